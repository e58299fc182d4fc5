"""Bad input: a clear error naming file, line and field, or (--skip-bad-rows) skipped and counted."""

from __future__ import annotations

import json

import pytest

from catalog.io.errors import InputError
from data_prep.pool import pool_threads
from data_prep.readers import read_protoqa, read_reddit, read_threads
from data_prep.schema import Report
from remark.cli.main import main
from tests.data_prep.conftest import write_catalog_csv, write_jsonl


def reddit_row(gt, prompt="movies like Moon?", **extra):
    return {"prompt": [{"role": "user", "content": prompt}], "seen_titles": [],
            "groundtruth_with_release_year": gt, **extra}  # fmt: skip


GOOD = reddit_row([["Primer", 2004]])


def thread_row(**over):
    row = {"request_id": "q1", "prompt": "p", "responder_id": "a", "title": "Moon", "year": 2009}
    return {**row, **over}


CASES = [
    # (name, reader, rows, line, field, message fragment, skip reason)
    ("malformed JSON", read_reddit, [GOOD, '{"prompt": [', GOOD], 2, None, "not valid JSON", "malformed_json"),
    ("not an object", read_reddit, [GOOD, "[1, 2]"], 2, None, "expected a JSON object", "malformed_json"),
    ("missing field", read_reddit, [GOOD, {"prompt": "x", "seen_titles": []}], 2,
     "groundtruth_with_release_year", "missing field", "missing_groundtruth_with_release_year"),
    ("empty responder", read_reddit, [GOOD, reddit_row([])], 2, "groundtruth_with_release_year",
     "empty ground-truth list", "empty_responder"),
    ("garbage year", read_reddit, [GOOD, reddit_row([["Moon", "n/a"]])], 2, "groundtruth_with_release_year",
     "'n/a' is not a year", "bad_year"),
    ("not a pair", read_reddit, [GOOD, reddit_row([["Moon"]])], 2, "groundtruth_with_release_year",
     "is not a [title, year] pair", "bad_groundtruth_entry"),
    ("duplicate responder", read_reddit, [reddit_row([["Moon", 2009]], responder_id="u1"), GOOD,
     reddit_row([["Primer", 2004]], responder_id="u1")], 3, "responder_id", "responder 'u1' already has a row",
     "duplicate_responder"),
    ("threads missing title", read_threads, [thread_row(), thread_row(responder_id="b", title=None)], 2,
     "title", "missing or empty value", "missing_title"),
    ("threads garbage year", read_threads, [thread_row(), thread_row(responder_id="b", year="19x9")], 2,
     "year", "'19x9' is not a year", "bad_year"),
    ("threads float year", read_threads, [thread_row(), thread_row(responder_id="b", year=2009.5)], 2,
     "year", "'2009.5' is not a year", "bad_year"),
    ("threads duplicate rows", read_threads, [thread_row(), thread_row(responder_id="b"), thread_row()], 3,
     "responder_id", "duplicate row", "duplicate_mention"),
    ("threads bad prompt", read_threads, [thread_row(), thread_row(request_id="q2", prompt=[{"role": "x"}])], 2,
     "prompt", "message 1 needs a role", "bad_prompt"),
    ("threads two prompts", read_threads, [thread_row(), thread_row(responder_id="b", prompt="other")], 1,
     "prompt", "request 'q1' has different prompts", "conflicting_prompt"),
    ("protoqa missing id", read_protoqa, [{"question": {"normalized": "q?"}, "answers": {"raw": {"a": 1}}}], 1,
     "metadata.id", "missing question id", "missing_field"),
    ("protoqa bad count", read_protoqa, [{"metadata": {"id": "q"}, "question": {"normalized": "q?"},
     "answers": {"raw": {"a": "lots"}}}], 1, "answers.raw", "count of answer 'a' is 'lots'", "bad_count"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "reader", "rows", "line", "field", "fragment", "reason"), CASES)
def test_bad_rows_raise_with_file_line_field(tmp_path, name, reader, rows, line, field, fragment, reason):
    path = write_jsonl(tmp_path / "in.jsonl", rows)
    with pytest.raises(InputError) as info:
        reader(path)
    err = info.value
    assert (err.path, err.row, err.field) == (str(path), line, field), str(err)
    assert fragment in str(err)
    assert str(err).startswith(f"{path}, row {line}")


@pytest.mark.parametrize(("name", "reader", "rows", "line", "field", "fragment", "reason"), CASES)
def test_bad_rows_are_skipped_and_counted(tmp_path, name, reader, rows, line, field, fragment, reason):
    report = Report(skip=True)
    th = reader(write_jsonl(tmp_path / "in.jsonl", rows), report=report)
    # a request whose rows disagree on the prompt is dropped whole (both rows)
    assert report.skipped == {reason: 2 if reason == "conflicting_prompt" else 1}
    assert fragment in report.examples[reason]
    assert line not in th.frame["row"].to_list()


def test_request_with_no_grounded_item(tmp_path, matcher):
    rows = [thread_row(), thread_row(request_id="q2", title="Not A Film", year=1990)]
    th = read_threads(write_jsonl(tmp_path / "t.jsonl", rows))
    with pytest.raises(
        InputError, match=r"t\.jsonl, row 2, field 'title': request 'q2': no mention grounded"
    ):
        pool_threads(th, matcher)
    report = Report(skip=True)
    pooled = pool_threads(th, matcher, report=report)
    assert pooled["request_id"].to_list() == ["q1"] and report.skipped == {"no_grounded_item": 1}


def test_missing_column_in_csv_names_the_field(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("request_id,prompt,title\nq1,p,Moon\n")
    with pytest.raises(InputError, match="field 'responder_id': missing column"):
        read_threads(path)


def test_cli_reports_error_and_skips_with_counts(tmp_path, capsys):
    rows = [thread_row(), "{oops", thread_row(responder_id="b", year="abc"), thread_row(request_id="q2",
            title="Nothing Here", year=1990), thread_row(request_id="q3", responder_id="c", title="Primer", year=2004)]  # fmt: skip
    data = write_jsonl(tmp_path / "t.jsonl", rows)
    cat = write_catalog_csv(tmp_path / "cat.csv")
    out = tmp_path / "ds"
    args = ["prep", "threads", "--input", str(data), "--catalog", str(cat), "--out", str(out)]
    assert main(args) == 2
    assert f"{data}, row 2: not valid JSON" in capsys.readouterr().err
    assert not out.exists()  # nothing half-written
    assert main([*args, "--skip-bad-rows"]) == 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["prep"]["skipped"] == {"bad_year": 1, "malformed_json": 1, "no_grounded_item": 1}
    assert stats["requests"] == 2
