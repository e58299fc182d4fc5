"""Rank-GRPO's reward slots and hit rule, exactly as published (Zhu et al., arXiv 2510.20150; its code:
yaochenzhu/Rank-GRPO, ``libs/utils.py`` and ``libs/metrics_align.py``), for the ``rank_grpo_published``
recipe (``segmentation: newlines``, reward slots ``rank_grpo``; docs/method.md#rank-grpo-as-published).

Which lines are reward slots (:func:`published_slot`, :func:`published_slots`, :func:`published_slots_many`):

- the lines of a completion are its ``"\\n"``-separated pieces, each stripped of whitespace; empty pieces
  are not lines (blank lines are no slot);
- a line is *cleaned*: whitespace runs become one space; then, until nothing changes, a run of ``* _ - #``
  is cut from each end, one list marker is cut from the front (a run of ``* _ - #`` followed by
  whitespace, or digits, optional whitespace, one of ``. ) 、 - — –`` and **required** whitespace),
  and leading ``#``s with the whitespace after them; then one pair of equal ASCII quotes (``"..."`` or
  ``'...'``) around the whole line is dropped;
- the cleaned line is a slot iff it *starts* with at least one character, whitespace, ``(``, four decimal
  digits (any script's), ``)``; the year is those digits, the title the part before the whitespace,
  cleaned again until it stops changing (every innermost ``( ... )`` group deleted, whitespace squeezed,
  the decoration above cut, the quotes dropped);
- every other line is dropped, and later slots move up: the reward's rank k is the k-th *kept* line.

So ``Arrival``, ``Arrival, 2016``, ``Arrival [2016]``, ``Arrival(2016)``, ``Arrival (2016-2017)`` and prose
are dropped; ``1.Arrival (2016)`` (no space after the marker) is a slot titled ``1.Arrival``, which no
catalog holds (a slot that never hits, in place: nothing moves up); ``“Arrival” (2016)`` keeps its curly
quotes and ``#2 Moon (2009)`` is titled ``2 Moon``; ``Here are movies like Arrival (2016):`` is a slot.

Which slots hit (:class:`VerbatimIndex`, :func:`published_credit`), for one responder's items:

- the slot's (title, year) must be a catalog item verbatim (same characters, same case, same year; no
  aliases, no year-less items): :meth:`VerbatimIndex.ids` gives that item's id, else None;
- a slot whose item's title is the title of one of the request's seen items is skipped (Rank-GRPO tests
  the slot's title against the request's seen titles, whatever the year);
- the responder's items are kept as counts per (folded title, year), the fold being whitespace squeezed
  and ``str.casefold``; slot by slot, in order, the first of years y, y + 1, y - 1, y + 2, y - 2, ...
  (up to ``year_tolerance``, Rank-GRPO's 2) with an item left under the slot's folded title is consumed,
  and the slot hits. So a slot can consume a *different* catalog item with the same folded title
  (``Titanic (1997)`` against a responder's ``Titanic (1996)``), a repeated slot can hit again while
  items are left, and only the first K slots are looked at.

:func:`published_credit` returns, per slot, the id of the responder item it consumed (None for a miss):
ids of distinct, unseen items of the responder, so that remark's ``responder`` reward on these ids
(``remark.algos.rewards.responder_reward``: e_k * 1[id in the responder's items]) is Rank-GRPO's hit
vector. ``remark.oracles``' ``OracleScorer`` checks all three against plain loops
(``catalog.oracles.published``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Hashable, Sequence

import polars as pl

from catalog.table import Catalog

__all__ = [
    "VerbatimIndex",
    "fold_title",
    "items_titled",
    "published_credit",
    "published_slot",
    "published_slots",
    "published_slots_many",
]

_SPACES = re.compile(r"\s+")
_DECOR = "*_\\-#"  # the decoration characters, escaped for a character class
_DECOR_HEAD = re.compile(rf"^[{_DECOR}]+")
_DECOR_TAIL = re.compile(rf"[{_DECOR}]+\Z")
_MARKER_HEAD = re.compile(rf"^(?:[{_DECOR}]+\s+|\d+\s*[.)、\-—–]\s+)")
_HASH_HEAD = re.compile(r"^#+\s*")
_PAREN_GROUP = re.compile(r"\([^()]*\)")
_TITLE_YEAR = re.compile(r"(.+?)\s+\((\d{4})\)")
_LINE_CACHE = 1 << 16


def _squeeze(s: str) -> str:
    return _SPACES.sub(" ", s.strip()).strip()


def _undecorate(s: str) -> str:
    s = s.strip()
    while True:
        t = _DECOR_HEAD.sub("", s).strip()
        t = _DECOR_TAIL.sub("", t).strip()
        t = _MARKER_HEAD.sub("", t).strip()
        t = _HASH_HEAD.sub("", t)
        if t == s:
            return s
        s = t


def _unquote(s: str) -> str:
    if s[:1] in ('"', "'") and s.endswith(s[0]):
        return s[1:-1]
    return s


def _clean_title(title: str) -> str:
    while True:
        cleaned = _unquote(_undecorate(_squeeze(_PAREN_GROUP.sub("", title.strip()))))
        if cleaned == title:
            return title
        title = cleaned


@functools.lru_cache(maxsize=_LINE_CACHE)
def published_slot(line: str) -> tuple[str, int] | None:
    """(title, year) of one line if Rank-GRPO's parser keeps it as a reward slot, else None (module
    docstring). ``line`` is one line of a completion (no ``"\\n"``); cached per line."""
    m = _TITLE_YEAR.match(_unquote(_undecorate(_squeeze(line))))
    if m is None:
        return None
    return _clean_title(m.group(1)), int(m.group(2))


def published_slots(text: str) -> list[tuple[str, int]]:
    """The (title, year) of every line of ``text`` that is a reward slot, in order (module docstring)."""
    out = []
    for piece in text.split("\n"):
        line = piece.strip()
        if line:
            slot = published_slot(line)
            if slot is not None:
                out.append(slot)
    return out


def published_slots_many(texts: Sequence[str]) -> list[list[tuple[str, int]]]:
    """:func:`published_slots` of each text (the lines of a batch repeat: each distinct line is parsed once)."""
    return [published_slots(t) for t in texts]


def fold_title(title: str) -> str:
    """Rank-GRPO's title key for the year rule: whitespace runs -> one space, stripped, ``casefold``."""
    return _SPACES.sub(" ", title.strip()).casefold()


class VerbatimIndex:
    """The catalog as Rank-GRPO's set of (title, year) pairs, with each item's folded title and year.

    ``ids(rows)`` maps (title, year) slots to item ids: the pair must be an item's title (as stored in
    ``Catalog.df``) and year, verbatim; aliases and year-less items never match. Two items with one
    (title, year) (a catalog loaded with ``on_duplicate="keep"``) map to the more popular, then the smaller
    id; which one does not change a reward, since the credit compares folded titles and years."""

    def __init__(self, catalog: Catalog) -> None:
        df = catalog.df.select("item_id", "title", "year", "popularity")
        ids, titles, years = df["item_id"].to_list(), df["title"].to_list(), df["year"].to_list()
        self.title_of: dict[Hashable, str] = dict(zip(ids, titles, strict=True))
        #: item id -> (folded title, year); only items with a year (the others never hit)
        self.key_of: dict[Hashable, tuple[str, int]] = {
            i: (fold_title(t), int(y)) for i, t, y in zip(ids, titles, years, strict=True) if y is not None
        }
        ranked = df.filter(pl.col("year").is_not_null()).sort(
            ["popularity", "item_id"], descending=[True, False], nulls_last=True
        )
        self.id_of: dict[tuple[str, int], Hashable] = {}
        for i, t, y in ranked.select("item_id", "title", "year").iter_rows():
            self.id_of.setdefault((t, int(y)), i)

    def __len__(self) -> int:
        return len(self.id_of)

    def ids(self, rows: Sequence[Sequence[tuple[str, int]]]) -> list[list[Hashable | None]]:
        """Per row, the item id of each (title, year) slot, None where the pair is not a catalog item."""
        get = self.id_of.get
        return [list(map(get, row)) for row in rows]


def items_titled(catalog: Catalog, titles: Sequence[str]) -> dict[str, list[str]]:
    """title -> the ids of every catalog item whose title is that string verbatim (catalog order; titles
    that name no item are left out): what a bare seen title names under Rank-GRPO's seen test."""
    wanted = pl.DataFrame({"title": list(dict.fromkeys(titles))}, schema={"title": pl.String})
    hits = catalog.df.select("item_id", "title").join(wanted, on="title", how="semi", maintain_order="left")
    out: dict[str, list[str]] = {}
    for item, title in hits.iter_rows():
        out.setdefault(title, []).append(item)
    return out


def _same(a: object, b: object) -> bool:
    """Two rows' responder (or seen) lists are the same object or hold the same ids."""
    return a is b or list(a) == list(b)  # type: ignore[call-overload]


def _year_order(tolerance: int) -> list[int]:
    """Year offsets in Rank-GRPO's order of preference: 0, +1, -1, +2, -2, ..."""
    return [0, *(d for step in range(1, tolerance + 1) for d in (step, -step))]


def published_credit(
    slot_ids: Sequence[Sequence[Hashable | None]],
    responder_items: Sequence[Sequence[Hashable]],
    seen: Sequence[Sequence[Hashable]],
    *,
    index: VerbatimIndex,
    k: int,
    year_tolerance: int = 2,
) -> list[list[Hashable | None]]:
    """Per row and slot, the responder item the slot consumes under Rank-GRPO's rule, else None.

    ``slot_ids``: per row, :meth:`VerbatimIndex.ids` of its slots; ``responder_items``: per row, the items
    of the responder it is scored against; ``seen``: per row, the request's seen item ids. Slots past ``k``
    are never looked at (None). Rule (module docstring): skip a slot with no id or whose title is a seen
    item's title; otherwise consume the first of years y, y+1, y-1, ..., y +- ``year_tolerance`` left under
    the slot's folded title among the responder's items (each item once, in the responder's order).
    Returns lists as long as ``slot_ids``' rows. Rows that share their responder and seen lists (a group's
    G rows) share the work of building the items' counts.
    """
    if year_tolerance < 0:
        raise ValueError(f"year_tolerance must be >= 0, got {year_tolerance}")
    if not len(slot_ids) == len(responder_items) == len(seen):
        raise ValueError(
            f"slot_ids has {len(slot_ids)} rows, responder_items {len(responder_items)} and seen {len(seen)}: "
            "pass one entry per completion row"
        )
    order = _year_order(year_tolerance)
    key_of, title_of = index.key_of, index.title_of
    out: list[list[Hashable | None]] = []
    shared: tuple[object, object, dict, frozenset] | None = None  # the previous row's counts
    for slots, items, seen_r in zip(slot_ids, responder_items, seen, strict=True):
        if shared is None or not (_same(shared[0], items) and _same(shared[1], seen_r)):
            counts: dict[str, dict[int, list[Hashable]]] = {}
            for item in items:
                key = key_of.get(item)
                if key is not None:
                    counts.setdefault(key[0], {}).setdefault(key[1], []).append(item)
            seen_titles = frozenset(title_of[i] for i in seen_r if i in title_of)
            shared = (items, seen_r, counts, seen_titles)
        _, _, counts, seen_titles = shared
        credited: list[Hashable | None] = [None] * len(slots)
        if counts:
            left = {t: {y: list(v) for y, v in by_year.items()} for t, by_year in counts.items()}
            for j, sid in enumerate(slots[:k]):
                key = key_of.get(sid) if sid is not None else None
                if key is None:
                    continue
                by_year = left.get(key[0])
                if not by_year or title_of[sid] in seen_titles:
                    continue
                for d in order:
                    pool = by_year.get(key[1] + d)
                    if pool:
                        credited[j] = pool.pop(0)
                        if not pool:
                            del by_year[key[1] + d]
                        break
        out.append(credited)
    return out
