"""catalog.published: Rank-GRPO's reward slots (which lines, which (title, year)), its verbatim catalog
test and its consumption rule with year +-2, on expectations written by hand from Rank-GRPO's code
(yaochenzhu/Rank-GRPO, libs/utils.py::process_rec_raw and libs/metrics_align.py); each case says which
of its rules gives the answer. The character-loop oracle (catalog.oracles.published) is checked against
the fast code on generated text."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.oracles.published import loop_hits, loop_slots
from catalog.published import (
    VerbatimIndex,
    fold_title,
    items_titled,
    published_credit,
    published_slot,
    published_slots,
)
from catalog.table import Catalog

ARRIVAL, MOON = ("Arrival", 2016), ("Moon", 2009)

# line -> the slot Rank-GRPO's parser makes of it (None: the line is dropped), with the rule that decides
SLOT_TABLE = [
    ("Moon (2009)", MOON),  # the plain form: title, space, (yyyy)
    ("1. Moon (2009)", MOON),  # numbering followed by whitespace is cut
    ("10) Moon (2009)", MOON),  # ... with ")" as the mark
    ("1 - Moon (2009)", MOON),  # ... digits, spaces, "-", whitespace
    ("- Moon (2009)", MOON),  # a bullet run is cut from the front
    ("* Moon (2009)", MOON),
    ('**1. "Moon" (2009)** - blurb', MOON),  # ** cut, then "1. ", then the title's quotes in the title pass
    ("__Moon__ (2009)", MOON),  # __ cut at the front; the title pass cuts the trailing __
    ('"Moon (2009)"', MOON),  # quotes around the whole cleaned line are dropped
    ("Moon - (2009)", MOON),  # the title pass cuts the trailing " -"
    ("Moon  (2009)", MOON),  # whitespace runs are one space
    ("Arrival", None),  # no " (yyyy)": dropped
    ("I think you will love these.", None),  # prose: dropped
    ("Arrival, 2016", None),  # a year without brackets: dropped
    ("Arrival [2016]", None),  # square brackets fail the "(dddd)" test: dropped
    ("Arrival(2016)", None),  # the year needs whitespace before its "("
    ("Arrival (2016-2017)", None),  # "(" four digits ")" exactly
    ("Arrival (2016, Villeneuve)", None),
    ("Arrival (2016", None),
    ("1.Arrival (2016)", ("1.Arrival", 2016)),  # the numbering cut needs whitespace after "1.": kept as is
    ("1)Arrival (2016)", ("1)Arrival", 2016)),
    ("1、Arrival (2016)", ("1、Arrival", 2016)),
    ("#2 Moon (2009)", ("2 Moon", 2009)),  # leading "#" is decoration; the number stays
    ("\u201cArrival\u201d (2016)", ("\u201cArrival\u201d", 2016)),  # curly quotes are never dropped
    ("Arrival: (2016)", ("Arrival:", 2016)),  # a colon is not decoration
    ("A*rr*ival (2016)", ("A*rr*ival", 2016)),  # decoration is cut at the ends only
    ("Birdman (or The Unexpected Virtue of Ignorance) (2014)", ("Birdman", 2014)),  # first " (dddd)" wins,
    ("Arrival (Villeneuve) (2016)", ARRIVAL),  # and parenthesised groups leave the title
    ("(500) Days of Summer (2009)", ("Days of Summer", 2009)),
    ("Title (2016) (2017)", ("Title", 2016)),  # the match is at the start, the tail is ignored
    (
        "Here are movies like Arrival (2016):",
        ("Here are movies like Arrival", 2016),
    ),  # a preamble with a year
    ("Here are some movies:", None),
    ("Arrival (\uff12\uff10\uff11\uff16)", ARRIVAL),  # any script's decimal digits
    ("(500) (2009)", ("", 2009)),  # the title pass can leave nothing: a slot that never hits
    ("* * Moon (2009)", MOON),  # the decoration loop runs until nothing changes
    ("## 3. Moon (2009)", MOON),
]


@pytest.mark.parametrize(("line", "slot"), SLOT_TABLE)
def test_which_lines_are_slots_and_what_they_name(line, slot):
    assert published_slot(line) == slot
    assert published_slots(line) == ([] if slot is None else [slot])


def test_a_text_keeps_its_slot_lines_in_order_and_drops_the_rest():
    # blank and whitespace-only lines are no lines; dropped lines leave no gap (renumbering)
    text = (
        "Here are some movies:\n\n  \n1. Arrival (2016)\r\nArrival, 2016\n\t2. Moon (2009)  \n1.Heat (1995)\n"
    )
    assert published_slots(text) == [ARRIVAL, MOON, ("1.Heat", 1995)]
    assert published_slots("") == [] and published_slots("\n\n") == []


@pytest.fixture
def catalog():
    rows = [
        ("a", "Arrival", 2016, None),
        ("m", "Moon", 2009, None),
        ("t96", "Titanic", 1996, None),
        ("t97", "Titanic", 1997, None),
        ("t97b", "TITANIC", 1997, None),  # another item whose folded title is "titanic"
        ("u", "Untitled", None, None),
        ("d1", "Dune", 2021, 1.0),
        ("d2", "Dune", 2021, 5.0),  # two items with one (title, year): the more popular is named
    ]
    with pytest.warns(UserWarning, match=r"kept 2 rows that share a \(title, year\)"):
        return Catalog.from_frame(
            pl.DataFrame(
                {
                    "item_id": [r[0] for r in rows],
                    "title": [r[1] for r in rows],
                    "year": [r[2] for r in rows],
                    "popularity": [r[3] for r in rows],
                    "aliases": [["Arrival Alias"] if r[0] == "a" else [] for r in rows],
                },
                schema_overrides={"year": pl.Int32, "popularity": pl.Float64},
            ),
            on_duplicate="keep",
        )


def test_the_catalog_test_is_verbatim(catalog):
    index = VerbatimIndex(catalog)
    slots = [[ARRIVAL, ("arrival", 2016), ("Arrival", 2015), ("Arrival Alias", 2016), ("Untitled", 2000)]]
    # same characters, same year; no case folding, no tolerance, no aliases, no year-less items
    assert index.ids(slots) == [["a", None, None, None, None]]
    assert index.ids([[("Dune", 2021)]]) == [["d2"]]  # the more popular of two equal pairs
    assert index.key_of["t97b"] == ("titanic", 1997) and "u" not in index.key_of
    assert fold_title("  The\u00a0 Matrix ") == "the matrix"


def credit(catalog, slots, responder, seen=(), *, k=5, tol=2):
    index = VerbatimIndex(catalog)
    return published_credit(
        index.ids([slots]), [list(responder)], [list(seen)], index=index, k=k, year_tolerance=tol
    )[0]


T96, T97, T98 = ("Titanic", 1996), ("Titanic", 1997), ("Titanic", 1998)


def test_a_slot_consumes_a_responder_item_within_two_years(catalog):
    # T4: (Titanic, 1997) is a catalog item; the responder's titanic bucket holds 1996; order 1997, 1998, 1996
    assert credit(catalog, [T97, MOON], ["t96"]) == ["t96", None]
    # T5: (Titanic, 1998) is no catalog item, so the +-2 rule never runs for it
    assert credit(catalog, [T98], ["t97"]) == [None]
    # the bucket is keyed by the folded title: TITANIC 1997 consumes a Titanic 1996 too
    assert credit(catalog, [("TITANIC", 1997)], ["t96"]) == ["t96"]
    # tolerance 0: the exact year only
    assert credit(catalog, [T97, T96], ["t96"], tol=0) == [None, "t96"]


def test_items_are_consumed_in_slot_order_with_rank_grpo_s_year_preference(catalog):
    # T8: the first Titanic 1996 takes 1996, the second 1997 (+1), the third finds nothing left
    assert credit(catalog, [T96, T96, T96], ["t96", "t97"]) == ["t96", "t97", None]
    # T9: 1997 first looks for 1997, 1998, then 1996: it consumes the only item, the later exact slot misses
    assert credit(catalog, [T97, T96], ["t96"]) == ["t96", None]
    # with 1997 and 1996 both there, each slot takes its own year first
    assert credit(catalog, [T97, T96], ["t96", "t97"]) == ["t97", "t96"]


def test_seen_titles_skip_a_slot_whatever_its_year_and_consume_nothing(catalog):
    # T11: the slot's title is a seen item's title: skipped in place; Moon still hits at rank 1
    assert credit(catalog, [ARRIVAL, MOON], ["a", "m"], seen=["a"]) == [None, "m"]
    # a seen Titanic 1996 skips Titanic 1997 too (the test is on titles); nothing is consumed by it
    assert credit(catalog, [T97, ("TITANIC", 1997)], ["t96"], seen=["t96"]) == [None, "t96"]


def test_only_the_first_k_slots_are_looked_at(catalog):
    # slots past K neither hit nor consume; the list keeps its length (the reward counts its slots)
    assert credit(catalog, [MOON, T96, ARRIVAL], ["a", "t96"], k=2) == [None, "t96", None]


def test_rows_that_share_a_responder_are_credited_each_on_its_own(catalog):
    index = VerbatimIndex(catalog)
    slots = index.ids([[T96, T96], [T96], [T97]])
    resp = ["t96", "t97"]
    shared = published_credit(slots, [resp] * 3, [[]] * 3, index=index, k=5)
    alone = [published_credit([s], [resp], [[]], index=index, k=5)[0] for s in slots]
    assert shared == alone == [["t96", "t97"], ["t96"], ["t97"]]


def test_bad_arguments_are_refused(catalog):
    index = VerbatimIndex(catalog)
    with pytest.raises(ValueError, match="year_tolerance must be >= 0"):
        published_credit([[]], [[]], [[]], index=index, k=5, year_tolerance=-1)
    with pytest.raises(ValueError, match="slot_ids has 1 rows, responder_items 2"):
        published_credit([[]], [[], []], [[]], index=index, k=5)


def test_items_titled_names_every_item_with_the_title_verbatim(catalog):
    assert items_titled(catalog, ["Titanic", "Dune", "titanic", "Nope", "Titanic"]) == {
        "Titanic": ["t96", "t97"],
        "Dune": ["d1", "d2"],
    }


# ---- the loop oracle against the fast code -------------------------------------------------------------
_PIECES = st.sampled_from(
    [
        "Moon",
        "Titanic",
        "TITANIC",
        " ",
        "  ",
        "\t",
        "\u00a0",
        "(2009)",
        "(1997)",
        " (1996)",
        "[1997]",
        "(19",
        ")",
        "(",
        "1.",
        "2) ",
        "3 - ",
        "、",
        "—",
        "*",
        "**",
        "_",
        "-",
        "#",
        '"',
        "'",
        "\u201c",
        ",",
        ":",
        "\r",
        "\n",
        "\n\n",
        "x",
        "\uff11\uff19\uff19\uff17",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=30).map("".join))
def test_the_loop_parser_agrees_with_the_fast_one(text):
    assert loop_slots(text) == published_slots(text)


@settings(max_examples=300, deadline=None)
@given(
    slots=st.lists(
        st.sampled_from([T96, T97, T98, ("TITANIC", 1997), MOON, ARRIVAL, ("Moon", 2011)]), max_size=8
    ),
    responder=st.lists(st.sampled_from(["t96", "t97", "t97b", "m", "a"]), unique=True, max_size=4),
    seen=st.lists(st.sampled_from(["a", "t96", "m"]), max_size=1),
    tol=st.integers(0, 3),
    k=st.integers(1, 6),
)
def test_credited_ids_are_the_loop_hit_vector(slots, responder, seen, tol, k):
    cat = Catalog.from_frame(
        pl.DataFrame(
            {
                "item_id": ["a", "m", "t96", "t97", "t97b"],
                "title": ["Arrival", "Moon", "Titanic", "Titanic", "TITANIC"],
                "year": [2016, 2009, 1996, 1997, 1997],
            }
        )
    )
    got = credit(cat, slots, responder, seen, k=k, tol=tol)
    info = {r[0]: (r[1], r[2]) for r in cat.df.select("item_id", "title", "year").rows()}
    want = loop_hits(
        slots,
        set(info.values()),
        [info[i] for i in responder],
        {info[i][0] for i in seen},
        k=k,
        year_tolerance=tol,
    )
    assert [int(i is not None) for i in got[:k]] + [0] * (k - min(k, len(got))) == want
    credited = [i for i in got if i is not None]
    assert len(set(credited)) == len(credited) and set(credited) <= set(responder)


def test_the_reddit_v2_catalog_as_rank_grpo_s_pairs(data_dir):
    """Reddit-v2's gt_catalog: 7,404 (title, year) pairs, 36 folded titles with two items <= 2 years
    apart; a Django Unchained (2012) slot consumes a responder's Django Unchained (2013)."""
    from catalog.table import load_catalog

    catalog = load_catalog(data_dir / "reddit-v2-catalog/gt_catalog.csv")
    index = VerbatimIndex(catalog)
    assert len(index) == len(catalog) == 7404
    years: dict[str, list[int]] = {}
    for key, year in index.key_of.values():
        years.setdefault(key, []).append(year)
    close = [
        k for k, ys in years.items() if any(abs(a - b) <= 2 for i, a in enumerate(ys) for b in ys[i + 1 :])
    ]
    assert len(close) == 36 and "django unchained" in close
    d12, d13 = index.id_of[("Django Unchained", 2012)], index.id_of[("Django Unchained", 2013)]
    slots = index.ids([[("Django Unchained", 2012), ("Django Unchained", 2012)]])
    assert published_credit(slots, [[d13]], [[]], index=index, k=20) == [[d13, None]]
    assert published_credit(slots, [[d13]], [[d12]], index=index, k=20) == [[None, None]]  # seen by title
