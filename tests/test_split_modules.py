"""Packages split into modules export their public names from the package, and the parts stay readable.
(A module moved into another room is imported from its new place: no re-exports are kept for moves.)"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: package -> the public names it exports from its modules
PUBLIC = {
    "data_prep.schema": (
        "DOMAINS EPOCH_MAX_S IDS MESSAGE MESSAGES OPTIONAL_SCHEMA PROVENANCE_SCHEMA REQUESTS_SCHEMA "
        "RESPONDER_ROWS_SCHEMA ROLES Report SPLITS SPLIT_ALIASES THREADS_SCHEMA Threads YEAR_MAX YEAR_MIN "
        "bad_timestamp bad_year check_column_types flag_rows normalize_prompt normalize_split parse_timestamp "
        "parse_year validate_threads"
    ),
    "remark.cli.eval": (
        "DEFAULT_KS DEFAULT_VIEWS FILTER_NAMES LISTS MAX_K METRIC_NAMES VIEW_NAMES add_parser cutoff "
        "filter_names run_compare run_convert run_curves run_protoqa_evaluator run_run run_score run_steps"
    ),
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_packages_export_their_public_names(module):
    mod = importlib.import_module(module)
    missing = [name for name in PUBLIC[module].split() if not hasattr(mod, name)]
    assert not missing, f"{module} lost {missing}"


def test_the_moved_names_are_the_same_objects():
    import data_prep.schema as schema
    import remark.cli.eval as cli_eval
    from data_prep.schema.checks import validate_threads
    from remark.cli.eval.score import run_score

    assert schema.validate_threads is validate_threads
    assert cli_eval.run_score is run_score


@pytest.mark.parametrize(
    "folder",
    [
        "data_prep/schema",
        "remark/cli/eval",
        "remark/run/output_dir.py",
        "remark/run/run_files.py",
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
