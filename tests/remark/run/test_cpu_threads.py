"""remark.run.cpu_threads: the cpu_threads setting sets torch's pools (and None leaves them)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from remark.run.cpu_threads import set_torch_threads, torch_threads

PROBE = """
import dataclasses
import torch
from remark.run.cpu_threads import set_torch_threads
from remark.config import RemarkGRPOConfig
before = torch.get_num_threads()
set_torch_threads({f.name: f.default for f in dataclasses.fields(RemarkGRPOConfig)}["cpu_threads"])
unchanged = torch.get_num_threads() == before
set_torch_threads(1)
print(unchanged, torch.get_num_threads(), torch.get_num_interop_threads())
"""


def test_cpu_threads_sets_torch_pools_and_none_keeps_them():
    # a fresh process: inter-op threads can be set once per process, before any inter-op work
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split() == ["True", "1", "1"]


def test_bad_thread_count():
    with pytest.raises(ValueError, match="threads must be >= 1"):
        set_torch_threads(0)


def test_torch_threads_restores_the_count():
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with torch_threads(None):
        assert torch.get_num_threads() == before
