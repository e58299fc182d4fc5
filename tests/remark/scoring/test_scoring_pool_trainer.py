"""``scoring_workers`` in multi-process training: two CPU processes (torchrun, gloo), each scoring its own
rows in its own ``ScoringPool``, give the per-token advantages of one serial process (groups straddle the
processes, so rank rewards are gathered after scoring, as without the pool)."""

from __future__ import annotations

import pytest

from tests.remark.step.test_multiprocess import collect, run_one_and_two

pytestmark = pytest.mark.slow


def test_two_processes_with_pools_match_one_serial(hand_model_dir, tmp_path):
    one, two = run_one_and_two(hand_model_dir, tmp_path, "1")
    assert collect(one) == collect(two)
    assert [int(p.read_text()) for p in sorted(two.glob("prefetched_*.txt"))] == [1, 1]
    assert int((one / "prefetched_0.txt").read_text()) == 0  # the serial run never prefetches
