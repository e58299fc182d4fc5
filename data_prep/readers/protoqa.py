"""ProtoQA (iesl/protoqa-data): Family-Feud questions answered by ~100 people each.

Each line is a question with ``answers.raw`` ({answer string: count}) and ``answers.clusters``
({cluster id: {count, answers}}). Every respondent gave one answer, so a question with raw counts
c_1..c_m has sum c_j respondents, respondent j naming one answer (ids ``a1, a2, ...`` in file order).
An answer with no text left after normalisation ("?": 7 respondents of crowdsourced dev) is kept as a
mention that grounds to nothing, so it lands in ``ungrounded`` and that respondent adds no responder
(see ``data_prep.pool``): crowdsourced dev has 99-101 respondents and n_x 98-101.
Crowdsourced dev has raw answers (n_x 99-101); scraped files have one string per cluster, and their raw
dict mirrors the cluster counts (n_x = sum of cluster counts). When ``raw`` is absent the clusters are
expanded instead (each cluster's first answer, ``count`` times).

Items (``items=``):

- ``raw``: every distinct answer string is an item;
- ``clusters``: a cluster's first answer, lower-cased, is the item (as docs/experiments.md uses the scraped
  data), with the cluster's other strings as aliases. A raw answer that belongs to a cluster of *its
  own question* is mapped to that cluster's item here, in the reader, because the same string can sit
  in clusters of different questions; raw answers in no cluster (crowdsourced raw strings were cleaned
  before clustering) keep their text and are grounded like any mention.

Each question's clusters and raw answers are also returned as written (``Threads.answers``,
``data_prep.schema.ANSWERS_SCHEMA``; ``remark prep`` writes them to ``answers.parquet``), so that
evaluation can match lists per question as ProtoQA's evaluator does (``eval.protoqa_match``).

The catalog is global (all items of the file), with ``item_id = normalize_title(item)``: the policy
names answers as free text and grounding maps them to these ids, so one string is one item across
questions. An alias claimed by two different items (clusters of different questions), or equal to
another item, is ambiguous for that global grounding; it is left out of the catalog's aliases and
counted in ``meta["ambiguous_aliases"]``.
Departure from ProtoQA's own evaluator, which matches answers against one question's clusters only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import polars as pl

from catalog.io.errors import InputError
from catalog.normalize import normalize_title
from catalog.table import Catalog
from data_prep.readers._io import iter_json_lines
from data_prep.schema import ANSWERS_SCHEMA, Report, Threads, validate_threads

Items = Literal["raw", "clusters"]


def read_protoqa(path: str | Path, *, items: Items = "raw", report: Report | None = None) -> Threads:
    """Read a ProtoQA answer file into a threads frame and its answer catalog (no years)."""
    if items not in ("raw", "clusters"):
        raise ValueError(f"items must be 'raw' or 'clusters', got {items!r}")
    report = report or Report()
    rows: dict[str, list] = {k: [] for k in ("request_id", "text", "answer", "count", "row")}
    cluster_rows: dict[str, list] = {"item": [], "alias": []}
    answer_rows: list[dict] = []
    seen_ids: dict[str, int] = {}
    for line_no, obj in iter_json_lines(path, report):
        parsed = _question(obj, path, line_no, items, report)
        if parsed is None:
            continue
        qid, text, answers, clusters = parsed
        if qid in seen_ids:
            report.bad(
                InputError(
                    f"question id {qid!r} already used on line {seen_ids[qid]}",
                    path=path,
                    row=line_no,
                    field="metadata.id",
                ),
                reason="duplicate_request",
            )
            continue
        seen_ids[qid] = line_no
        answer_rows.append(_answers_row(qid, obj["answers"]))
        for answer, count in answers:
            rows["request_id"].append(qid)
            rows["text"].append(text)
            rows["answer"].append(answer)
            rows["count"].append(count)
            rows["row"].append(line_no)
        for item, alias in clusters:
            cluster_rows["item"].append(item)
            cluster_rows["alias"].append(alias)
    answers_df = pl.DataFrame(
        rows,
        schema={
            "request_id": pl.String,
            "text": pl.String,
            "answer": pl.String,
            "count": pl.UInt32,
            "row": pl.UInt32,
        },
    )
    # One row per respondent: repeat each answer `count` times, number respondents within the question.
    frame = (
        answers_df.lazy()
        .with_columns(pl.int_ranges(pl.col("count")).alias("_k"))
        .explode("_k")
        .filter(pl.col("_k").is_not_null())
        .with_columns(
            pl.format("a{}", pl.int_range(1, pl.len() + 1).over("request_id")).alias("responder_id"),
            pl.concat_list(pl.struct(pl.lit("user").alias("role"), pl.col("text").alias("content"))).alias(
                "prompt"
            ),
            pl.col("answer").alias("title"),
            pl.lit(None, pl.Int32).alias("year"),
            pl.lit([], pl.List(pl.String)).alias("seen"),
            pl.lit(None, pl.String).alias("split"),
            pl.lit(str(path)).alias("file"),
        )
        .collect()
    )
    frame = validate_threads(frame, str(path), report)
    cat, ambiguous = _catalog(
        answers_df, pl.DataFrame(cluster_rows, schema={"item": pl.String, "alias": pl.String})
    )
    meta = {
        "source": "protoqa",
        "domain": "answer",
        "has_years": False,
        "instruction_included": False,
        "items": items,
        "ambiguous_aliases": ambiguous,
    }
    answers = pl.DataFrame(answer_rows, schema=ANSWERS_SCHEMA)
    return Threads(frame, cat, meta, answers.filter(pl.col("request_id").is_in(frame["request_id"].unique())))


def _answers_row(qid: str, answers: dict) -> dict:
    """One question's ``ANSWERS_SCHEMA`` row: clusters and raw answers as written (a count that is not
    a non-negative integer is null; ``_question`` has already refused the ones pooling reads)."""

    def count(value: object) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    clusters = [
        {"count": count(c.get("count")), "answers": list(c["answers"])}
        for c in (answers.get("clusters") or {}).values()
    ]
    raw = [{"answer": str(a), "count": count(n)} for a, n in (answers.get("raw") or {}).items()]
    return {"request_id": qid, "clusters": clusters, "raw": raw}


def _question(obj: dict, path, line_no: int, items: Items, report: Report):
    """One JSON object -> (id, prompt text, [(answer, count)], [(item, alias)]) or None (skipped)."""

    def bad(message: str, field: str, reason: str) -> None:
        hint = "fix the question, or pass --skip-bad-rows to skip it"
        report.bad(InputError(message, path=path, row=line_no, field=field, hint=hint), reason=reason)

    metadata, question, answers = obj.get("metadata"), obj.get("question"), obj.get("answers")
    for value, name in ((metadata, "metadata"), (question, "question"), (answers, "answers")):
        if value is not None and not isinstance(value, dict):
            return bad(f"{name} must be a JSON object, found {_kind(value)}", name, "bad_type")
    qid = (metadata or {}).get("id")
    text = (question or {}).get("normalized") or (question or {}).get("original")
    if not isinstance(qid, str) or not qid.strip():
        return bad("missing question id", "metadata.id", "missing_field")
    if not isinstance(text, str) or not text.strip():
        return bad("missing question text", "question.normalized", "missing_field")
    if not answers or not (answers.get("raw") or answers.get("clusters")):
        return bad("no answers (test files hold questions only)", "answers", "missing_field")
    for name, shape in (("raw", "{answer: count}"), ("clusters", "{cluster id: {count, answers}}")):
        if answers.get(name) is not None and not isinstance(answers[name], dict):
            found = _kind(answers[name])
            return bad(
                f"answers.{name} must be a JSON object {shape}, found {found}", f"answers.{name}", "bad_type"
            )
    clusters = answers.get("clusters") or {}
    item_of: dict[str, str] = {}  # this question's answer string -> its cluster's item
    pairs = []
    for cid, cluster in clusters.items():
        strings = cluster.get("answers") if isinstance(cluster, dict) else None
        if not isinstance(strings, list) or not strings or not all(isinstance(s, str) for s in strings):
            return bad(
                f"cluster {cid!r} needs a non-empty list of answer strings", "answers.clusters", "bad_cluster"
            )
        item = strings[0].strip().lower()
        for s in strings:
            item_of.setdefault(s.strip().lower(), item)
            pairs.append((item, s.strip().lower()))
    raw = answers.get("raw")
    if raw:
        counted = list(raw.items())
    else:
        counted = [(c["answers"][0], c.get("count")) for c in clusters.values()]
    out = []
    for answer, count in counted:
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            return bad(f"count of answer {answer!r} is {count!r}, not a count", "answers.raw", "bad_count")
        key = str(answer).strip().lower()
        out.append((item_of.get(key, key) if items == "clusters" else key, count))
    if sum(c for _, c in out) == 0:
        return bad("no respondent gave an answer", "answers.raw", "empty_responder")
    return qid.strip(), text.strip(), out, pairs if items == "clusters" else []


def _kind(value: object) -> str:
    """A JSON value's kind as a user wrote it: "a list", "a string", "a number"."""
    if isinstance(value, bool):
        return "a boolean"
    kinds = {list: "a list", dict: "an object", str: "a string", int: "a number", float: "a number"}
    return kinds.get(type(value), type(value).__name__)


def _catalog(answers: pl.DataFrame, clusters: pl.DataFrame):
    """Global answer catalog: item_id = normalize_title(title); popularity = respondents naming it."""
    key = pl.col("title").map_elements(normalize_title, return_dtype=pl.String)
    named = (
        answers.lazy()
        .group_by(pl.col("answer").alias("title"))
        .agg(pl.col("count").sum().cast(pl.Float64).alias("popularity"))
    )
    if clusters.height:  # items are the clusters; unclustered raw strings are mentions to ground
        listed = clusters.lazy().select(pl.col("item").alias("title")).unique()
        named = listed.join(named, on="title", how="left").with_columns(pl.col("popularity").fill_null(0.0))
    items = (
        named.with_columns(key.alias("item_id"))
        .filter(pl.col("item_id") != "")
        .group_by("item_id")
        .agg(pl.col("title").sort().first(), pl.col("popularity").sum())
    )
    # Aliases: strings of clusters; one claimed by two different items is ambiguous and left out.
    aliases = (
        clusters.lazy()
        .with_columns(
            pl.col("item").map_elements(normalize_title, return_dtype=pl.String).alias("item_id"),
            pl.col("alias").map_elements(normalize_title, return_dtype=pl.String).alias("_akey"),
        )
        .filter((pl.col("_akey") != "") & (pl.col("_akey") != pl.col("item_id")))
        .join(items.select(pl.col("item_id").alias("_akey")), on="_akey", how="anti")
        .unique(["item_id", "_akey"])
        .with_columns(pl.col("item_id").n_unique().over("_akey").alias("_claims"))
        .collect()
    )
    ambiguous = int(aliases.filter(pl.col("_claims") > 1)["_akey"].n_unique())
    alias_lists = (
        aliases.lazy()
        .filter(pl.col("_claims") == 1)
        .group_by("item_id")
        .agg(pl.col("alias").unique().sort().alias("aliases"))
    )
    df = (
        items.join(alias_lists, on="item_id", how="left")
        .select(
            "item_id",
            "title",
            pl.lit(None, pl.Int32).alias("year"),
            pl.col("aliases").fill_null([]),
            "popularity",
        )
        .sort("item_id")
        .collect()
    )
    return Catalog(df), ambiguous
