"""The README's demo table is the table of the demo CI just ran (``make demo``, then this test).

CI runs ``make demo`` before ``make test`` and sets ``REMARK_DEMO_OUT=runs/demo``: the test then fails when
the README's table differs from that run's, printing both, and fails when the run is missing. Without
the variable (a developer's ``make test``) it compares with ``runs/demo`` when there is one and skips
otherwise, saying why.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from remark.demo.report import (
    README_MARKERS,
    host_class,
    host_tolerances,
    protoqa_rows,
    readme_table,
    readme_table_problem,
)

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


INTEL = {"vendor": "GenuineIntel", "vector_isa": ["avx2", "avx512f"], "has_avx2": True}
AMD_AVX2 = {"vendor": "AuthenticAMD", "vector_isa": ["avx", "avx2"], "has_avx2": True}


def _fake_summary(n_seeds: int = 1, machine: dict | None = None) -> dict:
    sd = 0.01 if n_seeds > 1 else None
    cell = {"mean": 0.25, "ci_low": 0.2, "ci_high": 0.3}
    diff = {"mean": 0.05, "ci_low": 0.01, "ci_high": 0.09}
    models = {
        m: {"sampled": {"per_responder": {"requests": dict(cell), "seeds": {"n": n_seeds, "sd": sd}}}}
        for m in ("sft", "remark", "rank_grpo")
    }
    seeds = {"n": n_seeds, "sd": sd, "ci_low": 0.01 if n_seeds > 1 else None, "ci_high": 0.09}
    return {
        "settings": {"k": 10, "rl_seeds": list(range(n_seeds))},
        "machine": machine or INTEL,
        "reference_levels": {"chance": {"per_responder": 0.003}, "nearest_request": {"per_responder": 0.1}},
        "across_seeds": {
            "models": models,
            "paired": {
                "remark_vs_rank_grpo": {"sampled": {"per_responder": {"requests": diff, "seeds": seeds}}}
            },
        },
    }


def _readme(summary: dict) -> str:
    start, end = README_MARKERS
    return f"# x\n\n{start}\n{readme_table(summary)}\n{end}\n"


def test_readme_table_check_fails_on_any_changed_cell():
    s = _fake_summary()
    table = readme_table(s)
    assert "| nearest_request | 0.100 | 0.100 |" in table
    assert "| ReMaRk | 0.250 [0.200, 0.300] | n/a |" in table
    assert "| ReMaRk - Rank-GRPO (points) | +5.00 [+1.00, +9.00] | n/a |" in table
    assert "| verdict | no verdict (< 3 seeds) | n/a |" in table  # the rule needs three seeds
    assert "made on a host: GenuineIntel with AVX-512." in table
    readme = _readme(s)
    assert readme_table_problem(readme, s) is None
    changed = readme.replace("0.250 [0.200, 0.300]", "0.251 [0.200, 0.300]", 1)
    problem = readme_table_problem(changed, s)
    assert problem is not None and "0.251" in problem and "0.250" in problem and "made on" in problem
    assert "exactly one" in readme_table_problem("# no table", s)


def test_host_class_names_vendor_and_widest_vector_set():
    assert host_class(INTEL) == "GenuineIntel with AVX-512"
    assert host_class(AMD_AVX2) == "AuthenticAMD with AVX2"
    assert host_class({}) == "unknown vendor with no AVX2"


def test_host_tolerances_from_the_seed_spread():
    tol = host_tolerances(_fake_summary(n_seeds=3))
    # 4 SDs of the difference of two 3-seed means: 4 * 0.01 * sqrt(2/3) = 0.03266
    assert tol["ReMaRk"][0] == pytest.approx(4 * 0.01 * (2 / 3) ** 0.5)
    assert tol["SFT start"][0] == pytest.approx(tol["ReMaRk"][0])  # the widest RL row of its column
    assert tol["ReMaRk - Rank-GRPO (points)"][0] == pytest.approx(100 * 4 * 0.01 * (2 / 3) ** 0.5)
    assert tol["chance"] == [0.0, 0.0]  # reference levels train nothing: they must be equal
    assert host_tolerances(_fake_summary(n_seeds=1))["ReMaRk"][0] is None


def test_another_host_class_is_held_to_the_seed_spread_and_the_verdicts():
    made_on_intel = _readme(_fake_summary(n_seeds=3, machine=INTEL))
    here = _fake_summary(n_seeds=3, machine=AMD_AVX2)
    # a different host: numbers within 0.0327 of the README's pass, the README's host named in the table
    moved = copy.deepcopy(here)
    moved["across_seeds"]["models"]["remark"]["sampled"]["per_responder"]["requests"]["mean"] = 0.27
    assert readme_table_problem(made_on_intel, moved) is None
    far = copy.deepcopy(here)
    far["across_seeds"]["models"]["remark"]["sampled"]["per_responder"]["requests"]["mean"] = 0.30
    problem = readme_table_problem(made_on_intel, far)
    assert problem is not None and "row 'ReMaRk'" in problem and "AuthenticAMD with AVX2" in problem
    level = copy.deepcopy(here)
    level["reference_levels"]["chance"]["per_responder"] = 0.004
    assert "row 'chance'" in readme_table_problem(made_on_intel, level)
    flipped = copy.deepcopy(here)
    flipped["across_seeds"]["paired"]["remark_vs_rank_grpo"]["sampled"]["per_responder"]["seeds"][
        "ci_low"
    ] = -0.01
    assert "row 'verdict'" in readme_table_problem(made_on_intel, flipped)
    # the same host class as the README's: identical or it fails, whatever the spread
    same = _fake_summary(n_seeds=3, machine=INTEL)
    same["across_seeds"]["models"]["remark"]["sampled"]["per_responder"]["requests"]["mean"] = 0.251
    assert "on the host class it was made on" in readme_table_problem(made_on_intel, same)


def test_one_seed_on_another_host_gives_no_tolerance():
    made_on_intel = _readme(_fake_summary(n_seeds=1, machine=INTEL))
    here = _fake_summary(n_seeds=1, machine=AMD_AVX2)
    here["across_seeds"]["models"]["remark"]["sampled"]["per_responder"]["requests"]["mean"] = 0.251
    assert "no tolerance" in readme_table_problem(made_on_intel, here)


def test_protoqa_rows_average_the_seeds_and_sit_under_the_table():
    s = _fake_summary(n_seeds=3)
    pq = lambda x: {"protoqa": {"per_responder": {"recall@10": {"mean": x}, "recall@5": {"mean": 0.9}}}}  # noqa: E731
    s["test"] = {"sft": {"sampled": pq(0.10), "greedy": pq(0.05)}}
    for m, vals in (("remark", (0.11, 0.12, 0.13)), ("rank_grpo", (0.10, 0.10, 0.10))):
        for seed, v in enumerate(vals):
            s["test"][f"{m}-seed{seed}"] = {"sampled": pq(v), "greedy": pq(v)}
    rows = protoqa_rows(s)
    cell = rows["ProtoQA matching: ReMaRk"][0]
    assert cell["mean"] == pytest.approx(0.12) and cell["sd"] == pytest.approx(0.01)
    assert (cell["min"], cell["max"], cell["n"]) == (0.11, 0.13, 3)
    assert rows["ProtoQA matching: SFT start"][1]["mean"] == 0.05
    table = readme_table(s)
    assert "| ProtoQA matching: ReMaRk | 0.120 (0.110 to 0.130) | 0.120 (0.110 to 0.130) |" in table
    assert "| ProtoQA matching: SFT start | 0.100 | 0.050 |" in table
    tol = host_tolerances(s)
    assert tol["ProtoQA matching: ReMaRk"][0] == pytest.approx(4 * 0.01 * (2 / 3) ** 0.5)
    assert tol["ProtoQA matching: Rank-GRPO"][0] == 0.002  # no spread: the floor
    s.pop("test")
    assert "ProtoQA" not in readme_table(s)  # data without answer clusters: no such rows
