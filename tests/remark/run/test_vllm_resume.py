"""``kill -9`` during a checkpoint save of a vLLM (colocate) run, then ``remark train --resume``.

The resumed run starts a new engine from the base model, loads checkpoint-2, syncs it into the engine
before its first generation and reproduces the uninterrupted run's losses: the colocated CPU engine samples
from the process's torch generator, which the checkpoint's RNG state restores.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from remark.cli.main import main
from remark.step.checkpoint import checkpoint_problem
from tests.conftest import DIST_ENV
from tests.killable import run_and_kill
from tests.remark.run.run_fields import tiny_run_fields
from tests.vllm_helpers import VLLM_FIELDS, VLLM_MARKS

pytestmark = VLLM_MARKS


def write_config(root: Path, world: tuple[Path, Path], name: str) -> Path:
    data, model = world
    fields = tiny_run_fields(
        root / name,
        data_dir=str(data),
        model_name_or_path=str(model),
        match_mode="fuzzy",
        temperature=0.7,
        learning_rate=5e-4,
        save_strategy="steps",
        save_steps=2,
        **VLLM_FIELDS,
    )
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(fields))
    return path


def history(checkpoint: Path) -> list[dict]:
    return json.loads((checkpoint / "trainer_state.json").read_text())["log_history"]


def test_a_killed_vllm_run_resumes_and_reproduces_the_losses(vllm_world, tmp_path, capsys, monkeypatch):
    assert main(["train", "--config", str(write_config(tmp_path, vllm_world, "full"))]) == 0
    expected = {h["step"]: h["loss"] for h in history(tmp_path / "full" / "checkpoint-4") if "loss" in h}
    assert sorted(expected) == [1, 2, 3, 4]

    cfg = write_config(tmp_path, vllm_world, "part")
    for key in DIST_ENV:  # the run above (TRL's colocate) set them here: the child would join our group
        monkeypatch.delenv(key, raising=False)
    run_and_kill(tmp_path / "ready", "ckpt-marker:4", ["train", "--config", str(cfg)], timeout=600)
    run = tmp_path / "part"
    assert checkpoint_problem(run / "checkpoint-2") is None
    assert checkpoint_problem(run / "checkpoint-4") is not None
    capsys.readouterr()
    assert main(["train", "--config", str(cfg), "--resume"]) == 0
    out = capsys.readouterr().out
    assert f"resume: from {run / 'checkpoint-2'}" in out
    logs = history(run / "checkpoint-4")
    got = {h["step"]: h["loss"] for h in logs if "loss" in h}
    for step in (3, 4):
        assert got[step] == pytest.approx(expected[step], rel=1e-5, abs=1e-7)
    diffs = [h["sampling/sampling_logp_difference/mean"] for h in logs if h["step"] > 2 and "loss" in h]
    assert len(diffs) == 2 and max(diffs) <= 2e-3  # the engine got checkpoint-2's weights, not the base's
    assert (run / "final" / "model.safetensors").is_file()
