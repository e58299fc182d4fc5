"""``Matcher.ground_titles``' fast path: the item id of each (title, year), without explanations.

``catalog.match.Matcher.ground_many`` explains every decision (a :class:`~catalog.match.Match` with the
rule, the score and a sentence); the trainer's rewards and the evaluation need only the id, for every
line of every list of a batch. :class:`IdGrounder` gives exactly the ids ``ground_many`` would give
(tests/catalog/test_fast_paths.py and tests/remark/scoring/test_scorer_oracle.py check it), faster:

- ids are cached per (title, year) in the grounder's own cache, apart from ``ground_many``'s
  :class:`Match` cache (read, never written here); a title seen before is one dict look-up;
- the dict-lookup rules (exact, alias, subtitle) are the matcher's, passed in as ``rules``;
- the fuzzy rule (:meth:`IdGrounder.fuzzy_ids`) scores with a score cutoff and skips queries whose length
  cannot reach the threshold (see its docstring for why neither changes an id).

The grounder knows the matcher only through what it is handed (the index, the settings, the rules and
the explained cache), so this module imports nothing of ``catalog.match``.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from rapidfuzz import process

from catalog.index import CatalogIndex, number_signature, plural_key
from catalog.normalize import normalize_title
from catalog.settings import SCORERS, GroundingSettings

__all__ = ["IdGrounder", "remember"]

Query = tuple[str | None, int | None]

#: Scorers for which ``score <= 200 min(|a|, |b|) / (|a| + |b|)`` holds on normalised keys.
_LENGTH_BOUNDED = frozenset({"ratio", "token_sort_ratio"})
#: ``score_cutoff`` sits this far below the threshold, so that rapidfuzz's own cutoff arithmetic can never
#: drop a score exactly at the threshold.
_CUTOFF_SLACK = 1e-6
_CHUNK = 1024  # queries per cdist call


@dataclass(frozen=True)
class _Candidates:
    """The fuzzy rule's candidate entries for one query year, in tie-break order, and the same
    candidates ordered by key length (``by_len``: positions into ``entries``, stable)."""

    entries: np.ndarray
    keys: list[str]
    by_len: np.ndarray  # int64 positions, key length ascending (ties in tie-break order)
    sorted_keys: list[str]  # keys[by_len]
    sorted_lens: list[int]  # len(sorted_keys)


def _length_band(lo: int, hi: int, threshold: float) -> tuple[float, float]:
    """(shortest, longest) candidate key length l for which 200 min(L, l) / (L + l) can reach the
    threshold t for some query key length L in [lo, hi]: t L / (200 - t) <= l <= L (200 - t) / t, the
    bound of ``ratio`` and ``token_sort_ratio`` (see :func:`fuzzy_ids`); t is taken ``_CUTOFF_SLACK``
    low, and the band is widened by a hair, so that rounding can only let more candidates in."""
    t = threshold - _CUTOFF_SLACK
    if t <= 0:
        return 0.0, float("inf")
    return t * lo / (200.0 - t) - 1e-6, hi * (200.0 - t) / t + 1e-6


def remember(cache: dict, found: Mapping, size: int) -> None:
    """Add ``found`` to ``cache``, keeping at most ``size`` entries (the oldest go first: dicts keep
    insertion order); ``size <= 0`` caches nothing."""
    if size <= 0:
        return
    overflow = len(cache) + len(found) - size
    if overflow > 0:
        for k in list(itertools.islice(cache, overflow)):
            del cache[k]
    cache.update(itertools.islice(found.items(), size))


_MISSING = object()


class IdGrounder:
    """Item ids of (title, year) queries: ``Matcher.ground_many``'s answers, without its explanations.

    ``rules(title, year) -> Match | None`` are the matcher's dict-lookup rules (None: go to the fuzzy
    rule); ``explained`` is the matcher's cache of explained answers, read to reuse them, never written.
    """

    def __init__(
        self,
        index: CatalogIndex,
        settings: GroundingSettings,
        *,
        rules: Callable[[str, int | None], Any],
        explained: Mapping,
        workers: int = 1,
        cache_size: int = 200_000,
        min_fuzzy_len: int = 5,
    ) -> None:
        self.index = index
        self.year_tolerance = settings.year_tolerance
        self.threshold = settings.match_threshold
        self.scorer = settings.match_scorer
        self.rules = rules
        self.explained = explained
        self.workers = workers
        self.cache_size = int(cache_size)
        self.min_fuzzy_len = int(min_fuzzy_len)
        self.keys = np.asarray(index.entry_key, dtype=object)
        self.cache: dict[Query, str | None] = {}
        self._candidates: dict[int | None, _Candidates] = {}

    def clear(self) -> None:
        self.cache.clear()

    def ground(self, queries: list[Query]) -> list[str | None]:
        """The item id ``Matcher.ground_many`` gives each query (None without a title or a match).

        Every query is looked up in the id cache in one ``map``; only the distinct misses go through the
        rules (and, when no rule decides, the fuzzy rule), and only their answers are added to the cache.
        """
        ids, matches = self.cache, self.explained
        got = list(map(ids.get, queries, itertools.repeat(_MISSING)))
        if _MISSING not in got:
            return got
        missing = list(
            itertools.compress(range(len(got)), map(operator.is_, got, itertools.repeat(_MISSING)))
        )
        found: dict[Query, str | None] = {}
        new: dict[Query, str | None] = {}
        todo: list[tuple[str, int | None]] = []
        for q in dict.fromkeys(map(queries.__getitem__, missing)):
            if q[0] is None:
                found[q] = None
                continue
            hit = matches.get(q) or self.rules(*q)
            if hit is None:
                todo.append(q)  # type: ignore[arg-type]
            else:
                found[q] = new[q] = hit.item_id
        if todo:
            fuzzy = self.fuzzy_ids(todo)
            found.update(fuzzy)
            new.update(fuzzy)
        if new:
            remember(ids, new, self.cache_size)
        for i in missing:
            got[i] = found[queries[i]]
        return got

    def year_candidates(self, year: int | None) -> _Candidates:
        """The fuzzy rule's candidates for a query year (cached: they depend on the year only)."""
        got = self._candidates.get(year)
        if got is None:
            ix = self.index
            cand = ix.candidates(year, self.year_tolerance)
            lengths = ix.entry_len[cand]  # len(key) per entry
            keep = lengths >= self.min_fuzzy_len
            cand, lengths = cand[keep], lengths[keep]
            by_len = np.argsort(lengths, kind="stable")
            got = _Candidates(
                cand,
                self.keys[cand].tolist(),
                by_len,
                self.keys[cand[by_len]].tolist(),
                lengths[by_len].tolist(),
            )
            if len(self._candidates) >= 4096:
                self._candidates.clear()
            self._candidates[year] = got
        return got

    def fuzzy_ids(self, queries: list[tuple[str, int | None]]) -> dict[tuple[str, int | None], str | None]:
        """Rule 3 (fuzzy) for ids only: the item the matcher's explained fuzzy rule would match, or None.

        Same candidates, guards and tie-break as ``Matcher._fuzzy``; what changes no id but saves time:

        - ``process.cdist`` gets ``score_cutoff`` just below the threshold, so a score that could not be
          accepted comes back as 0; only the non-zero scores are kept, and the guards (sequel, plural)
          and the choice (highest score, then the candidate first in tie-break order, which is what
          ``argmax`` took) run once on those pairs for all year groups together. Every pair at or above
          the threshold keeps its exact score, so the best one, if it is accepted, is the same pair.
        - For ``ratio`` and ``token_sort_ratio``, a year's queries are scored only against the candidates
          whose key length can reach the threshold against one of theirs (:func:`_length_slices`):
          ratio(a, b) = 100 (1 - indel / (|a| + |b|)) with indel >= ||a| - |b||, so ratio <=
          200 min(|a|, |b|) / (|a| + |b|) (normalised keys have single spaces, so sorting their tokens keeps
          their length). A long unparsable line (random tokens) is then never scored against the catalog.
          The candidates of a year are kept sorted by key length, and each hit is mapped back to its
          position in tie-break order (``by_len``), so the choice below sees the same pairs.
        """
        ix = self.index
        scorer = SCORERS[self.scorer]
        cutoff = max(self.threshold - _CUTOFF_SLACK, 0.0)
        keys = [normalize_title(t) for t, _ in queries]
        by_year: dict[int | None, list[int]] = {}
        for i, q in enumerate(queries):
            by_year.setdefault(q[1], []).append(i)
        hit_q, hit_pos, hit_score, hit_entry = [], [], [], []
        for year, idx in by_year.items():
            cands = self.year_candidates(year)
            if cands.entries.size == 0:
                continue
            if self.scorer in _LENGTH_BOUNDED:
                calls = _length_slices(idx, keys, cands, self.threshold)
            else:
                calls = [(idx[lo : lo + _CHUNK], 0, len(cands.keys)) for lo in range(0, len(idx), _CHUNK)]
            for part, a, b in calls:
                choices = cands.sorted_keys[a:b] if self.scorer in _LENGTH_BOUNDED else cands.keys
                scores = process.cdist(
                    [keys[i] for i in part],
                    choices,
                    scorer=scorer,
                    dtype=np.float64,
                    workers=self.workers,
                    score_cutoff=cutoff,
                )
                flat = np.flatnonzero(scores != 0)  # a boolean's nonzero is cheaper than the float's
                if not flat.size:
                    continue
                r, c = np.divmod(flat, scores.shape[1])
                pos = cands.by_len[a + c] if self.scorer in _LENGTH_BOUNDED else c
                hit_q.append(np.asarray(part, dtype=np.int64)[r])
                hit_pos.append(pos)
                hit_score.append(scores[r, c])
                hit_entry.append(cands.entries[pos])
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
            if s >= self.threshold and s > 0:
                out[queries[i]] = ix.item_ids[int(ix.entry_item[e])]
        return out


def _length_slices(
    idx: list[int], keys: list[str], cands: _Candidates, threshold: float
) -> list[tuple[list[int], int, int]]:
    """(queries, a, b) per ``cdist`` call for one year's queries under a length-bounded scorer: up to
    ``_CHUNK`` queries per call, scored against ``sorted_keys[a:b]``, the candidates within
    :func:`_length_band` of the shortest and longest query key (a call with none is dropped: none of
    its pairs could reach the threshold). Cutting one year's queries into narrower length buckets, one
    call each, was slower (bench/RESULTS.md: rapidfuzz's cost per call and per choice outweighs the
    pairs it saves)."""
    out = []
    for lo in range(0, len(idx), _CHUNK):
        part = idx[lo : lo + _CHUNK]
        lens = [len(keys[i]) for i in part]
        band_lo, band_hi = _length_band(min(lens), max(lens), threshold)
        a = bisect.bisect_left(cands.sorted_lens, band_lo)  # a list: no array cast per float search
        b = bisect.bisect_right(cands.sorted_lens, band_hi)
        if a < b:
            out.append((part, a, b))
    return out
