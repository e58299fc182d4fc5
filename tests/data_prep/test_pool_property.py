"""Property: the per-responder rows reconstruct counts and union exactly, and pooling equals a slow
pure-Python reference on random threads (responder order, item order, union order, seen removal)."""

from __future__ import annotations

from collections import Counter

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from data_prep.pool import SplitSpec, expand_responders, pool_threads
from data_prep.schema import Report, validate_threads
from tests.data_prep.conftest import CATALOG_ROWS, make_catalog

TITLES = {t: i for i, t, _ in CATALOG_ROWS}  # title -> item id (years left out: any year matches)
TITLES |= {"Matrix, The": "m1", "moon": "m3"}  # spellings that ground to the same items
UNKNOWN = ["Nope One", "Nope Two"]
MATCHER = None


def _matcher():
    global MATCHER
    if MATCHER is None:
        from catalog.match import GroundingSettings, Matcher

        MATCHER = Matcher(make_catalog(), GroundingSettings(match_mode="normalized"))
    return MATCHER


mention = st.tuples(
    st.integers(0, 3),  # request
    st.integers(0, 4),  # responder
    st.sampled_from(list(TITLES) + UNKNOWN),
)
threads_strategy = st.tuples(
    st.lists(mention, min_size=1, max_size=40, unique=True),
    st.lists(st.lists(st.sampled_from(list(TITLES)), max_size=2), min_size=4, max_size=4),  # seen
)


def reference(mentions, seen):
    """Slow pooling with dicts, in file order; returns {request: (responders, union, counts)}."""
    out = {}
    for req in dict.fromkeys(m[0] for m in mentions):
        seen_ids = {TITLES[t] for t in seen[req]}
        responders: dict[int, list[str]] = {}
        first: dict[str, int] = {}
        for pos, (r, who, title) in enumerate(mentions):
            item = TITLES.get(title)
            if r != req or item is None or item in seen_ids:
                continue
            items = responders.setdefault(who, [])
            if item not in items:
                items.append(item)
            first.setdefault(item, pos)
        counts = Counter(i for items in responders.values() for i in items)
        union = sorted(counts, key=lambda i: (-counts[i], first[i]))
        if union:
            out[f"q{req}"] = (list(responders.values()), union, [counts[i] for i in union])
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(threads_strategy)
def test_responder_rows_reconstruct_union_and_counts(data):
    mentions, seen = data
    frame = pl.DataFrame(
        {
            "request_id": [f"q{r}" for r, _, _ in mentions],
            "prompt": [[{"role": "user", "content": f"request {r}"}] for r, _, _ in mentions],
            "responder_id": [f"u{w}" for _, w, _ in mentions],
            "title": [t for _, _, t in mentions],
            "year": [None] * len(mentions),
            "seen": [seen[r] for r, _, _ in mentions],
        }
    )
    report = Report(skip=True)  # requests with nothing grounded are dropped, as the reference does
    pooled = pool_threads(validate_threads(frame), _matcher(), split=SplitSpec(), report=report)
    rows = expand_responders(pooled)

    expected = reference(mentions, seen)
    assert pooled["request_id"].to_list() == list(expected)
    for req in pooled.iter_rows(named=True):
        responders, union, counts = expected[req["request_id"]]
        assert req["responders"] == responders
        assert req["union"] == union and req["counts"] == counts
        assert req["n_responders"] == len(responders)
        assert not set(req["union"]) & set(req["seen"])
        # Reconstruction from Rank-GRPO's view alone.
        mine = rows.filter(pl.col("request_id") == req["request_id"])
        assert mine.height == req["n_responders"]
        rebuilt = Counter(i for items in mine["items"].to_list() for i in items)
        assert rebuilt == dict(zip(req["union"], req["counts"], strict=True))
        assert set(rebuilt) == set(req["union"])
    assert report.skipped.get("no_grounded_item", 0) == len({m[0] for m in mentions}) - len(expected)
