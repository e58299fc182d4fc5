"""The loop oracles are written from the definitions, not copied from the fast paths they check: no run of
statements in an oracle's function bodies appears in a fast path's, and every registered segmentation has
its oracle. (A fault copied into both would pass every equality test.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from remark.algos import names
from remark.oracles.scorer import TOKEN_RANK_LOOPS, OracleScorer

REPO = Path(__file__).resolve().parents[2]
ORACLES = [
    *sorted((REPO / "remark" / "oracles").glob("*.py")),
    *sorted((REPO / "catalog" / "oracles").glob("*.py")),
]
FAST = [
    p
    for root in ("remark", "catalog")
    for p in sorted((REPO / root).rglob("*.py"))
    if "oracles" not in p.relative_to(REPO).parts
]
#: consecutive body lines that may not appear in both (three-line idioms such as a fixpoint loop are common)
RUN = 4


def body_lines(path: Path) -> list[list[str]]:
    """Per function: the lines of its body as ``ast.unparse`` writes them (formatting and comments do not
    count), without its docstring."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]
            lines = [line.strip() for stmt in body for line in ast.unparse(stmt).splitlines()]
            out.append([line for line in lines if line])
    return out


def runs(path: Path, n: int = RUN) -> set[tuple[str, ...]]:
    return {tuple(f[i : i + n]) for f in body_lines(path) for i in range(len(f) - n + 1)}


def shared_runs(oracle: Path, fast: list[Path], n: int = RUN) -> dict[str, set[tuple[str, ...]]]:
    mine = runs(oracle, n)
    return {str(p.relative_to(REPO)): common for p in fast if (common := mine & runs(p, n))}


@pytest.mark.parametrize("oracle", ORACLES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_oracle_shares_a_run_of_statements_with_a_fast_path(oracle):
    shared = shared_runs(oracle, FAST)
    assert not shared, f"{oracle.relative_to(REPO)} repeats fast-path code: {shared}"


def test_the_check_finds_a_copied_function(tmp_path):
    source = (REPO / "remark" / "algos" / "offsets.py").read_text()
    tree = ast.parse(source)
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_matching_run")
    copy = tmp_path / "copied.py"
    copy.write_text(
        "class Copy:\n" + "\n".join("    " + line for line in ast.unparse(fn).splitlines()) + "\n"
    )
    assert shared_runs(copy, [REPO / "remark" / "algos" / "offsets.py"])


def test_every_segmentation_has_a_loop_oracle():
    assert set(TOKEN_RANK_LOOPS) == set(names("segmentation"))


def test_a_segmentation_without_an_oracle_is_named(monkeypatch):
    import polars as pl

    from catalog.table import Catalog

    monkeypatch.delitem(TOKEN_RANK_LOOPS, "newlines")

    class Tok:
        eos_token_id = None

        def encode(self, text, add_special_tokens=False):
            return [1]

        def batch_decode(self, seqs, skip_special_tokens=True):
            return ["a" for _ in seqs]

    with pytest.raises(ValueError, match="no loop oracle for segmentation 'newlines'"):
        OracleScorer(
            Catalog.from_frame(pl.DataFrame({"title": ["Moon"]})),
            Tok(),
            k=2,
            scheme="responder",
            segmentation="newlines",
        )
