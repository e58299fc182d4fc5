"""Tests that launch torchrun take a free rendezvous port (``--standalone``), never a fixed one: two suites
running at once on one machine (the team's worktrees, CI) would otherwise clash on it."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXED = re.compile(r"master[_-]port|MASTER_PORT|rdzv[_-]endpoint|\b29[0-9]{3}\b")


def launchers() -> list[Path]:
    """Test files that run torchrun (``shutil.which("torchrun")`` and a command list), not its workers."""
    return [
        p
        for p in sorted((REPO / "tests").rglob("test_*.py"))
        if p.name != Path(__file__).name and 'which("torchrun"' in p.read_text()
    ]


def problems(text: str) -> list[str]:
    found = [m.group(0) for m in FIXED.finditer(text)]
    return found + ([] if '"--standalone"' in text else ["no --standalone"])


def test_every_torchrun_launch_takes_a_free_port():
    files = launchers()
    assert (
        len(files) >= 2
    )  # tests/remark/step/test_multiprocess.py (run_one_and_two, also used by the pool test), recipes' refill
    bad = {str(p.relative_to(REPO)): problems(p.read_text()) for p in files}
    assert not {k: v for k, v in bad.items() if v}


def test_the_check_finds_a_fixed_port():
    assert problems('cmd = [torchrun, "--master_port", "29517", "--nproc_per_node", "2"]') == [
        "master_port",
        "29517",
        "no --standalone",
    ]
    assert problems('cmd = [torchrun, "--standalone", "--nproc_per_node", "2"]') == []
