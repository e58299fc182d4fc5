"""remark's training paths with a colocated vLLM engine (``use_vllm``, ``vllm_mode: colocate``) on CPU.

Every run is float32 and checks TRL's ``sampling/sampling_logp_difference/mean`` (the engine's log-probs
of its samples against the policy's) at every step: <= 2e-3, seen about 1e-6. Covered: ReMaRk's and
Rank-GRPO's rewards, scoring overlapped with generation (``scoring_workers: 2``), a refill recipe (DAPO:
extra generation rounds within a step), the rank-level ratio under TRL's importance-sampling correction,
LoRA, the run's seed reaching the engine, and validation through the trainer's own engine (greedy lists
equal to transformers'). Kill and resume: ``test_vllm_resume.py``; two processes:
``tests/remark/step/test_vllm_multiprocess.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tests.vllm_helpers import VLLM_FIELDS, VLLM_MARKS, logged

pytestmark = VLLM_MARKS

LOGP_DIFF = "sampling/sampling_logp_difference/mean"
#: a 2-step run on the tiny world: 2 requests x G = 4 per step, K = 3, temperature 0.7 (the tiny model's
#: lists ground about 0.7 of 3 titles there, against 0.06 at 1.0)
BASE: dict[str, Any] = dict(
    use_cpu=True,
    bf16=False,
    report_to="none",
    per_device_train_batch_size=8,
    num_generations=4,
    max_completion_length=24,
    max_steps=2,
    learning_rate=5e-4,
    loss_type="bnpo",
    scale_rewards="group",
    beta=0.0,
    temperature=0.7,
    num_ranks=3,
    match_mode="fuzzy",
    seed=7,
    logging_steps=1,
    save_strategy="no",
    disable_tqdm=True,
    **VLLM_FIELDS,
)


def make_trainer(world: tuple[Path, Path], out: Path, *, recipe: str | None = None, **fields: Any):
    """A ``RemarkGRPOTrainer`` on the tiny world, its config composed as ``remark train`` composes it."""
    from data_prep.dataset import load_dataset
    from remark.config.compose import compose_config
    from remark.run.sampling import training_dataset
    from remark.run.training import policy_model
    from remark.step.trainer import RemarkGRPOTrainer

    data, model = world
    overrides = {**BASE, "output_dir": str(out), "data_dir": str(data), "model_name_or_path": str(model)}
    cfg = compose_config(recipe, None, {**overrides, **fields}).config
    ds = load_dataset(data)
    train = training_dataset(ds, split=cfg.train_split, sampling=cfg.sampling, k=cfg.num_ranks)
    policy, peft_config, tok = policy_model(cfg)
    return RemarkGRPOTrainer(
        model=policy,
        args=cfg,
        train_dataset=train,
        catalog=ds.catalog,
        processing_class=tok,
        peft_config=peft_config,
    )


def train(trainer) -> list[dict[str, Any]]:
    try:
        trainer.train()
    finally:
        if trainer.rank_reward.scorer.overlaps:
            trainer.rank_reward.scorer.close()
    return trainer.state.log_history


def check_engine_run(trainer, history, steps: int = 2) -> None:
    """Every step logged a sampling log-prob difference <= 2e-3 from a float32 engine."""
    diffs = logged(history, LOGP_DIFF)
    assert len(diffs) == steps and max(diffs) <= 2e-3, diffs
    config = trainer.vllm_generation.llm.llm_engine.model_config
    assert config.dtype == torch.float32
    assert (
        trainer.vllm_generation.last_sync is not None and trainer.vllm_generation.last_sync.method == "reload"
    )


@pytest.mark.parametrize(
    "method",
    [
        pytest.param(
            {"reward_scheme": "union", "sampling": "uniform", "scoring_workers": 2}, id="remark-pool"
        ),
        pytest.param({"reward_scheme": "responder", "sampling": "per_responder"}, id="rank_grpo"),
    ],
)
def test_rank_rewards_with_vllm(vllm_world, tmp_path, method):
    trainer = make_trainer(vllm_world, tmp_path / "run", **method)
    history = train(trainer)
    check_engine_run(trainer, history)
    assert len(logged(history, "train/reward_per_list")) == 2
    assert max(logged(history, "train/grounded_per_list")) > 0  # the SFT'd model writes catalog titles
    if method.get("scoring_workers"):  # every reward call was answered by the rows scored during TRL's passes
        assert trainer.rank_reward.prefetched == 2


def test_the_run_seed_reaches_the_engine(vllm_world, tmp_path):
    """TRL seeds the engine with the process index, and the engine re-seeds the process's RNGs with it;
    remark gives it the run's seed (+ the process index), so two seeds sample differently."""
    trainer = make_trainer(vllm_world, tmp_path / "run", seed=11)
    assert trainer.vllm_generation.llm.llm_engine.model_config.seed == 11
    assert torch.initial_seed() == 11


def test_a_refill_recipe_generates_extra_rounds_with_vllm(vllm_world, tmp_path):
    trainer = make_trainer(vllm_world, tmp_path / "run", recipe="dapo", refill_max_rounds=2)
    history = train(trainer)
    check_engine_run(trainer, history)
    rounds = logged(history, "train/refill_rounds")
    assert len(rounds) == 2 and max(rounds) >= 1, rounds  # zero-signal groups refilled by new vLLM rounds


def test_the_rank_level_ratio_under_importance_sampling_correction(vllm_world, tmp_path, monkeypatch):
    """rank_grpo's rank-level ratio, two updates per generation (so the ratio is not 1), with TRL's
    vLLM importance-sampling correction: the log-ratio TRL's loss sees is one value per rank, and the
    correction's weights are 1 (the engine samples what the policy computes)."""
    import remark.step.trainer as trainer_module

    seen: list[tuple[torch.Tensor, torch.Tensor]] = []
    real = trainer_module.logps_hook

    def spy(cfg, batch, **kwargs):
        hook = real(cfg, batch, **kwargs)
        transform = hook.transform

        def recorded(logps, old):
            new = transform(logps, old)
            seen.append(((new - old).detach(), batch["rank_ids"]))
            return new

        hook.transform = recorded
        return hook

    monkeypatch.setattr(trainer_module, "logps_hook", spy)
    trainer = make_trainer(
        vllm_world,
        tmp_path / "run",
        recipe="rank_grpo",
        num_iterations=2,
        learning_rate=5e-3,
        vllm_importance_sampling_correction=True,
    )
    assert trainer.args.rank_level_ratio
    history = train(trainer)
    check_engine_run(trainer, history, steps=1)  # one generation serves both updates
    for key in ("sampling/importance_sampling_ratio/min", "sampling/importance_sampling_ratio/max"):
        assert all(abs(v - 1) < 1e-3 for v in logged(history, key))
    assert len(seen) == 2  # 2 optimizer steps, the 2 updates of one generation
    moved = 0.0
    for log_ratio, rank_ids in seen:
        for r in range(log_ratio.shape[0]):
            for k in rank_ids[r].unique().tolist():
                if k < 0:
                    continue
                values = log_ratio[r][rank_ids[r] == k]
                assert torch.allclose(values, values[0].expand_as(values), atol=1e-6)
                moved = max(moved, values.abs().max().item())
    assert moved > 0  # the second update's ratio is not 1


def test_lora_with_vllm(vllm_world, tmp_path):
    """No LoRA dropout: TRL computes the policy's log-probs of the batch in train mode, so with dropout the
    logged difference measures the dropout's noise too (seen 3.6e-3 at lora_dropout 0.05), not the sync."""
    trainer = make_trainer(
        vllm_world,
        tmp_path / "run",
        use_peft=True,
        lora_r=4,
        lora_alpha=8,
        lora_dropout=0.0,
        learning_rate=5e-3,
    )
    history = train(trainer)
    check_engine_run(trainer, history)
    base = [n for n, _ in trainer.model.named_parameters() if "lora_" not in n]
    assert trainer.vllm_generation.last_sync.num_tensors == len(base)  # merged weights, no adapter tensors
    assert not any(getattr(m, "merged", False) for m in trainer.model.modules())


def test_validation_uses_the_trainer_engine_and_equals_transformers(vllm_world, tmp_path, monkeypatch):
    """Greedy validation through the colocated engine (after an update it syncs first) gives the lists,
    and so the metrics, that transformers gives on the model being trained; no second engine starts."""
    import vllm

    from data_prep.dataset import load_dataset
    from eval.generate import render_prompts, transformers_runner, vllm_runner
    from remark.run.callbacks import ValidationCallback

    trainer = make_trainer(vllm_world, tmp_path / "run", max_steps=1)
    train(trainer)
    ds = load_dataset(vllm_world[0])
    common = dict(split="valid", k=3, every=1, metric="eval/recall@3/per_responder", max_new_tokens=24)
    by_vllm = ValidationCallback(ds, engine="vllm", **common)
    by_vllm.attach(trainer)
    by_hf = ValidationCallback(ds, engine="transformers", **common)
    monkeypatch.setattr(vllm.LLM, "__init__", lambda *a, **k: pytest.fail("a second engine was started"))
    model, tok = trainer.model, trainer.processing_class
    texts = render_prompts(tok, by_hf.requests["prompt"].to_list(), ds.meta, 3)

    def lists() -> tuple[list, list]:
        return (
            vllm_runner(trainer.colocated_engine(), tok, by_vllm.gen)(texts, 1, False),
            transformers_runner(model, tok, by_hf.gen)(texts, 1, False),
        )

    before, _ = lists()
    with torch.no_grad():  # an update the engine has not seen: the next validation must sync first
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    trainer.state.global_step += 1
    ours, theirs = lists()
    assert ours == theirs and ours != before
    values_vllm, table_vllm = by_vllm.measure(model, tok)
    values_hf, table_hf = by_hf.measure(model, tok)
    assert values_vllm == values_hf
    assert table_vllm.equals(table_hf)
    assert trainer._last_loaded_step == trainer.state.global_step
