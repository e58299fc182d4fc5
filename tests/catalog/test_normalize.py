"""normalize_title and split_title_year on hand cases."""

from __future__ import annotations

import pytest

from catalog import normalize_title, split_title_year


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("The Matrix", "the matrix"),
        ("Matrix, The", "the matrix"),
        ("  the   MATRIX!! ", "the matrix"),
        ("Usual Suspects, The", "the usual suspects"),
        ("Man Called Ove, A", "a man called ove"),
        ("Fast & Furious", "fast and furious"),
        ("Ocean's Eleven", "oceans eleven"),
        ("E.T. the Extra-Terrestrial", "et the extraterrestrial"),
        ("Spider-Man: Into the Spider-Verse", "spiderman into the spiderverse"),
        ("Mission: Impossible – Fallout", "mission impossible fallout"),
        ("'71", "71"),
        ("2001: A Space Odyssey", "2001 a space odyssey"),
        ("", ""),
        ("?!", ""),
    ],
)
def test_normalize_hand_cases(raw: str, key: str) -> None:
    assert normalize_title(raw) == key


@pytest.mark.parametrize(
    "variant",
    [
        "Amélie",  # precomposed é
        "Ame\u0301lie",  # e + combining acute accent
        "ＡＭＥＬＩＥ",  # fullwidth letters (NFKC)
        "“Amélie”",  # curly quotes
        "«Amelie»",
        "AMÉLIE",
    ],
)
def test_unicode_variants_fold(variant: str) -> None:
    assert normalize_title(variant) == "amelie"


def test_more_unicode_folds() -> None:
    assert normalize_title("Léon: The Professional") == normalize_title("Leon - The Professional")
    assert normalize_title("Straße") == normalize_title("Strasse")
    assert normalize_title("ﬁnding nemo") == "finding nemo"  # the "fi" ligature (NFKC)
    assert normalize_title("Spider‐Man") == "spiderman"  # U+2010 hyphen
    assert normalize_title("Ocean’s Eleven") == normalize_title("Ocean's Eleven")  # curly apostrophe
    assert normalize_title("Pokémon\u00a0Detective\u2003Pikachu") == "pokemon detective pikachu"  # odd spaces


def test_article_only_moves_when_trailing_after_a_comma() -> None:
    assert normalize_title("The Thing") == "the thing"
    assert normalize_title("Thing, The") == "the thing"
    assert normalize_title("Theory of Everything") == "theory of everything"
    assert normalize_title("Good, the Bad and the Ugly, The") == "the good the bad and the ugly"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("The Matrix (1999)", ("The Matrix", 1999)),
        ("Frozen  (2010)", ("Frozen", 2010)),  # ReDial's two spaces
        ("The Mummy ", ("The Mummy", None)),
        (
            "Birdman (or The Unexpected Virtue of Ignorance) (2014)",
            ("Birdman (or The Unexpected Virtue of Ignorance)", 2014),
        ),
        ("1917 (2019)", ("1917", 2019)),
        ("(2019)", ("(2019)", None)),  # no title before the year: keep the text
        ("Blade Runner 2049", ("Blade Runner 2049", None)),
    ],
)
def test_split_title_year(raw: str, expected: tuple[str, int | None]) -> None:
    assert split_title_year(raw) == expected
