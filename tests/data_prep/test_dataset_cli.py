"""The dataset directory (atomic write, load back), ``remark prep`` / ``remark stats``, and fetch."""

from __future__ import annotations

import hashlib
import io
import json
import re
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from catalog.io.errors import InputError
from data_prep import dataset as dataset_mod
from data_prep.dataset import load_dataset
from data_prep.fetch import DATASETS, Remote, fetch
from remark.cli.main import main
from tests.data_prep.conftest import write_catalog_csv, write_jsonl
from tests.data_prep.test_pool import ROWS


@pytest.fixture
def inputs(tmp_path):
    return write_jsonl(tmp_path / "threads.jsonl", ROWS), write_catalog_csv(tmp_path / "cat.csv")


def prep(data, cat, out, *extra):
    return main(["prep", "threads", "--input", str(data), "--catalog", str(cat), "--out", str(out), *extra])


def test_prep_writes_a_dataset_that_loads_back(tmp_path, inputs, capsys):
    out = tmp_path / "ds"
    assert prep(*inputs, out, "--split-fractions", "test=1.0") == 0
    assert "wrote" in capsys.readouterr().out
    ds = load_dataset(out)
    assert ds.requests["request_id"].to_list() == ["q1", "q2"]
    assert ds.requests.columns == [
        "request_id", "prompt", "seen", "responders", "n_responders", "union", "counts", "ungrounded", "split"
    ]  # fmt: skip
    assert ds.requests["split"].to_list() == ["train", "test"]
    assert ds.responder_rows["responder_id"].to_list() == ["alice", "bob", "erin", "frank"]
    assert ds.meta["source"] == "threads" and ds.meta["has_years"] is True
    assert ds.meta["instruction_included"] is False and ds.meta["domain"] == "movie"
    assert len(ds.catalog) == 5
    stats = json.loads((out / "stats.json").read_text())
    assert stats["requests"] == 2 and stats["prep"]["notes"]["responders_without_items"] == 2


def test_stats_command_json_matches_the_file(tmp_path, inputs, capsys):
    out = tmp_path / "ds"
    prep(*inputs, out)
    capsys.readouterr()
    assert main(["stats", str(out), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    saved = json.loads((out / "stats.json").read_text())
    assert shown["n_responders"] == saved["n_responders"] and shown["responder_rows"] == 4
    assert main(["stats", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "responders per request: min 2" in printed
    # q1's split is given (train), q2's assigned with near-duplicate grouping, recorded and printed
    assert load_dataset(out).meta["split_near_duplicate_threshold"] == 84.5
    assert shown["split_near_duplicate_threshold"] == 84.5
    assert "near-duplicate prompts kept in one split (score >= 84.5, data_prep.request_split)" in printed


def test_stats_prints_the_overlap_of_a_respondent_split_and_warns(tmp_path, capsys):
    from tests.eval.conftest import write_split_dataset

    data = write_split_dataset(tmp_path / "respondents", by="respondent")
    assert main(["stats", str(data)]) == 0
    printed = capsys.readouterr().out
    assert (
        "Split overlap, test vs train: 4 test requests, 4 train requests; same prompt as a train request: 4; "
        "same or near-duplicate prompt (score >= 84.5, data_prep.request_split): 4"
    ) in printed
    assert "warning: 4 of 4 test requests are training requests (same or near-duplicate prompt)" in printed
    assert main(["stats", str(data), "--json"]) == 0
    captured = capsys.readouterr()
    overlap = json.loads(captured.out)["split_overlap"]
    assert list(overlap) == ["test"] and overlap["test"]["near_duplicate_prompt"] == 4
    assert 0 < overlap["test"]["target_overlap"] < 1
    assert captured.err.startswith("warning: 4 of 4 test requests are training requests")


def test_stats_prints_no_overlap_for_a_request_split(tmp_path, capsys):
    from tests.eval.conftest import write_split_dataset

    data = write_split_dataset(tmp_path / "requests", by="request")
    assert main(["stats", str(data)]) == 0
    printed = capsys.readouterr().out
    assert (
        "Split overlap, test vs train: 1 test requests, 3 train requests; same prompt as a train request: 0;"
        in printed
    )
    assert "near-duplicate prompt (score >= 84.5, data_prep.request_split): 0" in printed
    assert "warning" not in printed
    assert main(["stats", str(data), "--json"]) == 0
    captured = capsys.readouterr()
    overlap = json.loads(captured.out)["split_overlap"]["test"]
    assert (overlap["exact_prompt"], overlap["near_duplicate_prompt"], overlap["warning"]) == (0, 0, None)
    assert captured.err == ""


def test_stats_warns_when_one_near_duplicate_group_overfills_its_split(tmp_path, capsys):
    """50 requests with one prompt in three Unicode spellings and 10 others: prep puts the group in one
    split whole (more than any split's share at 0.8 / 0.1 / 0.1); stats says so in its report and on
    stderr, and in --json."""
    spellings = ["Films like Amélie?", "Films like Ame\u0301lie?", "Ｆｉｌｍｓ ｌｉｋｅ Ａｍéｌｉｅ?"]
    others = ["Old classics?", "Space operas", "Heist movies", "Courtroom dramas", "Silent comedies"]
    others += ["Road trips", "Submarine thrillers", "Chess biopics", "Ghost stories", "Jazz documentaries"]
    prompts = [spellings[i % 3] for i in range(50)] + others
    rows = [
        {"request_id": f"r{i:02d}", "prompt": [{"role": "user", "content": p}], "responder_id": "u1",
         "title": "Moon", "year": 2009}
        for i, p in enumerate(prompts)
    ]  # fmt: skip
    data = write_jsonl(tmp_path / "many.jsonl", rows)
    out = tmp_path / "ds"
    assert prep(data, write_catalog_csv(tmp_path / "cat.csv"), out) == 0
    splits = load_dataset(out).requests["split"].to_list()
    assert len(set(splits[:50])) == 1
    capsys.readouterr()
    assert main(["stats", str(out)]) == 0
    captured = capsys.readouterr()
    assert "near-duplicate groups: 11 over 60 requests, the largest 50" in captured.out
    line = "warning: one near-duplicate group holds 50 of 60 requests (83.3%) (request r00 among them)"
    assert line in captured.out and captured.err.startswith(line) and captured.err.count("\n") == 1
    assert main(["stats", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    groups = json.loads(captured.out)["split_groups"]
    assert (groups["largest_group"], groups["threshold"], groups["oversized_groups"]) == (50, 84.5, 1)
    assert captured.err.startswith(line)


def test_a_failed_run_leaves_the_old_dataset_untouched(tmp_path, inputs, monkeypatch, capsys):
    out = tmp_path / "ds"
    prep(*inputs, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def boom(*args, **kwargs):
        raise RuntimeError("killed while writing")

    monkeypatch.setattr(dataset_mod, "dataset_stats", lambda r: {"requests": r.height})
    monkeypatch.setattr(pl.DataFrame, "write_parquet", boom)
    assert prep(*inputs, out) == 1  # not an input error: the CLI's boundary shows the traceback
    assert "RuntimeError: killed while writing" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cat.csv", "ds", "threads.jsonl"]  # no temp left


def test_load_dataset_names_what_is_missing(tmp_path, inputs):
    with pytest.raises(InputError, match=r"requests\.parquet is missing"):
        load_dataset(tmp_path)
    out = tmp_path / "ds"
    prep(*inputs, out)
    pl.read_parquet(out / "requests.parquet").drop("counts").write_parquet(out / "requests.parquet")
    with pytest.raises(InputError, match=r"requests\.parquet, field 'counts': missing column"):
        load_dataset(out)


def test_prep_needs_a_catalog_for_sources_without_one(tmp_path, inputs, capsys):
    assert main(["prep", "threads", "--input", str(inputs[0]), "--out", str(tmp_path / "x")]) == 2
    assert "defines no catalog" in capsys.readouterr().err


def test_prep_split_prefix_and_bad_fractions(tmp_path, inputs, capsys):
    rows = [{**r, "split": None} for r in ROWS]
    data = write_jsonl(tmp_path / "nosplit.jsonl", rows)
    out = tmp_path / "ds"
    assert (
        main(["prep", "threads", "--input", f"valid={data}", "--catalog", str(inputs[1]), "--out", str(out)])
        == 0
    )
    assert load_dataset(out).requests["split"].unique().to_list() == ["valid"]
    assert prep(*inputs, out, "--split-fractions", "train=0.5") == 2
    assert "sum to 1" in capsys.readouterr().err


def test_round_trip_preserves_the_pooled_table(tmp_path, inputs):
    from catalog.match import Matcher
    from catalog.table import load_catalog
    from data_prep.dataset import write_dataset
    from data_prep.pool import pool_threads
    from data_prep.readers import read_threads

    cat = load_catalog(inputs[1])
    matcher = Matcher(cat)
    pooled = pool_threads(read_threads(inputs[0]), matcher)
    meta = {"source": "threads", "domain": "movie", "has_years": True, "instruction_included": False}
    written = write_dataset(tmp_path / "ds", pooled, cat, meta, grounding=matcher.settings)
    loaded = load_dataset(tmp_path / "ds")
    assert_frame_equal(loaded.requests, written.requests)
    assert_frame_equal(loaded.responder_rows, written.responder_rows)
    assert_frame_equal(loaded.catalog.df, cat.df)


class FakeResponse(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_fetch_writes_checked_files_with_a_fake_opener(tmp_path, monkeypatch):
    files = {"https://x/a.jsonl": b'{"a": 1}\n', "https://x/LICENSE": b"CC-BY"}
    monkeypatch.setitem(
        DATASETS,
        "fake",
        [
            Remote(
                "dev/a.jsonl", "https://x/a.jsonl", hashlib.sha256(files["https://x/a.jsonl"]).hexdigest()
            ),
            Remote("LICENSE", "https://x/LICENSE", None),
        ],
    )
    calls = []

    def opener(url, timeout):
        calls.append(url)
        return FakeResponse(files[url])

    written = fetch("fake", tmp_path / "out", opener=opener)
    assert [p.relative_to(tmp_path / "out").as_posix() for p in written] == ["dev/a.jsonl", "LICENSE"]
    assert (tmp_path / "out/dev/a.jsonl").read_bytes() == files["https://x/a.jsonl"]
    assert calls == list(files)
    files["https://x/a.jsonl"] = b"tampered"
    with pytest.raises(InputError, match="sha256"):
        fetch("fake", tmp_path / "again", opener=opener)
    assert not (tmp_path / "again/dev/a.jsonl").exists()


def test_protoqa_urls_are_pinned_to_the_recorded_commit():
    for remote in DATASETS["protoqa"]:
        assert remote.url.startswith("https://raw.githubusercontent.com/iesl/protoqa-data/c6c5696c")
    assert {r.dest for r in DATASETS["protoqa"]} >= {"dev/dev.crowdsourced.jsonl", "dev/dev.scraped.jsonl"}


def test_fetch_protoqa_holds_every_file_the_readme_reads():
    """The ProtoQA session (docs/usage.md) reads data/protoqa/<file>: `remark data fetch protoqa` must write each."""
    readme = (Path(__file__).resolve().parents[2] / "docs" / "usage.md").read_text()
    read = set(re.findall(r"data/protoqa/([\w./-]+\.jsonl)", readme))
    assert "dev/dev.predictions.human.jsonl" in read  # the session scores the human predictions
    assert read <= {r.dest for r in DATASETS["protoqa"]}


def test_fetch_sha256_matches_the_shared_copy():
    from tests.conftest import shared_data_dir

    root = shared_data_dir()
    if root is None or not (root / "protoqa").is_dir():
        pytest.skip("no shared ProtoQA copy (set REMARK_DATA_DIR to the data folder)")
    for remote in DATASETS["protoqa"]:
        local = root / "protoqa" / remote.dest
        if remote.sha256 is not None and local.is_file():
            assert hashlib.sha256(local.read_bytes()).hexdigest() == remote.sha256, remote.dest


def test_stats_lists_the_requests_whose_responder_count_is_an_outlier(tmp_path, capsys):
    """Ten test requests of 2 responders and one of 40: median 2, MAD 0 floored at 1, threshold 12; the
    40-responder request is flagged with 40 / 60 of the split's per-responder weight (data_prep.outliers)."""
    films = ["Moon", "Arrival", "Primer", "Solaris", "The Matrix"]
    rows = [
        {"request_id": f"r{i}", "prompt": f"Request number {i} about {films[i % 5]}", "responder_id": f"u{j}",
         "title": films[(i + j) % 5], "split": "test"}
        for i in range(10)
        for j in range(2)
    ] + [
        {"request_id": "big", "prompt": "One thread everyone answered", "responder_id": f"u{j}", "title": "Moon",
         "split": "test"}
        for j in range(40)
    ]  # fmt: skip
    out = tmp_path / "ds"
    assert prep(write_jsonl(tmp_path / "t.jsonl", rows), write_catalog_csv(tmp_path / "cat.csv"), out) == 0
    capsys.readouterr()
    assert main(["stats", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "responder-count outliers: 1 (rule: >= 5 answers with one equal mention count" in printed
    assert (
        "  big (test): 40 responders, 66.7% of the split's per-responder weight; responders: 40 > median 2.0 "
        "+ 10 x MAD 0.0 (floored at 1) = 12.0"
    ) in printed
    assert main(["stats", str(out), "--json"]) == 0
    block = json.loads(capsys.readouterr().out)["outliers"]
    assert "10 MAD" in block["rule"]
    assert block["requests"] == [
        {"request_id": "big", "split": "test", "n_responders": 40, "weight_share": 0.666667,
         "rules": ["responders"], "reason": "responders: 40 > median 2.0 + 10 x MAD 0.0 (floored at 1) = 12.0"}
    ]  # fmt: skip
    # without the big thread nothing is flagged, and the report says so
    small = tmp_path / "small"
    assert (
        prep(write_jsonl(tmp_path / "s.jsonl", rows[:20]), write_catalog_csv(tmp_path / "c2.csv"), small) == 0
    )
    capsys.readouterr()
    assert main(["stats", str(small)]) == 0
    assert "responder-count outliers: none (rule: " in capsys.readouterr().out
