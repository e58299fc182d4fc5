"""GroundingSettings: one validated object with one name per field; the Matcher takes it."""

from __future__ import annotations

import polars as pl
import pytest

from catalog import GroundingSettings, InputError, Matcher
from catalog.match import DEFAULT_SCORER, DEFAULT_THRESHOLD, MATCH_MODES, SCORERS
from catalog.table import Catalog

NAMES = ("match_mode", "year_tolerance", "match_threshold", "match_scorer")


def test_defaults_round_trip_and_overrides():
    g = GroundingSettings()
    assert g.names() == NAMES
    assert g.to_dict() == {
        "match_mode": "fuzzy",
        "year_tolerance": 2,
        "match_threshold": DEFAULT_THRESHOLD,
        "match_scorer": DEFAULT_SCORER,
    }
    for mode in MATCH_MODES:
        for scorer in SCORERS:
            s = GroundingSettings(match_mode=mode, year_tolerance=0, match_threshold=85, match_scorer=scorer)
            assert GroundingSettings.from_dict(s.to_dict()) == s
            assert isinstance(s.match_threshold, float)
    over = g.with_overrides({"year_tolerance": 0, "match_mode": None})
    assert over == GroundingSettings(year_tolerance=0)
    assert g.differences(over) == {"year_tolerance": (2, 0)} and over.differences(over) == {}
    assert over.describe() == "match_mode=fuzzy, year_tolerance=0, match_threshold=90, match_scorer=ratio"
    with pytest.raises(InputError, match=r"unknown grounding field\(s\) \['mode'\]"):
        g.with_overrides({"mode": "exact"})
    with pytest.raises(AttributeError):
        g.year_tolerance = 5  # frozen


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"match_mode": "loose"}, "grounding.match_mode", "use one of exact, normalized, fuzzy"),
        ({"year_tolerance": -1}, "grounding.year_tolerance", "not an integer >= 0"),
        ({"year_tolerance": 1.5}, "grounding.year_tolerance", "not an integer >= 0"),
        ({"year_tolerance": True}, "grounding.year_tolerance", "not an integer >= 0"),
        ({"match_threshold": 101}, "grounding.match_threshold", "not a score in [0, 100]"),
        ({"match_threshold": "high"}, "grounding.match_threshold", "not a score in [0, 100]"),
        ({"match_scorer": "nope"}, "grounding.match_scorer", "use one of ratio"),
        ({"match_scorer": ["ratio"]}, "grounding.match_scorer", "unknown match_scorer"),
        ({"match": "exact"}, "grounding", "unknown key(s) ['match']"),
        ([], "grounding", "expected an object"),
    ],
)
def test_from_dict_errors_name_the_file_and_the_field(data, field, words):
    record = {**GroundingSettings().to_dict(), **data} if isinstance(data, dict) else data
    with pytest.raises(InputError) as err:
        GroundingSettings.from_dict(record, path="d/meta.json")
    assert err.value.path == "d/meta.json" and err.value.field == field
    assert words in str(err.value)


def test_from_dict_needs_every_field():
    with pytest.raises(InputError, match=r"field 'grounding.year_tolerance': missing key"):
        GroundingSettings.from_dict({"match_mode": "exact"}, path="m.json")
    exact = {**GroundingSettings().to_dict(), "match_mode": "exact"}
    assert GroundingSettings.from_dict(exact) == GroundingSettings("exact")


def test_matcher_takes_the_settings_object():
    cat = Catalog.from_frame(pl.DataFrame({"item_id": ["m"], "title": ["The Matrix"], "year": [1999]}))
    assert Matcher(cat).settings == GroundingSettings()
    assert Matcher(cat).ground("The Matrix", 2001).item_id == "m"
    strict = Matcher(cat, GroundingSettings(year_tolerance=0))
    assert (
        strict.ground("The Matrix", 2001).item_id is None and strict.ground("The Matrix", 1999).item_id == "m"
    )
    assert "year_tolerance=0" in repr(strict)
    with pytest.raises(TypeError, match="GroundingSettings"):
        Matcher(cat, "exact")
