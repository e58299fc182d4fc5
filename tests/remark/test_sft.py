"""SFT targets built from pooled data (remark.sft)."""

from __future__ import annotations

import numpy as np

from remark.sft import _pad_list


def test_pad_list_keeps_items_skips_banned_and_survives_zero_weights():
    pool = np.array(["a", "b", "c", "d", "e"], dtype=object)
    weights = np.array([0.0, 0.0, 0.5, 0.5, 0.0])  # three zero-popularity items
    rng = np.random.default_rng(0)
    out = _pad_list(["x", "x", "c"], pool, weights, 5, banned={"d"}, rng=rng)
    assert out[:2] == ["x", "c"]  # given items first, deduplicated
    assert len(out) == 5
    assert len(set(out)) == 5
    assert "d" not in out
    assert set(out[2:]) == {"a", "b", "e"}  # only zero-weight items are left to pad with
    weights = np.array([0.0, 1.0, 0.0, 0.0, 0.0])
    assert _pad_list([], pool, weights, 3, banned=set(), rng=rng)[0] == "b"  # positive weight comes first
