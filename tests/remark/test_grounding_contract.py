"""The grounding contract end to end: the reward, the validation and ``remark eval run`` ground the same
completion lines to the same slot ids, with the dataset's settings unless a run asks for others (then
printed and recorded).

Generation is scripted in all three places (the trainer's rollout, the validation's runner,
``eval run``'s ``generate_lists``), so the three see the same texts; the ids are captured where each
grounds them: ``RankScorer.score``'s ``slot_ids``, the validation's ``parse_and_ground``, and
``predictions.jsonl``'s ``grounded`` lists.
"""

from __future__ import annotations

import json

import pytest

import remark.run.callbacks
import remark.step.trainer
from catalog.match import GroundingSettings
from eval.generate import Generated
from remark.cli.main import main
from remark.config import RemarkGRPOConfig
from remark.run.training import run_training
from remark.scoring.scorer import RankScorer
from tests.remark.conftest import HAND_REQUESTS, scripted_rollout, write_hand_dataset
from tests.remark.run.run_fields import tiny_run_fields

pytestmark = pytest.mark.slow

# One completion per request; the years of some lines are 1 or 2 off the catalog's (Alpha 2001, Gamma
# 2003, Delta 2004): they ground with year_tolerance 2 and not with 0.
TEXTS = {
    "r1": "Alpha (2003)\nBeta (2002)\nGamma (2001)",
    "r2": "Delta (2005)\nEpsilon (2005)",
}
IDS_TOL0 = {"r1": [None, "B", None], "r2": [None, "E"]}
IDS_TOL2 = {"r1": ["A", "B", "C"], "r2": ["D", "E"]}
TEXT_IDS_TOL0 = {TEXTS[r]: IDS_TOL0[r] for r in TEXTS}


def _rid(text: str) -> str:
    return next(r for r, (prompt, _, _) in HAND_REQUESTS.items() if prompt in text)


class Captured:
    """The slot ids each of the three paths produced, per completion text."""

    def __init__(self) -> None:
        self.reward: list[tuple[str, list]] = []
        self.validation: list[tuple[str, list]] = []


@pytest.fixture
def scripted(monkeypatch):
    """Script generation in the trainer, the validation and ``eval run``; capture what each grounds."""
    got = Captured()

    class ScriptedTrainer(remark.step.trainer.RemarkGRPOTrainer):
        def __init__(self, *args, **kwargs):
            script = {rid: [text] for rid, text in TEXTS.items()}
            rollout = scripted_rollout(kwargs["processing_class"], script)
            super().__init__(*args, rollout_func=rollout, **kwargs)

    original_score = RankScorer.score

    def score(self, completion_ids, columns, **kw):
        out = original_score(self, completion_ids, columns, **kw)
        got.reward += list(zip(out.texts, out.slot_ids, strict=True))
        return out

    def runner(model, tokenizer, gen):
        return lambda texts, n, sampled: [[TEXTS[_rid(t)]] * n for t in texts]

    original_ground = remark.run.callbacks.parse_and_ground

    def parse_and_ground(completions, matcher):
        shown, ids = original_ground(completions, matcher)
        got.validation += list(zip(completions, ids, strict=True))
        return shown, ids

    def generate_lists(model_dir, prompts, meta, cfg, adapter=None):
        greedy = [TEXTS[_rid(p[-1]["content"])] for p in prompts]
        return Generated(greedy=greedy, samples=None, engine="transformers", prompts=[])

    monkeypatch.setattr(remark.step.trainer, "RemarkGRPOTrainer", ScriptedTrainer)
    monkeypatch.setattr(RankScorer, "score", score)
    monkeypatch.setattr(remark.run.callbacks, "transformers_runner", runner)
    monkeypatch.setattr(remark.run.callbacks, "parse_and_ground", parse_and_ground)
    monkeypatch.setattr("eval.run.generate_lists", generate_lists)
    return got


def train_config(tmp_path, data_dir, model_dir, **grounding):
    fields = tiny_run_fields(
        tmp_path / "run",
        data_dir=str(data_dir),
        model_name_or_path=str(model_dir),
        train_split="train",
        valid_split="train",
        max_steps=1,
        learning_rate=1e-3,
        validation_steps=1,
        validation_metric="eval/recall@3/union",
    )
    del fields["match_mode"]  # the grounding comes from the dataset unless a test asks for it
    return RemarkGRPOConfig(**fields, **grounding)


def eval_run(tmp_path, data_dir, model_dir, name, *flags):
    out = tmp_path / name
    argv = ["eval", "run", "--model", str(model_dir), "--data", str(data_dir), "--out", str(out)]
    argv += ["--split", "train", "--k", "3", "--metrics", "recall", "--resamples", "100", *flags]
    assert main(argv) == 0
    rows = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    metrics = json.loads((out / "metrics.json").read_text())
    return {r["request_id"]: r["grounded"] for r in rows}, {r["completion"] for r in rows}, metrics


def assert_ids(pairs, want):
    assert pairs, "nothing was grounded"
    for text, ids in pairs:
        assert ids == want[text], text


def test_dataset_with_year_tolerance_0_grounds_alike_in_reward_validation_and_eval(
    scripted, hand_model_dir, tmp_path, capsys
):
    """prep -> train -> eval without grounding settings: all three use the dataset's year_tolerance 0."""
    dataset = GroundingSettings(match_mode="fuzzy", year_tolerance=0)
    data = write_hand_dataset(tmp_path / "data", grounding=dataset).path
    assert json.loads((data / "meta.json").read_text())["grounding"] == dataset.to_dict()
    cfg = train_config(tmp_path, data, hand_model_dir)
    assert cfg.year_tolerance is None and cfg.match_mode is None  # "from the dataset"
    summary = run_training(cfg)
    assert_ids(scripted.reward, TEXT_IDS_TOL0)
    assert_ids(scripted.validation, TEXT_IDS_TOL0)
    assert {t for t, _ in scripted.reward} == {t for t, _ in scripted.validation} == set(TEXTS.values())
    ids, completions, metrics = eval_run(tmp_path, data, tmp_path / "run" / "final", "eval")
    assert ids == IDS_TOL0 and completions == set(TEXTS.values())
    # recorded: what was used, that it is the dataset's, and that nothing was overridden
    record = summary["grounding"]
    assert record["used"] == record["dataset"] == dataset.to_dict()
    assert record["overridden"] == {} and record["requested"] == {} and record["notes"] == []
    assert json.loads((tmp_path / "run" / "train_summary.json").read_text())["grounding"] == record
    used = json.loads((tmp_path / "run" / "remark_config.json").read_text())
    assert {k: used[k] for k in dataset.names()} == dataset.to_dict()
    assert metrics["settings"]["grounding"]["used"] == dataset.to_dict()
    assert metrics["settings"]["grounding"]["overridden"] == {}
    assert "grounding_overridden" not in metrics["warnings"]
    # the model's run recorded the same grounding: compared, nothing differs, nothing said
    training = metrics["settings"]["grounding"]["training"]
    assert training["source"] == str((tmp_path / "run" / "train_summary.json").resolve())
    assert training["used"] == dataset.to_dict() and training["differs"] == {}
    assert "grounding_differs_from_training" not in metrics["warnings"]
    printed = capsys.readouterr()
    assert "grounding differs" not in printed.out + printed.err
    assert "differently from the model's training" not in printed.err


def test_config_override_is_printed_recorded_and_matched_by_eval_flags(
    scripted, hand_model_dir, tmp_path, capsys
):
    """year_tolerance: 0 in the config over a year_tolerance 2 dataset: reward and validation both use 0,
    the run prints and records it; `eval run --year-tolerance 0` grounds alike, `eval run` alone uses 2."""
    data = write_hand_dataset(tmp_path / "data", grounding=GroundingSettings()).path
    summary = run_training(train_config(tmp_path, data, hand_model_dir, year_tolerance=0))
    assert_ids(scripted.reward, TEXT_IDS_TOL0)
    assert_ids(scripted.validation, TEXT_IDS_TOL0)
    out = capsys.readouterr().out
    assert (
        "grounding differs from" in out and "year_tolerance=0 (dataset: 2), set by the training config" in out
    )
    record = summary["grounding"]
    assert record["overridden"] == {"year_tolerance": {"dataset": 2, "used": 0}}
    assert record["requested"] == {"year_tolerance": 0} and record["requested_by"] == "the training config"
    assert record["used"]["year_tolerance"] == 0 and record["dataset"]["year_tolerance"] == 2
    assert json.loads((tmp_path / "run" / "remark_config.json").read_text())["year_tolerance"] == 0

    model = tmp_path / "run" / "final"
    ids, _, metrics = eval_run(tmp_path, data, model, "eval_tol0", "--year-tolerance", "0")
    assert ids == IDS_TOL0
    err = capsys.readouterr().err
    assert "year_tolerance=0 (dataset: 2), set by command-line flags" in err
    assert metrics["settings"]["grounding"]["overridden"] == {"year_tolerance": {"dataset": 2, "used": 0}}
    assert metrics["warnings"]["grounding_overridden"] == 1
    assert metrics["settings"]["grounding"]["training"]["differs"] == {}  # evaluated as it was trained
    assert "grounding_differs_from_training" not in metrics["warnings"]
    ids, _, metrics = eval_run(tmp_path, data, model, "eval_dataset")
    assert ids == IDS_TOL2  # without flags: the dataset's year_tolerance 2
    assert metrics["settings"]["grounding"]["used"] == GroundingSettings().to_dict()
    err = capsys.readouterr().err
    assert "grounding differs" not in err
    # ... which is not the grounding the model was trained with: printed and recorded
    summary_path = str((tmp_path / "run" / "train_summary.json").resolve())
    assert f"note: this evaluation grounds differently from the model's training ({summary_path}): " in err
    assert "year_tolerance=2 (training: 0)" in err and "pass --year-tolerance 0 to evaluate it" in err
    training = metrics["settings"]["grounding"]["training"]
    assert training["differs"] == {"year_tolerance": {"training": 0, "eval": 2}}
    assert training["source"] == summary_path and training["used"]["year_tolerance"] == 0
    assert metrics["warnings"]["grounding_differs_from_training"] == 1
    assert any("training: 0" in n for n in metrics["settings"]["grounding"]["notes"])
