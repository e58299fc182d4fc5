"""The trainer's advantage plumbing on scripted completions, checked against hand-computed values.

A ``rollout_func`` replaces sampling with fixed lists, so rewards, group scaling, the local slice and
the token map are exact. Request r2's four lists all have one hit (scalar reward 1 each, so TRL's
scalar advantage is 0 for every list), but at different ranks: the rank structure must still move them.
"""

from __future__ import annotations

import math

import pytest
import torch

from remark.config import RemarkGRPOConfig
from remark.run.sampling import training_dataset
from tests.remark.conftest import HAND_SCRIPT, Capturing, scripted_rollout

K = 3
EPS = 1e-4
SCRIPT = {rid: list(lists) for rid, lists in HAND_SCRIPT.items()}  # tests swap r2's lists
REWARDS = {
    "r1": [[1, 1, 1], [1, 0, 0], [0, 1, 0], [0, 1, 0]],
    "r2": [[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0]],
}


def group_advantages(rewards):
    r = torch.tensor(rewards, dtype=torch.float64)
    return (r - r.mean(0)) / (r.std(0, unbiased=True) + EPS)


def make_trainer(hand_dataset, hand_model_dir, tmp_path, **overrides):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(hand_model_dir)
    values = dict(
        output_dir=str(tmp_path / "run"),
        use_cpu=True,
        bf16=False,
        report_to="none",
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=32,
        max_steps=1,
        learning_rate=1e-3,
        loss_type="bnpo",
        scale_rewards="group",
        beta=0.0,
        save_strategy="no",
        num_ranks=K,
        reward_scheme="union",
        sampling="uniform",
        match_mode="exact",
        seed=0,
        logging_steps=1,
    )
    values.update(overrides)
    args = RemarkGRPOConfig(**values)
    train = training_dataset(hand_dataset, split="train", sampling=args.sampling, k=K)
    trainer = Capturing(
        model=str(hand_model_dir),
        args=args,
        train_dataset=train,
        catalog=hand_dataset.catalog,
        processing_class=tok,
        rollout_func=scripted_rollout(tok, SCRIPT),
    )
    trainer.captured = []
    return trainer, tok


def line_token_advantages(tok, text, ids, adv_row):
    """Advantages of the tokens of each line (by decoding token pieces), plus the end token's."""
    per_line: dict[int, set[float]] = {}
    pos = 0
    bounds = []
    start = 0
    for i, line in enumerate(text.split("\n")):
        bounds.append((start, start + len(line), i))
        start += len(line) + 1
    for t, tid in enumerate(ids[:-1]):
        piece = tok.decode([tid])
        if piece.strip() and piece != "\n":
            line = next(i for s, e, i in bounds if s <= pos < e + 1)
            per_line.setdefault(line, set()).add(round(float(adv_row[t]), 4))
        pos += len(piece)
    return per_line, float(adv_row[len(ids) - 1])


def assert_token_advantages(tok, cols, out, rewards_of):
    """Every line's tokens carry its rank's hand-computed advantage; the end token is shaped; padding is 0."""
    adv = out["advantages"]
    assert adv.shape == out["completion_ids"].shape  # (B, T) per-token advantages
    seen_rows: dict[tuple, int] = {}
    for r, (rid, resp) in enumerate(zip(cols["request_id"], cols["responder_index"], strict=True)):
        g = seen_rows.get((rid, resp), 0)
        seen_rows[(rid, resp)] = g + 1
        expected = group_advantages(rewards_of(rid, resp))
        text = SCRIPT[rid][g]
        ids = [*tok(text, add_special_tokens=False)["input_ids"], tok.eos_token_id]
        assert out["completion_ids"][r, : len(ids)].tolist() == ids
        per_line, eos_adv = line_token_advantages(tok, text, ids, adv[r])
        for line, values in per_line.items():
            assert values == {round(float(expected[g, line]), 4)}, (rid, resp, g, line, values)
        assert eos_adv == pytest.approx(0.1 if len(text.split("\n")) >= K else -0.1)
        assert float(adv[r, len(ids) :].abs().sum()) == 0.0  # padding


def test_union_advantages_match_hand_values(hand_dataset, hand_model_dir, tmp_path):
    trainer, tok = make_trainer(hand_dataset, hand_model_dir, tmp_path)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    ((cols, out),) = trainer.captured
    assert set(cols["responder_index"]) == {-1}  # pooled rows: no responder of their own
    assert_token_advantages(tok, cols, out, lambda rid, _: REWARDS[rid])
    # r2: every list has scalar reward 1 (TRL's scalar advantage would be 0), yet the ranks differ.
    r2 = group_advantages(REWARDS["r2"])
    assert r2[1, 1] == pytest.approx(0.75 / (0.5 + EPS))  # rank 2 column [0, 1, 0, 0]
    assert r2[0, 0] == pytest.approx(0.5 / (math.sqrt(1 / 3) + EPS))  # rank 1 column [1, 0, 0, 1]
    r2_rows = [r for r, rid in enumerate(cols["request_id"]) if rid == "r2"]
    assert all(float(out["advantages"][r].abs().max()) > 0.49 for r in r2_rows)
    logs = trainer.state.log_history[0]
    assert logs["train/zero_signal_frac"] == 0.0
    assert logs["train/rank_reward/01"] == pytest.approx(4 / 8)  # rank-1 hits: r1 L1, L2; r2 L1, L4
    assert logs["reward"] == pytest.approx((3 + 1 + 1 + 1 + 4) / 8)  # TRL logs the per-list sums
    assert any(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters())


# Per-responder rewards of the scripted lists: r1's responders are {A, B} and {B, C}.
RESPONDER_REWARDS = {
    ("r1", 0): [[1, 1, 0], [1, 0, 0], [0, 1, 0], [0, 1, 0]],
    ("r1", 1): [[0, 1, 1], [1, 0, 0], [0, 0, 0], [0, 1, 0]],
    ("r2", 0): REWARDS["r2"],
}


def test_responder_rows_score_their_own_responder(hand_dataset, hand_model_dir, tmp_path):
    trainer, tok = make_trainer(
        hand_dataset, hand_model_dir, tmp_path, reward_scheme="responder", sampling="per_responder"
    )
    trainer.train()  # the rollout replays the same four lists for each of r1's responder rows
    ((cols, out),) = trainer.captured
    assert set(cols["responder_index"]) <= {0, 1}
    assert_token_advantages(tok, cols, out, lambda rid, resp: RESPONDER_REWARDS[(rid, resp)])


def test_zero_signal_groups_are_dropped_from_the_loss(hand_dataset, hand_model_dir, tmp_path):
    SCRIPT["r2_saved"] = SCRIPT["r2"]
    SCRIPT["r2"] = ["Delta (2004)"] * 4  # every list identical: zero signal
    try:
        trainer, _ = make_trainer(hand_dataset, hand_model_dir, tmp_path, zero_signal_filter=True)
        trainer.train()
    finally:
        SCRIPT["r2"] = SCRIPT.pop("r2_saved")
    ((cols, out),) = trainer.captured
    mask = out["completion_mask"]
    for r, rid in enumerate(cols["request_id"]):
        assert (mask[r].sum() == 0) == (rid == "r2")
    logs = trainer.state.log_history[0]
    assert logs["train/zero_signal_frac"] == 0.5
    assert logs["train/kept_frac"] == 0.5


@pytest.mark.parametrize("filler_penalty", [-0.1, 0.0])
def test_blank_lines_get_the_filler_penalty(hand_dataset, hand_model_dir, tmp_path, filler_penalty):
    """A list of blank lines (the collapse of ProtoQA run 2) is not free: each of its tokens gets
    ``filler_penalty`` (0 switches it off); its end token is shaped as an early stop."""
    SCRIPT["r2_saved"] = SCRIPT["r2"]
    SCRIPT["r2"] = ["\n\n\n\n"] * 4
    try:
        trainer, tok = make_trainer(hand_dataset, hand_model_dir, tmp_path, filler_penalty=filler_penalty)
        trainer.train()
    finally:
        SCRIPT["r2"] = SCRIPT.pop("r2_saved")
    ((cols, out),) = trainer.captured
    n = len(tok("\n\n\n\n", add_special_tokens=False)["input_ids"])
    for r, rid in enumerate(cols["request_id"]):
        if rid == "r2":
            adv = out["advantages"][r]
            torch.testing.assert_close(adv[:n], torch.full((n,), filler_penalty))
            assert float(adv[n]) == pytest.approx(-0.1)  # the end token: an early stop


def test_rank_level_ratio_trains_with_reused_batches(hand_dataset, hand_model_dir, tmp_path):
    trainer, _ = make_trainer(
        hand_dataset, hand_model_dir, tmp_path, rank_level_ratio=True, num_iterations=2, max_steps=2
    )
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 2
    assert all(math.isfinite(x) for x in losses)


@pytest.mark.parametrize(
    ("scheme", "sampling", "extra"),
    [
        ("union", "uniform", {}),
        ("responder", "per_responder", {}),
        ("responder", "uniform", {}),  # a responder drawn per (step, request)
        ("marginal", "uniform", {}),
        ("responder_rb", "uniform", {}),
        ("union", "uniform", {"log_decay": True}),
    ],
)
def test_every_scheme_trains_three_steps(hand_dataset, hand_model_dir, tmp_path, scheme, sampling, extra):
    trainer, _ = make_trainer(
        hand_dataset, hand_model_dir, tmp_path, reward_scheme=scheme, sampling=sampling, max_steps=3, **extra
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 3
    assert all(math.isfinite(x) for x in losses)
    assert any(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters())
    for _, out in trainer.captured:
        adv = out["advantages"]
        assert torch.isfinite(adv).all()
        assert float(adv.abs().max()) > 0.1  # the scripted lists always carry rank signal
