"""A slow, character-by-character reference for ``catalog.published`` (Rank-GRPO's reward slots and hits).

Written from the rules in ``catalog.published``'s docstring with no regular expression and no shared
code: every step is a loop over characters (``str.isspace`` for whitespace, ``str.isdecimal`` for
digits), the catalog test a scan over every catalog row, and the hit rule a count per (folded title,
year) of the responder's items, decremented as slots consume them (no ids). Tests and the scoring
oracle (``remark.oracles.scorer``) only.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["loop_hits", "loop_slots", "loop_verbatim_id"]

_DECOR = set("*_-#")
_MARKS = set(".)、-—–")
_QUOTES = ('"', "'")


def _strip(s: str) -> str:
    a, b = 0, len(s)
    while a < b and s[a].isspace():
        a += 1
    while b > a and s[b - 1].isspace():
        b -= 1
    return s[a:b]


def _squeeze(s: str) -> str:
    out, in_space = [], False
    for c in _strip(s):
        if c.isspace():
            if not in_space:
                out.append(" ")
            in_space = True
        else:
            out.append(c)
            in_space = False
    return "".join(out)


def _cut_decor_front(s: str) -> str:
    i = 0
    while i < len(s) and s[i] in _DECOR:
        i += 1
    return s[i:]


def _cut_decor_back(s: str) -> str:
    j = len(s)
    while j > 0 and s[j - 1] in _DECOR:
        j -= 1
    return s[:j]


def _cut_marker(s: str) -> str:
    """One leading bullet (decoration + whitespace) or number (digits, spaces, a mark, whitespace)."""
    i = 0
    while i < len(s) and s[i] in _DECOR:
        i += 1
    if i > 0:
        j = i
        while j < len(s) and s[j].isspace():
            j += 1
        return s[j:] if j > i else s
    while i < len(s) and s[i].isdecimal():
        i += 1
    if i == 0:
        return s
    while i < len(s) and s[i].isspace():
        i += 1
    if i >= len(s) or s[i] not in _MARKS:
        return s
    j = i + 1
    while j < len(s) and s[j].isspace():
        j += 1
    return s[j:] if j > i + 1 else s


def _cut_hashes(s: str) -> str:
    i = 0
    while i < len(s) and s[i] == "#":
        i += 1
    if i == 0:
        return s
    while i < len(s) and s[i].isspace():
        i += 1
    return s[i:]


def _undecorate(s: str) -> str:
    s = _strip(s)
    while True:
        t = _cut_hashes(_strip(_cut_marker(_strip(_cut_decor_back(_strip(_cut_decor_front(s)))))))
        if t == s:
            return s
        s = t


def _unquote(s: str) -> str:
    for q in _QUOTES:
        if len(s) >= 1 and s[0] == q and s[-1] == q:
            return s[1:-1]
    return s


def _drop_groups(s: str) -> str:
    """Delete every ``( ... )`` holding no parenthesis, scanning left to right."""
    out, i = [], 0
    while i < len(s):
        if s[i] == "(":
            j = i + 1
            while j < len(s) and s[j] not in "()":
                j += 1
            if j < len(s) and s[j] == ")":
                i = j + 1
                continue
        out.append(s[i])
        i += 1
    return "".join(out)


def _split_title_year(s: str) -> tuple[str, int] | None:
    """The shortest non-empty head followed by whitespace, "(", four digits, ")" (at the start of ``s``)."""
    for end in range(1, len(s)):
        if not s[end].isspace():
            continue
        j = end
        while j < len(s) and s[j].isspace():
            j += 1
        digits = s[j + 1 : j + 5]
        if (
            j < len(s)
            and s[j] == "("
            and len(digits) == 4
            and all(c.isdecimal() for c in digits)
            and s[j + 5 : j + 6] == ")"
        ):
            return s[:end], int(digits)
    return None


def loop_slots(text: str) -> list[tuple[str, int]]:
    """(title, year) of every line of ``text`` that Rank-GRPO's parser keeps, in order."""
    lines, current = [], []
    for c in text + "\n":
        if c == "\n":
            lines.append("".join(current))
            current = []
        else:
            current.append(c)
    out = []
    for raw in lines:
        line = _strip(raw)
        if not line:
            continue
        found = _split_title_year(_unquote(_undecorate(_squeeze(line))))
        if found is None:
            continue
        title, year = found
        while True:
            nxt = _unquote(_undecorate(_squeeze(_drop_groups(_strip(title)))))
            if nxt == title:
                break
            title = nxt
        out.append((title, year))
    return out


def loop_verbatim_id(rows: Sequence[tuple[str, str, int | None]], title: str, year: int) -> str | None:
    """The id of a catalog row (item_id, title, year) equal to (title, year), scanning every row; among
    equal rows the first in ``rows`` (the caller orders them as ``VerbatimIndex`` prefers)."""
    for item, t, y in rows:
        if y is not None and t == title and y == year:
            return item
    return None


def _fold(s: str) -> str:
    return _squeeze(s).casefold()


def loop_hits(
    slots: Sequence[tuple[str, int]],
    catalog_pairs: set[tuple[str, int]],
    truth: Sequence[tuple[str, int | None]],
    seen_titles: set[str],
    *,
    k: int,
    year_tolerance: int = 2,
) -> list[int]:
    """Rank-GRPO's hit vector (length ``k``) of one list against one responder's (title, year) items."""
    left: dict[tuple[str, int], int] = {}
    for t, y in truth:
        if y is not None:
            left[(_fold(t), y)] = left.get((_fold(t), y), 0) + 1
    hits = [0] * k
    for pos in range(min(k, len(slots))):
        title, year = slots[pos]
        if title in seen_titles or (title, year) not in catalog_pairs:
            continue
        tries = [year]
        for d in range(1, year_tolerance + 1):
            tries += [year + d, year - d]
        for y in tries:
            if left.get((_fold(title), y), 0) > 0:
                left[(_fold(title), y)] -= 1
                hits[pos] = 1
                break
    return hits
