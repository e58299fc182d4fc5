"""MKL's matrix products in a demo worker compute the same bits on Intel and non-Intel x86 CPUs.

MKL picks its code path by CPU vendor as well as by instruction set: an explicit branch such as
``MKL_CBWR=AVX2`` is honoured on Intel CPUs only and silently replaced by ``AUTO`` elsewhere (MKL's
documentation of conditional numerical reproducibility), so an AMD host and an Intel host computed
different products under it and the demo trained differently (bench/RESULTS.md, "MKL's code path by
vendor"). ``COMPATIBLE`` is the branch MKL runs alike on both.

The test takes MKL's non-Intel path on this CPU: a preloaded library answers MKL's own vendor check
(``mkl_serv_intel_cpu_true``, exported by torch's statically linked MKL) with "not Intel", as on an AMD
host. Products of the tiny model's shapes must be byte-identical with and without it under
:func:`remark.demo.worker_env.worker_env`. On an Intel CPU the negative control shows that the check has
teeth: under ``MKL_CBWR=AVX2`` the two paths differ. On a non-Intel CPU the preload changes nothing and
both halves hold trivially (the control is skipped).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from remark.demo.worker_env import cpu_info, libtorch_cpu, worker_env

SPOOF_C = """
int mkl_serv_intel_cpu_true(void) { return 0; }
int mkl_serv_intel_cpu(void) { return 0; }
"""

# (m, k, n): a batch of hidden states times the tied 4,096-token head, its weight gradient, and odd sizes
PRODUCTS = r"""
import hashlib, torch
torch.set_num_threads(2)
g = torch.Generator().manual_seed(0)
out = []
for m, k, n in [(2048, 128, 4096), (4096, 2048, 128), (512, 128, 512), (33, 128, 97)]:
    a, b = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
    out.append((a @ b).numpy().tobytes())
print(hashlib.sha256(b"".join(out)).hexdigest())
"""


def _libtorch_exports_vendor_check() -> bool:
    lib = libtorch_cpu()
    if not lib.exists() or shutil.which("nm") is None:
        return False
    syms = subprocess.run(["nm", "-D", str(lib)], capture_output=True, text=True).stdout
    return " T mkl_serv_intel_cpu_true" in syms


pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64"
    or not torch.backends.mkl.is_available()
    or shutil.which("gcc") is None
    or not _libtorch_exports_vendor_check(),
    reason="needs x86-64, torch built with MKL exporting its vendor check, and gcc",
)


@pytest.fixture(scope="module")
def spoof(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("mkl_vendor")
    (d / "spoof.c").write_text(SPOOF_C)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(d / "spoof.so"), str(d / "spoof.c")], check=True)
    return d / "spoof.so"


def _products(env: dict[str, str], preload: Path | None) -> str:
    env = dict(env)
    env.pop("LD_PRELOAD", None)
    if preload is not None:
        env["LD_PRELOAD"] = str(preload)
    done = subprocess.run(
        [sys.executable, "-c", PRODUCTS], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_worker_products_are_the_same_on_intel_and_non_intel_paths(spoof):
    env = worker_env(2)
    assert env["MKL_CBWR"] == "COMPATIBLE"
    assert _products(env, None) == _products(env, spoof)


def test_an_intel_only_branch_differs_between_the_paths(spoof):
    if cpu_info()["vendor"] != "GenuineIntel":
        pytest.skip(f"the control needs an Intel CPU (this one: {cpu_info()['vendor'] or 'unknown'})")
    env = worker_env(2) | {"MKL_CBWR": "AVX2"}
    assert _products(env, None) != _products(env, spoof)


def test_the_preload_reaches_mkl(spoof):
    """Without pinning, MKL's automatic branch reads the vendor check: the preload must move it."""
    code = (
        "import ctypes; from remark.demo.worker_env import libtorch_cpu; "
        "print(ctypes.CDLL(str(libtorch_cpu())).mkl_serv_cbwr_get_auto_branch())"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("MKL_CBWR", "LD_PRELOAD")}
    plain = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    spoofed = subprocess.run(
        [sys.executable, "-c", code], env=env | {"LD_PRELOAD": str(spoof)}, capture_output=True, text=True
    )
    assert plain.returncode == 0 and spoofed.returncode == 0, plain.stderr + spoofed.stderr
    if cpu_info()["vendor"] == "GenuineIntel":
        assert plain.stdout != spoofed.stdout  # Intel's automatic branch is a wide one; non-Intel's is not
    else:
        assert plain.stdout == spoofed.stdout
