"""Whole training runs on a tiny local model: best-checkpoint selection, resume, divergence guard, CLI."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest
import torch
from safetensors.torch import load_file

from remark.config import RemarkGRPOConfig
from remark.run.callbacks import DivergenceGuard, ValidationCallback
from remark.run.sampling import training_dataset
from remark.step.trainer import RemarkGRPOTrainer
from tests.remark.run.run_fields import tiny_run_fields

pytestmark = pytest.mark.slow


def config(tmp_path, name="run", **overrides):
    return RemarkGRPOConfig(**tiny_run_fields(tmp_path / name, **overrides))


def trainer_for(cfg, ds, model_dir, callbacks=()):
    from transformers import AutoTokenizer

    return RemarkGRPOTrainer(
        model=str(model_dir),
        args=cfg,
        train_dataset=training_dataset(ds, split="train", sampling=cfg.sampling, k=cfg.num_ranks),
        catalog=ds.catalog,
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        callbacks=list(callbacks),
    )


class ScriptedValidation(ValidationCallback):
    """The real callback with scripted metric values: validation peaks at the second validation."""

    values = iter([0.10, 0.30, 0.20, 0.15])

    def measure(self, model, tokenizer):
        value = next(self.values)
        per_request = pl.DataFrame({"request_id": self.requests["request_id"], self.metric: value})
        return {self.metric: value}, per_request


def test_best_checkpoint_is_the_early_peak(hand_dataset, hand_model_dir, tmp_path):
    cfg = config(tmp_path, max_steps=6, save_strategy="steps", save_steps=2)
    metric = "eval/recall@3/union"
    callback = ScriptedValidation(hand_dataset, split="train", k=3, every=2, metric=metric, max_new_tokens=24)
    trainer_for(cfg, hand_dataset, hand_model_dir, [callback]).train()
    out = tmp_path / "run"
    log = [json.loads(x) for x in (out / "eval_log.jsonl").read_text().splitlines()]
    assert [x["step"] for x in log] == [0, 2, 4, 6]
    assert [x[metric] for x in log] == [0.10, 0.30, 0.20, 0.15]
    assert json.loads((out / "best" / "best.json").read_text()) == {
        "step": 2,
        "metric": metric,
        "value": 0.30,
    }
    best = load_file(str(out / "best" / "model.safetensors"))
    at_2 = load_file(str(out / "checkpoint-2" / "model.safetensors"))
    at_6 = load_file(str(out / "checkpoint-6" / "model.safetensors"))
    assert all(torch.equal(best[k], at_2[k]) for k in best)
    assert any(not torch.equal(best[k], at_6[k]) for k in best)
    for step in (0, 2, 4, 6):
        assert (
            pl.read_parquet(out / "eval" / f"step_{step:06d}.parquet").height == hand_dataset.requests.height
        )
    # Checkpoints hold no pickle: optimizer, scheduler, RNG and args as safetensors/JSON.
    names = {p.name for p in (out / "checkpoint-2").iterdir()}
    assert {"optimizer.safetensors", "optimizer.json", "scheduler.json", "rng_state.safetensors"} <= names
    assert not names & {"optimizer.pt", "scheduler.pt", "rng_state.pth", "training_args.bin"}


def losses(trainer):
    return {h["step"]: h["loss"] for h in trainer.state.log_history if "loss" in h}


def test_resume_reproduces_the_uninterrupted_run(hand_dataset, hand_model_dir, tmp_path):
    full = trainer_for(
        config(tmp_path, "full", max_steps=4, save_strategy="steps", save_steps=2),
        hand_dataset,
        hand_model_dir,
    )
    full.train()
    expected = losses(full)
    assert len(expected) == 4
    # A second run that stops after step 2, then resumes from its checkpoint to step 4.
    first = trainer_for(
        config(tmp_path, "part", max_steps=4, save_strategy="steps", save_steps=2),
        hand_dataset,
        hand_model_dir,
    )
    first.train()
    shutil.rmtree(tmp_path / "part" / "checkpoint-4")
    resumed = trainer_for(
        config(tmp_path, "part", max_steps=4, save_strategy="steps", save_steps=2),
        hand_dataset,
        hand_model_dir,
    )
    resumed.train(resume_from_checkpoint=str(tmp_path / "part" / "checkpoint-2"))
    got = losses(resumed)  # steps 1-2 come back from the checkpoint's trainer_state.json
    assert sorted(got) == [1, 2, 3, 4]
    for step in (3, 4):
        assert got[step] == pytest.approx(expected[step], rel=1e-5, abs=1e-7)


def test_divergence_guard_stops_and_says_why(hand_dataset, hand_model_dir, tmp_path):
    cfg = config(tmp_path, beta=0.1, max_steps=6, learning_rate=0.5, divergence_log_ratio=1e-6)
    guard = DivergenceGuard(max_abs_log_ratio=1e-6)
    trainer = trainer_for(cfg, hand_dataset, hand_model_dir, [guard])
    trainer.train()
    assert trainer.state.global_step < 6
    stopped = json.loads((tmp_path / "run" / "stopped.json").read_text())
    assert stopped["reason"] == "divergence"
    assert stopped["metric"] == "train/abs_log_ratio_ref"
    assert stopped["value"] > 1e-6


def test_group_size_advisor_is_fed_and_writes_its_advice_into_checkpoints(
    hand_dataset, hand_model_dir, tmp_path
):
    from remark.planning.adaptive import GroupSizeAdvisor, read_recommendation

    prof = tmp_path / "profile.json"
    points = [{"G": g, "peak_mem_gb": 10 + 2 * g, "step_s": 5 + 0.5 * g} for g in (2, 4, 8)]
    prof.write_text(json.dumps({"device": "test", "model": "test", "points": points}))
    advisor = GroupSizeAdvisor.from_profile(
        prof, memory_budget_gb=40, candidates=(2, 4, 8), every_n_steps=1, min_units=4, current_G=4
    )
    cfg = config(tmp_path, max_steps=2, save_strategy="steps", save_steps=2)
    trainer = trainer_for(cfg, hand_dataset, hand_model_dir, [advisor])
    assert trainer._advisor is advisor
    trainer.train()
    rec = read_recommendation(tmp_path / "run" / "checkpoint-2")
    assert rec is not None
    assert rec["recommended_G"] in (2, 4, 8)
    assert any("plan/recommended_G" in h for h in trainer.state.log_history)
