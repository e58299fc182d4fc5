"""The lookup structures behind ``catalog.match.Matcher``, built once per catalog.

An *entry* is one searchable string of an item: its title or one of its aliases. For every entry we keep
its normalised key, its item, whether it is an alias, its number signature, and its position in a
year-sorted order, so that the year-compatible candidates of a query are two ``searchsorted`` calls.

Tie-break (deterministic, the same in every mode): among candidates that pass a rule, prefer the
smallest year distance (items with a known year before year-less items), then the higher popularity
(unknown popularity last), then the smaller ``item_id``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from catalog.normalize import normalize_title

__all__ = ["CatalogIndex", "bare_key", "number_signature", "plural_key", "raw_key", "subtitle_heads"]

_ROMAN = {"ii": 2, "iii": 3, "iv": 4, "vi": 6, "vii": 7, "viii": 8, "ix": 9, "xi": 11, "xii": 12, "xiii": 13}
_NUMBER = re.compile(r"\d+|\b(?:" + "|".join(sorted(_ROMAN, key=len, reverse=True)) + r")\b")
# Where a subtitle starts: ": ", " - ", " – ", " — ", " (" in the raw title.
_SUBTITLE = re.compile(r"\s*:\s+|\s+[-–—]\s+|\s+\(")


def may_have_subtitle(title: str) -> bool:
    """``title`` holds one of ``: - – — (``, one of which every ``_SUBTITLE`` alternative needs.

    Five substring searches (C loops, no per-character Python work) rather than ``frozenset.isdisjoint``,
    which hashes every character of the title: the timings are in bench/RESULTS.md."""
    return ":" in title or "-" in title or "–" in title or "—" in title or "(" in title


_PARENS = re.compile(r"\([^()]*\)")
_QUOTE_PAIRS = (('"', '"'), ("'", "'"))
_ARTICLE = re.compile(r"^(?:the|a|an) (?=.)")
NO_YEAR = np.iinfo(np.int32).min


_PLURAL = re.compile(r"(?<=\w{3})e?s?\b")


def plural_key(key: str) -> str:
    """The key with a final "s", "e" or "es" cut from every word of 4+ letters: the plural guard.

    "aliens" / "alien", "nightmares" / "nightmare", "the witches" / "the witch" share a plural key, so
    fuzzy matching never turns one into the other (a typo that drops a final "s" or "e" is lost too).

    >>> plural_key("the witches"), plural_key("nightmare"), plural_key("aliens")
    ('the witch', 'nightmar', 'alien')
    """
    return _PLURAL.sub("", key)


def bare_key(key: str) -> str:
    """A normalised key without its leading article: "the godfather" -> "godfather"."""
    if not key.startswith(("the ", "a ", "an ")):  # what ``_ARTICLE`` needs (most keys: no regex call)
        return key
    return _ARTICLE.sub("", key, count=1)


def number_signature(key: str) -> tuple[int, ...]:
    """Sorted numbers in a normalised key (digit runs and roman numerals II..XIII): the sequel guard.

    >>> number_signature("toy story 2"), number_signature("rocky iv"), number_signature("alien3")
    ((2,), (4,), (3,))
    """
    return tuple(sorted(int(t) if t.isdigit() else _ROMAN[t] for t in _NUMBER.findall(key)))


def subtitle_heads(title: str) -> list[str]:
    """Normalised prefixes of ``title`` that end where a subtitle starts (longest first, distinct).

    >>> subtitle_heads("Mission: Impossible - Fallout")
    ['mission impossible', 'mission']
    """
    if not may_have_subtitle(title):
        return []
    full = normalize_title(title)
    heads = []
    for m in reversed(list(_SUBTITLE.finditer(title))):
        head = normalize_title(title[: m.start()])
        if head and head != full and head not in heads:
            heads.append(head)
    return heads


def raw_key(title: str) -> str:
    """Rank-GRPO's comparison string: parenthesised groups deleted (repeatedly), quotes around the
    title removed, whitespace collapsed; case kept (its catalog lookup is an exact tuple test)."""
    prev = None
    s = title.strip()
    while s != prev:
        prev = s
        s = " ".join(_PARENS.sub("", s).split())
        for a, b in _QUOTE_PAIRS:
            if len(s) >= 2 and s[0] == a and s[-1] == b:
                s = s[1:-1].strip()
    return s


@dataclass
class CatalogIndex:
    """Arrays over entries (title + aliases of every item), plus dicts from keys to entries."""

    item_ids: list[str]
    titles: list[str]
    years: np.ndarray  # int32 per item, NO_YEAR when unknown
    prio: np.ndarray  # int64 per item: rank by (popularity desc, nulls last, item_id asc)
    entry_item: np.ndarray  # int64 per entry
    entry_alias: np.ndarray  # bool per entry
    entry_key: list[str]
    entry_text: list[str]
    entry_sig: np.ndarray  # int64 per entry: id of its number signature
    entry_len: np.ndarray  # int64 per entry: len(key)
    entry_plural: np.ndarray  # int64 per entry: id of its plural key
    plural_ids: dict[str, int]
    by_key: dict[str, list[int]]
    by_bare: dict[str, list[int]]
    by_head: dict[str, list[int]]
    by_raw: dict[tuple[str, int | None], list[int]]
    year_order: np.ndarray  # entries with a known year, sorted by year
    year_sorted: np.ndarray  # their years, ascending
    no_year: np.ndarray  # entries whose item has no year
    sig_ids: dict[tuple[int, ...], int]

    @classmethod
    def build(cls, df: pl.DataFrame) -> CatalogIndex:
        n = df.height
        order = df.with_row_index("i").sort(
            [pl.col("popularity").fill_null(float("-inf")), "item_id"], descending=[True, False]
        )["i"]
        prio = np.empty(n, dtype=np.int64)
        prio[order.to_numpy()] = np.arange(n)
        years = df["year"].fill_null(NO_YEAR).to_numpy().astype(np.int32)
        titles = df["title"].to_list()
        texts: list[str] = []
        items: list[int] = []
        alias: list[bool] = []
        for i, (title, aliases) in enumerate(zip(titles, df["aliases"].to_list(), strict=True)):
            for j, text in enumerate([title, *(aliases or [])]):
                texts.append(text)
                items.append(i)
                alias.append(j > 0)
        keys = [normalize_title(t) for t in texts]
        sig_ids: dict[tuple[int, ...], int] = {}
        sigs = [sig_ids.setdefault(number_signature(k), len(sig_ids)) for k in keys]
        plural_ids: dict[str, int] = {}
        plurals = [plural_ids.setdefault(plural_key(k), len(plural_ids)) for k in keys]
        entry_item = np.asarray(items, dtype=np.int64)
        # Entries in tie-break order (titles before aliases of the same item), so that every list in
        # the dicts below is already sorted by preference apart from the year distance.
        pref = np.lexsort((np.asarray(alias), prio[entry_item]))
        by_key: dict[str, list[int]] = {}
        by_bare: dict[str, list[int]] = {}
        by_head: dict[str, list[int]] = {}
        by_raw: dict[tuple[str, int | None], list[int]] = {}
        for e in pref.tolist():
            if keys[e]:
                by_key.setdefault(keys[e], []).append(e)
                by_bare.setdefault(bare_key(keys[e]), []).append(e)
            for head in subtitle_heads(texts[e]):
                by_head.setdefault(head, []).append(e)
            y = int(years[items[e]])
            by_raw.setdefault((raw_key(texts[e]), None if y == NO_YEAR else y), []).append(e)
        entry_years = years[entry_item]
        known = np.flatnonzero(entry_years != NO_YEAR)
        year_order = known[np.argsort(entry_years[known], kind="stable")]
        return cls(
            item_ids=df["item_id"].to_list(),
            titles=titles,
            years=years,
            prio=prio,
            entry_item=entry_item,
            entry_alias=np.asarray(alias, dtype=bool),
            entry_key=keys,
            entry_text=texts,
            entry_sig=np.asarray(sigs, dtype=np.int64),
            entry_len=np.asarray([len(k) for k in keys], dtype=np.int64),
            entry_plural=np.asarray(plurals, dtype=np.int64),
            plural_ids=plural_ids,
            by_key=by_key,
            by_bare=by_bare,
            by_head=by_head,
            by_raw=by_raw,
            year_order=year_order,
            year_sorted=entry_years[year_order],
            no_year=np.flatnonzero(entry_years == NO_YEAR),
            sig_ids=sig_ids,
        )

    def year_of(self, item: int) -> int | None:
        y = int(self.years[item])
        return None if y == NO_YEAR else y

    def year_gap(self, item: int, year: int | None) -> int | None:
        """|year - item year|, or None when either is unknown (compatible with anything)."""
        y = int(self.years[item])
        return None if year is None or y == NO_YEAR else abs(year - y)

    def rank(self, entries: list[int], year: int | None, tol: int) -> tuple[list[int], list[int]]:
        """Split ``entries`` (in dict order) into (year-compatible, best first; incompatible)."""
        ok: list[tuple[int, int, int, int]] = []
        bad: list[int] = []
        for pos, e in enumerate(entries):
            gap = self.year_gap(int(self.entry_item[e]), year)
            if gap is None:
                ok.append((1, 0, pos, e))
            elif gap <= tol:
                ok.append((0, gap, pos, e))
            else:
                bad.append(e)
        ok.sort()
        return [t[3] for t in ok], bad

    def candidates(self, year: int | None, tol: int) -> np.ndarray:
        """Entries whose item is year-compatible with ``year``, in tie-break order (best first)."""
        if year is None:
            cand = np.arange(len(self.entry_key))
            items = self.entry_item[cand]
            return cand[np.lexsort((self.entry_alias[cand], self.prio[items]))]
        lo = np.searchsorted(self.year_sorted, year - tol, side="left")
        hi = np.searchsorted(self.year_sorted, year + tol, side="right")
        cand = np.concatenate([self.year_order[lo:hi], self.no_year])
        items = self.entry_item[cand]
        known = self.years[items] != NO_YEAR
        gap = np.where(known, np.abs(self.years[items].astype(np.int64) - year), 0)
        # Sort keys, last is primary: unknown year last, smaller gap, priority, title before alias.
        return cand[np.lexsort((self.entry_alias[cand], self.prio[items], gap, ~known))]
