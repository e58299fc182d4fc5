"""Online group-size adaptation wired into training: the advisor is fed, its advice applies on resume."""

from __future__ import annotations

import json

import pytest

from catalog.io.errors import InputError
from remark.config import RemarkGRPOConfig
from remark.planning.adaptive import write_recommendation
from remark.run.output_dir import _valid_group_sizes, resume_group_size


def profile(tmp_path):
    path = tmp_path / "profile.json"
    points = [{"G": g, "peak_mem_gb": 10 + 2 * g, "step_s": 5 + 0.5 * g} for g in (2, 4, 8)]
    path.write_text(json.dumps({"device": "test", "model": "test", "points": points}))
    return str(path)


def cfg(tmp_path, **kw):
    values = dict(
        output_dir=str(tmp_path / "run"),
        use_cpu=True,
        report_to="none",
        loss_type="bnpo",
        scale_rewards="group",
        num_generations=4,
        per_device_train_batch_size=8,  # 2 requests x G = 4
        max_completion_length=24,
        num_ranks=3,
        group_size_profile=profile(tmp_path),
        group_size_memory_budget_gb=40,
    )
    values.update(kw)
    return RemarkGRPOConfig(**values)


def test_recommended_g_is_applied_with_requests_per_step_fixed(tmp_path):
    c = cfg(tmp_path)
    write_recommendation(tmp_path / "ckpt", {"recommended_G": 8, "step": 10, "signal_prob": 0.4})
    new = resume_group_size(c, tmp_path / "ckpt")
    assert (new.num_generations, new.per_device_train_batch_size, new.generation_batch_size) == (8, 16, 16)
    assert new.generation_batch_size // new.num_generations == 2  # still 2 requests per step
    assert new.ignore_data_skip
    off = cfg(tmp_path, adapt_group_size=False)
    assert resume_group_size(off, tmp_path / "ckpt").num_generations == 4
    assert resume_group_size(c, tmp_path / "no_recommendation").num_generations == 4


def test_group_sizes_that_cannot_fill_the_batch_are_refused(tmp_path):
    c = cfg(tmp_path, gradient_accumulation_steps=4, per_device_train_batch_size=4)  # 16 = 4 requests x 4
    assert c.steps_per_generation == 4
    assert _valid_group_sizes(c, limit=8) == [2, 3, 4, 5, 6, 7, 8]
    c2 = cfg(tmp_path, gradient_accumulation_steps=4, per_device_train_batch_size=2)  # 8 = 2 requests x 4
    assert _valid_group_sizes(c2, limit=8) == [2, 4, 6, 8]
    write_recommendation(tmp_path / "ckpt", {"recommended_G": 3, "step": 10})
    with pytest.raises(InputError, match="do not split"):
        resume_group_size(c2, tmp_path / "ckpt")


def test_advisor_config_needs_a_budget_and_a_profile(tmp_path):
    with pytest.raises(InputError, match="memory budget"):
        cfg(tmp_path, group_size_memory_budget_gb=None)
    with pytest.raises(InputError, match="cost profile not found"):
        cfg(tmp_path, group_size_profile=str(tmp_path / "absent.json"))
