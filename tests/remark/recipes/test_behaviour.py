"""What makes each recipe itself, asserted on crafted batches against hand computations.

A recipe trains one scripted step; then the captured batch is given behaviour log-probs that differ
from the policy's by a known, seeded amount (so importance ratios are not 1), and the trainer's loss is
compared with the slow loop reference of ``conftest.reference_loss``; variant-specific facts (refills,
baselines, aggregation weights, clipping, masks) are checked directly.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from remark.config import compose_config
from remark.step.rank_step import modified_rewards
from tests.remark.recipes.conftest import (
    SIGNAL,
    G,
    K,
    expected_rewards,
    make_trainer,
    policy_logps,
    reference_loss,
    run_fields,
    trainer_loss,
)


def shifted(logps, *, scale=0.6, seed=0):
    """Behaviour log-probs logps - u, u uniform in [-scale, scale] per token (seeded)."""
    g = torch.Generator().manual_seed(seed)
    return logps - (torch.rand(logps.shape, generator=g, dtype=torch.float64) * 2 - 1) * scale


def one_step(name, dataset, model_dir, tmp_path, **kw):
    """A fresh trainer of ``name`` after one scripted step (for runs that change the script or fields)."""
    trainer, tok = make_trainer(name, dataset, model_dir, tmp_path, max_steps=kw.pop("max_steps", 1), **kw)
    trainer.train()
    return trainer, tok


def last_batch(trainer):
    """The captured batch with the most advantage mass (a batch of zero-signal groups tells nothing apart),
    with the current policy's log-probs of it."""
    cols, out = max(trainer.captured, key=lambda c: float(c[1]["advantages"].abs().sum()))
    assert float(out["advantages"].abs().sum()) > 0
    return cols, out, policy_logps(trainer, out)


def assert_loss_matches_reference(trainer, out, logps, old, **overrides):
    got = float(trainer_loss(trainer, out, old))
    want = reference_loss(out, logps, old, trainer=trainer, **overrides)
    assert got == pytest.approx(want, rel=1e-4, abs=1e-6)
    return want


def logged(trainer, key):
    return [h[key] for h in trainer.state.log_history if key in h]


@pytest.mark.parametrize("name", ["grpo", "gspo", "gspo_rank", "gmpo", "gmpo_rank", "sapo", "rank_grpo"])
def test_ratio_and_objective_variants_match_the_loop_reference(name, trained):
    """GRPO's symmetric clip + 1/|o| + KL; GSPO's sequence ratio; the rank ratio; GMPO's geometric mean
    of clipped token ratios (sequence and rank segments); SAPO's soft gate; Rank-GRPO's rank ratio with bnpo."""
    trainer, _ = trained(name)[:2]
    _, out, logps = last_batch(trainer)
    old = shifted(logps)
    want = assert_loss_matches_reference(trainer, out, logps, old)
    # the crafted batch tells the variant apart from plain token-level PPO on the same batch
    plain = reference_loss(
        out,
        logps,
        old,
        trainer=trainer,
        gmpo_level=None,
        importance_sampling_level="token",
        rank_level_ratio=False,
        loss_type="grpo" if name == "sapo" else trainer.args.loss_type,
    )
    if name != "grpo":
        assert abs(want - plain) > 1e-4
    if name.startswith("gmpo"):
        assert (
            trainer._metrics["train"]["gmpo/clip_frac"][-1] > 0.0
        )  # the crafted ratios hit the log-space clip


def test_grpo_averages_per_list_and_keeps_an_unweighted_kl(trained):
    trainer, _ = trained("grpo")[:2]
    _, out, logps = last_batch(trainer)
    assert trainer.args.beta == 0.04 and "ref_per_token_logps" in out
    old = shifted(logps)
    want = assert_loss_matches_reference(trainer, out, logps, old)
    assert abs(want - reference_loss(out, logps, old, trainer=trainer, loss_type="bnpo")) > 1e-5
    assert abs(want - reference_loss(out, logps, old, trainer=trainer, use_bias_correction_kl=True)) > 1e-7


def test_dr_grpo_does_not_divide_by_the_std(trained):
    trainer, _ = trained("dr_grpo")[:2]
    for cols, out in trainer.captured:
        rows = [r for r, rid in enumerate(cols["request_id"]) if rid == "r2"]
        for g, r in enumerate(rows):  # r2's rank-2 column is [0, 1, 0, 0]: A = r - 0.25, not (r - 0.25) / 0.5
            sel = (out["rank_ids"][r] == 1) & out["completion_mask"][r].bool()
            if sel.any():
                assert float(out["advantages"][r, sel][0]) == pytest.approx([-0.25, 0.75, -0.25, -0.25][g])
    _, out, logps = last_batch(trainer)
    old = shifted(logps)
    want = assert_loss_matches_reference(trainer, out, logps, old)  # normaliser: B x max_completion_length
    assert abs(want - reference_loss(out, logps, old, trainer=trainer, loss_type="bnpo")) > 1e-5


def test_dapo_drops_all_equal_groups_and_refills_the_batch(trained):
    trainer, _ = trained("dapo")[:2]
    rounds = logged(trainer, "train/refill_rounds")
    prompts = logged(trainer, "train/refill_prompts")
    sampled_zero = logged(trainer, "train/zero_signal_frac")
    assert len(rounds) == 2 and max(rounds) >= 1  # one epoch of r1..r4 holds r3 or r4 in a step
    assert prompts == [2.0 * n for n in rounds]  # each round draws a batch of 8 / G = 2 prompts
    for n, z in zip(rounds, sampled_zero, strict=True):
        assert (n >= 1) == (z > 0)  # refilled exactly when the sampled batch had zero-signal groups
    assert logged(trainer, "train/kept_frac") == [1.0, 1.0]
    assert logged(trainer, "train/refill_short_groups") == [0.0, 0.0]
    for cols, out in trainer.captured:
        assert len(cols["request_id"]) == 8 and set(cols["request_id"]) <= SIGNAL
        assert bool((out["completion_mask"].sum(1) > 0).all())
        # groups are whole: G consecutive rows of one request
        assert all(len(set(cols["request_id"][b : b + G])) == 1 for b in range(0, 8, G))
    # clip-higher: a ratio of e^0.25 = 1.28 is inside (0.8, 1.28] for positive advantages, clipped at 1.2 otherwise
    _, out, logps = last_batch(trainer)
    old = logps - 0.245
    want = assert_loss_matches_reference(trainer, out, logps, old)
    assert abs(want - reference_loss(out, logps, old, trainer=trainer, epsilon_high=0.2)) > 1e-5


def test_dapo_refill_gives_up_after_max_rounds_and_masks_what_is_left(
    recipe_dataset, recipe_model_dir, tmp_path
):
    script = {rid: ["Epsilon (2005)"] * G for rid in ("r1", "r2", "r3", "r4")}  # nothing has signal
    trainer, _ = one_step(
        "dapo", recipe_dataset, recipe_model_dir, tmp_path, script=script, refill_max_rounds=2
    )
    assert logged(trainer, "train/refill_rounds") == [2.0]
    assert logged(trainer, "train/refill_short_groups") == [2.0]
    ((cols, out),) = trainer.captured
    assert len(cols["request_id"]) == 8 and float(out["completion_mask"].sum()) == 0.0


def test_cispo_clips_the_weight_without_zeroing_the_gradient(trained):
    trainer, _ = trained("cispo")[:2]
    _, out, logps = last_batch(trainer)
    positive = out["advantages"].abs()  # every token pushes up: a hard clip would zero them all at r = e^3

    def grads(old):
        trainer.model.zero_grad()
        trainer_loss(trainer, out, old, advantages=positive).backward()
        return torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])

    on_policy = grads(logps)  # r = 1: weight 1
    clipped = grads(logps - 3.0)  # r = e^3 = 20.1 > eps_max = 5: weight clipped to 5, gradient kept
    assert float(on_policy.abs().sum()) > 0
    torch.testing.assert_close(clipped, 5.0 * on_policy, rtol=1e-4, atol=1e-7)
    assert trainer._metrics["train"]["cispo_clip_ratio"][-1] == pytest.approx(1.0)
    assert_loss_matches_reference(trainer, out, logps, shifted(logps, scale=2.5))


def test_sapo_gates_softly_where_a_hard_clip_stops(trained):
    trainer, _ = trained("sapo")[:2]
    _, out, logps = last_batch(trainer)
    trainer.model.zero_grad()
    trainer_loss(
        trainer, out, logps - 0.5, advantages=out["advantages"].abs()
    ).backward()  # r = 1.65 > 1 + eps
    assert sum(float(p.grad.abs().sum()) for p in trainer.model.parameters() if p.grad is not None) > 0


def test_rloo_baseline_leaves_the_sample_out(trained):
    trainer, _ = trained("rloo")[:2]
    seen = False
    for cols, out in trainer.captured:
        rows = [r for r, rid in enumerate(cols["request_id"]) if rid == "r2"]
        for g, r in enumerate(rows):
            sel = (out["rank_ids"][r] == 0) & out["completion_mask"][r].bool()
            # r2's rank-1 column [1, 0, 0, 1]: 1 - (0 + 0 + 1) / 3 = 2/3, 0 - (1 + 0 + 1) / 3 = -2/3
            # (= G / (G - 1) * (r - mean) = 4/3 * 0.5), not r - mean = 0.5
            assert float(out["advantages"][r, sel][0]) == pytest.approx(
                [2 / 3, -2 / 3, -2 / 3, 2 / 3][g], abs=1e-6
            )
            seen = True
    assert seen


def test_reinforce_pp_normalises_over_the_batch_not_the_group(trained):
    trainer, _ = trained("reinforce_pp")[:2]
    for cols, out in trainer.captured:
        rewards = expected_rewards(cols, "union")
        want = (rewards - rewards.mean(0)) / (rewards.std(0, unbiased=True) + 1e-4)
        for r in range(len(cols["request_id"])):
            for k in range(K):
                sel = (out["rank_ids"][r] == k) & out["completion_mask"][r].bool()
                if sel.any():
                    assert float(out["advantages"][r, sel][0]) == pytest.approx(float(want[r, k]), rel=1e-4)
        # identical lists (r3, r4) still move: there is no per-group baseline
        flat = [r for r, rid in enumerate(cols["request_id"]) if rid in ("r3", "r4")]
        if flat:
            assert float(out["advantages"][flat].abs().sum()) > 0


def test_deepseek_v32_masks_off_policy_negative_ranks_and_weights_the_kl(trained):
    trainer, _ = trained("deepseek_v32")[:2]
    _, out, logps = last_batch(trainer)
    old = shifted(logps, scale=0.2)
    row = int(out["advantages"].min(1).values.argmin())  # a row with negative ranks to mask
    assert float(out["advantages"][row].min()) < 0
    old[row] = logps[row] + 1.0  # that row drifted: mean KL(old || new) = 1 > delta = 0.5
    want = assert_loss_matches_reference(trainer, out, logps, old)
    assert abs(want - reference_loss(out, logps, old, trainer=trainer, off_policy_mask_threshold=None)) > 1e-5
    assert abs(want - reference_loss(out, logps, old, trainer=trainer, use_bias_correction_kl=False)) > 1e-9


def test_scalerl_prompt_aggregation_filters_and_fp32_head(trained):
    trainer, _ = trained("scalerl")[:2]
    assert trainer.model.lm_head.forward.__name__ == "cast_forward_to_fp32"  # TRL's FP32 output layer
    assert not logged(trainer, "train/refill_rounds")  # zero-variance groups are dropped, not replaced
    for cols, out in trainer.captured:
        n_R = out["completion_mask"].sum(1).double()
        for r, rid in enumerate(cols["request_id"]):
            assert (n_R[r] > 0) == (rid in SIGNAL)  # r3 (all equal) and r4 (all equal, pass rate 1) masked
        n_B = n_R.view(-1, G).sum(1)
        groups = int((n_B > 0).sum())
        want = torch.where(n_B > 0, n_R.sum() / (groups * n_B.clamp(min=1)), torch.zeros_like(n_B))
        torch.testing.assert_close(
            out["tool_mask"][:, 0].double(), want.repeat_interleave(G), rtol=1e-6, atol=0
        )
    if "r4" in {rid for cols, _ in trainer.captured for rid in cols["request_id"]}:
        assert "r4" in trainer.dropped and logged(trainer, "train/dropped_requests")[-1] >= 1
    _, out, logps = last_batch(trainer)
    old = shifted(logps, scale=2.0)
    want = assert_loss_matches_reference(trainer, out, logps, old)
    if (out["tool_mask"][:, 0] > 0).any():
        flat = out["tool_mask"].clone()
        flat[out["tool_mask"] > 0] = 1.0
        assert (
            abs(want - reference_loss({**out, "tool_mask": flat}, logps, old, trainer=trainer)) > 0
            or groups == 1
        )


def test_scalerl_interrupts_a_list_cut_at_the_length_cap(trained):
    trainer, tok = trained("scalerl")[:2]
    rows = [x for x in trainer.train_dataset if x["request_id"] == "r1"][:1] * G
    columns = {c: [x[c] for x in rows] for c in rows[0]}
    texts = [
        "Alpha (2001)\nBeta (2002)\nGamma (2003)",
        "Alpha (2001)\nBeta (2002)\nGamma",
        "Alpha (2001)\nBeta (2002)\n",
    ]
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]  # no end token: all hit the cap
    ids.append([*ids[0], tok.eos_token_id])
    scored = trainer.rank_reward.scorer.score(ids, columns, group_size=None, step=0)

    def list_sums(settings):
        return modified_rewards(scored, settings).sum(-1)[:, 0].tolist()

    # a line is complete when a newline or the end token follows it: the last line of the first two lists
    # was cut by the cap (even "Gamma (2003)" might have gone on) and earns 0; the third ends on a newline
    assert list_sums(trainer.rank_settings) == [2.0, 2.0, 2.0, 3.0]
    score = dataclasses.replace(trainer.rank_settings, truncation="score")
    assert list_sums(score) == [3.0, 2.0, 2.0, 3.0]  # the unterminated line counts


def test_olmo3_active_sampling_no_std_clip_higher_and_tis_no_op(trained, tmp_path):
    composed = compose_config("olmo3", None, run_fields(tmp_path))
    assert any("no-op" in n for n in composed.notes)  # truncated IS needs vLLM's sampling log-probs
    trainer, _ = trained("olmo3")[:2]
    assert trainer.epsilon_low == 0.2 and trainer.epsilon_high == 0.272 and trainer.beta == 0.0
    assert max(logged(trainer, "train/refill_rounds")) >= 1
    for cols, out in trainer.captured:
        assert "importance_sampling_ratio" not in out
        assert set(cols["request_id"]) <= SIGNAL and bool((out["completion_mask"].sum(1) > 0).all())
        rows = [r for r, rid in enumerate(cols["request_id"]) if rid == "r2"]
        for g, r in enumerate(rows):  # r - mean, no std: r2's rank-1 column [1, 0, 0, 1] -> +-0.5
            sel = (out["rank_ids"][r] == 0) & out["completion_mask"][r].bool()
            assert float(out["advantages"][r, sel][0]) == pytest.approx([0.5, -0.5, -0.5, 0.5][g])
    _, out, logps = last_batch(trainer)
    assert_loss_matches_reference(trainer, out, logps, shifted(logps))


@pytest.mark.parametrize("name", ["cispo", "sapo", "dapo", "dr_grpo"])
def test_the_rank_level_ratio_composes_with_token_losses(name, recipe_dataset, recipe_model_dir, tmp_path):
    """rank_level_ratio on CISPO (weight clipped per rank), SAPO (gate per rank) and the token-sum losses:
    the loss equals the loop reference with one ratio per rank, and differs from the token-level one."""
    trainer, _ = one_step(name, recipe_dataset, recipe_model_dir, tmp_path, rank_level_ratio=True)
    _, out, logps = last_batch(trainer)
    old = shifted(logps, scale=2.5 if name == "cispo" else 0.6)
    want = assert_loss_matches_reference(trainer, out, logps, old)
    assert abs(want - reference_loss(out, logps, old, trainer=trainer, rank_level_ratio=False)) > 1e-5
