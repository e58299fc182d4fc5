"""Two CPU processes (torchrun, gloo), each with its own colocated vLLM engine, give the per-token
advantages one process computes on the same completions.

Each process samples its 6 rows with its engine (seeded ``seed + process index``), and groups of G = 4
straddle the processes, so rank rewards are gathered before group scaling; the single process replays
the 12 sampled completions (a rollout function, no vLLM; in the test's process) and must give every row
the same advantages.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.vllm_helpers import VLLM_MARKS

REPO = Path(__file__).resolve().parents[3]
WORKER = Path(__file__).with_name("mp_vllm_worker.py")

pytestmark = VLLM_MARKS


def _run(cmd: list[str]) -> None:
    # torchrun sets its own rank, world size and rendezvous port (the clean_dist_env fixture removed ours)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(cmd, env=env, cwd=REPO, timeout=600, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stdout[-3000:] + "\n" + done.stderr[-6000:]).strip()
        pytest.fail(f"{Path(cmd[0]).name} exited {done.returncode}:\n{tail}", pytrace=False)


def rows(folder: Path) -> list[dict]:
    out = [r for f in sorted(folder.glob("rows_*.json")) for r in json.loads(f.read_text())]
    return sorted(out, key=lambda r: r["row"])


def test_two_vllm_processes_give_one_process_advantages(vllm_world, tmp_path):
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    if torchrun is None:
        pytest.skip("torchrun is not installed beside this Python")
    data, model = map(str, vllm_world)
    two, one = tmp_path / "two", tmp_path / "one"
    two.mkdir()
    one.mkdir()
    _run([torchrun, "--nproc_per_node", "2", "--standalone", str(WORKER), data, model, str(two), "vllm", "6"])
    from tests.remark.step.mp_vllm_worker import main as worker

    worker(data, model, str(one), "replay", 12, str(two))  # in this process: no vLLM, no second start-up
    sampled, replayed = rows(two), rows(one)
    assert [r["row"] for r in sampled] == list(range(12))
    assert [r["request_id"] for r in replayed] == [r["request_id"] for r in sampled]
    assert [r["completion_ids"] for r in replayed] == [r["completion_ids"] for r in sampled]
    for a, b in zip(sampled, replayed, strict=True):
        assert a["adv"] == pytest.approx(b["adv"], abs=1e-5)
    assert any(abs(x) > 0.1 for r in sampled for x in r["adv"])  # some group had a signal
    for rank in (0, 1):
        (log,) = json.loads((two / f"log_{rank}.json").read_text())
        assert log["sampling/sampling_logp_difference/mean"] <= 2e-3
