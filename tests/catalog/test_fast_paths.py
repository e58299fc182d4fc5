"""Issue 13's shortcuts in catalog/ change no answer: the ids-only grounding path (score cutoff, length
bound, id cache) against ``Matcher.ground_many``; the parser's per-line caches and its "N. " key against
the uncached line features; the table-driven accent strip against ``unicodedata.combining``."""

from __future__ import annotations

import random
import sys
import unicodedata

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog import normalize, parse
from catalog.match import SCORERS, GroundingSettings, Matcher
from catalog.parse import ParsedLine
from catalog.table import Catalog, load_catalog


def _catalog(titles: list[tuple[str, int | None]]) -> Catalog:
    return Catalog.from_frame(
        pl.DataFrame(
            {
                "item_id": [f"i{n}" for n in range(len(titles))],
                "title": [t for t, _ in titles],
                "year": [y for _, y in titles],
            },
            schema_overrides={"year": pl.Int32},
        )
    )


def _lines(queries: list[tuple[str | None, int | None]]) -> list[list[ParsedLine]]:
    return [[ParsedLine(0, 0, 0, "", t, y)] for t, y in queries]


def _same_ids(matcher: Matcher, queries: list[tuple[str | None, int | None]]) -> None:
    want = [
        m.item_id if t is not None else None
        for (t, _), m in zip(queries, matcher.ground_many(*zip(*queries)))
    ]
    fresh = Matcher(matcher.catalog, matcher.settings)
    assert [row[0] for row in fresh.ground_lines(_lines(queries))] == want  # cold
    assert [row[0] for row in fresh.ground_lines(_lines(queries))] == want  # from the id cache


def test_a_score_exactly_at_the_threshold_still_matches():
    # ratio("abcdefghij", "abcdefghiz") = 100 * (1 - 2 / 20) = 90.0
    m = Matcher(
        _catalog([("abcdefghij", 2000), ("zzzzzzzzzzzz", 2000)]), GroundingSettings(match_threshold=90)
    )
    assert m.ground("abcdefghiz", 2000).score == 90.0
    _same_ids(m, [("abcdefghiz", 2000), ("abcdefghiy", None)])
    assert m.ground_lines(_lines([("abcdefghiz", 2000)])) == [["i0"]]


def test_the_length_bound_keeps_every_query_that_can_reach_the_threshold():
    longest = "abcdefghijklmnopqrst"  # the longest key (20); +3 letters: ratio 93.0, bound 93.0
    shortest = "abcdefghi"  # the shortest (9); -1 letter: ratio 94.1
    m = Matcher(_catalog([(longest, 2001), (shortest, 2001), ("klmnopqrstuv", 2001)]))
    queries = [
        (longest + "xyz", 2001),
        (longest + "xyzw", 2001),
        (longest + "x" * 40, 2001),
        ("abcdefgh", 2001),
    ]
    _same_ids(m, queries)
    assert [r[0] for r in m.ground_lines(_lines(queries))] == ["i0", "i0", None, "i1"]


ODD = ["", "x", "xyz", "!!", " - a blurb that runs on", "é", "\ufffd" * 3, "s", "es", " 2", " II", "  "]


def _perturb(rng: random.Random, title: str) -> str:
    kind = rng.randrange(7)
    if kind == 0 and len(title) > 2:  # drop one character
        i = rng.randrange(len(title))
        return title[:i] + title[i + 1 :]
    if kind == 1:
        return title + rng.choice(ODD)
    if kind == 2:
        return rng.choice(ODD) + title
    if kind == 3:
        return title[: max(1, len(title) - rng.randrange(1, 4))]
    if kind == 4:
        return "".join(rng.choice("abcdefghij \ufffd'-:") for _ in range(rng.randrange(1, 400)))
    if kind == 5:
        return title.upper()
    return title


@pytest.mark.parametrize("scorer", sorted(SCORERS))
@pytest.mark.parametrize("threshold", [0.0, 50.0, 88.0, 90.0, 100.0])
def test_ground_lines_gives_ground_many_ids_on_perturbed_titles(scorer, threshold):
    titles = [
        ("The Matrix", 1999), ("Matrix", 2021), ("Alien", 1979), ("Aliens", 1986), ("Toy Story 2", 1999),
        ("Toy Story 3", 2010), ("Mission: Impossible - Fallout", 2018), ("Spider-Man: Into the Spider-Verse", 2018),
        ("Amélie", 2001), ("Heat", 1995), ("The Witches", 1990), ("Untitled", None), ("Birdman", 2014),
    ]  # fmt: skip
    for tol in (0, 2):
        m = Matcher(
            _catalog(titles),
            GroundingSettings(year_tolerance=tol, match_threshold=threshold, match_scorer=scorer),
        )
        rng = random.Random(f"{scorer}{threshold}{tol}")
        queries = [
            (
                _perturb(rng, rng.choice(titles)[0]),
                rng.choice([None, 1979, 1990, 1999, 2000, 2010, 2018, 2020]),
            )
            for _ in range(300)
        ] + [(None, 1999), ("", None), ("   ", 2000)]
        _same_ids(m, queries)


def test_ground_lines_on_the_real_catalog(data_dir):
    cat = load_catalog(data_dir / "reddit-v2-catalog" / "gt_catalog.csv")
    rng = random.Random(0)
    titles = cat.df["title"].to_list()
    years = cat.df["year"].to_list()
    for settings_ in (
        GroundingSettings(),
        GroundingSettings(match_threshold=80, match_scorer="token_sort_ratio"),
    ):
        m = Matcher(cat, settings_)
        queries = []
        for _ in range(2000):
            j = rng.randrange(len(titles))
            queries.append(
                (_perturb(rng, titles[j]), rng.choice([years[j], None, (years[j] or 2000) + 1, 1950]))
            )
        _same_ids(m, queries)


def test_small_caches_evict_and_stay_right():
    m = Matcher(_catalog([("Heat", 1995), ("Alien", 1979)]), GroundingSettings(), cache_size=2)
    queries = [("Heat", 1995), ("Alen", 1979), ("Aliem", None), ("Heat", None), ("Alien", 1979)] * 3
    assert [r[0] for r in m.ground_lines(_lines(queries))] == [
        mm.item_id for mm in Matcher(m.catalog).ground_many(*zip(*queries))
    ]
    assert len(m._ids.cache) <= 2
    m.clear_cache()
    assert not m._ids.cache and not m._cache


# ---- parse -----------------------------------------------------------------------------------------
_chars = st.sampled_from(
    [*"ab 1.)-*_`~#\"'“”:()[]2019\t•", "\ufffd", "é", "\u0301", "1999", "(2001)", "- ", "1. "]
)
_text = st.lists(_chars, max_size=25).map("".join)


@settings(max_examples=600, deadline=None)
@given(n=st.integers(1, 999), rest=_text)
def test_a_numbered_line_is_keyed_by_its_rest(n, rest):
    text = f"{n}. {rest}".strip()
    assert parse._features_of(text) == parse._line_features(text)


@settings(max_examples=400, deadline=None)
@given(text=_text)
def test_cached_line_features_equal_the_uncached_ones(text):
    text = text.strip()
    if text:
        assert parse._features_of(text) == parse._features_of(text) == parse._line_features(text)


def test_long_lines_are_not_cached_but_parse_the_same():
    text = "1. " + "x" * (parse._CACHE_MAX_LEN + 10) + " (1999)"
    before = len(parse._line_features_cached) + len(parse._numbered_features_cached)
    assert parse.parse_list(text)[0].title == "x" * (parse._CACHE_MAX_LEN + 10)
    after = len(parse._line_features_cached) + len(parse._numbered_features_cached)
    assert after == before


def test_the_fast_constructor_builds_ordinary_parsed_lines():
    made = parse._new_parsed_line(3, 4, 9, "Heat!", "Heat", None)
    plain = ParsedLine(3, 4, 9, "Heat!", "Heat", None)
    assert made == plain and hash(made) == hash(plain) and repr(made) == repr(plain)
    with pytest.raises(AttributeError):
        made.rank = 1  # still frozen


# ---- normalize -------------------------------------------------------------------------------------
def test_the_combining_table_is_unicodedata_combining_on_every_code_point():
    table = normalize._combining_table()
    assert len(table) == sys.maxunicode + 1
    want = [c for c in range(sys.maxunicode + 1) if unicodedata.combining(chr(c))]
    assert table.nonzero()[0].tolist() == want


def _old_strip(s: str) -> str:
    decomposed = unicodedata.normalize("NFKD", s)
    if decomposed.isascii():
        return decomposed
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


@settings(max_examples=500, deadline=None)
@given(
    s=st.text(st.characters(codec="utf-8"), max_size=200)
    | st.text(st.sampled_from("aé\u0301\ufffd東 ñ"), min_size=40, max_size=300)
)
def test_accent_strip_equals_the_per_character_loop(s):
    assert normalize._strip_accents(s) == _old_strip(s)
    assert normalize._strip_accents(s + "\ud800" * 60) == _old_strip(s + "\ud800" * 60)  # lone surrogates


def test_a_full_parse_cache_is_emptied_and_answers_stay_the_same(monkeypatch):
    monkeypatch.setattr(parse, "_CACHE_SIZE", 3)
    cache = parse._Cache(parse._line_features)
    texts = [f"{n}. Alien (1979)" for n in range(7)] + ["- Heat", "- Heat"]
    assert [cache(t) for t in texts] == [parse._line_features(t) for t in texts]
    assert 1 <= len(cache) <= 3
    cache.cache_clear()
    assert len(cache) == 0


# ---- line spans ------------------------------------------------------------------------------------
def _stripping_loop(completion: str) -> tuple[list[str], list[int], list[int]]:
    """The span loop ``parse_list`` used before the shortcut (every line stripped in Python)."""
    texts, starts, ends, pos = [], [], [], 0
    for raw in completion.split("\n"):
        stripped = raw.strip()
        if stripped:
            start = pos + (len(raw) - len(raw.lstrip()))
            texts.append(stripped)
            starts.append(start)
            ends.append(start + len(stripped))
        pos += len(raw) + 1
    return texts, starts, ends


_spaced = st.lists(
    st.sampled_from(
        ["a", "1. Heat (1995)", "x y", "\n", "\n", " ", "\t", "\r", "\x0b", "\x1c", "\x85", "\xa0"]
    )
    | st.sampled_from(["\u2028", "\u3000", "\u200b", "\ufeff", "é"]),
    max_size=30,
).map("".join)


@settings(max_examples=800, deadline=None)
@given(text=_spaced)
def test_the_span_shortcut_equals_the_stripping_loop(text):
    assert parse._spans(text) == _stripping_loop(text)
    texts, starts, ends = parse._spans(text)
    assert all(text[a:b] == t for t, a, b in zip(texts, starts, ends, strict=True))


# ---- the one-regex path for "Title (YYYY) ..." lines -------------------------------------------------
_title_chars = st.sampled_from([*"Abz AB:-!?.,;&", "é", "1", "\u00a0", *"'\"“»*_`~#()[]"])
_tail_chars = st.sampled_from([*"ab -:,.!?", "é", "(", ")", "[", "(1999)", *"'\"“”«*_`~"])
_item = st.tuples(
    st.sampled_from(["", "1. ", "12. ", "1.  ", "- "]),
    st.lists(_title_chars, max_size=12).map("".join),
    st.sampled_from([" (1999)", "  (2001)", "(1995)", " [1999]", " (١٩٩٥)", " (1999-2003)", ""]),
    st.lists(_tail_chars, max_size=12).map("".join),
).map("".join)


@settings(max_examples=2000, deadline=None)
@given(head=st.sampled_from(["", "Heat", "The Thing", "X", "heat"]), item=_item)
def test_the_simple_item_path_equals_the_general_rules(head, item):
    n = next((p for p in ("12. ", "1. ") if item.startswith(p)), "")
    text = (n + head + item[len(n) :]).strip()
    if not text:
        return
    assert parse._line_features(text) == parse._general_features(text)
    if n and text.startswith(n):  # the "N. " key: rest alone, through the fast path or the general one
        key = text[len(n) :]
        body, _ = parse._strip_markers(parse._unemphasize(key).strip(), 2)
        assert parse._numbered_features(key) == parse._finish(body, True, False)


def test_the_simple_item_path_is_taken_on_usual_lines_only():
    assert parse._simple("Heat (1995) - a heist goes wrong", False) == (
        "Heat (1995) - a heist goes wrong",
        "Heat",
        1995,
        False,
        False,
        False,
    )
    for text in [
        '"Heat" (1995)',
        "**Heat** (1995)",
        "Heat [1995]",
        "1917 (2019)",
        "Heat (or not) (1995)",
        "Heat",
    ]:
        assert parse._simple(text, False) is None
