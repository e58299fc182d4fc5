"""DAPO's refill on two CPU processes (torchrun, gloo): every process refills its own groups, both run
the same number of rounds (no collective is left waiting) and end with full batches of signal groups."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from catalog.io.errors import InputError
from remark.config import validate_remark_layout
from tests.remark.recipes.conftest import SIGNAL

REPO = Path(__file__).resolve().parents[3]
WORKER = Path(__file__).with_name("mp_refill_worker.py")


@pytest.mark.slow
def test_two_processes_refill_in_step(recipe_model_dir, tmp_path):
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    if torchrun is None:
        pytest.skip("torchrun is not installed beside this Python")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [
        torchrun,
        "--nproc_per_node",
        "2",
        "--standalone",  # a free port: fixed ports clash when several suites run at once
        str(WORKER),
        str(recipe_model_dir),
        str(tmp_path),
    ]
    subprocess.run(cmd, check=True, env=env, cwd=REPO, timeout=600)
    dumps = [json.loads((tmp_path / f"refill_{r}.json").read_text()) for r in (0, 1)]
    assert dumps[0]["logs"] == dumps[1]["logs"]  # metrics are gathered: one value per step
    rounds = dumps[0]["logs"]["train/refill_rounds"]
    assert len(rounds) == 2 and min(rounds) >= 1  # 4 prompts per step hold r3 and r4 (no signal)
    for d in dumps:
        for step in d["steps"]:
            assert len(step["request_id"]) == 8 and set(step["request_id"]) <= SIGNAL
            assert all(n > 0 for n in step["tokens"])


def test_refill_needs_whole_groups_on_each_process():
    layout = dict(refill_batch=True, world_size=2, steps_per_generation=1, num_generations=4)
    validate_remark_layout(SimpleNamespace(**layout, per_device_train_batch_size=8))
    with pytest.raises(InputError, match="hold whole groups of num_generations=4"):
        validate_remark_layout(SimpleNamespace(**layout, per_device_train_batch_size=6))
    validate_remark_layout(SimpleNamespace(**{**layout, "world_size": 1}, per_device_train_batch_size=6))
