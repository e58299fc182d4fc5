"""Split a generated list into ranked lines, each with its title, optional year and exact character span.

The trainer maps tokens to ranks with these spans, and rewards are computed on the same lines, so the
two can never disagree. Rules:

- Lines are separated by "\\n" (a trailing "\\r" is stripped). ``[start, end)`` is the span of the
  line's content with surrounding whitespace excluded: ``completion[start:end] == text``.
- Blank lines are not ranks. A *preamble* before the first item is not a rank: a line ending with ":"
  ("Here are 20 movies you might like:"), a markdown heading, a chatty opener ("Sure!", "Here are",
  "Based on ..."), or an unmarked line without a year followed by a numbered/bulleted line.
- Every other line is a rank, 0-based, in order, including lines that do not parse (``title=None``:
  nothing alphanumeric left, or a section header such as "**Sci-fi:**"), so ranks never shift.
- Cleaning: markdown emphasis (``**``, ``__``, ``*``, ``~~``, backticks, ``_word_``) and headings
  (``###``), list markers ("1." "1)" "(1)" "#1" "1 -" "1、", bullets - * • ...), then quotes around the
  line or the title (straight and curly: Rank-GRPO's prompt asks for ``"Title" (Year)``).
- Year: the first "(YYYY)" (or "[YYYY]", "(YYYY-YYYY)") that has text before it; the title is that
  text and the rest of the line (" - blurb", ": blurb") is ignored, so "2001: A Space Odyssey (1968)",
  "Blade Runner 2049 (2017)", "1. 1917 (2019)" and "Birdman (or The Unexpected Virtue of Ignorance)
  (2014)" keep their titles whole. Without a year the whole cleaned line is the title (ProtoQA answers).

Departures from Rank-GRPO (``libs/utils.py::process_rec_raw``): it drops lines that do not match
``(.+?)\\s+\\((\\d{4})\\)`` (ranks shift; we keep them as unparsed ranks), counts a preamble as a line,
requires a year, and deletes every parenthesised group from the title ("Birdman (or ...)" -> "Birdman");
``catalog.match``'s ``exact`` mode applies that deletion when it looks a title up, to stay faithful.

Performance: compiled regexes, one pass, no backtracking-prone patterns; a 10k-line completion parses
in tens of milliseconds. Each distinct line's features are cached per process (``_line_features``, lines
up to ``_CACHE_MAX_LEN`` characters; a line's features depend on its text only, so the cache changes no
answer), and so is the title/year split of each distinct cleaned body. Shortcuts that give the same
answers (tests/catalog/test_fast_paths.py): a list with nothing to strip and no blank line is
split with C loops (``_spans``); the usual item line, "Title (YYYY)" with an optional blurb and no
markdown or quotes, is read by one regex (``_simple``) instead of the general rules.
"""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ParsedLine", "parse_line", "parse_list", "preamble_len"]


@dataclass(frozen=True, slots=True)
class ParsedLine:
    """One ranked line: ``rank`` 0-based; ``completion[start:end] == text``; ``title`` None if unparsed."""

    rank: int
    start: int
    end: int
    text: str
    title: str | None
    year: int | None


def _parsed_line_maker():
    """A ``ParsedLine`` constructor that fills the slots directly: the same object as ``ParsedLine(...)``
    at half the cost of the frozen dataclass ``__init__`` (one ``object.__setattr__`` per field); a list
    of 20 lines x 256 completions builds 5,120 of them per step."""
    new = object.__new__
    setters = [
        ParsedLine.__dict__[name].__set__ for name in ("rank", "start", "end", "text", "title", "year")
    ]
    set_rank, set_start, set_end, set_text, set_title, set_year = setters

    def make(rank: int, start: int, end: int, text: str, title: str | None, year: int | None) -> ParsedLine:
        line = new(ParsedLine)
        set_rank(line, rank)
        set_start(line, start)
        set_end(line, end)
        set_text(line, text)
        set_title(line, title)
        set_year(line, year)
        return line

    return make


_new_parsed_line = _parsed_line_maker()


_HEADING = re.compile(r"^#{1,6}\s+")
_EMPHASIS = re.compile(r"\*+|~~|`+|(?<!\w)_+|_+(?!\w)")
_MARKERS = re.compile(
    r"^(?:"
    r"[-–—+]\s+"  # dash / plus bullets need a space after them
    r"|[•·‣◦▪▫●○■□►▶➤→✓✔]\s*"  # unicode bullets
    r"|\(\d{1,2}\)\s+"  # (1); not "(500) Days of Summer"
    r"|#\s*\d{1,3}\s*[.):\-–—]?\s*"  # #1, #1., #1:, # 1 -
    r"|\d{1,3}\s*[.)\]、](?:\s+|$|(?=[^\d\s]))"  # 1.  1)  1]  1、 (not "1.5", not "2001:")
    r"|\d{1,3}\s+[-–—]\s+"  # 1 - Title
    r")"
)
# "(1999)", "[1999]", "(1999-2003)", "(2016, Denis Villeneuve)"; bounded, so no runaway backtracking.
_YEAR = re.compile(r"[(\[]\s*(\d{4})\s*(?:[)\]]|[,;/\-–—]\s*[^()\[\]]{0,80}?[)\]])")
_QUOTES = {'"': '"', "'": "'", "“": "”", "”": "”", "‘": "’", "’": "’", "„": "“", "«": "»", "`": "`"}
_DOUBLE_QUOTES = frozenset('"“”„«»')
_TRIM = " \t,;:|-–—.*_~"
_OPENER = re.compile(
    r"^(?:sure|certainly|of course|absolutely|okay|ok|great|here are|here is|here's|heres|based on|"
    r"i recommend|i'd recommend|i would recommend|i suggest|you might|you may|if you|below are|"
    r"these are|the following|some (?:great|good)|recommendations?|my (?:top|picks))\b",
    re.IGNORECASE,
)
_ALNUM = re.compile(r"\w")


def _unquote(s: str) -> str:
    """Remove quote pairs around ``s``, then a lone leading/trailing double quote ('"Arrival' -> 'Arrival')."""
    while len(s) >= 2 and s[0] in _QUOTES and s[-1] == _QUOTES[s[0]]:
        s = s[1:-1].strip()
    if s[:1] in _DOUBLE_QUOTES and not any(c in _DOUBLE_QUOTES for c in s[1:]):
        s = s[1:].lstrip()
    if s[-1:] in _DOUBLE_QUOTES and not any(c in _DOUBLE_QUOTES for c in s[:-1]):
        s = s[:-1].rstrip()
    return s


# First characters a list marker can start with (``_MARKERS`` also starts with ``\d``: any Nd digit).
_MARKER_START = frozenset("-–—+•·‣◦▪▫●○■□►▶➤→✓✔(#")


def _clean(text: str) -> tuple[str, bool, bool]:
    """Strip heading marks, emphasis and list markers: (body, had_marker, is_heading).

    The regexes run only where they can match: ``_HEADING`` on a line starting with "#", ``_MARKERS``
    on a body starting with one of ``_MARKER_START`` or a decimal digit (same answers, fewer regex calls).
    """
    heading = text[:1] == "#" and _HEADING.match(text) is not None
    body = _HEADING.sub("", text) if heading else text
    body, marker = _strip_markers(_unemphasize(body).strip(), 3)
    return body, marker, heading


def _unemphasize(body: str) -> str:
    if "*" in body or "_" in body or "`" in body or "~" in body:
        return _EMPHASIS.sub("", body)
    return body


def _strip_markers(body: str, tries: int) -> tuple[str, bool]:
    """Strip up to ``tries`` list markers ("- 1. Title", "1. - Title"): (body, stripped any)."""
    marker = False
    for _ in range(tries):
        c = body[:1]
        if not c or not (c in _MARKER_START or c.isdecimal()):
            break
        m = _MARKERS.match(body)
        if m is None or m.end() == 0:
            break
        marker = True
        body = body[m.end() :].strip()
    return body, marker


def _title_year(body: str) -> tuple[str | None, int | None]:
    """(title or None, year or None) of a cleaned line body (a pure function of ``body``)."""
    body = _unquote(body)
    year = None
    for m in _YEAR.finditer(body) if "(" in body or "[" in body else ():
        before = body[: m.start()]
        if _ALNUM.search(before):
            year = int(m.group(1))
            body = before
            break
    title = _unquote(body.strip(_TRIM))
    title = title.strip(_TRIM)
    if not _ALNUM.search(title):
        return None, year
    return title, year


def parse_line(text: str) -> tuple[str | None, int | None]:
    """Parse one line (markers, markdown, quotes, year) into (title or None, year or None).

    >>> parse_line('**1. "Arrival" (2016)** - a linguist decodes an alien language')
    ('Arrival', 2016)
    >>> parse_line("#3 Birdman (or The Unexpected Virtue of Ignorance) (2014)")
    ('Birdman (or The Unexpected Virtue of Ignorance)', 2014)
    >>> parse_line("- a toothbrush")
    ('a toothbrush', None)
    """
    body, _, _ = _clean(text.strip())
    return _title_year(body)


def _line_features(text: str) -> tuple[str, str | None, int | None, bool, bool, bool]:
    """(body, title, year, marker, heading, colon) of one stripped line: a pure function of its text."""
    return _simple(text, False) or _general_features(text)


def _general_features(text: str) -> tuple[str, str | None, int | None, bool, bool, bool]:
    body, marker, heading = _clean(text)
    return _finish(body, marker, heading)


#: The usual item, "Title (YYYY)" or "Title (YYYY) - blurb": an ASCII letter first, no emphasis mark,
#: quote, bracket or parenthesis in the title, no ``*_`~`` anywhere (``_simple``). The title is greedy: it
#: cannot hold "(", so it ends before the first one, and a single-character repeat is sre's fast loop.
_SIMPLE = re.compile(r"([A-Za-z][^*_`~()\[\]\"'“”‘’„«»]*) \((\d{4})\)[^*_`~]*")


def _simple(body: str, marker: bool) -> tuple[str, str | None, int | None, bool, bool, bool] | None:
    """The features of a stripped body that ``_SIMPLE`` matches whole, None for any other body: what
    ``_clean`` and ``_finish`` give, in one regex (tests/catalog/test_fast_paths.py checks it).

    Why it is the same: no emphasis character, so nothing comes off; a letter first, so no heading and no
    list marker; the first "(" or "[" is the one before the year, so it is ``_YEAR``'s first match, with
    a letter before it; no quote in the title and a letter first, so ``_unquote`` leaves the part before
    the year alone (a quote in the blurb only changes what follows the year); the title is that part
    stripped of ``_TRIM``. ``colon`` is computed as ``_finish`` does (the preamble rule reads it).
    """
    m = _SIMPLE.fullmatch(body) if " (" in body else None
    if m is None:
        return None
    return body, m.group(1).strip(_TRIM), int(m.group(2)), marker, False, body.rstrip(" *_").endswith(":")


def _numbered_features(rest: str) -> tuple[str, str | None, int | None, bool, bool, bool]:
    """``_line_features("N. " + rest)`` for N of 1-3 ASCII digits, computed from ``rest`` alone.

    Why it is the same: the line starts with a digit, so it is no heading; "N. " holds no emphasis
    character, so emphasis comes off ``rest`` alone (the "_" look-behind sees a space or the start, both
    non-word); after the strip the first marker match is "N." plus every following space (or "N." then
    the end, when nothing else is left), which leaves ``rest``'s stripped body with two marker tries to go.
    """
    got = _simple(rest, True)
    if got is not None:
        return got
    body, _ = _strip_markers(_unemphasize(rest).strip(), 2)
    return _finish(body, True, False)


def _finish(body: str, marker: bool, heading: bool) -> tuple[str, str | None, int | None, bool, bool, bool]:
    title, year = _title_year_cached(body) if len(body) <= _CACHE_MAX_LEN else _title_year(body)
    colon = body.rstrip(" *_").endswith(":")
    if year is None and (colon or (heading and not marker)):
        title = None  # a section header, not an item
    return body, title, year, marker, heading, colon


#: Lines up to this many characters are cached (a list's lines are short and repeat across the G lists
#: of a group and across steps; a long unbroken run of text, e.g. random tokens, is rarely seen twice).
_CACHE_MAX_LEN = 400
_CACHE_SIZE = 1 << 16  # entries per cache; a full cache is emptied (answers never depend on it)


class _Cache(dict):
    """``fn(key)`` memoised in a plain dict, emptied when it holds ``_CACHE_SIZE`` entries. A dict of str
    keys and tuples of str/int/None is left alone by the cyclic garbage collector once its tuples are
    untracked, where ``functools.lru_cache``'s 65k linked-list nodes stay tracked and slow every full
    collection of the training process."""

    def __init__(self, fn: Callable[[str], Any]) -> None:
        super().__init__()
        self.fn = fn

    def __call__(self, key: str) -> Any:
        got = self.get(key)
        if got is None:
            if len(self) >= _CACHE_SIZE:
                self.clear()
            got = self[key] = self.fn(key)
        return got

    def cache_clear(self) -> None:
        self.clear()


_line_features_cached = _Cache(_line_features)
_numbered_features_cached = _Cache(_numbered_features)
_title_year_cached = _Cache(_title_year)


def _features_of(text: str) -> tuple[str, str | None, int | None, bool, bool, bool]:
    """``_line_features(text)`` through the caches: "N. rest" is keyed by ``rest`` ("3. Alien (1979)" and
    "7. Alien (1979)" share an entry), other lines by their text; lines past ``_CACHE_MAX_LEN`` uncached."""
    if len(text) > _CACHE_MAX_LEN:
        return _line_features(text)
    dot = text.find(". ", 1, 5)
    if dot > 0 and text[:dot].isdigit() and text[:dot].isascii():
        rest = text[dot + 2 :]
        return _numbered_get(rest) or _numbered_features_cached(rest)
    return _line_get(text) or _line_features_cached(text)


_numbered_get = _numbered_features_cached.get  # a hit without the _Cache.__call__ frame
_line_get = _line_features_cached.get


Features = tuple[str, str | None, int | None, bool, bool, bool]  # (body, title, year, marker, heading, colon)


def _is_preamble(line: Features, nxt: Features | None) -> bool:
    body, _, year, marker, heading, colon = line
    if marker:
        return False
    if colon or (heading and year is None):
        return True
    if _OPENER.match(body):
        return True
    return year is None and nxt is not None and nxt[3]


def preamble_len(texts: list[str], features: Callable[[str], Features] | None = None) -> int:
    """How many of a list's stripped lines ``texts`` (in order) are preamble: lines before the first
    rank (see the module docstring). Features (``features``, default ``_features_of``) are computed as
    they are needed: for the usual list, whose first line has a list marker, only the first line's."""
    features = features or _features_of
    n, first = len(texts), 0
    line = features(texts[0]) if n else None
    while line is not None and not line[3]:  # a line with a list marker is never preamble
        nxt = features(texts[first + 1]) if first + 1 < n else None
        if not _is_preamble(line, nxt):
            break
        first += 1
        line = nxt
    return first


def parse_list(completion: str, *, max_items: int | None = None) -> list[ParsedLine]:
    """Split ``completion`` into ranked lines (see the module docstring for the rules).

    ``max_items`` stops after that many ranks. ``catalog.lists.parse_lists`` parses a batch of
    completions by the same rules, into columns.

    >>> [(p.rank, p.title, p.year) for p in parse_list("Here you go:\\n\\n1. Alien (1979)\\n2. ???\\n3. Heat")]
    [(0, 'Alien', 1979), (1, None, None), (2, 'Heat', None)]
    """
    if max_items is not None and max_items <= 0:
        return []
    if not completion:
        return []
    texts, starts, ends = _spans(completion)
    n = len(texts)
    first = preamble_len(texts)
    stop = n if max_items is None else min(n, first + max_items)
    if first or stop < n:
        texts, starts, ends = texts[first:stop], starts[first:stop], ends[first:stop]
    feats = list(map(_features_of, texts))
    return list(
        map(
            _new_parsed_line, range(len(texts)), starts, ends, texts, map(_TITLE, feats), map(_YEAR_OF, feats)
        )
    )


_TITLE, _YEAR_OF = operator.itemgetter(1), operator.itemgetter(2)


def _spans(completion: str) -> tuple[list[str], list[int], list[int]]:
    """(text, start, end) of each non-blank line, stripped: ``completion[start:end] == text``.

    When no line needs stripping and none is blank (the usual list), the lines are
    ``completion.split("\\n")`` as they are and the spans are running sums of their lengths (C loops:
    ``str.strip`` returns the very string when there is nothing to strip); otherwise the lines are
    walked in Python as before. Both give the same spans (tests/catalog/test_fast_paths.py).
    """
    raws = completion.split("\n")
    stripped = list(map(str.strip, raws))
    if stripped == raws and "" not in raws:
        lens = list(map(len, raws))
        ends = list(map(operator.add, itertools.accumulate(lens), range(len(raws))))
        return raws, list(map(operator.sub, ends, lens)), ends
    texts, starts, ends = [], [], []
    pos = 0
    for raw, text in zip(raws, stripped, strict=True):
        if text:
            start = pos + (len(raw) - len(raw.lstrip()))
            texts.append(text)
            starts.append(start)
            ends.append(start + len(text))
        pos += len(raw) + 1
    return texts, starts, ends
