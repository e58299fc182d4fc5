"""The top-level packages depend one way: catalog <- data_prep <- eval <- remark (no cycles)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYERS = ["catalog", "data_prep", "eval", "remark"]


def imported_top_levels(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", LAYERS)
def test_package_imports_only_lower_layers(package):
    allowed = set(LAYERS[: LAYERS.index(package) + 1])
    forbidden = set(LAYERS) - allowed
    offenders = []
    for path in sorted((REPO / package).rglob("*.py")):
        bad = imported_top_levels(path) & forbidden
        if bad:
            offenders.append(f"{path.relative_to(REPO)} imports {sorted(bad)}")
    assert not offenders, "layering violated (catalog <- data_prep <- eval <- remark):\n" + "\n".join(
        offenders
    )


def test_layering_check_detects_a_violation(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("import remark.algos\nfrom eval import metrics\n")
    assert imported_top_levels(bad) == {"remark", "eval"}
