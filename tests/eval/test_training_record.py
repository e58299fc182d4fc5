"""eval.training_record: the grounding a model's run recorded, read from its run folder and compared."""

from __future__ import annotations

import json

import pytest

from catalog.io.errors import InputError
from catalog.match import GroundingSettings
from eval.training_record import training_comparison, training_grounding

EXACT0 = GroundingSettings(match_mode="exact", year_tolerance=0)


def run_folder(tmp_path, **files):
    (tmp_path / "run" / "best").mkdir(parents=True)
    for name, obj in files.items():
        (tmp_path / "run" / f"{name}.json").write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return tmp_path / "run" / "best"


def test_the_summary_wins_then_the_config_then_nothing(tmp_path):
    config = {
        "learning_rate": 1e-5,
        **GroundingSettings(match_mode="normalized", match_threshold=80.0).to_dict(),
    }
    model = run_folder(
        tmp_path, train_summary={"grounding": {"used": EXACT0.to_dict()}}, remark_config=config
    )
    summary = str(tmp_path / "run" / "train_summary.json")
    assert training_grounding(model) == (EXACT0.to_dict(), summary)
    (tmp_path / "run" / "train_summary.json").unlink()  # a run that died before its end: the config
    fields, source = training_grounding(model)
    assert fields == {
        "match_mode": "normalized",
        "year_tolerance": 2,
        "match_threshold": 80.0,
        "match_scorer": "ratio",
    } and source.endswith("remark_config.json")
    (tmp_path / "run" / "remark_config.json").unlink()
    assert training_grounding(model) is None and training_comparison(model, GroundingSettings()) is None


def test_comparison_names_each_field_and_the_flags_that_match_the_training(tmp_path):
    model = run_folder(tmp_path, train_summary={"grounding": {"used": EXACT0.to_dict()}})
    got = training_comparison(model, GroundingSettings())  # fuzzy, year_tolerance 2
    assert got["differs"] == {
        "match_mode": {"training": "exact", "eval": "fuzzy"},
        "year_tolerance": {"training": 0, "eval": 2},
    }
    assert "match_mode='fuzzy' (training: 'exact'), year_tolerance=2 (training: 0)" in got["note"]
    assert "pass --match-mode exact --year-tolerance 0 to evaluate it as it was trained" in got["note"]
    same = training_comparison(model, EXACT0)
    assert same["differs"] == {} and same["note"] is None


@pytest.mark.parametrize(
    ("files", "fragment"),
    [
        ({"train_summary": "{not json"}, "row 1: not valid JSON"),
        (
            {"train_summary": {"grounding": {"used": {**EXACT0.to_dict(), "match_mode": "loose"}}}},
            "match_mode",
        ),
        ({"remark_config": {**EXACT0.to_dict(), "year_tolerance": -1}}, "field 'year_tolerance'"),
        # a record that holds part of the grounding could call two different groundings alike
        ({"train_summary": {"global_step": 4}}, "field 'grounding': missing"),
        (
            {"train_summary": {"grounding": {"used": {"match_mode": "exact"}}}},
            "'grounding.used.year_tolerance'",
        ),
        ({"remark_config": {"year_tolerance": 2, "match_mode": None}}, "field 'match_threshold': missing"),
        ({"remark_config": {**EXACT0.to_dict(), "match_mode": None}}, "unknown match_mode None"),
    ],
)
def test_a_bad_record_is_an_input_error_naming_the_file(tmp_path, files, fragment):
    model = run_folder(tmp_path, **files)
    with pytest.raises(InputError) as err:
        training_grounding(model)
    assert fragment in str(err.value) and str(tmp_path / "run") in str(err.value)
    assert "re-run the training, or pass the grounding flags" in str(err.value)
