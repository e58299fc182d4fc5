"""``remark.scoring.pool.ScoringPool``: the pooled and background-thread paths give ``RankScorer.score``'s
answers exactly; a worker that dies or a step that takes too long fails with a clear error, never hangs."""

from __future__ import annotations

import os
import signal
import time

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remark.algos import names
from remark.scoring.pool import ScoringPool, ScoringWorkerError
from remark.scoring.scorer import RankScorer
from remark.scoring.shards import shard_bounds
from tests.remark.scoring.test_scorer_oracle import ITEMS, K, _bpe, assert_same, batch, columns, encode
from tests.remark.scoring.test_scorer_oracle import catalog as catalog  # the fixture

G = 2


@pytest.fixture(scope="module")
def tok():
    return _bpe()


@pytest.fixture(scope="module", params=names("reward"))
def scheme(request):
    return request.param


@pytest.fixture(scope="module")
def pool(catalog, tok, scheme):
    with ScoringPool(RankScorer(catalog, tok, k=K, scheme=scheme), workers=2) as p:
        yield p


@pytest.fixture(scope="module")
def serial(catalog, tok, scheme):
    return RankScorer(catalog, tok, k=K, scheme=scheme)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_pooled_rows_equal_the_serial_path(pool, serial, tok, data):
    rows = encode(tok, data.draw(batch(len(tok), tok.eos_token_id)))
    cols = columns(len(rows))
    step = data.draw(st.integers(0, 5))  # the responder drawn per (seed, step, request) must agree too
    future = pool.submit(rows, cols, group_size=G, step=step)
    got = future.result()
    assert_same(got, serial.score(rows, cols, group_size=G, step=step))
    assert future.wait_s >= 0 and len(future.worker_s) == min(2, len(rows) // G)


def test_background_thread_equals_the_serial_path(catalog, tok, serial, scheme):
    rows = encode(
        tok, [("text", f"{i}. {t} ({y})\nHeat (1995)", i % 2 == 0) for i, (t, y) in enumerate(ITEMS)]
    )
    cols = columns(len(rows))
    with ScoringPool(RankScorer(catalog, tok, k=K, scheme=scheme), workers=0) as threaded:
        future = threaded.submit(rows, cols, group_size=G, step=3)
        assert_same(future.result(), serial.score(rows, cols, group_size=G, step=3))
        assert threaded.pids == []


def test_shards_are_whole_groups_in_order():
    assert shard_bounds(16, 2, 4) == [(0, 8), (8, 16)]
    assert shard_bounds(12, 2, 4) == [(0, 4), (4, 12)]
    assert shard_bounds(6, 4, 2) == [(0, 2), (2, 4), (4, 6)]  # fewer groups than workers
    assert shard_bounds(5, 2, 2) == [(0, 2), (2, 5)]  # not whole groups: rows
    assert shard_bounds(0, 2, 2) == [(0, 0)]


def test_errors_reach_the_caller_naming_the_batch_row(pool, serial):
    with pytest.raises(ValueError, match="token ids must be >= 0"):  # raised in a worker
        pool.score([[1, -5], [2]], columns(2), group_size=G, step=0)
    cols = columns(4)
    cols["union"][3] = (
        cols["union"][3] * 2
    )  # a repeated id: encode_rows, run here on the whole batch, refuses it
    with pytest.raises(ValueError, match=r"^row 3: union has repeated ids"):
        pool.score([[1], [2], [3], [4]], cols, group_size=G, step=0)
    rows = [[1, 2], [3]]
    assert pool.score(rows, columns(2), group_size=G, step=0).texts  # the pool still works
    with pytest.raises(ValueError, match="do not split into groups"):  # a bad layout: the serial error
        pool.score([[1], [2], [3]], columns(3), group_size=G, step=0)
    outcomes = []
    for scorer in (pool, serial):  # an empty batch: the serial call's answer (or its error) either way
        try:
            outcomes.append(scorer.score([], columns(0), group_size=G, step=0))
        except ValueError as err:
            outcomes.append(str(err))
    if isinstance(outcomes[0], str):
        assert outcomes[0] == outcomes[1]
    else:
        assert_same(*outcomes)


def _kill_and_expect_a_clear_error(catalog, tok, while_running: bool) -> None:
    p = ScoringPool(RankScorer(catalog, tok, k=K, scheme="union"), workers=2, timeout_s=120)
    try:
        rows = encode(tok, [("text", "\n".join(f"{t} ({y})" for t, y in ITEMS) * 30, True)] * 40)
        cols = columns(len(rows))
        p.score(rows[:4], cols | {k: v[:4] for k, v in cols.items()}, group_size=G, step=0)
        victim = p.pids[1]
        t0 = time.monotonic()
        if while_running:
            future = p.submit(rows, cols, group_size=G, step=1)
            os.kill(victim, signal.SIGKILL)
            with pytest.raises(ScoringWorkerError, match=rf"scoring worker 1 \(pid {victim}\) died"):
                future.result()
        else:
            os.kill(victim, signal.SIGKILL)
            time.sleep(1.0)  # the executor notices the dead process
            with pytest.raises(ScoringWorkerError, match=f"pid {victim}"):
                p.score(rows, cols, group_size=G, step=1)
        assert time.monotonic() - t0 < 60, "a dead worker must fail the step promptly"
        with pytest.raises(ScoringWorkerError):  # and the pool stays broken
            p.submit(rows, cols, group_size=G, step=2)
    finally:
        p.close()


def test_a_killed_worker_fails_the_running_step(catalog, tok):
    _kill_and_expect_a_clear_error(catalog, tok, while_running=True)


def test_a_killed_idle_worker_fails_the_next_step(catalog, tok):
    _kill_and_expect_a_clear_error(catalog, tok, while_running=False)


def test_a_step_past_the_timeout_raises(catalog, tok, pool):
    rows = encode(tok, [("text", "\n".join(f"{t} ({y})" for t, y in ITEMS) * 50, True)] * 60)
    future = pool.submit(rows, columns(len(rows)), group_size=G, step=0)
    with pytest.raises(TimeoutError, match="did not return within"):
        future.result(timeout=0.001)
    assert torch.is_tensor(future.result(timeout=120).rank_RT)  # it still arrives
