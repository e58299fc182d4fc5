"""Title normalisation: the key that exact grounding compares, and the string fuzzy grounding scores.

``normalize_title`` folds what differs between two spellings of the same title and nothing else:

1. unicode NFKC, then accents stripped (NFKD without combining marks: "Amélie" == "Amelie"), casefold;
2. quotes, apostrophes and periods deleted ("Ocean's" == "Oceans", "E.T." == "ET", "'71" == "71");
   a hyphen between two word characters deleted ("Spider-Man" == "Spiderman"); "&" -> "and";
3. every other punctuation or symbol run -> one space, whitespace collapsed;
4. a trailing article moved to the front ("Matrix, The" == "The Matrix"; also ", A" and ", An").

Departure from Rank-GRPO: its matcher only casefolds and collapses whitespace (``exact`` mode in
``catalog.match`` keeps that); ``fuzzy`` mode compares these folded keys.

``split_title_year`` reads a catalog entry "Title (Year)" (ReDial writes "Title  (Year)" with two
spaces, Reddit-Movie "Title (Year)"); list lines from a model go through ``catalog.parse`` instead.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import lru_cache

import numpy as np

# "matrix, the" (checked after casefolding, before punctuation is folded away).
_TRAILING_ARTICLE = re.compile(r"^(?P<body>.+?)\s*,\s*(?P<art>the|a|an)[\W_]*$", re.DOTALL)
# Deleted outright (no space): straight and curly quotes, apostrophes, backticks, periods.
_DELETE = re.compile(r"[\"'`´‘’‚‛“”„‟′″«»‹›.]")
# A hyphen/dash between two word characters joins them: "spider-man" -> "spiderman".
_INNER_HYPHEN = re.compile(r"(?<=\w)[-‐‑‒](?=\w)")
# Anything that is not a letter or digit (unicode aware; "_" counts as punctuation) -> one space.
_NON_WORD = re.compile(r"[\W_]+")
_YEAR_AT_END = re.compile(r"^(?P<title>.*?)\s*\(\s*(?P<year>\d{4})\s*\)\s*$", re.DOTALL)


@lru_cache(maxsize=1)
def _combining_table() -> np.ndarray:
    """bool per code point: ``unicodedata.combining(chr(c)) != 0``, over all of Unicode (built once per
    process, on the first long non-ASCII string; its cost is in bench/RESULTS.md)."""
    table = np.zeros(sys.maxunicode + 1, dtype=bool)
    table[[c for c in range(sys.maxunicode + 1) if unicodedata.combining(chr(c))]] = True
    return table


def _strip_accents(s: str) -> str:
    """NFKD, then every character with a non-zero combining class deleted.

    Strings of more than ``_SHORT`` characters are filtered with one table look-up over their code points
    (numpy) instead of a Python loop per character: a long line of random tokens is full of U+FFFD and
    never ASCII. Both branches delete exactly the characters ``unicodedata.combining`` flags.
    """
    decomposed = unicodedata.normalize("NFKD", s)
    if decomposed.isascii():
        return decomposed
    if len(decomposed) <= _SHORT:
        return "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    points = np.frombuffer(decomposed.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    marks = _combining_table()[points]
    if not marks.any():
        return decomposed
    return points[~marks].tobytes().decode("utf-32-le", "surrogatepass")


_SHORT = 48


@lru_cache(maxsize=1 << 16)
def normalize_title(s: str) -> str:
    """Fold a title into its comparison key ("" when nothing alphanumeric is left).

    >>> normalize_title("Matrix, The")
    'the matrix'
    >>> normalize_title("  “Amélie”  ")
    'amelie'
    >>> normalize_title("Spider-Man: Into the Spider-Verse")
    'spiderman into the spiderverse'
    >>> normalize_title("Fast & Furious")
    'fast and furious'
    """
    if not s:
        return ""
    t = unicodedata.normalize("NFKC", s)
    t = _strip_accents(t).casefold()
    m = _TRAILING_ARTICLE.match(t) if "," in t else None  # the pattern needs a comma
    if m:
        t = f"{m.group('art')} {m.group('body')}"
    t = t.replace("&", " and ")
    t = _DELETE.sub("", t)
    if "-" in t or "‐" in t or "‑" in t or "‒" in t:  # _INNER_HYPHEN needs one (substring searches stop
        # at the first hit in C; ``frozenset.isdisjoint`` would hash every character: bench/RESULTS.md)
        t = _INNER_HYPHEN.sub("", t)
    if t.isascii():  # [\W_]+ on ASCII is "not [a-z0-9]": one byte table, then single spaces
        return " ".join(t.encode("ascii").translate(_ASCII_NON_WORD).decode("ascii").split())
    return _NON_WORD.sub(" ", t).strip()


#: byte -> itself for ASCII letters and digits, b" " for every other byte (what ``_NON_WORD`` folds)
_ASCII_NON_WORD = bytes(c if chr(c).isascii() and chr(c).isalnum() else 32 for c in range(256))


def split_title_year(s: str) -> tuple[str, int | None]:
    """Split a catalog entry "Title (Year)" into (title, year); (stripped text, None) without a year.

    Whitespace inside the title is collapsed (ReDial's "Title  (Year)" has two spaces before the year).

    >>> split_title_year("Frozen  (2010)")
    ('Frozen', 2010)
    >>> split_title_year("The Mummy ")
    ('The Mummy', None)
    """
    m = _YEAR_AT_END.match(s)
    if m and m.group("title").strip():
        return " ".join(m.group("title").split()), int(m.group("year"))
    return " ".join(s.split()), None
