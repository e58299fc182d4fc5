"""``remark --help`` and ``remark COMMAND --help`` load none of the heavy libraries (remark.cli.main: modules
import them inside ``func`` only), and the lazy package namespaces that make this so still export every
public name."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

HEAVY = {"numpy", "polars", "torch", "transformers", "trl", "scipy", "rapidfuzz"}
HELPS = [
    [],
    ["prep"],
    ["sft"],
    ["train"],
    ["eval"],
    ["eval", "score"],
    ["eval", "run"],
    ["eval", "compare"],
    ["eval", "baselines"],
    ["data", "fetch"],
    ["diagnose"],
    ["curve", "fit"],
    ["demo"],
    ["model", "fetch"],
    ["model", "import-gguf"],
    ["versions"],
]


def imported_top_level(argv: list[str]) -> tuple[set[str], str]:
    """Top-level packages ``python -X importtime -m remark.cli.main ARGV --help`` imports, and its stdout."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "remark.cli.main", *argv, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            names.add(name.split(".")[0])
    assert "remark" in names and "argparse" in names  # the trace is there (so an empty set means something)
    return names, proc.stdout


@pytest.mark.parametrize("argv", HELPS, ids=lambda a: " ".join(a) or "remark")
def test_help_imports_no_heavy_library(argv):
    names, out = imported_top_level(argv)
    assert names & HEAVY == set()
    assert out.startswith("usage: remark" + "".join(f" {a}" for a in argv))


@pytest.mark.parametrize("package", ["catalog", "remark.algos", "remark.demo", "remark.config"])
def test_lazy_packages_export_every_public_name(package):
    mod = importlib.import_module(package)
    for name in mod.__all__:
        value = getattr(mod, name)
        source = importlib.import_module(mod._LAZY_EXPORTS[name])
        assert value is getattr(source, name), name
    assert set(mod.__all__) == set(mod._LAZY_EXPORTS) and set(mod.__all__) <= set(dir(mod))
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        mod.not_a_name  # noqa: B018


def test_prep_sources_are_the_readers_sources():
    from data_prep import readers, sources

    assert readers.DATA_SOURCES is sources.DATA_SOURCES and set(sources.DATA_SOURCES) >= {
        "protoqa",
        "reddit",
        "threads",
    }
