"""Two CPU processes (torchrun, gloo) give the per-token advantages of one process on the same batch.

Groups of G = 4 lists straddle the processes (6 completions per process, 3 groups in all), so rank
rewards must be gathered before group scaling (docs/architecture.md#where-it-runs).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
WORKER = Path(__file__).with_name("mp_worker.py")

pytestmark = pytest.mark.slow


def collect(out: Path) -> dict[tuple[str, int], list[list[float]]]:
    rows: dict[tuple[str, int], list[list[float]]] = {}
    for f in sorted(out.glob("adv_*.json")):
        for r in json.loads(f.read_text()):
            rows.setdefault((r["request_id"], r["g"]), []).append([round(x, 5) for x in r["adv"]])
    return {k: sorted(v) for k, v in rows.items()}


def run_one_and_two(hand_model_dir, tmp_path, *worker_args: str) -> tuple[Path, Path]:
    """The worker once as one process (12 rows) and once as two torchrun processes (6 rows each)."""
    # accelerate's launcher needs MPI for several CPU processes; torchrun (torch's own) does not.
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    if torchrun is None:
        pytest.skip("torchrun is not installed beside this Python")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    one, two = tmp_path / "one", tmp_path / "two"
    _run([sys.executable, str(WORKER), str(hand_model_dir), str(one), "12"], env=env)
    cmd = [
        torchrun,
        "--nproc_per_node",
        "2",
        "--standalone",  # a free port: fixed ports clash when several suites run at once
        str(WORKER),
        str(hand_model_dir),
        str(two),
        "6",
        *worker_args,
    ]
    _run(cmd, env=env)
    return one, two


def _run(cmd: list[str], *, env: dict[str, str]) -> None:
    """Run ``cmd`` in the repository; a failure shows the end of its output (a torchrun rendezvous error
    or a worker's traceback), not only its exit status."""
    done = subprocess.run(cmd, env=env, cwd=REPO, timeout=600, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stdout[-3000:] + "\n" + done.stderr[-6000:]).strip()
        pytest.fail(f"{Path(cmd[0]).name} exited {done.returncode}:\n{tail}", pytrace=False)


def test_two_processes_match_one(hand_model_dir, tmp_path):
    one, two = run_one_and_two(hand_model_dir, tmp_path)
    single, double = collect(one), collect(two)
    assert len(list(two.glob("adv_*.json"))) == 2
    assert sum(len(v) for v in single.values()) == 12
    assert single == double
    assert any(abs(x) > 0.4 for rows in double.values() for row in rows for x in row)
