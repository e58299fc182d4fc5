"""Rank scoring off the critical path: ``RankScorer``'s per-row stages spread over worker processes.

``ScoringPool(scorer, workers=W)`` holds W worker processes, each with its own ``RankScorer`` built from
``scorer``'s catalog, tokenizer and settings (so its token pieces, parsed lines and grounded ids stay warm
across steps), and uses ``scorer`` itself in the calling process (one matcher index per process). It is a
``remark.scoring.scorer.Scorer`` that overlaps: ``submit(completion_ids, columns, group_size=, step=)``
returns at once with a :class:`PoolFuture`; ``future.result()`` returns the ``ScoredRows`` that
``scorer.score`` returns on the same arguments:

- the rows are cut into W contiguous shards of whole groups (groups of ``group_size`` rows are one
  request's lists: they share lines, so a worker sees the repeats), and each worker runs
  ``RankScorer.row_stages`` on its shard: decode, offsets, parse, ground, token ranks and end tokens,
  each a function of the row's token ids alone, so a shard's rows are the rows the serial call makes.
  Only token ids go to the workers, never dataset columns;
- the calling process joins the shards in order (token ranks padded with -1 to the batch's longest row)
  and runs ``RankScorer.assemble`` on the whole batch: responders, encoding and the reward scheme. So a
  reward scheme registered only in the calling process scores the same with workers as without.

``workers=0`` keeps everything in the calling process, run by one background thread: it overlaps with
work that releases the GIL (CUDA kernels of the log-prob passes TRL runs between generation and the
reward call). Between the two, a trainer submits right after generation and asks for the result in its
reward function; whatever runs in between is overlapped.

Failures never hang a step: a worker that dies (killed, out of memory, a crash in C code) breaks its
executor, and ``result()`` raises ``ScoringWorkerError`` naming the worker, its process id and the
executor's error; ``result(timeout)`` (default ``timeout_s``) raises ``TimeoutError`` instead of waiting
forever. A broken pool stays broken (later submits raise the same error): the run stops rather than
scoring on with fewer workers. Workers come from a ``forkserver`` (``spawn`` where there is none): no CUDA
state or threads inherited from a training process; each training process of a multi-process run holds its own pool for its own
rows, and the gather of rewards across processes happens after, as with the serial path.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any

import numpy as np
import torch

from remark.algos.offsets import FlatRows
from remark.scoring.scorer import RankScorer, RowStages, ScoredRows
from remark.scoring.shards import join_shards, pack_shard, shard_bounds

__all__ = ["PoolFuture", "ScoringPool", "ScoringWorkerError"]

DEFAULT_TIMEOUT_S = 600.0


class ScoringWorkerError(RuntimeError):
    """A scoring worker process died or failed; the step that needed it cannot be scored."""


# ---- the worker side ------------------------------------------------------------------------------------
_WORKER: RankScorer | None = None


def _init_worker(catalog: Any, tokenizer: Any, kwargs: dict[str, Any]) -> None:
    global _WORKER
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(1)
    _WORKER = RankScorer(catalog, tokenizer, **kwargs)
    gc.collect()
    gc.freeze()  # the catalog index and tokenizer are long-lived: keep them out of every collection


def _pid() -> int:
    return os.getpid()


def _row_stages(flat: np.ndarray, lengths: np.ndarray) -> dict[str, Any]:
    """``RankScorer.row_stages`` on one shard, packed as arrays and flat lists (cheap to send back)."""
    assert _WORKER is not None, "worker not initialised"
    t0, c0 = time.perf_counter(), time.process_time()
    stages = _WORKER.row_stages(FlatRows(flat, lengths))
    return pack_shard(stages, t0, c0)


# ---- the calling side -----------------------------------------------------------------------------------
@dataclass
class PoolFuture:
    """A submitted batch. ``result()`` blocks until it is scored (``wait_s`` records how long it did)."""

    _pool: ScoringPool
    _shards: list[tuple[int, Future]]  # (worker index, future)
    _serial: Future | None
    _columns: dict[str, Sequence[Any]]
    _group_size: int | None
    _step: int
    submitted_at: float = field(default_factory=time.perf_counter)
    wait_s: float = 0.0
    worker_s: list[float] = field(default_factory=list)  # wall seconds per shard, in the worker
    worker_cpu_s: list[float] = field(default_factory=list)  # CPU seconds per shard, in the worker
    timings: dict[str, float] = field(default_factory=dict)
    _scored: ScoredRows | None = None

    def done(self) -> bool:
        futures = [f for _, f in self._shards] + ([self._serial] if self._serial is not None else [])
        return all(f.done() for f in futures)

    def result(self, timeout: float | None = None) -> ScoredRows:
        """The ``ScoredRows`` of the batch; raises ``ScoringWorkerError`` if a worker died, ``TimeoutError``
        after ``timeout`` seconds (default: the pool's ``timeout_s``)."""
        if self._scored is not None:
            return self._scored
        timeout = self._pool.timeout_s if timeout is None else timeout
        t0 = time.perf_counter()
        deadline = t0 + timeout
        try:
            if self._serial is not None:
                self._scored = self._wait(self._serial, deadline, None, timeout)
            else:
                parts = [self._wait(f, deadline, w, timeout) for w, f in self._shards]
                self._scored = self._pool._join(parts, self)
        finally:
            self.wait_s += time.perf_counter() - t0
        return self._scored

    def _wait(self, future: Future, deadline: float, worker: int | None, timeout: float) -> Any:
        left = deadline - time.perf_counter()
        try:
            return future.result(timeout=max(left, 0.0))
        except BrokenProcessPool as err:
            self._pool._broken = self._pool._describe(worker, err)
            raise ScoringWorkerError(self._pool._broken) from err
        except TimeoutError:
            who = "the scoring thread" if worker is None else f"scoring worker {worker}"
            raise TimeoutError(
                f"{who} did not return within {timeout:g} s (ScoringPool(timeout_s=...)); the step is not scored"
            ) from None


class ScoringPool:
    """``scorer``'s row stages in ``workers`` processes (0: all of ``scorer.score`` in a background thread);
    see the module docstring."""

    overlaps = True

    def __init__(self, scorer: RankScorer, *, workers: int, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        if workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers}")
        self.scorer = scorer
        self.workers = int(workers)
        self.timeout_s = float(timeout_s)
        self._broken: str | None = None
        self._closed = False
        self._pids: list[int | None] = [None] * self.workers
        if self.workers == 0:
            from concurrent.futures import ThreadPoolExecutor

            self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="remark-scoring")
            self._executors: list[ProcessPoolExecutor] = []
            return
        ctx = _worker_context()
        self._executors = [
            ProcessPoolExecutor(
                max_workers=1,
                mp_context=ctx,
                initializer=_init_worker,
                initargs=(scorer.catalog, scorer.tokenizer, scorer.settings),
            )
            for _ in range(self.workers)
        ]
        # start every worker now (imports + the matcher's index take seconds) and learn its pid
        with _main_module_hidden():
            pids = [ex.submit(_pid) for ex in self._executors]
        for w, f in enumerate(pids):
            try:
                self._pids[w] = f.result(timeout=self.timeout_s)
            except BrokenProcessPool as err:
                self.close()
                raise ScoringWorkerError(f"scoring worker {w} failed to start: {err}") from err

    @property
    def pids(self) -> list[int | None]:
        """Process id of each worker (empty with ``workers=0``)."""
        return list(self._pids)

    def _describe(self, worker: int | None, err: BaseException) -> str:
        pid = self._pids[worker] if worker is not None and worker < len(self._pids) else None
        return (
            f"scoring worker {worker} (pid {pid}) died or was killed: {err}. The step cannot be scored; "
            "the pool is closed (start a new ScoringPool, or train with scoring_workers=0)"
        )

    def submit(
        self,
        completion_ids: Sequence[Sequence[int]],
        columns: dict[str, Sequence[Any]],
        *,
        group_size: int | None,
        step: int,
    ) -> PoolFuture:
        """Start scoring a batch (the arguments of ``RankScorer.score``); returns without waiting."""
        if self._closed:
            raise RuntimeError("this ScoringPool is closed")
        if self._broken is not None:
            raise ScoringWorkerError(self._broken)
        if self.workers == 0:
            rows = [list(r) if not isinstance(r, list) else r for r in completion_ids]
            job = self._thread.submit(self.scorer.score, rows, columns, group_size=group_size, step=step)
            return PoolFuture(self, [], job, columns, group_size, step)
        rows = [r.tolist() if hasattr(r, "tolist") else r for r in completion_ids]
        if not rows or (group_size and len(rows) % group_size):  # nothing to spread, or a bad layout:
            done: Future = Future()  # the serial call scores it (or raises its error) right here
            done.set_result(self.scorer.score(rows, columns, group_size=group_size, step=step))
            return PoolFuture(self, [], done, columns, group_size, step)
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum()))
        starts = np.concatenate([[0], np.cumsum(lengths)]).tolist()
        futures = []
        for w, (a, b) in enumerate(shard_bounds(len(rows), self.workers, group_size)):
            try:
                futures.append(
                    (w, self._executors[w].submit(_row_stages, flat[starts[a] : starts[b]], lengths[a:b]))
                )
            except BrokenProcessPool as err:
                self._broken = self._describe(w, err)
                raise ScoringWorkerError(self._broken) from err
        return PoolFuture(self, futures, None, columns, group_size, step)

    def score(
        self,
        completion_ids: Sequence[Sequence[int]],
        columns: dict[str, Sequence[Any]],
        *,
        group_size: int | None,
        step: int,
    ) -> ScoredRows:
        """``submit(...).result()``."""
        return self.submit(completion_ids, columns, group_size=group_size, step=step).result()

    def _join(self, parts: list[dict[str, Any]], future: PoolFuture) -> ScoredRows:
        """The shards' row stages joined (``remark.scoring.shards.join_shards``), then assembled here on
        the whole batch; the shards' wall / CPU seconds and stage timings go on ``future``."""
        stages: RowStages
        stages, future.worker_s, future.worker_cpu_s, future.timings = join_shards(parts)
        scored = self.scorer.assemble(
            stages, future._columns, group_size=future._group_size, step=future._step
        )
        future.timings = future.timings | self.scorer.last_timings
        return scored

    def close(self) -> None:
        """Stop the workers (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self.workers == 0:
            self._thread.shutdown(wait=True)
            return
        for ex in self._executors:
            ex.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> ScoringPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:  # a pool dropped without close() must not leave processes behind
        with contextlib.suppress(Exception):
            self.close()


@contextlib.contextmanager
def _main_module_hidden() -> Iterator[None]:
    """Start workers without making them re-run the caller's ``__main__`` (multiprocessing imports it in
    every child to find functions pickled from there; the workers only run this module's functions), so a
    training script needs no ``if __name__ == "__main__"`` guard."""
    main = sys.modules.get("__main__")
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if main is not None and k in main.__dict__}
    try:
        if main is not None:
            main.__dict__.pop("__file__", None)
            main.__dict__["__spec__"] = None
        yield
    finally:
        if main is not None:
            main.__dict__.pop("__spec__", None)
            main.__dict__.update(saved)


def _worker_context() -> Any:
    """``forkserver`` (a clean server process that imports this module once and forks the workers: no
    CUDA state or threads of a training process), else ``spawn`` (Windows)."""
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return get_context("spawn")
    ctx = get_context("forkserver")
    from multiprocessing import forkserver

    if not forkserver._forkserver._forkserver_pid:  # not started yet: choose what it imports
        ctx.set_forkserver_preload(["remark.scoring.pool"])
    return ctx
