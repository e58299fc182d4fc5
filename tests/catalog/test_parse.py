"""parse_list / parse_line: ranks, exact spans, cleaning rules, robustness."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog import ParsedLine, parse_line, parse_list


def _check_spans(completion: str, lines: list[ParsedLine]) -> None:
    assert [p.rank for p in lines] == list(range(len(lines)))
    last = -1
    for p in lines:
        assert completion[p.start : p.end] == p.text
        assert p.text == p.text.strip() and p.text
        assert "\n" not in p.text
        assert p.start > last
        last = p.end


def test_markdown_numbered_line_with_blurb() -> None:
    assert parse_line("**1. Arrival (2016)** - a linguist is recruited to talk to aliens") == (
        "Arrival",
        2016,
    )


def test_preamble_and_blank_lines_give_right_ranks_and_spans() -> None:
    completion = (
        "Here are 20 movies you might like:\n"
        "\n"
        "1. Arrival (2016)\n"
        "\n"
        "2. **Annihilation** (2018) - shimmer\n"
        '   3. "Contact" (1997)   \n'
        "4. ???\n"
        "5. Moon (2009)"
    )
    lines = parse_list(completion)
    _check_spans(completion, lines)
    got = [(p.rank, p.title, p.year) for p in lines]
    assert got == [
        (0, "Arrival", 2016),
        (1, "Annihilation", 2018),
        (2, "Contact", 1997),
        (3, None, None),  # unparsable, but it keeps its slot: ranks never shift
        (4, "Moon", 2009),
    ]
    # hand-computed offsets: the preamble is 34 chars + "\n", then a blank line
    assert (lines[0].start, lines[0].end) == (36, 53)
    assert completion.index('3. "Contact"') == lines[2].start
    assert lines[4].end == len(completion)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("1. The Matrix (1999)", ("The Matrix", 1999)),
        ("1) The Matrix (1999)", ("The Matrix", 1999)),
        ("#1 The Matrix (1999)", ("The Matrix", 1999)),
        ("#1: The Matrix (1999)", ("The Matrix", 1999)),
        ("1 - The Matrix (1999)", ("The Matrix", 1999)),
        ("(1) The Matrix (1999)", ("The Matrix", 1999)),
        ("- The Matrix (1999)", ("The Matrix", 1999)),
        ("* The Matrix (1999)", ("The Matrix", 1999)),
        ("• The Matrix (1999)", ("The Matrix", 1999)),
        ("- 1. The Matrix (1999)", ("The Matrix", 1999)),
        ('"The Matrix" (1999)', ("The Matrix", 1999)),
        ("“The Matrix” (1999)", ("The Matrix", 1999)),
        ("'The Matrix' (1999)", ("The Matrix", 1999)),
        ('"The Matrix (1999)"', ("The Matrix", 1999)),
        ("*The Matrix* (1999)", ("The Matrix", 1999)),
        ("__The Matrix__ (1999)", ("The Matrix", 1999)),
        ("The Matrix (1999) - Neo wakes up", ("The Matrix", 1999)),
        ("The Matrix (1999): Neo wakes up", ("The Matrix", 1999)),
        ("The Matrix (1999) — Neo wakes up", ("The Matrix", 1999)),
        ("The Matrix [1999]", ("The Matrix", 1999)),
        ("The Matrix (1999, Wachowskis)", ("The Matrix", 1999)),
        ("2001: A Space Odyssey (1968)", ("2001: A Space Odyssey", 1968)),
        ("Blade Runner 2049 (2017)", ("Blade Runner 2049", 2017)),
        ("1. 1917 (2019)", ("1917", 2019)),
        ("10. 10 Cloverfield Lane (2016)", ("10 Cloverfield Lane", 2016)),
        ("300: Rise of an Empire (2014)", ("300: Rise of an Empire", 2014)),
        ("(500) Days of Summer (2009)", ("(500) Days of Summer", 2009)),
        (
            "Birdman (or The Unexpected Virtue of Ignorance) (2014)",
            ("Birdman (or The Unexpected Virtue of Ignorance)", 2014),
        ),
        ("'71 (2014)", ("'71", 2014)),
        ("3. a toothbrush", ("a toothbrush", None)),  # ProtoQA: no year, the whole line
        ("Blade Runner 2049", ("Blade Runner 2049", None)),
        ("1.", (None, None)),
        ("---", (None, None)),
        ("**", (None, None)),
    ],
)
def test_parse_line_cases(line: str, expected: tuple[str | None, int | None]) -> None:
    assert parse_line(line) == expected


def test_chatty_preamble_and_headers() -> None:
    completion = "Sure! Based on your taste, try these\n1. Heat (1995)\n**Sci-fi:**\n2. Alien (1979)\nEnjoy!"
    lines = parse_list(completion)
    _check_spans(completion, lines)
    assert [(p.title, p.year) for p in lines] == [
        ("Heat", 1995),
        (None, None),
        ("Alien", 1979),
        ("Enjoy!", None),
    ]


def test_heading_preamble_and_heading_items() -> None:
    completion = "### Recommendations\n### 1. Heat (1995)\n### Alien (1979)"
    assert [(p.rank, p.title) for p in parse_list(completion)] == [(0, "Heat"), (1, "Alien")]


def test_protoqa_lines_without_markers_are_all_ranks() -> None:
    completion = "dog\ncat\n\ngoldfish"
    lines = parse_list(completion)
    assert [(p.rank, p.title, p.year) for p in lines] == [
        (0, "dog", None),
        (1, "cat", None),
        (2, "goldfish", None),
    ]


def test_crlf_and_max_items() -> None:
    completion = "1. Heat (1995)\r\n2. Alien (1979)\r\n3. Moon (2009)\r\n"
    lines = parse_list(completion)
    _check_spans(completion, lines)
    assert [p.text for p in lines] == ["1. Heat (1995)", "2. Alien (1979)", "3. Moon (2009)"]
    assert [p.title for p in parse_list(completion, max_items=2)] == ["Heat", "Alien"]
    assert parse_list(completion, max_items=0) == []


@pytest.mark.parametrize(
    "completion", ["", "\n\n\n", "   ", "(((((", "*" * 5000, "\x00\x01\ufffd", "1.\n2.\n3."]
)
def test_empty_and_garbage_never_crash(completion: str) -> None:
    lines = parse_list(completion)
    _check_spans(completion, lines)


def test_ten_thousand_lines_fast() -> None:
    completion = "\n".join(f"{i}. Movie number {i} ({1900 + i % 120}) - a blurb" for i in range(10_000))
    t0 = time.perf_counter()
    lines = parse_list(completion)
    elapsed = time.perf_counter() - t0
    assert len(lines) == 10_000
    assert (lines[998].title, lines[998].year) == ("Movie number 998", 1900 + 998 % 120)
    # numbering has 1-3 digits ("2001: A Space Odyssey" must survive), so "9999." stays in the title
    assert lines[-1].title == "9999. Movie number 9999"
    assert elapsed < 2.0  # about 0.06 s on one core; generous for a loaded CI box
    _check_spans(completion, lines[:50])


def test_pathological_brackets_are_linear() -> None:
    completion = ("(" * 3000 + "1999 " * 500 + "\n") * 5 + "[" * 20000
    t0 = time.perf_counter()
    parse_list(completion)
    assert time.perf_counter() - t0 < 2.0


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab1 9(0)\n\r*-_#.\"'“”:•\t")), max_size=200))
def test_spans_property(completion: str) -> None:
    lines = parse_list(completion)
    _check_spans(completion, lines)
    # every non-blank line after the first rank is a rank
    if lines:
        rest = completion[lines[0].start :].split("\n")
        assert len(lines) == sum(1 for r in rest if r.strip())
