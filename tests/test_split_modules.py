"""Modules split into smaller ones keep their public names where they were, and the parts stay readable."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: module -> the public names it had before the split (data_prep/schema.py, remark/run/training.py, remark/cli/eval.py)
PUBLIC = {
    "data_prep.schema": (
        "DOMAINS EPOCH_MAX_S IDS MESSAGE MESSAGES OPTIONAL_SCHEMA PROVENANCE_SCHEMA REQUESTS_SCHEMA "
        "RESPONDER_ROWS_SCHEMA ROLES Report SPLITS SPLIT_ALIASES THREADS_SCHEMA Threads YEAR_MAX YEAR_MIN "
        "bad_timestamp bad_year check_column_types flag_rows normalize_prompt normalize_split parse_timestamp "
        "parse_year validate_threads"
    ),
    "remark.run.training": (
        "FINAL_KIND MERGED_KIND RUN_OUTPUTS SETUP_OUTPUTS TINY_DEFAULTS build_tiny_assets policy_model "
        "prepare_output_dir previous_run resume_checkpoint resume_group_size run_training tensorboard_logs"
    ),
    "remark.cli.eval": (
        "DEFAULT_KS DEFAULT_VIEWS FILTER_NAMES LISTS MAX_K METRIC_NAMES VIEW_NAMES add_parser cutoff "
        "filter_names run_compare run_convert run_curves run_protoqa_evaluator run_run run_score run_steps"
    ),
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_public_names_still_import_from_where_they_were(module):
    mod = importlib.import_module(module)
    missing = [name for name in PUBLIC[module].split() if not hasattr(mod, name)]
    assert not missing, f"{module} lost {missing}"


def test_the_moved_names_are_the_same_objects():
    import data_prep.schema as schema
    import remark.cli.eval as cli_eval
    import remark.run.training as train
    from data_prep.schema.checks import validate_threads
    from remark.cli.eval.score import run_score
    from remark.run.build_tiny import build_tiny_assets
    from remark.run.output_dir import prepare_output_dir

    assert schema.validate_threads is validate_threads
    assert train.prepare_output_dir is prepare_output_dir and train.build_tiny_assets is build_tiny_assets
    assert cli_eval.run_score is run_score


@pytest.mark.parametrize(
    "folder",
    [
        "data_prep/schema",
        "remark/cli/eval",
        "remark/run/output_dir.py",
        "remark/run/build_tiny.py",
        "remark/run/training.py",
    ],
)
def test_the_parts_are_under_400_lines_and_say_what_they_hold(folder):
    path = REPO / folder
    for f in sorted(path.glob("*.py")) if path.is_dir() else [path]:
        text = f.read_text()
        assert len(text.splitlines()) < 400, f"{f.relative_to(REPO)} has {len(text.splitlines())} lines"
        assert text.startswith('"""'), f"{f.relative_to(REPO)} has no module docstring"
