"""Thread counts fixed by settings, never by the machine's load, and recorded with every result.

Why: the same seed gives different models when the thread count changes (a thread count chosen from
``os.getloadavg()`` would differ from run to run): a matrix product summed by 2 threads adds its partial sums in
another order than 1 thread, so the weights differ in their last bits after the first step and the runs
drift apart. At a *fixed* thread count CPU training here is bit-for-bit repeatable, whatever else runs
on the machine (``tests/remark/demo/test_demo_determinism.py`` runs the warm-up twice, with different
``PYTHONHASHSEED`` values and a CPU-bound neighbour, and compares the weights).

Every compute stage of the demo (warm-up, each RL run, each test evaluation) therefore runs in its own
process started with :func:`worker_env`, which fixes, *before* any library starts its thread pool:

- torch intra-op threads (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, then ``torch.set_num_threads``) and
  inter-op threads (``torch.set_num_interop_threads``), MKL's dynamic thread choice off
  (``MKL_DYNAMIC=FALSE``, ``OMP_DYNAMIC=FALSE``);
- polars' pool (``POLARS_MAX_THREADS``: polars reads it once, when it is first imported, which is why a
  stage cannot fix it from inside an already running ``remark`` process) and rayon's
  (``RAYON_NUM_THREADS``, used by the tokenizer trainer), with ``TOKENIZERS_PARALLELISM=false``;
- glibc's allocator keeps freed memory for reuse (:data:`ALLOCATOR_ENV`), which changes the speed only;
- every CPU kernel's code path pinned (:data:`ISA_ENV`): torch's and oneDNN's to AVX2, MKL's to its
  vendor-neutral branch, so that hosts with and without AVX-512, Intel's and AMD's, compute alike;
- ``PYTHONHASHSEED=0``, so even a set or dict of strings iterates in one order (none is known to
  matter: the test above also runs with two different hash seeds);
- datasets and dataloaders in-process (``dataset_num_proc`` None, ``dataloader_num_workers`` 0, set in
  the stages' trainer arguments).

How many such processes run at once (``DemoSettings.jobs``) changes only the wall time, never a number.
:func:`thread_record` is what a worker writes next to its outputs (``threads.json``), so a summary can
show, and a test can check, what each stage actually ran with.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from remark.run.cpu_threads import set_torch_threads

#: Environment variables that fix a library's thread pool, each to the stage's thread count.
THREAD_ENV: tuple[str, ...] = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "POLARS_MAX_THREADS",
    "RAYON_NUM_THREADS",
)

#: Fixed settings that do not depend on the thread count.
FIXED_ENV: dict[str, str] = {
    "MKL_DYNAMIC": "FALSE",
    "OMP_DYNAMIC": "FALSE",
    "TOKENIZERS_PARALLELISM": "false",
    "PYTHONHASHSEED": "0",
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "PYTHONUNBUFFERED": "1",
}


#: glibc malloc settings of every worker: no buffer gets a mapping of its own (threshold 4 GiB; only the
#: environment can set it above 32 MiB, ``mallopt`` cannot) and freed memory is not given back to the
#: system (trim threshold 4 GiB). By default glibc maps a buffer above its dynamic threshold (at most
#: 32 MiB; a batch of the tiny model's logits is larger) fresh and unmaps it when freed, so every step
#: pays the kernel to fault in and zero those pages again, as system time. ``python bench/allocator.py``
#: measures what this saves (``bench/RESULTS.md``) and checks that the weights come out identical: the
#: arithmetic is untouched (torch aligns every buffer to 64 bytes either way). A process keeps its peak
#: heap until it exits.
ALLOCATOR_ENV: dict[str, str] = {
    "MALLOC_MMAP_THRESHOLD_": str(1 << 32),
    "MALLOC_TRIM_THRESHOLD_": str(1 << 32),
}


#: The code path of every CPU kernel, pinned so that x86 hosts compute alike. The same seed, versions and
#: thread count trained differently on an AVX-512 host and an AVX2-only one, and on an Intel host and an
#: AMD one. torch's own vectorised kernels (softmax, reductions, optimizers) are compiled per instruction
#: set and dispatched to the widest the CPU has, and vectors of another width sum in another order:
#: ``ATEN_CPU_CAPABILITY`` pins them to AVX2, ``ONEDNN_MAX_CPU_ISA`` oneDNN's JIT kernels likewise. MKL
#: (the matrix products) chooses by vendor too: an explicit branch such as ``AVX2`` is honoured on Intel
#: CPUs only and silently becomes ``AUTO`` elsewhere, so ``MKL_CBWR=COMPATIBLE`` (SSE2 without the
#: approximate reciprocals, the one branch MKL runs alike on Intel and non-Intel CPUs; deterministic
#: reductions and fixed blocking at a fixed thread count). ``tests/remark/demo/test_mkl_vendor.py`` checks
#: it by making MKL take its non-Intel path on the test's CPU. Every x86-64 CPU since 2013-2015 has AVX2;
#: ``python bench/allocator.py --setting isa`` measures what the pinning costs (``bench/RESULTS.md``). A
#: host without AVX2 runs torch's default kernels instead, and its numbers differ (``summary.json``'s
#: ``machine`` says which ran).
ISA_ENV: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
}


def cpu_info() -> dict[str, Any]:
    """The host's CPU vendor, model and x86 vector extensions (``/proc/cpuinfo``; empty where there is
    none)."""
    vendor, model, flags = "", platform.processor() or platform.machine(), set()
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "vendor_id" and not vendor:
            vendor = value.strip()
        elif key.strip() == "model name" and value.strip():
            model = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = set(value.split())
    vector = sorted(f for f in flags if f.startswith(("avx", "sse", "fma", "amx")))
    return {"vendor": vendor, "cpu_model": model, "vector_isa": vector, "has_avx2": "avx2" in flags}


#: MKL's ``mkl_cbwr_get(MKL_CBWR_BRANCH)`` codes (MKL's reference: "Named Constants for CNR Control")
MKL_BRANCHES = {
    1: "OFF", 2: "AUTO", 3: "COMPATIBLE", 4: "SSE2", 6: "SSSE3", 7: "SSE4_1", 8: "SSE4_2",
    9: "AVX", 10: "AVX2", 11: "AVX512_MIC", 12: "AVX512", 13: "AVX512_MIC_E1", 14: "AVX512_E1",
}  # fmt: skip


def libtorch_cpu() -> Path:
    """torch's CPU library, which links MKL statically (its ``mkl_serv_*`` calls are exported)."""
    import torch

    return Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"


def mkl_branch() -> str | None:
    """The code branch MKL runs in this process (``MKL_CBWR`` as MKL took it: a branch the CPU does not
    offer becomes ``AUTO`` without a word), read from torch's statically linked MKL; None where torch has no
    MKL or does not export the call."""
    import ctypes

    try:
        get = ctypes.CDLL(str(libtorch_cpu())).mkl_serv_cbwr_get
    except (OSError, AttributeError):
        return None
    code = int(get(1))
    return MKL_BRANCHES.get(code, str(code))


#: what a stage worker leaves in its job folder when its input was bad (``remark.demo.worker``); the parent
#: (``remark.demo.jobs``) raises it again as the same one-line error
INPUT_ERROR = "input_error.json"


def worker_env(threads: int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a demo worker process: ``base`` (default ``os.environ``) with every thread
    pool fixed to ``threads``, the settings of :data:`FIXED_ENV`, the kernels' instruction set of
    :data:`ISA_ENV` (on hosts with AVX2) and the allocator's of :data:`ALLOCATOR_ENV` (where ``base``
    sets none of them)."""
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    env = dict(os.environ if base is None else base)
    env |= {name: str(threads) for name in THREAD_ENV}
    env |= FIXED_ENV
    if cpu_info()["has_avx2"]:
        env |= ISA_ENV
    if not any(name in env for name in ALLOCATOR_ENV):  # a user's own malloc settings are kept
        env |= ALLOCATOR_ENV
    return env


def apply_threads(threads: int) -> None:
    """In a worker started with :func:`worker_env`: torch's intra- and inter-op pools to ``threads`` / 1.

    Checks that the environment was set up (polars' pool cannot be changed after its import).
    """
    import torch

    missing = [n for n in THREAD_ENV if os.environ.get(n) != str(threads)]
    if missing:
        raise RuntimeError(f"not started by remark.demo.worker_env.worker_env({threads}): {missing} differ")
    set_torch_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)


def thread_record() -> dict[str, Any]:
    """What this process runs with: torch's pools, polars' pool, and the environment that fixes them."""
    import polars as pl
    import torch

    return {
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkl_branch": mkl_branch(),
        "torch_intra_op": torch.get_num_threads(),
        "torch_inter_op": torch.get_num_interop_threads(),
        "polars": pl.thread_pool_size(),
        "env": {
            name: os.environ.get(name)
            for name in (*THREAD_ENV, *FIXED_ENV, *ISA_ENV, *ALLOCATOR_ENV)
            if name != "HF_HUB_OFFLINE"
        },
    }
