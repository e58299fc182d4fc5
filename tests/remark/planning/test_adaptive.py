"""GroupSizeAdvisor: a TrainerCallback driven with real TrainerState/TrainerControl and fake rewards."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from transformers import TrainerControl, TrainerState

from catalog.io.errors import InputError
from remark.planning.adaptive import (
    RECOMMENDATION_FILE,
    GroupSizeAdvisor,
    read_recommendation,
    resolve_group_size,
)
from remark.planning.group_size import fit_cost_model

CANDIDATES = [2, 4, 8, 16, 32, 64]


def cost():
    g = np.array([4.0, 8.0, 16.0, 32.0])
    return fit_cost_model(g, 10 + 2 * g, 5 + 0.5 * g)  # memory 10 + 2G GB, step 5 + 0.5G s


def rank_rewards(hits_per_slot: int, b: int = 8, g: int = 4, k: int = 5) -> np.ndarray:
    """(B, G, K) 0/1 rank rewards where every (request, rank) has exactly ``hits_per_slot`` hits of G."""
    r = np.zeros((b, g, k))
    r[:, :hits_per_slot, :] = 1.0
    return r


def run_steps(advisor, args, state, control, steps, rewards, ids):
    for step in steps:
        state.global_step = step
        advisor.update_from_rewards(ids, rewards)
        advisor.on_step_end(args, state, control)


@pytest.fixture
def setup(tmp_path):
    args = SimpleNamespace(output_dir=str(tmp_path), num_generations=4)
    return args, TrainerState(), TrainerControl()


def test_recommends_logs_and_checkpoints(setup, tmp_path):
    args, state, control = setup
    adv = GroupSizeAdvisor(
        cost(), memory_budget_gb=80.0, candidates=CANDIDATES, every_n_steps=10, min_units=16
    )
    adv.on_train_begin(args, state, control)
    assert adv.current_G == 4  # read from args.num_generations
    ids = [f"r{i}" for i in range(8)]
    # 1 hit of 4 on every rank: p = 1/4. Objective q (1 - 1/G) / (5 + 0.5 G), q = 1 - 0.25^G - 0.75^G:
    #   G = 4:  q = 1 - 0.0039 - 0.3164 = 0.6797 -> 0.6797 * 0.75 / 7   = 0.0728
    #   G = 8:  q = 1 - 0.0000 - 0.1001 = 0.8999 -> 0.8999 * 0.875 / 9  = 0.0875  (best, +20 % over G = 4)
    #   G = 16: q = 0.9900                       -> 0.9900 * 0.9375 / 13 = 0.0714
    run_steps(adv, args, state, control, range(1, 10), rank_rewards(1), ids)
    assert adv.latest is None  # nothing before step 10
    run_steps(adv, args, state, control, [10], rank_rewards(1), ids)
    rec = adv.latest
    assert rec["recommended_G"] == 8 and rec["current_G"] == 4 and rec["step"] == 10
    assert rec["n_units"] == 8 * 5  # one unit per (request, rank); later steps replace earlier ones
    assert rec["estimator"] == "beta"
    assert rec["signal_prob"] == pytest.approx(0.8999, abs=0.01)
    assert rec["signal_prob_current"] == pytest.approx(0.6797, abs=0.01)

    logs = {"loss": 1.0}
    state.log_history.append(logs | {"step": 10})
    adv.on_log(args, state, control, logs=logs)
    assert logs["plan/recommended_G"] == 8.0
    assert logs["plan/signal_prob"] == pytest.approx(rec["signal_prob"])
    assert state.log_history[-1]["plan/recommended_G"] == 8.0
    later = {"loss": 0.5}
    adv.on_log(args, state, control, logs=later)
    assert later == {"loss": 0.5}  # logged once

    adv.on_save(args, state, control)
    ckpt = tmp_path / "checkpoint-10"
    saved = json.loads((ckpt / RECOMMENDATION_FILE).read_text())
    assert saved["recommended_G"] == 8 and saved["memory_budget_gb"] == 80.0
    assert [c["G"] for c in saved["candidates"]] == CANDIDATES
    assert read_recommendation(ckpt)["recommended_G"] == 8

    g, why = resolve_group_size(4, ckpt)
    assert g == 8 and "recommended at step 10" in why
    assert resolve_group_size(4, ckpt, adapt=False)[0] == 4
    assert resolve_group_size(4, tmp_path / "checkpoint-5")[0] == 4
    assert resolve_group_size(4, None)[0] == 4


def test_small_gains_keep_the_current_g(setup):
    # p = 1/2: G = 8 beats G = 4 by only 0.09646 / 0.09375 = 1.029 (hand values in test_group_size);
    # with min_gain 0.05 the advisor keeps G = 4, with min_gain 0 it moves to 8.
    args, state, control = setup
    ids = [f"r{i}" for i in range(8)]
    for min_gain, expect in ((0.05, 4), (0.0, 8)):
        adv = GroupSizeAdvisor(
            cost(),
            memory_budget_gb=80.0,
            candidates=CANDIDATES,
            every_n_steps=1,
            min_units=16,
            min_gain=min_gain,
        )
        adv.on_train_begin(args, state, control)
        run_steps(adv, args, state, control, [1], rank_rewards(2), ids)
        assert adv.latest["recommended_G"] == expect
        assert adv.latest["planner_best_G"] == 8


def test_old_units_leave_the_window():
    adv = GroupSizeAdvisor(cost(), memory_budget_gb=80.0, every_n_steps=100, window_steps=5, min_units=16)
    ids = [f"r{i}" for i in range(8)]
    adv.update_from_rewards(ids, rank_rewards(1), step=1)
    assert adv.recommend(step=6) is not None  # 6 - 1 <= window_steps
    assert adv.pop_metrics()["plan/n_units"] == 40.0
    assert adv.recommend(step=7) is None  # 7 - 1 > window_steps: no units left
    assert adv.pop_metrics() == {}


def test_pass_rates_and_repeated_ids():
    adv = GroupSizeAdvisor(cost(), memory_budget_gb=80.0, candidates=[2, 4], min_units=1, estimator="plugin")
    # Two groups of the same request in one call pool their counts: (2 + 1) hits of 8, p = 3/8;
    # q(2, 3/8) = 1 - 9/64 - 25/64 = 30/64 = 0.46875.
    adv.update_from_rewards(["a", "a"], np.array([[1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]))
    rows = {c["G"]: c for c in adv.recommend()["candidates"]}
    assert rows[2]["q"] == pytest.approx(0.46875)
    # Pass rates without sample counts fall back to the plug-in estimator.
    adv2 = GroupSizeAdvisor(cost(), memory_budget_gb=80.0, candidates=[2, 4], min_units=2)
    adv2.update(["a", "b"], [0.5, 0.0])
    rec = adv2.recommend()
    assert rec["estimator"] == "plugin"
    assert {c["G"]: c["q"] for c in rec["candidates"]}[2] == pytest.approx((0.5 + 0.0) / 2)


def test_only_process_zero_writes(setup, tmp_path):
    args, state, control = setup
    adv = GroupSizeAdvisor(cost(), memory_budget_gb=80.0, min_units=1)
    adv.update(["a"], [0.5], n_samples=[8])
    state.global_step, state.is_world_process_zero = 3, False
    adv.on_save(args, state, control)
    assert adv.latest is not None
    assert not (tmp_path / "checkpoint-3").exists()


def test_from_profile_and_torch_rewards(tmp_path):
    points = [{"G": g, "peak_mem_gb": 10.0 + 2 * g, "step_s": 5.0 + 0.5 * g} for g in (4, 8, 16, 32)]
    (tmp_path / "profile.json").write_text(json.dumps({"device": "t", "model": "m", "points": points}))
    adv = GroupSizeAdvisor.from_profile(tmp_path / "profile.json", memory_budget_gb=80.0, min_units=40)
    assert adv.cost.memory.slope == pytest.approx(2.0)
    adv.update_from_rewards([f"r{i}" for i in range(8)], torch.from_numpy(rank_rewards(1)))
    assert adv.recommend()["n_units"] == 40
    with pytest.raises(InputError, match="budget"):
        GroupSizeAdvisor(cost(), memory_budget_gb=12.0, candidates=[2, 4])  # G = 2 needs 14 GB


def test_bad_feeds_and_files(tmp_path):
    adv = GroupSizeAdvisor(cost(), memory_budget_gb=80.0)
    with pytest.raises(InputError, match="request ids"):
        adv.update(["a", "b"], [0.5])
    with pytest.raises(InputError, match=r"\[0, 1\]"):
        adv.update(["a"], [1.5])
    with pytest.raises(InputError, match="rewards must be"):
        adv.update_from_rewards(["a"], np.zeros((1, 1)))
    with pytest.raises(InputError, match=r"\[0, 1\]"):
        adv.update_from_rewards(["a"], np.full((1, 4), 2.0))
    (tmp_path / RECOMMENDATION_FILE).write_text('{"recommended_G": 0}')
    with pytest.raises(InputError, match="recommended_G"):
        read_recommendation(tmp_path)
