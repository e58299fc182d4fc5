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
in tens of milliseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ParsedLine", "parse_line", "parse_list"]


@dataclass(frozen=True, slots=True)
class ParsedLine:
    """One ranked line: ``rank`` 0-based; ``completion[start:end] == text``; ``title`` None if unparsed."""

    rank: int
    start: int
    end: int
    text: str
    title: str | None
    year: int | None


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


def _clean(text: str) -> tuple[str, bool, bool]:
    """Strip heading marks, emphasis and list markers: (body, had_marker, is_heading)."""
    heading = _HEADING.match(text) is not None
    body = _HEADING.sub("", text) if heading else text
    if "*" in body or "_" in body or "`" in body or "~" in body:
        body = _EMPHASIS.sub("", body)
    body = body.strip()
    marker = False
    for _ in range(3):  # "- 1. Title", "1. - Title"
        m = _MARKERS.match(body)
        if m is None or m.end() == 0:
            break
        marker = True
        body = body[m.end() :].strip()
    return body, marker, heading


def _title_year(body: str) -> tuple[str | None, int | None]:
    body = _unquote(body)
    year = None
    for m in _YEAR.finditer(body):
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


@dataclass(slots=True)
class _Line:
    start: int
    end: int
    text: str
    body: str
    title: str | None
    year: int | None
    marker: bool
    heading: bool
    colon: bool


def _features(completion: str, start: int, end: int) -> _Line:
    text = completion[start:end]
    body, marker, heading = _clean(text)
    title, year = _title_year(body)
    colon = body.rstrip(" *_").endswith(":")
    if year is None and (colon or (heading and not marker)):
        title = None  # a section header, not an item
    return _Line(start, end, text, body, title, year, marker, heading, colon)


def _is_preamble(line: _Line, nxt: _Line | None) -> bool:
    if line.marker:
        return False
    if line.colon or (line.heading and line.year is None):
        return True
    if _OPENER.match(line.body):
        return True
    return line.year is None and nxt is not None and nxt.marker


def parse_list(completion: str, *, max_items: int | None = None) -> list[ParsedLine]:
    """Split ``completion`` into ranked lines (see the module docstring for the rules).

    ``max_items`` stops after that many ranks (the rest of the completion is not parsed).

    >>> [(p.rank, p.title, p.year) for p in parse_list("Here you go:\\n\\n1. Alien (1979)\\n2. ???\\n3. Heat")]
    [(0, 'Alien', 1979), (1, None, None), (2, 'Heat', None)]
    """
    if max_items is not None and max_items <= 0:
        return []
    spans: list[tuple[int, int]] = []
    pos = 0
    for raw in completion.split("\n"):
        stripped = raw.strip()
        if stripped:
            start = pos + (len(raw) - len(raw.lstrip()))
            spans.append((start, start + len(stripped)))
        pos += len(raw) + 1

    out: list[ParsedLine] = []
    cache: dict[int, _Line] = {}

    def line_at(i: int) -> _Line | None:
        if i >= len(spans):
            return None
        if i not in cache:
            cache[i] = _features(completion, *spans[i])
        return cache[i]

    in_preamble = True
    for i in range(len(spans)):
        line = line_at(i)
        assert line is not None
        if in_preamble:
            if _is_preamble(line, line_at(i + 1)):
                continue
            in_preamble = False
        out.append(ParsedLine(len(out), line.start, line.end, line.text, line.title, line.year))
        cache.pop(i, None)
        if max_items is not None and len(out) >= max_items:
            break
    return out
