"""Grounding: map a (title, year) to a catalog item, explaining every decision.

One settings object, :class:`GroundingSettings` (``match_mode``, ``year_tolerance``, ``match_threshold``,
``match_scorer``), says how titles are grounded: ``Matcher(catalog, GroundingSettings(...))``. The same
four names are the CLI flags (``--match-mode``, ``--year-tolerance``, ``--match-threshold``,
``--match-scorer``) and the training config's fields, with the same valid values. ``remark prep`` writes
the settings into the dataset (``meta.json["grounding"]``); the reward, the validation and ``remark eval``
read them from there (``data_prep.dataset.choose_grounding``).

Modes (``match_mode``):

- ``fuzzy`` (default), rules tried in order, the first that fires wins:
  1. ``exact`` / ``alias``: the normalised title (``catalog.normalize``) equals an item's title or alias
     key (or does so once a leading "the/a/an" is dropped on both sides: "Godfather" == "The Godfather")
     and the years are compatible (|dy| <= ``year_tolerance``; a missing year on either side is
     compatible with any year). If the key exists but no year is compatible ("The Matrix (2002)"),
     the answer is ``none`` unless rule 2 fires: a named item with a wrong year is not a typo of a
     neighbouring title ("Alien (1986)" never becomes "Aliens (1986)").
  2. ``subtitle``: the query is a catalog title without its subtitle ("Mission: Impossible (2018)" ->
     "Mission: Impossible - Fallout (2018)"), or the query's part before its own subtitle is a catalog
     title ("Birdman (or The Unexpected Virtue of Ignorance)" -> "Birdman"). Subtitles start at ": ",
     " - ", " – ", " — " or " (" in the raw title. Year-compatible candidates only.
  3. ``fuzzy``: ``match_scorer`` (rapidfuzz, on normalised keys) >= ``match_threshold`` against the year-compatible
     entries, skipping keys shorter than ``min_fuzzy_len`` and candidates whose numbers differ (the
     sequel guard: "toy story 2" never scores against "toy story 3") or that differ only by a plural
     "s"/"e" (the plural guard, ``catalog.index.plural_key``: "Aliens" never becomes "Alien"). Batched: the queries that reach
     this rule are grouped by year and scored with one ``rapidfuzz.process.cdist`` per group.
- ``normalized``: rule 1 only (no fuzzy), for audits.
- ``exact``: the (title, year) pair must be in the catalog verbatim: same case, same year, no
  tolerance, as in Rank-GRPO's catalog test (an inline tuple test in its ``libs/metrics_align.py``). The
  title is compared after ``catalog.index.raw_key`` (parenthesised groups deleted, quotes around it
  stripped, whitespace collapsed), on both sides; aliases match verbatim too, and a year-less catalog
  item matches its title with any year or none. This is close to Rank-GRPO's test but not it: Rank-GRPO
  compares its own parser's title with the catalog's raw tuple, and applies its +-2 year tolerance
  afterwards, between the slot and the ground-truth titles (casefolded), consuming one ground-truth entry
  per hit; here ids are compared, so two *different* items with the same casefolded title within 2 years
  are different items (Reddit-v2's gt_catalog has 36 such titles of 7,404 items, e.g. "Django Unchained"
  2012/2013). The reward of ``segmentation: newlines`` reproduces Rank-GRPO exactly with its own parser,
  verbatim index and consumption rule (``catalog.published``), whatever the mode. ``year_tolerance`` is
  unused here.

Ties (several items pass the same rule): smallest year distance (known years before unknown), then
higher popularity, then smaller ``item_id`` (``catalog.index``). Results are cached per (title, year).

Where the code lives: the settings in ``catalog.settings`` (re-exported here), the lookup structures in
``catalog.index``, and the ids-only path that ``Matcher.ground_lines`` takes (the trainer's rewards and
the evaluation; no explanations, same ids) in ``catalog.ground_ids``.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import polars as pl
from rapidfuzz import fuzz, process

from catalog.ground_ids import IdGrounder, remember
from catalog.index import (
    CatalogIndex,
    bare_key,
    may_have_subtitle,
    number_signature,
    plural_key,
    raw_key,
    subtitle_heads,
)
from catalog.io.errors import InputError
from catalog.lists import ParsedLists
from catalog.normalize import normalize_title
from catalog.parse import ParsedLine
from catalog.settings import (
    DEFAULT_SCORER,
    DEFAULT_THRESHOLD,
    MATCH_MODES,
    SCORERS,
    GroundingSettings,
    Mode,  # noqa: F401  (re-exported)
)
from catalog.table import Catalog

__all__ = [
    "DEFAULT_SCORER",
    "DEFAULT_THRESHOLD",
    "MATCH_MODES",
    "SCORERS",
    "GroundingSettings",
    "Match",
    "Matcher",
]

_CHUNK = 1024
_TITLE, _YEAR = operator.attrgetter("title"), operator.attrgetter("year")
_PLAIN_YEARS = frozenset({int, type(None)})


@dataclass(frozen=True, slots=True)
class Match:
    """A grounding decision. ``rule`` in exact, alias, subtitle, fuzzy, none; ``score`` in [0, 100]."""

    item_id: str | None
    title: str | None
    year: int | None
    rule: str
    score: float
    detail: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _none(detail: str, score: float = 0.0) -> Match:
    return Match(None, None, None, "none", score, detail)


class Matcher:
    """Ground titles against a :class:`~catalog.table.Catalog` (see the module docstring)."""

    def __init__(
        self,
        catalog: Catalog,
        settings: GroundingSettings | None = None,
        *,
        workers: int = 1,
        cache_size: int = 200_000,
        min_fuzzy_len: int = 5,
    ) -> None:
        """``settings`` (default ``GroundingSettings()``) fixes the grounding; ``workers`` and
        ``cache_size`` only change speed (rapidfuzz threads, cached (title, year) decisions)."""
        if settings is None:
            settings = GroundingSettings()
        if not isinstance(settings, GroundingSettings):
            raise TypeError(f"settings must be a GroundingSettings, got {type(settings).__name__}")
        self.catalog = catalog
        self.settings = settings
        # shorthands of the settings, read by the rules below
        self.mode = settings.match_mode
        self.year_tolerance = settings.year_tolerance
        self.threshold = settings.match_threshold
        self.scorer = settings.match_scorer
        self.min_fuzzy_len = int(min_fuzzy_len)
        self.workers = workers
        self.cache_size = int(cache_size)
        self.index = CatalogIndex.build(catalog.df)
        self._cache: dict[tuple[str | None, int | None], Match] = {}
        self._ids = IdGrounder(  # ground_titles' answers (ids only), with their own cache
            self.index,
            settings,
            rules=self._rules,
            explained=self._cache,
            workers=workers,
            cache_size=cache_size,
            min_fuzzy_len=min_fuzzy_len,
        )
        self._keys = self._ids.keys

    def __repr__(self) -> str:
        return f"Matcher({len(self.catalog)} items, {self.settings.describe()})"

    # -- public API -------------------------------------------------------------------------------------
    def ground(self, title: str | None, year: int | None = None) -> Match:
        """Ground one title (see :meth:`ground_many`)."""
        return self.ground_many([title], [year])[0]

    def ground_many(
        self, titles: Sequence[str | None], years: Sequence[int | None] | None = None
    ) -> list[Match]:
        """Ground many titles at once; ``years[i]`` (or None) goes with ``titles[i]``.

        Exact and rule hits are dict lookups; only the rest are scored, one ``cdist`` per query year.
        """
        if years is None:
            years = [None] * len(titles)
        if len(years) != len(titles):
            raise InputError(f"{len(titles)} titles but {len(years)} years", field="years")
        queries = [(t, None if y is None else int(y)) for t, y in zip(titles, years, strict=True)]
        todo: dict[tuple[str, int | None], tuple[str, int | None]] = {}
        found: dict[tuple[str | None, int | None], Match] = {}
        for q in dict.fromkeys(queries):
            hit = self._cache.get(q)
            if hit is None:
                hit = self._rules(*q)
            if hit is None:
                todo[q] = q
            else:
                found[q] = hit
        if todo:
            found.update(self._fuzzy(list(todo)))
        remember(self._cache, found, self.cache_size)
        return [found[q] for q in queries]

    def ground_frame(
        self, df: pl.DataFrame, *, title: str = "title", year: str | None = "year"
    ) -> pl.DataFrame:
        """``df`` plus ``item_id`` (null when nothing matched), ``rule`` and ``score`` columns."""
        for col in (title, year):
            if col is not None and col not in df.columns:
                raise InputError(
                    f"no {col!r} column",
                    field=col,
                    hint=f"columns: {', '.join(df.columns)}; pass year=None without years",
                )
        years = None if year is None else df[year].cast(pl.Int64, strict=False).to_list()
        matches = self.ground_many(df[title].cast(pl.String).to_list(), years)
        return df.with_columns(
            pl.Series("item_id", [m.item_id for m in matches], dtype=pl.String),
            pl.Series("rule", [m.rule for m in matches], dtype=pl.String),
            pl.Series("score", [m.score for m in matches], dtype=pl.Float64),
        )

    def ground_lines(self, rows: Sequence[Sequence[ParsedLine]]) -> list[list[str | None]]:
        """Catalog id of every parsed line of every row (None when the line has no title or no match).

        One batched pass over all rows: the path the trainer's rewards and the evaluation share, so that a
        list is grounded the same way in both. It returns the ids :meth:`ground_many` would give, without
        its explanations: ids are cached per (title, year) apart from ``ground_many``'s
        :class:`Match` cache (which is read, not written), and the fuzzy rule (``catalog.ground_ids.IdGrounder.fuzzy_ids``) scores
        with a score cutoff and skips queries whose length cannot reach the threshold.
        """
        if isinstance(rows, ParsedLists):  # columns already: no ParsedLine is built or read
            return rows.split(self.ground_titles(rows.titles, rows.years))
        flat = list(itertools.chain.from_iterable(rows))
        ids = self.ground_titles(list(map(_TITLE, flat)), list(map(_YEAR, flat)))
        out, pos = [], 0
        for row in rows:
            out.append(ids[pos : pos + len(row)])
            pos += len(row)
        return out

    def ground_titles(self, titles: Sequence[str | None], years: Sequence[int | None]) -> list[str | None]:
        """The id :meth:`ground_lines` gives each (title, year) pair (None: no title or no match)."""
        years = years if isinstance(years, list) else list(years)
        if not set(map(type, years)) <= _PLAIN_YEARS:  # e.g. numpy ints: as ground_many, int(year)
            years = [None if y is None else int(y) for y in years]
        return self._ids.ground(list(zip(titles, years, strict=True)))

    def clear_cache(self) -> None:
        self._cache.clear()
        self._ids.clear()

    # -- internals --------------------------------------------------------------------------------------

    def _hit(self, entry: int, rule: str, score: float, detail: str) -> Match:
        ix = self.index
        item = int(ix.entry_item[entry])
        if rule == "exact" and ix.entry_alias[entry]:
            rule = "alias"
        if ix.entry_alias[entry]:
            detail += f" (via alias {ix.entry_text[entry]!r})"
        return Match(ix.item_ids[item], ix.titles[item], ix.year_of(item), rule, float(score), detail)

    def _year_note(self, entry: int, year: int | None) -> str:
        item_year = self.index.year_of(int(self.index.entry_item[entry]))
        if year is None or item_year is None:
            return "a missing year is compatible with any year"
        return f"year {year} vs {item_year}, |dy|={abs(year - item_year)} <= {self.year_tolerance}"

    def _rules(self, title: str | None, year: int | None) -> Match | None:
        """Dict-lookup rules; None means "go to the fuzzy rule"."""
        if title is None or not title.strip():
            return _none("empty or unparsed title")
        if self.mode == "exact":
            return self._exact(title, year)
        ix, tol = self.index, self.year_tolerance
        key = normalize_title(title)
        if not key:
            return _none(f"nothing left of {title!r} after normalisation")
        blocked = None
        entries = ix.by_key.get(key)
        bare = not entries
        if bare:
            entries = ix.by_bare.get(bare_key(key))
        if entries:
            ok, bad = ix.rank(entries, year, tol)
            if ok:
                how = f"normalised title {key!r}" + (" ignoring a leading article" if bare else "")
                n = f"; {len(ok)} candidates, tie-break: year, popularity, id" if len(ok) > 1 else ""
                return self._hit(ok[0], "exact", 100.0, f"{how}; {self._year_note(ok[0], year)}{n}")
            item = int(ix.entry_item[bad[0]])
            blocked = (
                f"title {key!r} is {ix.titles[item]!r} ({ix.year_of(item)}) but year {year} is "
                f"{abs(year - ix.year_of(item))} off (tolerance {tol})"  # type: ignore[operator]
            )
        if self.mode == "normalized":
            return _none(blocked or f"no catalog title or alias normalises to {key!r}")
        sub = self._subtitle(title, key, year) if key in ix.by_head or may_have_subtitle(title) else None
        if sub is not None:
            return sub
        if blocked:
            return _none(blocked + "; fuzzy matching skipped")
        if len(key) < self.min_fuzzy_len:
            return _none(f"no exact match for {key!r}, too short for fuzzy matching (< {self.min_fuzzy_len})")
        return None

    def _subtitle(self, title: str, key: str, year: int | None) -> Match | None:
        ix = self.index
        cands = {e: "dropped" for e in ix.by_head.get(key, ())}
        for head in subtitle_heads(title):
            for e in ix.by_key.get(head, ()):
                cands.setdefault(e, head)
        if not cands:
            return None
        order = sorted(cands, key=lambda e: (ix.prio[ix.entry_item[e]], ix.entry_alias[e]))
        ok, _ = ix.rank(order, year, self.year_tolerance)
        if not ok:
            return None
        e = ok[0]
        how = (
            f"{key!r} is {ix.entry_text[e]!r} without its subtitle"
            if cands[e] == "dropped"
            else f"{title!r} before its subtitle is {ix.entry_text[e]!r}"
        )
        return self._hit(
            e, "subtitle", fuzz.ratio(key, ix.entry_key[e]), f"{how}; {self._year_note(e, year)}"
        )

    def _exact(self, title: str, year: int | None) -> Match:
        ix = self.index
        rk = raw_key(title)
        entries = (ix.by_raw.get((rk, year), []) if year is not None else []) + ix.by_raw.get((rk, None), [])
        if entries:
            e = entries[0]
            what = "title" if ix.year_of(int(ix.entry_item[e])) is None else "(title, year)"
            return self._hit(e, "exact", 100.0, f"{what} {rk!r} found verbatim (exact mode)")
        if year is None and self.catalog.has_years:
            return _none("no year: Rank-GRPO's parser drops lines without (YYYY)")
        return _none(
            f"({rk!r}, {year}) is not in the catalog verbatim (exact mode: case and year must match)"
        )

    def _fuzzy(self, queries: list[tuple[str, int | None]]) -> dict[tuple[str, int | None], Match]:
        ix, out = self.index, {}
        scorer = SCORERS[self.scorer]
        by_year: dict[int | None, list[tuple[str, int | None]]] = {}
        for q in queries:
            by_year.setdefault(q[1], []).append(q)
        for year, group in by_year.items():
            cand = ix.candidates(year, self.year_tolerance)
            cand = cand[ix.entry_len[cand] >= self.min_fuzzy_len]
            if cand.size == 0:
                for q in group:
                    out[q] = _none(f"no catalog item is year-compatible with {year}")
                continue
            cand_keys = self._keys[cand].tolist()
            cand_sig, cand_plural = ix.entry_sig[cand], ix.entry_plural[cand]
            keys = [normalize_title(t) for t, _ in group]
            sigs = np.asarray([ix.sig_ids.get(number_signature(k), -1) for k in keys], dtype=np.int64)
            plurals = np.asarray([ix.plural_ids.get(plural_key(k), -1) for k in keys], dtype=np.int64)
            for lo in range(0, len(group), _CHUNK):
                hi = min(lo + _CHUNK, len(group))
                scores = process.cdist(
                    keys[lo:hi], cand_keys, scorer=scorer, dtype=np.float64, workers=self.workers
                )
                scores[cand_sig[None, :] != sigs[lo:hi, None]] = 0.0  # the sequel guard
                scores[cand_plural[None, :] == plurals[lo:hi, None]] = 0.0  # the plural guard
                best = scores.argmax(axis=1)  # first maximum = best by the tie-break order
                top = scores[np.arange(hi - lo), best]
                for j in range(hi - lo):
                    q, s, e = group[lo + j], float(top[j]), int(cand[best[j]])
                    if s >= self.threshold and s > 0:
                        out[q] = self._hit(
                            e,
                            "fuzzy",
                            s,
                            f"{self.scorer}({keys[lo + j]!r}, {ix.entry_key[e]!r}) = {s:.1f} >= {self.threshold:g}; "
                            f"{self._year_note(e, year)}",
                        )
                    else:
                        near = f"; best {ix.entry_text[e]!r} scored {s:.1f}" if s > 0 else ""
                        out[q] = _none(f"no rule matched; fuzzy below {self.threshold:g}{near}", s)
        return out
