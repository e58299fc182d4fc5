"""eval.baselines: the reference levels (chance, popularity, genre popularity), on a hand-computed case."""

from __future__ import annotations

import math

import polars as pl
import pytest

from eval.baselines import chance_recall, genre_lists, popularity_lists, reference_levels

# Items a..f, popularity 6..1; horror a c e, comedy b d f.
CATALOG = pl.DataFrame(
    {
        "item_id": list("abcdef"),
        "popularity": [6.0, 5.0, 4.0, 3.0, 2.0, 1.0],
        "genre": ["horror", "comedy"] * 3,
    }
)
REQUESTS = pl.DataFrame(
    {
        "request_id": ["r1", "r2"],
        "prompt": [
            [{"role": "user", "content": "Some HORROR please"}],
            [{"role": "user", "content": "any comedy?"}],
        ],
        "seen": [["a"], []],
        "responders": [[["c"], ["b", "e"]], [["d"]]],
        "union": [["c", "b", "e"], ["d"]],
        "counts": [[1, 1, 1], [1]],
    }
)


def test_chance_is_k_over_unseen_items_weighted_like_the_views():
    got = chance_recall(REQUESTS, n_items=6, k=2)
    # r1: 2 / (6 - 1) = 0.4 on 2 responder rows; r2: 2 / 6 on 1 row
    assert got["per_responder"] == pytest.approx((0.4 * 2 + 2 / 6) / 3)
    assert got["union"] == pytest.approx((0.4 + 2 / 6) / 2)
    assert got["single_mention"] == pytest.approx((0.4 + 2 / 6) / 2)


def test_lists_skip_seen_items_and_follow_popularity_and_the_named_genre():
    assert popularity_lists(REQUESTS, CATALOG, 2) == [["b", "c"], ["a", "b"]]
    assert genre_lists(REQUESTS, CATALOG, 2) == [["c", "e"], ["b", "d"]]
    assert genre_lists(REQUESTS, CATALOG.drop("genre"), 2) is None


def test_reference_levels_by_hand():
    got = reference_levels(REQUESTS, CATALOG, 2)
    # popularity: r1 [b, c]: u0 {c} 1, u1 {b, e} 0.5; r2 [a, b] vs {d}: 0
    assert got["popularity"]["per_responder"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert got["popularity"]["union"] == pytest.approx((2 / 3 + 0) / 2)
    # genre: r1 [c, e]: u0 1, u1 0.5; r2 [b, d]: 1
    assert got["genre_popularity"]["per_responder"] == pytest.approx((1 + 0.5 + 1) / 3)
    assert got["genre_popularity"]["union"] == pytest.approx((2 / 3 + 1) / 2)
    assert math.isclose(got["chance"]["union"], (0.4 + 2 / 6) / 2)
    assert "genre_popularity" not in reference_levels(REQUESTS, CATALOG.drop("genre"), 2)
