"""The real public catalogs load, and grounding behaves on them (skipped without ../shared/data)."""

from __future__ import annotations

import random
import warnings

import pytest

from catalog import GroundingSettings, Matcher, load_catalog
from catalog.oracles.matcher import reference_ground

pytestmark = pytest.mark.data


@pytest.fixture(scope="module")
def gt(data_dir):
    return load_catalog(data_dir / "reddit-v2-catalog" / "gt_catalog.csv")


def test_real_catalogs_load(data_dir, gt) -> None:
    assert len(gt) == 7404 and gt.has_years
    assert gt.df.filter(gt.df["title"] == "The Wall")["year"].to_list().count(201) == 1  # kept as given
    rm = load_catalog(data_dir / "reddit-movie-cikm23" / "reddit" / "entity2id.json")
    assert len(rm) == 7506 and rm.df["item_id"].str.starts_with("tt").all()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        redial = load_catalog(data_dir / "redial" / "movies_with_mentions.csv")
    assert len(redial) == 6924
    assert any("kept 16 rows" in str(w.message) for w in caught)  # 8 films listed twice upstream
    row = redial.df.filter(redial.df["item_id"] == "75881").row(0, named=True)
    assert (row["title"], row["year"], row["popularity"]) == ("Toy Story 2", 1999, 26.0)
    assert redial.df["title"].str.contains("  ").sum() == 0  # "Title  (Year)" split cleanly


def test_grounding_on_gt_catalog(gt) -> None:
    m = Matcher(gt)
    assert m.ground("Matrix, The", 2000).item_id == "The Matrix (1999)"
    assert m.ground("Blade Runner 2049", 2017).item_id == "Blade Runner 2049 (2017)"
    assert m.ground("2001: A Space Odyssey", 1968).item_id == "2001: A Space Odyssey (1968)"
    assert (
        Matcher(gt, GroundingSettings(match_mode="exact")).ground("The Matrix", 1999).item_id
        == "The Matrix (1999)"
    )


def test_batched_equals_reference_on_real_catalog(gt) -> None:
    rng = random.Random(0)
    m = Matcher(gt)
    titles, years = gt.df["title"].to_list(), gt.df["year"].to_list()
    qs = []
    for _ in range(40):
        i = rng.randrange(len(titles))
        t = titles[i]
        j = rng.randrange(len(t))
        qs.append((t[:j] + rng.choice("aeiou") + t[j + 1 :], years[i] + rng.choice([-2, 0, 1])))
    got = m.ground_many([t for t, _ in qs], [y for _, y in qs])
    for (t, y), g in zip(qs, got, strict=True):
        r = reference_ground(m, t, y)
        assert (g.item_id, g.rule, round(g.score, 6)) == (r.item_id, r.rule, round(r.score, 6)), (t, y)


def test_rank_grpo_tolerance_pairs_in_gt_catalog(gt) -> None:
    from catalog import tolerance_groups

    groups = tolerance_groups(gt)
    merged = groups.filter(groups["item_id"] != groups["group"])
    assert merged.height == 37  # catalog rows Rank-GRPO's +-2 tolerance makes one item with another
    assert dict(groups.iter_rows())["Django Unchained (2013)"] == "Django Unchained (2012)"
