"""``Matcher.ground_lines``' fast path: the item id of each (title, year), without explanations (issue 13).

``catalog.match.Matcher.ground_many`` explains every decision (a :class:`~catalog.match.Match` with the
rule, the score and a sentence); the trainer's rewards and the evaluation need only the id, for every
line of every list of a batch. :func:`ground_ids` gives exactly the ids ``ground_many`` would give
(tests/catalog/test_fast_paths.py and tests/remark/test_scoring_equivalence.py check it), faster:

- ids are cached per (title, year) in ``Matcher._id_cache``, apart from ``ground_many``'s
  :class:`Match` cache (read, never written here); a title seen before is one dict look-up;
- the dict-lookup rules (exact, alias, subtitle) are ``Matcher._rules``, unchanged;
- the fuzzy rule (:func:`fuzzy_ids`) scores with a score cutoff and skips queries whose length cannot
  reach the threshold (see its docstring for why neither changes an id).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from rapidfuzz import process

from catalog.index import number_signature, plural_key
from catalog.normalize import normalize_title
from catalog.settings import SCORERS

if TYPE_CHECKING:
    from catalog.match import Matcher

__all__ = ["fuzzy_ids", "ground_ids"]

Query = tuple[str | None, int | None]

#: Scorers for which ``score <= 200 min(|a|, |b|) / (|a| + |b|)`` holds on normalised keys.
_LENGTH_BOUNDED = frozenset({"ratio", "token_sort_ratio"})
#: ``score_cutoff`` sits this far below the threshold, so that rapidfuzz's own cutoff arithmetic can never
#: drop a score exactly at the threshold.
_CUTOFF_SLACK = 1e-6
_CHUNK = 1024  # queries per cdist call


@dataclass(frozen=True)
class _Candidates:
    """The fuzzy rule's candidate entries for one query year, in tie-break order."""

    entries: np.ndarray
    keys: list[str]
    min_len: int
    max_len: int


def _length_can_reach(length: int, cands: _Candidates, threshold: float) -> bool:
    """False when 200 min(L, l) / (L + l) < threshold for every candidate key length l (L = ``length``):
    the bound rises with l up to L and falls after it, so a key longer than the longest candidate is
    bounded by the longest, one shorter than the shortest by the shortest; anything between may reach."""
    if length > cands.max_len:
        return 200.0 * cands.max_len / (length + cands.max_len) >= threshold - _CUTOFF_SLACK
    if length < cands.min_len:
        return 200.0 * length / (length + cands.min_len) >= threshold - _CUTOFF_SLACK
    return True


def ground_ids(matcher: Matcher, queries: list[Query]) -> list[str | None]:
    """The item id ``matcher.ground_many`` gives each query (None without a title or a match).

    Distinct queries are looked up in the id cache in one ``map``; only the misses go through the rules
    (and, when no rule decides, the fuzzy rule), and only their answers are added to the cache.
    """
    ids, matches = matcher._id_cache, matcher._cache
    distinct = list(dict.fromkeys(queries))
    found = dict(zip(distinct, map(ids.get, distinct, itertools.repeat(_MISSING)), strict=True))
    new: dict[Query, str | None] = {}
    todo: list[tuple[str, int | None]] = []
    for q in [q for q, v in found.items() if v is _MISSING]:
        if q[0] is None:
            found[q] = None
            continue
        hit = matches.get(q) or matcher._rules(*q)
        if hit is None:
            todo.append(q)  # type: ignore[arg-type]
        else:
            found[q] = new[q] = hit.item_id
    if todo:
        fuzzy = fuzzy_ids(matcher, todo)
        found.update(fuzzy)
        new.update(fuzzy)
    if new:
        matcher._remember(new, ids)
    return list(map(found.__getitem__, queries))


_MISSING = object()


def year_candidates(matcher: Matcher, year: int | None) -> _Candidates:
    """The fuzzy rule's candidates for a query year (cached: they depend on the year only)."""
    got = matcher._candidates.get(year)
    if got is None:
        ix = matcher.index
        cand = ix.candidates(year, matcher.year_tolerance)
        cand = cand[ix.entry_len[cand] >= matcher.min_fuzzy_len]
        lengths = ix.entry_len[cand]
        got = _Candidates(
            cand,
            matcher._keys[cand].tolist(),
            int(lengths.min()) if cand.size else 0,
            int(lengths.max()) if cand.size else 0,
        )
        if len(matcher._candidates) >= 4096:
            matcher._candidates.clear()
        matcher._candidates[year] = got
    return got


def fuzzy_ids(
    matcher: Matcher, queries: list[tuple[str, int | None]]
) -> dict[tuple[str, int | None], str | None]:
    """Rule 3 (fuzzy) for ids only: the item :meth:`Matcher._fuzzy` would match, or None.

    Same candidates, guards and tie-break as :meth:`Matcher._fuzzy`; what changes no id but saves time:

    - ``process.cdist`` gets ``score_cutoff`` just below the threshold, so a score that could not be
      accepted comes back as 0; only the non-zero scores are kept, and the guards (sequel, plural)
      and the choice (highest score, then the candidate first in tie-break order, which is what
      ``argmax`` took) run once on those pairs for all year groups together. Every pair at or above
      the threshold keeps its exact score, so the best one, if it is accepted, is the same pair.
    - For ``ratio`` and ``token_sort_ratio``, a query is not scored when its key length cannot reach
      the threshold against the shortest and longest candidate keys: ratio(a, b) =
      100 (1 - indel / (|a| + |b|)) with indel >= ||a| - |b||, so ratio <= 200 min(|a|, |b|) /
      (|a| + |b|) (normalised keys have single spaces, so sorting their tokens keeps their length).
      A long unparsable line (random tokens) is then never scored against the catalog.
    """
    ix = matcher.index
    scorer = SCORERS[matcher.scorer]
    cutoff = max(matcher.threshold - _CUTOFF_SLACK, 0.0)
    keys = [normalize_title(t) for t, _ in queries]
    by_year: dict[int | None, list[int]] = {}
    for i, q in enumerate(queries):
        by_year.setdefault(q[1], []).append(i)
    hit_q, hit_pos, hit_score, hit_entry = [], [], [], []
    for year, idx in by_year.items():
        cands = year_candidates(matcher, year)
        if cands.entries.size == 0:
            continue
        if matcher.scorer in _LENGTH_BOUNDED:
            idx = [i for i in idx if _length_can_reach(len(keys[i]), cands, matcher.threshold)]
            if not idx:
                continue
        for lo in range(0, len(idx), _CHUNK):
            part = idx[lo : lo + _CHUNK]
            scores = process.cdist(
                [keys[i] for i in part],
                cands.keys,
                scorer=scorer,
                dtype=np.float64,
                workers=matcher.workers,
                score_cutoff=cutoff,
            )
            r, c = np.nonzero(scores)
            hit_q.append(np.asarray(part, dtype=np.int64)[r])
            hit_pos.append(c)
            hit_score.append(scores[r, c])
            hit_entry.append(cands.entries[c])
    out: dict[tuple[str, int | None], str | None] = dict.fromkeys(queries)
    if not hit_q:
        return out
    q, pos, score, entry = (np.concatenate(x) for x in (hit_q, hit_pos, hit_score, hit_entry))
    with_hits = np.unique(q).tolist()
    sig_q = np.full(len(queries), -2, dtype=np.int64)
    plural_q = np.full(len(queries), -2, dtype=np.int64)
    sig_q[with_hits] = [ix.sig_ids.get(number_signature(keys[i]), -1) for i in with_hits]
    plural_q[with_hits] = [ix.plural_ids.get(plural_key(keys[i]), -1) for i in with_hits]
    keep = (ix.entry_sig[entry] == sig_q[q]) & (ix.entry_plural[entry] != plural_q[q])  # the guards
    q, pos, score, entry = q[keep], pos[keep], score[keep], entry[keep]
    order = np.lexsort((pos, -score, q))  # per query: highest score, then first in tie-break order
    first = order[np.r_[True, q[order][1:] != q[order][:-1]]] if order.size else order
    for i, s, e in zip(q[first].tolist(), score[first].tolist(), entry[first].tolist()):
        if s >= matcher.threshold and s > 0:
            out[queries[i]] = ix.item_ids[int(ix.entry_item[e])]
    return out
