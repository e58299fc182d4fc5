"""Score a predictions file against a prepared dataset: read, check, ground, score, bootstrap.

Predictions are JSON lines ``{"request_id": str, "recommendations": [str, ...]}`` (ranked; other fields
are ignored). Each recommendation is parsed like one generated line (``catalog.parse.parse_line``: list
markers, quotes and a ``(Year)`` stripped) and grounded with ``catalog.match.Matcher`` using the
dataset's grounding settings (``meta.json["grounding"]``); settings asked for explicitly replace the
dataset's field by field, and the result's ``settings.grounding`` records what was used, what the dataset
says and what differs (``data_prep.dataset.choose_grounding``; a difference is also a warning).
A slot that does not parse or ground stays a slot (it consumes a rank unless compaction drops it).

Which requests are scored (never fewer than the predictions cover without an error): ``split`` names one
split (default ``test``) or ``"all"`` (every request of the dataset). A prediction for a request of
another split than the one scored is an error by default, naming how many there are per split and how
to include them (``--split all``, or ``--split NAME``); with ``on_other_split="ignore"`` they are left out
on purpose and counted in the result's ``warnings`` and ``n_predictions``. Scoring every request that
has predictions by default was the other choice; it was not taken because a predictions file that
covers training requests would then silently mix them into a test figure. The result always says
``n_requests`` (scored), ``n_predictions`` (in the file) and ``requests_by_split``.

Bad input, and what happens (never a metric over a silent subset):

- not JSON, not an object, ``request_id`` not a non-empty string, ``recommendations`` not a list, an item
  that is not a string, a request id given twice: ``InputError`` naming the file, line and field;
- a request id that the dataset does not have: ``InputError`` (usually the wrong file or dataset), or,
  with ``on_unknown="warn"``, ignored and counted;
- a request of another split than the one scored: ``InputError`` (see above), or, with
  ``on_other_split="ignore"``, ignored and counted;
- a request of the scored split without a prediction: ``InputError``, or, with ``on_missing="empty"``,
  scored as an empty list (all metrics 0) and counted;
- an empty list, or an empty-string item: scored as given (no hits; the empty string is an empty slot)
  and counted, since both are legitimate if poor answers (GPT-2's ProtoQA file has empty strings).

The counts land in the result's ``warnings``; the CLI prints them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import polars as pl

from catalog.io.errors import InputError
from catalog.io.files import iter_jsonl
from catalog.io.versions import package_versions
from catalog.match import GroundingSettings, Matcher
from catalog.parse import parse_line
from data_prep.dataset import GroundingChoice, PooledDataset, choose_grounding, dataset_identity
from eval.bootstrap import DEFAULT_CI, BootstrapConfig, intervals
from eval.collapse import requests_collapse
from eval.leakage import overlap_against_train
from eval.metrics import DEFAULT_KS, METRICS
from eval.views import VIEWS, ScoredLists, key_views, score_lists, split_key

OnUnknown = Literal["error", "warn"]
OnMissing = Literal["error", "empty"]
OnOtherSplit = Literal["error", "ignore"]
#: the ``split`` value that scores every request of the dataset
ALL_SPLITS = "all"


@dataclass
class Predictions:
    """A read predictions file: one ranked list of raw strings per request, with its line number."""

    path: str
    request_ids: list[str]
    recommendations: list[list[str]]
    lines: list[int]


def read_predictions(path: str | Path) -> Predictions:
    """Read and check a predictions JSON-lines file (errors name the line and field)."""
    p = Path(path)
    if not p.is_file():
        raise InputError("predictions file not found", path=p)
    ids: list[str] = []
    recs: list[list[str]] = []
    lines: list[int] = []
    first_line: dict[str, int] = {}
    for line_no, obj in iter_jsonl(p, hint=_FORMAT):
        rid = obj.get("request_id")
        if not isinstance(rid, str) or not rid:
            raise InputError("missing or not a non-empty string", path=p, row=line_no, field="request_id")
        items = obj.get("recommendations")
        if not isinstance(items, list):
            raise InputError(
                "missing or not a list", path=p, row=line_no, field="recommendations", hint=_FORMAT
            )
        for i, x in enumerate(items):
            if not isinstance(x, str):
                raise InputError(
                    f"item is {type(x).__name__} {x!r}, not a string",
                    path=p,
                    row=line_no,
                    field=f"recommendations[{i}]",
                    hint='write every recommendation as a string, e.g. "Title (Year)"',
                )
        if rid in first_line:
            raise InputError(
                f"request {rid!r} already has predictions on line {first_line[rid]}",
                path=p,
                row=line_no,
                field="request_id",
                hint="keep one ranked list per request",
            )
        first_line[rid] = line_no
        ids.append(rid)
        recs.append(items)
        lines.append(line_no)
    if not ids:
        raise InputError("no predictions in the file", path=p, hint=_FORMAT)
    return Predictions(str(p), ids, recs, lines)


_FORMAT = 'expected JSON lines {"request_id": str, "recommendations": [str, ...]}'


def ground_lists(lists: Sequence[Sequence[str]], matcher: Matcher) -> list[list[str | None]]:
    """Raw strings -> catalog ids (None when an item does not parse or ground), one batched grounding."""
    parsed = [parse_line(x) if x.strip() else (None, None) for lst in lists for x in lst]
    matches = matcher.ground_many([t for t, _ in parsed], [y for _, y in parsed])
    ids = [m.item_id if t is not None else None for m, (t, _) in zip(matches, parsed)]
    out, pos = [], 0
    for lst in lists:
        out.append(ids[pos : pos + len(lst)])
        pos += len(lst)
    return out


@dataclass
class Aligned:
    """Predictions aligned with the scored requests (one list per request, in the requests' order)."""

    requests: pl.DataFrame
    lists: list[list[str]]
    warnings: dict[str, int] = field(default_factory=dict)


def align(
    preds: Predictions,
    requests: pl.DataFrame,
    *,
    split: str | None,
    on_unknown: OnUnknown = "error",
    on_missing: OnMissing = "error",
    on_other_split: OnOtherSplit = "error",
) -> Aligned:
    """Match prediction lines to the dataset's requests of ``split`` (None or ``"all"``: every request)."""
    if split == ALL_SPLITS:
        split = None
    all_ids = requests["request_id"].to_list()
    split_of = dict(zip(all_ids, requests["split"].to_list()))
    scored = requests if split is None else requests.filter(pl.col("split") == split)
    if scored.height == 0:
        splits = sorted(set(requests["split"].to_list()))
        raise InputError(
            f"the dataset has no request in split {split!r}",
            field="split",
            hint=f"splits: {splits}, or {ALL_SPLITS!r} for every request",
        )
    warnings: dict[str, int] = {}
    by_id: dict[str, list[str]] = {}
    unknown: list[tuple[str, int]] = []
    other: dict[str, int] = {}
    for rid, items, line in zip(preds.request_ids, preds.recommendations, preds.lines):
        if rid not in split_of:
            unknown.append((rid, line))
        elif split is not None and split_of[rid] != split:
            other[split_of[rid]] = other.get(split_of[rid], 0) + 1
        else:
            by_id[rid] = items
    if unknown:
        if on_unknown == "error":
            rid, line = unknown[0]
            raise InputError(
                f"request {rid!r} is not in the dataset ({len(unknown)} unknown request ids in all)",
                path=preds.path,
                row=line,
                field="request_id",
                hint="check that the predictions and --data belong together, or pass --on-unknown warn",
            )
        warnings["unknown_ignored"] = len(unknown)
    if other:
        n_other = sum(other.values())
        if on_other_split == "error":
            per = ", ".join(f"{k}: {v}" for k, v in sorted(other.items()))
            raise InputError(
                f"{n_other} of {len(preds.request_ids)} predictions are for requests outside split {split!r} "
                f"({per}): scoring {split!r} alone would report on {len(by_id)} of the {len(by_id) + n_other} "
                "predicted requests",
                path=preds.path,
                field="split",
                hint=f"pass --split {ALL_SPLITS} to score every request, --split NAME for another split, or "
                f"--on-other-split ignore to score split {split!r} only",
            )
        warnings["other_split_ignored"] = n_other
    ids = scored["request_id"].to_list()
    missing = [rid for rid in ids if rid not in by_id]
    if missing:
        if on_missing == "error":
            raise InputError(
                f"{len(missing)} of {len(ids)} requests have no prediction (first: {missing[0]!r})",
                path=preds.path,
                hint="predict every request of the split, or pass --on-missing empty to score them as empty lists",
            )
        warnings["missing_scored_empty"] = len(missing)
    lists = [by_id.get(rid, []) for rid in ids]
    empty_lists = sum(1 for lst, rid in zip(lists, ids) if not lst and rid in by_id)
    empty_items = sum(1 for lst in lists for x in lst if not x.strip())
    if empty_lists:
        warnings["empty_lists"] = empty_lists
    if empty_items:
        warnings["empty_items"] = empty_items
    return Aligned(scored, lists, warnings)


def summarize(
    scored: ScoredLists,
    config: BootstrapConfig,
    *,
    settings: dict[str, Any] | None = None,
    warnings: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The result JSON: ``{"n_requests", "per_responder": {"recall@10": {"mean", "ci_low", "ci_high"}},
    "union": {...}, "single_mention": {...}, "settings", "ci", "counts", "warnings"}``; a slot-filter
    variant is a view of its own (``"per_responder/drop_ooc": {...}``)."""
    table = intervals(scored.per_request, scored.keys, config)
    out: dict[str, Any] = {"n_requests": scored.per_request.height}
    for view in key_views(scored.keys):
        cells = {split_key(k)[0]: v for k, v in table.items() if split_key(k)[1] == view}
        if cells:
            out[view] = cells
    lists = scored.per_request.select(pl.col("list/distinct", "list/length", "list/eligible").mean())
    out["settings"] = {**scored.settings, **(settings or {})}
    out["ci"] = config.as_dict()
    out["counts"] = dict(scored.counts)
    out["lists"] = {
        k.split("/")[1] + "_mean": round(float(v), 4) for k, v in lists.row(0, named=True).items()
    }
    out["warnings"] = dict(warnings or {})
    out["versions"] = package_versions()
    return out


def grounding_choice(
    dataset: PooledDataset,
    grounding: GroundingSettings | Mapping[str, Any] | None,
    *,
    by: str = "the caller",
) -> GroundingChoice:
    """The dataset's grounding with ``grounding`` over it (a ``GroundingSettings`` sets every field; a
    mapping the fields it holds that are not None; None none)."""
    asked = grounding.to_dict() if isinstance(grounding, GroundingSettings) else dict(grounding or {})
    return choose_grounding(dataset, asked, by=by)


def grounding_record(choice: GroundingChoice, warnings: dict[str, int]) -> dict[str, Any]:
    """``settings["grounding"]`` of a result (``choice.to_dict()`` plus its notes); counts a difference
    from the dataset's settings in ``warnings["grounding_overridden"]``."""
    if choice.overridden:
        warnings["grounding_overridden"] = len(choice.overridden)
    return {**choice.to_dict(), "notes": choice.notes()}


def score_predictions(
    dataset: PooledDataset,
    preds: Predictions,
    *,
    split: str | None = "test",
    grounding: GroundingSettings | Mapping[str, Any] | None = None,
    grounding_by: str = "the caller",
    ks: Sequence[int] = DEFAULT_KS,
    metrics: Sequence[str] = METRICS,
    compact: bool = True,
    filters: Sequence[str] = (),
    views: Sequence[str] = VIEWS,
    config: BootstrapConfig = DEFAULT_CI,
    on_unknown: OnUnknown = "error",
    on_missing: OnMissing = "error",
    on_other_split: OnOtherSplit = "error",
) -> tuple[dict[str, Any], ScoredLists]:
    """Align, ground, score and bootstrap; returns (result JSON, per-request scores).

    ``grounding``: settings asked for instead of the dataset's (see :func:`grounding_choice`);
    ``grounding_by`` names who asked, for the printed note. ``result["split_overlap"]``: the scored
    requests' overlap with the dataset's train split (``eval.leakage``), when that means something.
    ``result["collapse"]``: the lists' diversity and popularity (``eval.collapse.requests_collapse``: window
    K = ``max(ks)``, targets the requests' ``union``, popularity from the dataset's train split).
    """
    aligned = align(
        preds,
        dataset.requests,
        split=split,
        on_unknown=on_unknown,
        on_missing=on_missing,
        on_other_split=on_other_split,
    )
    choice = grounding_choice(dataset, grounding, by=grounding_by)
    matcher = Matcher(dataset.catalog, choice.used)
    grounded = ground_lists(aligned.lists, matcher)
    scored = score_lists(
        aligned.requests, grounded, ks=ks, metrics=metrics, views=views, compact=compact, filters=filters
    )
    warnings = dict(aligned.warnings)
    settings = {
        "grounding": grounding_record(choice, warnings),
        "split": ALL_SPLITS if split is None else split,
        "predictions": preds.path,
        "dataset": dataset_identity(dataset),
    }
    result = summarize(scored, config, settings=settings, warnings=warnings)
    scored.per_row = per_row_table(scored, aligned.requests, dataset.responder_rows)
    result["n_predictions"] = len(preds.request_ids)
    result["requests_by_split"] = requests_by_split(aligned.requests)
    result["collapse"] = requests_collapse(
        grounded, aligned.requests, dataset.requests, k=max(ks), n_items=len(dataset.catalog)
    )
    overlap = overlap_against_train(dataset.requests, split, evaluated=aligned.requests)
    if overlap is not None:
        result["split_overlap"] = overlap
    return result, scored


#: the identifying columns of a per-row table (``per_row.parquet``), before the metric columns
ROW_ID_COLUMNS = ("request_id", "responder_id", "responder_index", "split", "n_lists", "n_targets")


def per_row_table(
    scored: ScoredLists, requests: pl.DataFrame, responder_rows: pl.DataFrame
) -> pl.DataFrame | None:
    """``scored.per_row`` with each row's ``responder_id`` (the dataset's ``responder_rows.parquet``) and
    its request's ``split``: :data:`ROW_ID_COLUMNS`, then every per-responder metric column (None when the
    per-responder view was not scored). ``per_row.parquet`` of ``remark eval score --out`` / ``eval run``."""
    if scored.per_row is None:
        return None
    ids = responder_rows.select("request_id", "responder_index", "responder_id")
    table = scored.per_row.join(ids, on=["request_id", "responder_index"], how="left", maintain_order="left")
    table = table.join(
        requests.select("request_id", "split"), on="request_id", how="left", maintain_order="left"
    )
    return table.select(*ROW_ID_COLUMNS, *[c for c in scored.per_row.columns if c not in ROW_ID_COLUMNS])


def requests_by_split(requests: pl.DataFrame) -> dict[str, int]:
    """``{split: number of requests}`` of a requests frame, splits sorted."""
    counts = requests.group_by("split").len().sort("split")
    return dict(zip(counts["split"].to_list(), counts["len"].to_list()))
