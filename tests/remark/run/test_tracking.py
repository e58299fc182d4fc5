"""Experiment tracking: a tiny CPU run with ``report_to: tensorboard`` writes event files holding remark's
own metrics (rank rewards, zero-signal share, per-list counts, validation recall with its CI,
steps-to-reach against a baseline run), read back with TensorBoard's own event reader."""

from __future__ import annotations

import json

import polars as pl
import pytest

from catalog.io.errors import InputError
from remark.run.callbacks import ValidationCallback
from remark.run.training import run_training
from tests.remark.run.test_training_run import config

pytest.importorskip("tensorboard")
METRIC = "eval/recall@3/union"


def scalars(run_dir):
    """tag -> [(step, value)] from every event file under ``<run_dir>/runs`` (transformers' logging_dir)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: dict[str, list[tuple[int, float]]] = {}
    for folder in sorted({p.parent for p in (run_dir / "runs").rglob("events.out.tfevents.*")}):
        acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            out.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
    return out


class Scripted(ValidationCallback):
    """The real callback with scripted per-request values (the hand dataset's 2 requests) per validation."""

    def __init__(self, script, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.script = iter(script)

    def measure(self, model, tokenizer):
        values = next(self.script)
        per_request = pl.DataFrame({"request_id": self.requests["request_id"], self.metric: values})
        return {self.metric: sum(values) / len(values)}, per_request


def scripted_run(tmp_path, hand_dataset, hand_model_dir, name, script, baseline=None):
    cfg = config(
        tmp_path,
        name,
        data_dir=str(tmp_path / "hand"),
        model_name_or_path=str(hand_model_dir),
        max_steps=2,
        save_strategy="steps",
        save_steps=2,
        report_to=["tensorboard"],
    )
    validation = Scripted(
        script,
        hand_dataset,
        split="train",
        k=3,
        every=1,
        metric=METRIC,
        max_new_tokens=24,
        baseline_run=baseline,
    )
    run_training(cfg, callbacks=[validation])
    return tmp_path / name


def test_tracking_fields_are_checked_before_loading(tmp_path, monkeypatch):
    from remark.config import load_config
    from tests.remark.run.run_fields import tiny_run_fields

    baseline = tmp_path / "baseline"
    baseline.mkdir()
    (baseline / "eval_log.jsonl").write_text('{"step": 0}\n')
    with pytest.raises(InputError) as err:  # validation is off: the baseline would never be compared
        load_config(None, tiny_run_fields(tmp_path / "run", baseline_run=str(baseline)))
    assert err.value.field == "baseline_run" and "has no effect with validation_steps=0" in err.value.message
    with pytest.raises(InputError) as err:
        config(  # no eval_log.jsonl there
            tmp_path, validation_steps=2, validation_metric="eval/recall@3/union", baseline_run=str(tmp_path)
        )
    assert err.value.field == "baseline_run"
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "wandb" else real(n, *a))
    with pytest.raises(InputError) as err:
        config(tmp_path, report_to=["wandb"])
    assert err.value.field == "report_to" and "remark[wandb]" in err.value.hint


@pytest.mark.slow
def test_tensorboard_receives_remarks_own_metrics(hand_dataset, hand_model_dir, tmp_path):
    # baseline means 0.1, 0.2, 0.3 at steps 0, 1, 2: the target is 0.3 (its last validation, step 2)
    baseline = scripted_run(
        tmp_path, hand_dataset, hand_model_dir, "baseline", [[0.0, 0.2], [0.2, 0.2], [0.2, 0.4]]
    )
    # the run: 0.2, 0.4, 0.5; it crosses 0.3 half-way from step 0 to step 1 -> step 0.5, 0.25 of 2 steps
    run = scripted_run(
        tmp_path, hand_dataset, hand_model_dir, "run", [[0.2, 0.2], [0.4, 0.4], [0.5, 0.5]], baseline
    )
    tags = scalars(run)

    # the trainer's own statistics, as TRL logs them (transformers prefixes train/), step by step
    history = json.loads((run / "checkpoint-2" / "trainer_state.json").read_text())["log_history"]
    logged = {h["step"]: h for h in history if "loss" in h}
    names = ["zero_signal_frac", "hits_per_list", "grounded_per_list", "parsed_per_list"]
    names += [f"rank_reward/{k:02d}" for k in (1, 2, 3)]
    for name in names:
        got = dict(tags[f"train/train/{name}"])
        assert sorted(got) == [1, 2], name
        for step, value in got.items():
            assert value == pytest.approx(logged[step][f"train/{name}"], abs=1e-6), name

    # validation at steps 0, 1, 2 with its 95% CI over the two requests
    assert dict(tags[f"train/{METRIC}"]) == pytest.approx({0: 0.2, 1: 0.4, 2: 0.5})
    low, high = (dict(tags[f"train/validation/{METRIC}/ci_{s}"]) for s in ("low", "high"))
    assert low == pytest.approx({0: 0.2, 1: 0.4, 2: 0.5}) and high == pytest.approx(low)  # equal requests

    # steps-to-reach against the baseline
    reach = f"train/reach/{METRIC}"
    assert dict(tags[f"{reach}/baseline_value"]) == pytest.approx({0: 0.3, 1: 0.3, 2: 0.3})
    assert dict(tags[f"{reach}/baseline_step"]) == {0: 2.0, 1: 2.0, 2: 2.0}
    assert dict(tags[f"{reach}/reached"]) == {0: 0.0, 1: 1.0, 2: 1.0}
    assert dict(tags[f"{reach}/step"]) == pytest.approx({1: 0.5, 2: 0.5})
    assert dict(tags[f"{reach}/fraction"]) == pytest.approx({1: 0.25, 2: 0.25})
    # resampling the two requests: targets 0.2 / 0.4 / 0.3 -> fractions 0 / 0.5 / 0.25
    lo, hi = dict(tags[f"{reach}/ci_low"])[2], dict(tags[f"{reach}/ci_high"])[2]
    assert 0.0 <= lo <= 0.25 <= hi <= 0.5 and lo < hi
