"""The README's demo table is the table of the demo CI just ran (``make demo``, then this test).

CI runs ``make demo`` before ``make test`` and sets ``REMARK_DEMO_OUT=runs/demo``: the test then fails when
the README's table differs from that run's, printing both, and fails when the run is missing. Without
the variable (a developer's ``make test``) it compares with ``runs/demo`` when there is one and skips
otherwise, saying why.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from remark.demo.report import README_MARKERS, readme_table, readme_table_problem

REPO = Path(__file__).resolve().parents[1]


def _summary_path() -> Path | None:
    wanted = os.environ.get("REMARK_DEMO_OUT")
    folder = REPO / (wanted or "runs/demo")
    path = folder / "summary.json"
    if wanted and not path.is_file():
        pytest.fail(f"REMARK_DEMO_OUT={wanted}: no summary.json there; run `make demo` first")
    return path if path.is_file() else None


def test_readme_demo_table_is_the_demo_run():
    path = _summary_path()
    if path is None:
        pytest.skip("no runs/demo/summary.json: run `make demo` (CI does, then sets REMARK_DEMO_OUT)")
    summary = json.loads(path.read_text())
    problem = readme_table_problem((REPO / "README.md").read_text(), summary)
    assert problem is None, problem


def _fake_summary() -> dict:
    cell = {"mean": 0.25, "ci_low": 0.2, "ci_high": 0.3}
    diff = {"mean": 0.05, "ci_low": 0.01, "ci_high": 0.09}
    models = {m: {"sampled": {"per_responder": {"requests": cell}}} for m in ("sft", "remark", "rank_grpo")}
    return {
        "settings": {"k": 10},
        "reference_levels": {"chance": {"per_responder": 0.003}, "nearest_request": {"per_responder": 0.1}},
        "across_seeds": {
            "models": models,
            "paired": {"remark_vs_rank_grpo": {"sampled": {"per_responder": {"requests": diff}}}},
        },
    }


def test_readme_table_check_fails_on_any_changed_cell():
    s = _fake_summary()
    table = readme_table(s)
    assert "| nearest_request | 0.100 | 0.100 |" in table
    assert "| ReMaRk | 0.250 [0.200, 0.300] | n/a |" in table
    assert "| ReMaRk - Rank-GRPO (points) | +5.00 [+1.00, +9.00] | n/a |" in table
    start, end = README_MARKERS
    readme = f"# x\n\n{start}\n{table}\n{end}\n"
    assert readme_table_problem(readme, s) is None
    changed = readme.replace("0.250 [0.200, 0.300]", "0.251 [0.200, 0.300]", 1)
    problem = readme_table_problem(changed, s)
    assert problem is not None and "0.251" in problem and "0.250" in problem
    assert "exactly one" in readme_table_problem("# no table", s)
