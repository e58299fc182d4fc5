"""Dataset and model cards (Hugging Face format: YAML header + markdown), and checkpoint hygiene:
``save_total_limit`` / ``save_only_model`` rotate ``checkpoint-N`` and never touch ``best/``."""

from __future__ import annotations

import json

import polars as pl
import pytest

from data_prep.card import read_card_header
from remark.cli.main import main
from remark.run.callbacks import ValidationCallback
from remark.run.training import run_training
from tests.remark.run.test_training_run import config


def test_prep_writes_a_dataset_card_with_the_pooled_statistics(tmp_path):
    out = tmp_path / "synth"
    cmd = ["prep", "synthetic", "--n-requests", "60", "--n-items", "20", "--out", str(out)]
    assert main(cmd) == 0
    text = (out / "README.md").read_text()
    header = read_card_header(text)
    assert header["license"] == "apache-2.0"
    assert header["pretty_name"] == "synth"
    assert header["size_categories"] == ["n<1K"]
    assert header["source_datasets"] == ["synthetic"]
    assert {"recommendation", "multi-responder"} <= set(header["tags"])
    stats = json.loads((out / "stats.json").read_text())
    splits = ", ".join(f"{k} {v['requests']}" for k, v in stats["by_split"].items())
    assert f"| requests | 60 ({splits}) |" in text
    assert f"mean {stats['n_responders']['mean']:.2f}" in text
    assert f"{100 * stats['single_mention_item_share']:.1f}%" in text
    assert "match_mode fuzzy" in text  # the grounding used
    assert "remark prep synthetic --n-requests 60 --n-items 20 --out " + str(out) in text
    assert json.loads((out / "meta.json").read_text())["command"].startswith("remark prep synthetic")


class ScriptedValidation(ValidationCallback):
    """The real callback with scripted per-request values (2 requests): the mean peaks at step 1."""

    script = iter([[0.0, 0.2], [0.4, 0.6], [0.1, 0.3], [0.2, 0.2]])

    def measure(self, model, tokenizer):
        values = next(self.script)
        per_request = pl.DataFrame({"request_id": self.requests["request_id"], self.metric: values})
        return {self.metric: sum(values) / len(values)}, per_request


@pytest.mark.slow
def test_rotation_keeps_best_and_cards_carry_the_metrics(hand_dataset, hand_model_dir, tmp_path):
    metric = "eval/recall@3/union"
    cfg = config(
        tmp_path,
        data_dir=str(tmp_path / "hand"),
        model_name_or_path=str(hand_model_dir),
        max_steps=3,
        save_strategy="steps",
        save_steps=1,
        save_total_limit=1,
        save_only_model=True,
        model_card_license="apache-2.0",
    )
    validation = ScriptedValidation(
        hand_dataset, split="train", k=3, every=1, metric=metric, max_new_tokens=24
    )
    summary = run_training(cfg, callbacks=[validation], command="remark train --config x.yaml")
    out = tmp_path / "run"

    # hygiene: one checkpoint kept (the last), model only; best/ (step 1) survives the rotation
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-3"]
    names = {p.name for p in (out / "checkpoint-3").iterdir()}
    assert "model.safetensors" in names
    assert not names & {"optimizer.safetensors", "optimizer.pt", "scheduler.json", "rng_state.safetensors"}
    assert json.loads((out / "best" / "best.json").read_text())["step"] == 1
    assert (out / "best" / "model.safetensors").is_file()
    assert summary["best"]["step"] == 1

    # model cards: YAML header, method, data, validation with its CI, command
    for kind, step, mean in (("best", 1, 0.5), ("final", 3, 0.2)):
        text = (out / kind / "README.md").read_text()
        header = read_card_header(text)
        assert header["base_model"] == str(hand_model_dir)
        assert header["datasets"] == ["hand"]
        assert header["license"] == "apache-2.0"
        assert header["library_name"] == "transformers"
        assert {"remark", "grpo", "reward-union"} <= set(header["tags"])
        assert f"# {kind}: step {step} of 3" in text
        assert "| reward_scheme | union |" in text and "| loss_type | bnpo |" in text
        assert "2 requests (train 2)" in text
        assert "remark train --config x.yaml" in text
        card = json.loads((out / kind / "card.json").read_text())
        v = card["validation"]["metrics"][metric]
        assert v["mean"] == pytest.approx(mean)
        assert v["ci_low"] <= v["mean"] <= v["ci_high"]
        assert f"| `{metric}` | {mean:.4f} |" in text
    best = json.loads((out / "best" / "card.json").read_text())["validation"]["metrics"][metric]
    assert 0.4 <= best["ci_low"] < best["ci_high"] <= 0.6  # resampling two requests valued 0.4 and 0.6

    # test metrics: remark card adds a remark eval run's numbers with their CIs
    ev = tmp_path / "test_eval"
    args = ["eval", "run", "--model", str(out / "best"), "--data", str(tmp_path / "hand"), "--out", str(ev)]
    args += ["--split", "train", "--k", "3", "--max-new-tokens", "24", "--engine", "transformers"]
    assert main([*args, "--device", "cpu", "--resamples", "99"]) == 0
    assert main(["card", str(out / "best"), "--test", str(ev)]) == 0
    result = json.loads((ev / "metrics.json").read_text())
    text = (out / "best" / "README.md").read_text()
    r = result["per_responder"]["recall@3"]
    assert (
        f"| `eval/recall@3/per_responder` | {r['mean']:.4f} | [{r['ci_low']:.4f}, {r['ci_high']:.4f}] |"
        in text
    )
    assert "split `train` (2 requests" in text
    assert read_card_header(text)["base_model"] == str(hand_model_dir)
