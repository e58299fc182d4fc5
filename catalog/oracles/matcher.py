"""A slow per-pair reference for ``Matcher``: the same rules, written as plain loops over every entry.

It exists to check the batched path (dict lookups + one ``cdist`` per year group): the tests compare
the two on random queries, and ``bench/grounding.py`` times it as the "naive per-pair rapidfuzz loop"
baseline. Nothing else should call it: it costs O(catalog) Python work per query.
"""

from __future__ import annotations

import weakref

from catalog.index import NO_YEAR, bare_key, number_signature, plural_key, raw_key, subtitle_heads
from catalog.match import SCORERS, Match, Matcher
from catalog.normalize import normalize_title

__all__ = ["reference_ground"]

# Catalog-side strings are prepared once per matcher (as any sensible naive loop would); the per-query
# work stays a loop over every entry.
_PREPARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _prepare(matcher: Matcher) -> dict[str, list]:
    if matcher not in _PREPARED:
        ix = matcher.index
        _PREPARED[matcher] = {
            "raw": [raw_key(t) for t in ix.entry_text],
            "heads": [set(subtitle_heads(t)) for t in ix.entry_text],
            "bare": [bare_key(k) for k in ix.entry_key],
            "sig": [number_signature(k) for k in ix.entry_key],
            "plural": [plural_key(k) for k in ix.entry_key],
        }
    return _PREPARED[matcher]


def _answer(matcher: Matcher, e: int, rule: str, score: float) -> Match:
    ix = matcher.index
    item = int(ix.entry_item[e])
    if rule == "exact" and ix.entry_alias[e]:
        rule = "alias"
    return Match(ix.item_ids[item], ix.titles[item], ix.year_of(item), rule, float(score), "reference")


def _order(matcher: Matcher, e: int, year: int | None) -> tuple[int, int, int, bool] | None:
    """Tie-break key (known year first, gap, priority, title before alias); None if incompatible."""
    ix = matcher.index
    item = int(ix.entry_item[e])
    item_year = int(ix.years[item])
    if year is None or item_year == NO_YEAR:
        return (1, 0, int(ix.prio[item]), bool(ix.entry_alias[e]))
    gap = abs(year - item_year)
    if gap > matcher.year_tolerance:
        return None
    return (0, gap, int(ix.prio[item]), bool(ix.entry_alias[e]))


def _first(matcher: Matcher, entries: list[int], year: int | None) -> int | None:
    keyed = [(k, e) for e in entries if (k := _order(matcher, e, year)) is not None]
    return min(keyed)[1] if keyed else None


def reference_ground(matcher: Matcher, title: str | None, year: int | None = None) -> Match:
    """Ground one title by looping over every catalog entry (answers equal ``matcher.ground``)."""
    ix = matcher.index
    n = len(ix.entry_key)
    prep = _prepare(matcher)
    none = Match(None, None, None, "none", 0.0, "reference")
    if title is None or not title.strip():
        return none
    if matcher.mode == "exact":
        rk = raw_key(title)
        hits = []
        for e in range(n):
            item_year = int(ix.years[int(ix.entry_item[e])])
            if prep["raw"][e] != rk:
                continue
            if item_year == NO_YEAR or (year is not None and item_year == year):
                hits.append(
                    ((item_year == NO_YEAR, int(ix.prio[int(ix.entry_item[e])]), bool(ix.entry_alias[e])), e)
                )
        return _answer(matcher, min(hits)[1], "exact", 100.0) if hits else none
    key = normalize_title(title)
    if not key:
        return none
    same = [e for e in range(n) if ix.entry_key[e] == key]
    if not same:
        bare = bare_key(key)
        same = [e for e in range(n) if ix.entry_key[e] and prep["bare"][e] == bare]
    e = _first(matcher, same, year)
    if e is not None:
        return _answer(matcher, e, "exact", 100.0)
    if matcher.mode == "normalized":
        return none
    heads = set(subtitle_heads(title))
    sub = [e for e in range(n) if key in prep["heads"][e] or ix.entry_key[e] in heads]
    e = _first(matcher, sub, year)
    if e is not None:
        return _answer(matcher, e, "subtitle", SCORERS["ratio"](key, ix.entry_key[e]))
    if same or len(key) < matcher.min_fuzzy_len:
        return none
    scorer = SCORERS[matcher.scorer]
    sig, plural = number_signature(key), plural_key(key)
    best: tuple[float, tuple, int] | None = None
    for e in range(n):
        order = _order(matcher, e, year)
        if order is None or len(ix.entry_key[e]) < matcher.min_fuzzy_len:
            continue
        other = ix.entry_key[e]
        guarded = prep["sig"][e] != sig or prep["plural"][e] == plural
        s = 0.0 if guarded else scorer(key, other)
        if best is None or (-s, order) < (-best[0], best[1]):
            best = (s, order, e)
    if best is None or best[0] <= 0:
        return none
    if best[0] >= matcher.threshold:
        return _answer(matcher, best[2], "fuzzy", best[0])
    return Match(None, None, None, "none", float(best[0]), "reference")
