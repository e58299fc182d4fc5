"""Checkpoint state without pickle: optimizer, scheduler and RNG round trips."""

from __future__ import annotations

import random

import numpy as np
import torch

from remark.checkpoint import load_optimizer_state, load_rng_state, save_optimizer_state, save_rng_state


def _stepped_adam():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(5, 4)).pow(2).sum().backward()
        opt.step()
    return model, opt


def test_optimizer_state_round_trip_continues_identically(tmp_path):
    model, opt = _stepped_adam()
    save_optimizer_state(opt.state_dict(), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["optimizer.json", "optimizer.safetensors"]

    clone = torch.nn.Linear(4, 3)
    clone.load_state_dict(model.state_dict())
    opt2 = torch.optim.AdamW(clone.parameters(), lr=0.5)  # wrong lr: must come back from the file
    opt2.load_state_dict(load_optimizer_state(tmp_path))
    assert opt2.param_groups[0]["lr"] == 1e-3
    assert tuple(opt2.param_groups[0]["betas"]) == (0.9, 0.99)

    x = torch.randn(5, 4)
    for m, o in ((model, opt), (clone, opt2)):
        o.zero_grad()
        m(x).pow(2).sum().backward()
        o.step()
    for a, b in zip(model.parameters(), clone.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_rng_state_round_trip(tmp_path):
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    save_rng_state(tmp_path)
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    random.seed(9)
    np.random.seed(9)
    torch.manual_seed(9)
    assert load_rng_state(tmp_path)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected
    assert not load_rng_state(tmp_path / "absent")
