"""torch's CPU thread pools for one process, set from a setting (never from the machine's load).

The thread count changes the numbers (a product summed by 2 threads adds its partial sums in another
order than 1 thread, so runs drift apart after the first step), so it is a setting like the seed:
``cpu_threads`` in the training config, ``--threads`` in the demo (``remark.demo.worker_env``, which also
fixes the pools of polars and the tokenizers through the environment of its worker processes).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


def set_torch_threads(threads: int | None) -> None:
    """torch intra-op threads to ``threads`` and inter-op threads to 1; ``None`` leaves torch's defaults.

    Inter-op threads can be set once per process, before any inter-op work; a second call keeps them.
    """
    if threads is None:
        return
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    import torch

    torch.set_num_threads(threads)
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """:func:`set_torch_threads` for the ``with`` block; torch's intra-op count is restored after it."""
    if threads is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    set_torch_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
