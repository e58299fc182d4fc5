"""Per-token advantages of the scripted rollouts, pinned for every reward scheme, modifier, filter and
recipe family member: a refactor of the rank step must leave them unchanged.

``pinned_advantages.json`` was written by this file (``python -m tests.remark.recipes.test_pinned OUT``) from
the trainer as it stood before ``remark.step.rank_step`` existed (commit 82ae1fb), except where a case says
it was re-pinned and why. Each case trains two scripted steps and records, per captured batch: the rows'
request ids, the (B, T) advantages and token ranks, the loss mask, TRL's loss-only weights and token
count, and the rank-step metrics logged for the step.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from tests.remark.recipes.conftest import SCRIPT, make_trainer

PINNED = Path(__file__).with_name("pinned_advantages.json")

# a script with blank lines, indentation and a preamble (filler tokens, no-rank tokens)
FILLER_SCRIPT = {
    **SCRIPT,
    "r1": [
        "Alpha (2001)\n\nBeta (2002)\n  Gamma (2003)",
        "Here you go:\nBeta (2002)\nZeta (2006)",
        "\n\nAlpha (2001)",
        "Delta (2004)\n\n\n",
    ],
}

# name -> (recipe, scheme, overrides, script, end token)
CASES = {
    "union": ("rank_grpo", "union", {}, SCRIPT, True),
    "responder": ("rank_grpo", "responder", {}, SCRIPT, True),
    "responder_drawn": ("rank_grpo", "union", {"reward_scheme": "responder"}, SCRIPT, True),
    "marginal": ("rank_grpo", "union", {"reward_scheme": "marginal"}, SCRIPT, True),
    "responder_rb": ("rank_grpo", "union", {"reward_scheme": "responder_rb"}, SCRIPT, True),
    "log_decay": ("rank_grpo", "union", {"log_decay": True}, SCRIPT, True),
    "responder_rb_log_decay": (
        "rank_grpo",
        "union",
        {"reward_scheme": "responder_rb", "log_decay": True},
        SCRIPT,
        True,
    ),
    "truncated_score": ("rank_grpo", "union", {}, SCRIPT, False),
    "truncated_interrupt": ("rank_grpo", "union", {"truncation": "interrupt"}, SCRIPT, False),
    "filler": ("rank_grpo", "union", {}, FILLER_SCRIPT, True),
    "filler_off_no_overflow": (
        "rank_grpo",
        "union",
        {"filler_penalty": 0.0, "overflow_penalty": -0.3, "eos_complete_bonus": 0.2},
        FILLER_SCRIPT,
        True,
    ),
    "zero_signal_filter": ("rank_grpo", "union", {"zero_signal_filter": True}, SCRIPT, True),
    "pass_rate_drop": ("rank_grpo", "union", {"pass_rate_drop": 0.9}, SCRIPT, True),
    "batch_scale": ("reinforce_pp", "union", {}, SCRIPT, True),
    "rloo": ("rloo", "responder", {}, SCRIPT, True),
    "dr_grpo": ("dr_grpo", "union", {}, SCRIPT, True),
    "dapo_refill": ("dapo", "union", {}, SCRIPT, True),
    "dapo_refill_responder_rb": ("dapo", "union", {"reward_scheme": "responder_rb"}, SCRIPT, True),
    "olmo3": ("olmo3", "responder", {}, SCRIPT, True),
    "scalerl": ("scalerl", "union", {}, SCRIPT, False),
}
METRICS = (
    "train/zero_signal_frac",
    "train/kept_frac",
    "train/dropped_requests",
    "train/refill_rounds",
    "train/refill_prompts",
    "train/refill_short_groups",
    "train/hits_per_list",
    "train/rank_reward/01",
    "train/rank_reward/03",
    "train/truncated_frac",
    "reward",
    "train/reward_per_list",
)
# TRL's ``reward`` log is the scheme's per-list sum *before* truncation and modifiers since the rank step
# owns them; the rank step logs the sum after them as ``train/reward_per_list``: that is the pinned
# ``reward`` of every case (the old TRL value), and TRL's own equals it where nothing modifies rewards.
# (TRL's ``reward`` averages every generation round, refills included; the rank step's, the sampled one.)
MODIFIED = {"log_decay", "responder_rb_log_decay", "scalerl", "truncated_interrupt"}
REFILLED = {"dapo_refill", "dapo_refill_responder_rb", "olmo3"}


def run_case(name, dataset, model_dir, tmp_path):
    from tests.remark.conftest import scripted_rollout as rollout
    from tests.remark.recipes.conftest import REQUESTS

    recipe, scheme, overrides, script, eos = CASES[name]
    trainer, tok = make_trainer(
        recipe, dataset, model_dir, tmp_path, scheme=scheme, script=script, **overrides
    )
    trainer.rollout_func = rollout(tok, script, REQUESTS, eos=eos)
    trainer.train()
    batches = []
    for cols, out in trainer.captured:
        batches.append(
            {
                "request_id": list(cols["request_id"]),
                "advantages": out["advantages"].tolist(),
                "rank_ids": out["rank_ids"].tolist(),
                "completion_mask": out["completion_mask"].tolist(),
                "weight": out["tool_mask"][:, 0].tolist(),
                "num_items_in_batch": float(out["num_items_in_batch"]),
            }
        )
    logs = {k: [h[k] for h in trainer.state.log_history if k in h] for k in METRICS}
    return {"batches": batches, "logs": logs}


def test_every_registered_reward_scheme_has_a_pinned_case():
    from remark.algos import names

    pinned = {overrides.get("reward_scheme", scheme) for _, scheme, overrides, _, _ in CASES.values()}
    assert pinned == set(names("reward"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_advantages_equal_the_pinned_ones(name, recipe_dataset, recipe_model_dir, tmp_path):
    want = json.loads(PINNED.read_text())[name]
    got = run_case(name, recipe_dataset, recipe_model_dir, tmp_path)
    assert len(got["batches"]) == len(want["batches"])
    for g, w in zip(got["batches"], want["batches"], strict=True):
        assert g["request_id"] == w["request_id"]
        assert g["rank_ids"] == w["rank_ids"]
        assert g["completion_mask"] == w["completion_mask"]
        for key in ("advantages", "weight"):
            torch.testing.assert_close(
                torch.tensor(g[key], dtype=torch.float64),
                torch.tensor(w[key], dtype=torch.float64),
                rtol=0,
                atol=1e-6,
                msg=lambda m, key=key: f"{name}: {key}: {m}",
            )
        assert g["num_items_in_batch"] == w["num_items_in_batch"]
    for key, values in want["logs"].items():
        if key == "train/reward_per_list":
            continue
        if key == "reward" and name not in REFILLED:
            assert got["logs"]["train/reward_per_list"] == pytest.approx(values, abs=1e-6), name
            if name in MODIFIED:
                continue
        assert got["logs"][key] == pytest.approx(values, abs=1e-6), (name, key)


def main(out: str) -> None:
    """Write the pinned values of every case (run from the repository root)."""
    import tempfile

    from data_prep.dataset import load_dataset
    from tests.remark.conftest import build_hand_model, write_hand_dataset
    from tests.remark.recipes.conftest import REQUESTS

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_hand_dataset(tmp / "hand", requests=REQUESTS)
        dataset = load_dataset(tmp / "hand")
        model_dir = build_hand_model(tmp / "model", [t for t, _, _ in REQUESTS.values()])
        pinned = {}
        for name in sorted(CASES):
            case_dir = tmp / name
            case_dir.mkdir()
            pinned[name] = run_case(name, dataset, model_dir, case_dir)
            print(name, len(pinned[name]["batches"]), "batches")
    Path(out).write_text(json.dumps(pinned, indent=0, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
