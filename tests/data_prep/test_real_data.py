"""The public data in ../shared/data (skipped when absent): ProtoQA, ReDial, the Reddit-v2 catalog."""

from __future__ import annotations

import json

import polars as pl
import pytest

from catalog.match import GroundingSettings, Matcher
from catalog.table import load_catalog
from data_prep.pool import expand_responders, pool_threads
from data_prep.readers import read_protoqa, read_reddit, read_redial
from data_prep.schema import Report
from data_prep.stats import dataset_stats
from tests.data_prep.conftest import write_jsonl

pytestmark = pytest.mark.data


def _sums(path, key):
    rows = [json.loads(line) for line in path.open()]
    if key == "raw":
        return {r["metadata"]["id"]: sum(r["answers"]["raw"].values()) for r in rows}
    return {r["metadata"]["id"]: sum(c["count"] for c in r["answers"]["clusters"].values()) for r in rows}


def test_protoqa_crowdsourced_dev(data_dir):
    path = data_dir / "protoqa/dev/dev.crowdsourced.jsonl"
    th = read_protoqa(path, items="raw")
    respondents = th.frame.group_by("request_id").agg(pl.col("responder_id").n_unique().alias("n"))
    assert dict(respondents.iter_rows()) == _sums(path, "raw")  # one respondent per raw answer count
    assert respondents["n"].min() == 99 and respondents["n"].max() == 101
    report = Report()
    pooled = pool_threads(th, Matcher(th.catalog), report=report)
    assert pooled.height == 52
    # Seven respondents answered "?": ungrounded, so n_x is 98-101.
    assert (pooled["n_responders"].min(), pooled["n_responders"].max()) == (98, 101)
    assert report.notes["responders_without_items"] == 7
    assert pooled["ungrounded"].list.len().sum() == 7
    rows = expand_responders(pooled)
    assert rows.height == pooled["n_responders"].sum() and rows["items"].list.len().max() == 1


def test_protoqa_scraped_dev_clusters(data_dir):
    path = data_dir / "protoqa/dev/dev.scraped.jsonl"
    th = read_protoqa(path, items="clusters")
    assert 3200 <= len(th.catalog) <= 3400  # docs/experiments.md: ~3.3k scraped items
    pooled = pool_threads(th, Matcher(th.catalog))
    assert pooled.height == 980
    assert dict(pooled.select("request_id", "n_responders").iter_rows()) == _sums(path, "clusters")
    assert pooled["ungrounded"].list.len().sum() == 0


@pytest.mark.filterwarnings("ignore:.*share a \\(title, year\\)")
def test_redial_test_is_single_responder(data_dir):
    th = read_redial(data_dir / "redial/test_data.jsonl")
    assert th.meta["dropped"] == {"no_recommendation": 16, "no_request_before_recommendation": 54}
    pooled = pool_threads(th, Matcher(th.catalog))
    assert pooled.height == 1342 - 70
    assert pooled["n_responders"].unique().to_list() == [1]
    s = dataset_stats(pooled)
    assert s["single_responder_request_share"] == 1.0 and s["union_reward_equals_summed_hits_share"] == 1.0
    assert s["ungrounded_share"] < 0.01


def test_reddit_rows_ground_against_the_real_reddit_v2_catalog(tmp_path, data_dir):
    catalog = load_catalog(data_dir / "reddit-v2-catalog/gt_catalog.csv")
    assert len(catalog) == 7404
    prompt = [{"role": "user", "content": "Pretend you are a movie recommender...\n\nMind-bending sci-fi?"}]
    rows = [
        {"prompt": prompt, "seen_titles": ["Arrival"],
         "groundtruth_with_release_year": [["Primer", "2004"], ["10 Cloverfield Lane", 2016]]},
        {"prompt": prompt, "seen_titles": ["Arrival"],
         "groundtruth_with_release_year": [["Primer", 2004], ["A Film Nobody Made", 2031]]},
    ]  # fmt: skip
    pooled = pool_threads(
        read_reddit(write_jsonl(tmp_path / "r.jsonl", rows)),
        Matcher(catalog, GroundingSettings(match_mode="exact")),
    )
    row = pooled.row(0, named=True)
    assert row["n_responders"] == 2 and row["counts"][0] == 2
    assert [catalog.display(i) for i in row["union"]] == ["Primer (2004)", "10 Cloverfield Lane (2016)"]
    assert row["ungrounded"] == ["A Film Nobody Made (2031)"]
