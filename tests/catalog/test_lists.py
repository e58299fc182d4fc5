"""``catalog.lists`` (the batch parser the scorer reads) gives ``parse_list``'s lines, and the
guards in ``normalize_title`` / ``subtitle_heads`` change no key: each is checked against the code it
replaced (frozen here) on hand-written and generated inputs."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog import index, lists, normalize, parse
from catalog.lists import ParsedLists, parse_lists, title_years
from catalog.parse import ParsedLine, parse_list

_line = st.tuples(
    st.sampled_from(
        ["", "1. ", "12. ", "123. ", "1234. ", "1.  ", "- ", "**", "# ", "Here are some:", "Sure! "]
    ),
    st.sampled_from(["Heat", "The Thing", "2001: A Space Odyssey", "Amélie", "x", "", '"Alien"', "???"]),
    st.sampled_from(
        [" (1999)", " (٢٠٠١)", "(1995)", " [1999]", "", " (1999) - a blurb:", " (2016) - *great*"]
    ),
    st.sampled_from(["", " - two friends", ":", " (or not)", "**"]),
).map("".join)
_completion = st.lists(
    st.one_of(_line, st.sampled_from(["", " ", "\t", "x" * 450 + " (1999)"])), max_size=8
).map("\n".join)


@settings(max_examples=600, deadline=None)
@given(completions=st.lists(_completion, max_size=6))
def test_parse_lists_equals_parse_list_on_each_completion(completions):
    lists.clear_caches()
    want = [parse_list(c) for c in completions]
    for _ in range(2):  # cold, then from the caches
        got = parse_lists(completions)
        assert got == want
        assert got.rows() == want and [list(r) for r in got] == want and len(got) == len(want)
        assert got.n_lines == [len(r) for r in want]
        assert got.titles == [ln.title for r in want for ln in r]


@settings(max_examples=800, deadline=None)
@given(text=_line)
def test_title_years_equal_the_line_features(text):
    text = text.strip()
    if text:
        lists.clear_caches()
        assert title_years([text]) == [parse._features_of(text)[1:3]]
        assert lists._uncached([text, text]) == [parse._line_features(text)[1:3]] * 2


def test_the_batch_reads_numbered_and_plain_items_and_leaves_the_rest_to_the_rules():
    texts = [
        "1. Alien (1979) - a classic",
        "Heat (1995)",
        "1234. X (2000)",  # 4 digits: not a list marker
        '2. "Q" (1999)',  # quotes: the general rules
        "3. 2001: A Space Odyssey (1968)",  # the title starts with a digit: the general rules
        "4. Amélie (2001)",
        "5. Heat (１９９５)",  # fullwidth digits: not the ASCII pattern; the rules read the year
        "Here are some:",
    ]
    got = lists._uncached(texts)
    assert got == [parse._line_features(t)[1:3] for t in texts]
    assert got[:2] == [("Alien", 1979), ("Heat", 1995)]
    assert got[2] == ("1234. X", 2000) and got[3] == ("Q", 1999) and got[4] == ("2001: A Space Odyssey", 1968)


def test_title_years_of_nothing_and_of_a_text_with_a_newline():
    assert title_years([]) == [] and lists._uncached([]) == []
    with pytest.raises(ValueError, match="holds a newline"):
        lists._uncached(["Heat (1995)", "Alien (1979)\nHeat"])


def test_a_preamble_is_dropped_per_list_and_spans_stay_in_their_completion():
    completions = [
        "Sure! Here you go:\n\n1. Alien (1979)\n2. Heat",
        "1. Heat (1995)",
        "",
        "Top picks\n- A\n- B",
    ]
    got = parse_lists(completions)
    assert got.n_lines == [2, 1, 0, 2]
    assert got.titles == ["Alien", "Heat", "Heat", "A", "B"]
    rows = got.rows()
    for completion, row in zip(completions, rows, strict=True):
        assert all(completion[ln.start : ln.end] == ln.text for ln in row)
        assert [ln.rank for ln in row] == list(range(len(row)))


def test_parsed_lists_round_trip_concat_split_and_refuse_ragged_columns():
    a = parse_lists(["1. Alien (1979)\n2. Heat", "x"])
    b = parse_lists(["", "- Heat (1995)"])
    both = ParsedLists.concat([a, b])
    assert both == [*a.rows(), *b.rows()] and len(both) == 4
    assert ParsedLists.from_rows(both.rows()) == both
    assert ParsedLists.from_rows(both) is both
    assert both.split(list(range(len(both.texts)))) == [[0, 1], [2], [], [3]]
    with pytest.raises(ValueError, match="3 values for 4 lines"):
        both.split([0, 1, 2])
    assert both != parse_lists(["1. Alien (1979)"])
    with pytest.raises(ValueError, match="sum\\(n_lines\\) = 2"):
        ParsedLists([1, 1], [0], [1], ["a"], ["a"], [None])
    with pytest.raises(ValueError, match="ranks must be 0, 1, 2"):
        ParsedLists.from_rows([[ParsedLine(1, 0, 1, "a", "a", None)]])


def test_a_full_line_cache_is_emptied_and_answers_stay_the_same(monkeypatch):
    monkeypatch.setattr(lists, "_CACHE_SIZE", 4)
    lists.clear_caches()
    texts = [f"Title {n} (2000)" for n in range(10)]
    assert title_years(texts[:3]) == [(f"Title {n}", 2000) for n in range(3)]
    assert title_years(texts) == [(f"Title {n}", 2000) for n in range(10)]  # 3 + 7 new > 4: emptied first
    assert sorted(lists._title_year_by_text) == sorted(texts[3:])  # then this call's new lines kept
    assert title_years(texts) == [(f"Title {n}", 2000) for n in range(10)]


# ---- normalize_title and subtitle_heads: the guards against the code they replaced ------------------
_TRAILING_ARTICLE = re.compile(r"^(?P<body>.+?)\s*,\s*(?P<art>the|a|an)[\W_]*$", re.DOTALL)
_DELETE = re.compile(r"[\"'`´‘’‚‛“”„‟′″«»‹›.]")
_INNER_HYPHEN = re.compile(r"(?<=\w)[-‐‑‒](?=\w)")
_NON_WORD = re.compile(r"[\W_]+")
_SUBTITLE = re.compile(r"\s*:\s+|\s+[-–—]\s+|\s+\(")


def _old_normalize(s: str) -> str:
    if not s:
        return ""
    t = unicodedata.normalize("NFKC", s)
    t = normalize._strip_accents(t).casefold()
    m = _TRAILING_ARTICLE.match(t)
    if m:
        t = f"{m.group('art')} {m.group('body')}"
    t = t.replace("&", " and ")
    t = _DELETE.sub("", t)
    t = _INNER_HYPHEN.sub("", t)
    return _NON_WORD.sub(" ", t).strip()


def _old_heads(title: str) -> list[str]:
    full = _old_normalize(title)
    heads = []
    for m in reversed(list(_SUBTITLE.finditer(title))):
        head = _old_normalize(title[: m.start()])
        if head and head != full and head not in heads:
            heads.append(head)
    return heads


_title = st.lists(
    st.sampled_from(
        [*"aZ09 ,-‐‑‒–—_:&.'\"()!?\t\n", "é", "ß", "ǅ", "Ⅳ", "ﬁ", "東", " the", ", The", ", an", "\u0301"]
    ),
    max_size=20,
).map("".join) | st.text(max_size=30)


@settings(max_examples=1500, deadline=None)
@given(s=_title)
def test_normalize_title_equals_the_unguarded_code(s):
    assert normalize.normalize_title.__wrapped__(s) == _old_normalize(s)
    assert index.subtitle_heads(s) == _old_heads(s)
    # bare_key's prefix guard: the regex alone gives the same key
    key = normalize.normalize_title.__wrapped__(s)
    assert index.bare_key(key) == index._ARTICLE.sub("", key, count=1)
    assert index.bare_key(s) == index._ARTICLE.sub("", s, count=1)
    # the matcher's subtitle guard: the same as the set test it replaced, and never False on a subtitle
    assert index.may_have_subtitle(s) == (not frozenset(":-–—(").isdisjoint(s))
    assert index.may_have_subtitle(s) or _SUBTITLE.search(s) is None


def test_normalize_title_by_hand():
    f = normalize.normalize_title.__wrapped__
    assert f("Matrix, The") == "the matrix"
    assert f("Spider-Man: Into the Spider-Verse") == "spiderman into the spiderverse"
    assert f("E.T. the Extra_Terrestrial!!") == "et the extra terrestrial"
    assert f("  Fast & Furious\t") == "fast and furious"
    assert f("Straße") == "strasse"
    assert index.subtitle_heads("Heat") == [] and index.subtitle_heads("Alien: Covenant") == ["alien"]
    b = index.bare_key
    assert (b("the godfather"), b("a quiet place"), b("an education")) == (
        "godfather",
        "quiet place",
        "education",
    )
    assert (b("theory"), b("the "), b("an "), b("a"), b("the the end")) == (
        "theory",
        "the ",
        "an ",
        "a",
        "the end",
    )
