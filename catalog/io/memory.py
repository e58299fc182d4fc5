"""Inputs whose size sets the memory a command needs: estimated up front and refused with one line, rather
than killed by the kernel (exit 137) minutes later.

A command that holds an array whose size a user chooses (``remark diagnose --group-size``, bootstrap
``--resamples``, ``remark eval run --num-samples``, ...) estimates its peak bytes from its inputs and calls
:func:`check_fits` before the work starts; over the limit it raises ``InputError`` naming the flag, the
estimate and the limit::

    remark diagnose: error: field '--group-size': one batch of 48 requests x G = 100000 lists x K = 20
    ranks (up to 20 responders) needs about 1.1 TB of memory, over the limit of 17.0 GB (80% of the
    memory available now) (lower --group-size or --batch-size, or set REMARK_MEMORY_LIMIT_GB)

The limit is ``REMARK_MEMORY_LIMIT_GB`` when set (a number of GB, 1e9 bytes), else :data:`FRACTION` of
the memory available when the command starts (``MemAvailable`` in ``/proc/meminfo``; the physical memory
where that is not readable; :data:`FALLBACK` where neither is). Estimates are the measured cost per
element of the arrays involved (each caller's docstring says which), so they are approximate: the
point is to refuse what cannot fit by a wide margin, not to pack memory to the last byte.
:data:`SIZE_INPUTS` lists every such input and how it is bounded.
"""

from __future__ import annotations

import os

from catalog.io.errors import InputError

#: the share of the available memory a command may plan to use by default
FRACTION = 0.8
#: the limit when the machine's memory cannot be read (bytes)
FALLBACK = 8_000_000_000
ENV = "REMARK_MEMORY_LIMIT_GB"

#: every user input whose size sets a command's memory, and what bounds it (the estimators are in the
#: named functions; a refusal is exit 2 naming the first flag)
SIZE_INPUTS: dict[str, str] = {
    "remark diagnose --group-size / --batch-size / --k": (
        "refused: remark.diagnose.diagnose_memory (one batch of requests x G lists x K x responders is held "
        "at a time; popularity lists are drawn per batch)"
    ),
    "remark eval score|run|compare|steps|curves --resamples": (
        "refused: eval.bootstrap.bootstrap_memory (the bootstrap distribution, statistics x resamples)"
    ),
    "remark eval run --num-samples / --max-new-tokens": (
        "refused: eval.generate.completions_memory (every completion is held until scored)"
    ),
    "remark eval run --batch-size x --num-samples": (
        "refused: eval.generate.kv_cache_bytes (one generate call's KV cache, against the device's free memory)"
    ),
    "remark train per_device_train_batch_size x steps_per_generation / max_completion_length": (
        "refused: remark.run.limits.check_generation_memory (one generation step's KV cache and logits)"
    ),
    "remark plan-group-size --candidates": (
        "refused: remark.cli.plan.BYTES_PER_CELL x candidates x requests (the planner's q arrays)"
    ),
    "remark prep synthetic --n-requests / --n-items": (
        "refused: data_prep.synthetic.synthetic_memory (the threads and pooled tables)"
    ),
}


def format_bytes(n: float) -> str:
    """``1234567890`` -> ``"1.2 GB"`` (powers of 1000, as ``REMARK_MEMORY_LIMIT_GB`` counts)."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} bytes"


def available_bytes() -> int | None:
    """The memory available to a new allocation now (``MemAvailable``), else the physical memory, else None."""
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError, AttributeError):
        return None


def memory_limit() -> tuple[int, str]:
    """(the limit in bytes, where it comes from, in words)."""
    text = os.environ.get(ENV, "").strip()
    if text:
        try:
            gb = float(text)
        except ValueError:
            gb = -1.0
        if not gb > 0:
            raise InputError(f"{ENV}={text!r} is not a positive number of GB", field=ENV)
        return int(gb * 1e9), f"{ENV}={text}"
    avail = available_bytes()
    if avail is None:
        return FALLBACK, f"the default {format_bytes(FALLBACK)}: this machine's memory could not be read"
    return int(avail * FRACTION), f"{FRACTION:.0%} of the {format_bytes(avail)} available now"


def check_fits(
    need: float, *, what: str, field: str, hint: str, limit: tuple[int, str] | None = None
) -> None:
    """``InputError`` naming ``field`` when ``need`` bytes (``what`` says for what) exceed the limit
    (:func:`memory_limit`, or ``limit`` = (bytes, where it comes from)); ``hint`` says what to lower."""
    cap, source = limit if limit is not None else memory_limit()
    if need > cap:
        raise InputError(
            f"{what} needs about {format_bytes(need)} of memory, over the limit of {format_bytes(cap)} ({source})",
            field=field,
            hint=f"{hint}, or set {ENV} to allow more",
        )
