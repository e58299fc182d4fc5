"""``scoring_workers`` in multi-process training: two CPU processes (torchrun, gloo), each scoring its own
rows in its own ``ScoringPool``, give the per-token advantages of one serial process (groups straddle the
processes, so rank rewards are gathered after scoring, as without the pool)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.remark.test_multiprocess import REPO, WORKER, collect

pytestmark = pytest.mark.slow


def test_two_processes_with_pools_match_one_serial(hand_model_dir, tmp_path):
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    if torchrun is None:
        pytest.skip("torchrun is not installed beside this Python")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    one, two = tmp_path / "one", tmp_path / "two"
    subprocess.run(
        [sys.executable, str(WORKER), str(hand_model_dir), str(one), "12"], check=True, env=env, cwd=REPO
    )
    cmd = [
        torchrun,
        "--nproc_per_node",
        "2",
        "--standalone",
        str(WORKER),
        str(hand_model_dir),
        str(two),
        "6",
        "1",
    ]
    subprocess.run(cmd, check=True, env=env, cwd=REPO, timeout=600)
    assert collect(one) == collect(two)
    assert [int(p.read_text()) for p in sorted(two.glob("prefetched_*.txt"))] == [1, 1]
    assert int((one / "prefetched_0.txt").read_text()) == 0  # the serial run never prefetches
