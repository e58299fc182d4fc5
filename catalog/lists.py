"""A batch of generated lists, parsed into columns: what the trainer's scoring reads.

``parse_lists(completions)`` gives the lines ``catalog.parse.parse_list`` gives each completion, by the
same rules and helpers (``_spans``, ``features_many``, ``preamble_len``), as one :class:`ParsedLists`:
flat columns over every rank line of every list (``starts``, ``ends``, ``texts``, ``titles``,
``years``) and ``n_lines`` per list. Why columns: a batch of 256 lists of 20 lines is 5,120 lines per
step, and the scorer needs only their spans (token ranks) and their (title, year) (grounding); building
5,120 ``ParsedLine`` objects per step, and sending them between processes, cost more than parsing them
once the lines are cached. The objects are still there for whoever asks: a :class:`ParsedLists` is a
sequence of rows, each a ``list[ParsedLine]``, built on first access (``rows()``), equal to
``[parse_list(c) for c in completions]``.
"""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Callable, Iterator, Sequence

from catalog.parse import (
    _CACHE_MAX_LEN,
    _CACHE_SIZE,
    _SIMPLE,
    _TRIM,
    ParsedLine,
    _features_of,
    _line_features_cached,
    _new_parsed_line,
    _numbered_features_cached,
    _spans,
    _title_year_cached,
    preamble_len,
)

__all__ = ["ParsedLists", "clear_caches", "parse_lists", "title_years"]

_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)


class ParsedLists(Sequence):
    """R parsed lists as columns (L = all rank lines, row by row, in rank order within a row).

    ``n_lines`` (R ints), ``starts`` / ``ends`` (L ints, character spans in the row's completion),
    ``texts`` (L stripped line texts), ``titles`` (L, None when unparsed), ``years`` (L, None without a
    year). A line's rank is its position within its row. Indexing or iterating gives the rows as
    ``list[ParsedLine]`` (built once, on first use).
    """

    __slots__ = ("_rows", "ends", "n_lines", "starts", "texts", "titles", "years")

    def __init__(
        self,
        n_lines: list[int],
        starts: list[int],
        ends: list[int],
        texts: list[str],
        titles: list[str | None],
        years: list[int | None],
    ) -> None:
        n = sum(n_lines)
        if not (len(starts) == len(ends) == len(texts) == len(titles) == len(years) == n):
            raise ValueError(
                f"ParsedLists columns must all hold sum(n_lines) = {n} lines, got starts {len(starts)}, "
                f"ends {len(ends)}, texts {len(texts)}, titles {len(titles)}, years {len(years)}"
            )
        self.n_lines, self.starts, self.ends = n_lines, starts, ends
        self.texts, self.titles, self.years = texts, titles, years
        self._rows: list[list[ParsedLine]] | None = None

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[ParsedLine]]) -> ParsedLists:
        """Columns of rows of ``ParsedLine`` (ranks must be 0, 1, ... within each row)."""
        if isinstance(rows, ParsedLists):
            return rows
        flat = list(itertools.chain.from_iterable(rows))
        for row in rows:
            if [ln.rank for ln in row] != list(range(len(row))):
                raise ValueError("ParsedLists.from_rows: each row's ranks must be 0, 1, 2, ... in order")
        out = cls(
            [len(r) for r in rows],
            [ln.start for ln in flat],
            [ln.end for ln in flat],
            [ln.text for ln in flat],
            [ln.title for ln in flat],
            [ln.year for ln in flat],
        )
        out._rows = [list(r) for r in rows]
        return out

    @classmethod
    def concat(cls, parts: Sequence[ParsedLists]) -> ParsedLists:
        """The rows of ``parts``, in order, as one ``ParsedLists``."""
        chain = itertools.chain.from_iterable
        return cls(
            list(chain(p.n_lines for p in parts)),
            list(chain(p.starts for p in parts)),
            list(chain(p.ends for p in parts)),
            list(chain(p.texts for p in parts)),
            list(chain(p.titles for p in parts)),
            list(chain(p.years for p in parts)),
        )

    def row_bounds(self) -> list[int]:
        """R + 1 offsets into the columns: row r's lines are ``[bounds[r], bounds[r + 1])``."""
        return [0, *itertools.accumulate(self.n_lines)]

    def split(self, values: Sequence) -> list[list]:
        """A column of L values (one per line, e.g. grounded ids) cut into R rows."""
        b = self.row_bounds()
        if len(values) != b[-1]:
            raise ValueError(f"split: {len(values)} values for {b[-1]} lines (one value per line)")
        return [list(values[b[r] : b[r + 1]]) for r in range(len(self.n_lines))]

    def rows(self) -> list[list[ParsedLine]]:
        """The rows as ``list[ParsedLine]`` (what ``parse_list`` returns for each completion)."""
        if self._rows is None:
            b = self.row_bounds()
            self._rows = [
                list(
                    map(
                        _new_parsed_line,
                        range(hi - lo),
                        self.starts[lo:hi],
                        self.ends[lo:hi],
                        self.texts[lo:hi],
                        self.titles[lo:hi],
                        self.years[lo:hi],
                    )
                )
                for lo, hi in itertools.pairwise(b)
            ]
        return self._rows

    def __len__(self) -> int:
        return len(self.n_lines)

    def __getitem__(self, i):  # type: ignore[override]
        return self.rows()[i]

    def __iter__(self) -> Iterator[list[ParsedLine]]:
        return iter(self.rows())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ParsedLists):
            return all(
                getattr(self, name) == getattr(other, name)
                for name in ("n_lines", "starts", "ends", "texts", "titles", "years")
            )
        if isinstance(other, Sequence):
            return self.rows() == [list(r) for r in other]
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ParsedLists({len(self.n_lines)} rows, {len(self.texts)} lines)"


def parse_lists(completions: Sequence[str]) -> ParsedLists:
    """``[parse_list(c) for c in completions]`` as one :class:`ParsedLists` (no ``max_items``).

    One pass: every completion's lines are split (``_spans``), each list drops its preamble
    (``preamble_len``: for the usual list it reads the first line only), and the (title, year) of all
    kept lines come from one :func:`title_years` call.
    """
    spans = [_spans(c) if c else ([], [], []) for c in completions]
    long: dict[str, tuple] = {}  # features of long first lines (uncached): read again for their titles

    def features(text: str) -> tuple:
        if len(text) <= _CACHE_MAX_LEN:
            return _features_of(text)
        got = long.get(text)
        if got is None:
            got = long[text] = _features_of(text)
        return got

    firsts = [preamble_len(t, features) for t, _, _ in spans]
    chain = itertools.chain.from_iterable
    if any(firsts):
        spans = [(t[f:], s[f:], e[f:]) for f, (t, s, e) in zip(firsts, spans, strict=True)]
    texts = list(chain(s[0] for s in spans))
    ty = title_years(texts, features)
    return ParsedLists(
        [len(s[0]) for s in spans],
        list(chain(s[1] for s in spans)),
        list(chain(s[2] for s in spans)),
        texts,
        list(map(_FIRST, ty)),
        list(map(_SECOND, ty)),
    )


#: (title, year) of each line by its whole text (lines up to ``_CACHE_MAX_LEN`` characters).
_title_year_by_text: dict[str, tuple[str | None, int | None]] = {}


def title_years(
    texts: list[str], features: Callable[[str], tuple] | None = None
) -> list[tuple[str | None, int | None]]:
    """(title, year) of each stripped rank line: ``parse_line``'s answer without the preamble rules
    (``_features_of(text)[1:3]``), a ``dict.get`` per line once the line was seen (the usual lines of a
    group repeat across its G lists and across steps).

    Why no vectorised regex: polars' ``str.extract_groups`` with ``catalog.parse._SIMPLE``'s pattern
    measured slower than Python's ``re`` per line (bench/RESULTS.md, "Scoring").
    """
    got = list(map(_title_year_by_text.get, texts))
    if None not in got:
        return got  # type: ignore[return-value]
    todo = list(dict.fromkeys(itertools.compress(texts, map(operator.is_, got, itertools.repeat(None)))))
    answers = dict(zip(todo, _uncached(todo, features or _features_of), strict=True))
    cache = _title_year_by_text
    if len(cache) + len(todo) > _CACHE_SIZE:
        cache.clear()
    if max(map(len, todo)) <= _CACHE_MAX_LEN:
        cache.update(answers)
    else:
        cache.update((t, a) for t, a in answers.items() if len(t) <= _CACHE_MAX_LEN)
    return list(map(answers.get, texts, got))  # a new line's answer, else the cached one


#: The "N. " marker ``_features_of`` reads as a numbered line (1-3 ASCII digits, a period, a space:
#: ``text.find(". ", 1, 5)`` after ASCII digits only), after each newline of "\n" + the joined lines
#: (a literal first character lets ``re`` jump between candidates; ``^`` with MULTILINE tries every
#: position, and is slower: bench/RESULTS.md).
_MARKER = re.compile(r"\n[0-9]{1,3}\. ")


def _uncached(
    texts: list[str], features: Callable[[str], tuple] = _features_of
) -> list[tuple[str | None, int | None]]:
    """``features(text)[1:3]`` (default ``_features_of``) for each line, the usual item read once per
    distinct *rest*: the line without its "N. " marker (one ``_MARKER.sub`` over all the lines joined),
    so that "3. Alien (1979) - x" and "7. Alien (1979) - x" are one regex call. A rest that
    ``_SIMPLE`` matches whole is read as ``_simple`` reads it (title stripped of ``_TRIM``, year): that is
    ``_features_of``'s answer for the line, whose body is the rest (a numbered line is read by its rest,
    another line by itself, and the marker flag changes neither title nor year). The pattern is tried,
    as ``_simple`` tries it, only on rests holding " (" (on a long line without one, e.g. random tokens,
    the title group would backtrack over the whole line), and only for lines of up to
    ``_CACHE_MAX_LEN`` characters (``_features_of`` reads longer ones unnumbered); every other line
    goes to ``features``."""
    limit = _CACHE_MAX_LEN
    every = max(map(len, texts), default=0) <= limit
    short = texts if every else [t for t in texts if len(t) <= limit]  # (a long line is not joined)
    rests = _MARKER.sub("\n", "\n" + "\n".join(short)).split("\n")[1:] if short else []
    if len(rests) != len(short):
        raise ValueError("title_years reads single lines: one of the texts holds a newline")
    tried = dict.fromkeys(itertools.compress(rests, map(operator.contains, rests, itertools.repeat(" ("))))
    items = {
        r: (m.group(1).strip(_TRIM), int(m.group(2)))
        for r, m in zip(tried, map(_SIMPLE.fullmatch, tried))
        if m is not None
    }
    if every:  # rests are aligned with texts
        out = list(map(items.get, rests))
    else:  # a long line has no rest: None
        out = list(map(items.get, map(dict(zip(short, rests, strict=True)).get, texts)))
    for i in list(itertools.compress(range(len(out)), map(operator.is_, out, itertools.repeat(None)))):
        out[i] = features(texts[i])[1:3]
    return out  # type: ignore[return-value]


def clear_caches() -> None:
    """Empty every per-process parse cache (answers never depend on them; benchmarks time cold starts)."""
    _title_year_by_text.clear()
    for cache in (_line_features_cached, _numbered_features_cached, _title_year_cached):
        cache.clear()
