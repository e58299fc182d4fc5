"""``remark eval run``: generate lists for a split, ground, score, bootstrap, write every output atomically.

Outputs in ``out_dir``, written together into one temporary folder and swapped in once complete
(``catalog.io.outputs.atomic_dir``, kind ``"eval-run"``; ``remark eval score --out`` writes kind ``"eval-score"``):
a killed run leaves the previous complete folder or none, never files of two runs side by side, and a
folder that is not an earlier output of the same command is refused before any generation:

- ``predictions.jsonl``: greedy lists, ``{"request_id", "recommendations", "grounded", "completion"}``;
  ``recommendations`` are the parsed lines ("Title (Year)"), so ``remark eval score`` on this file gives
  the same numbers (``grounded`` holds the catalog ids, null when a line did not ground);
- ``samples.jsonl`` (with ``num_samples > 0``): the same per sampled list, plus ``sample``;
- ``metrics.json``: the score JSON of the greedy lists (``n_requests``, ``per_responder``, ``union``,
  ``single_mention``, ``settings``, ``ci``, ``counts``, ``lists``, ``warnings``; ``collapse``: the lists'
  diversity and popularity, ``eval.collapse.requests_collapse``; ``split_overlap``: the
  evaluated requests' overlap with the train split, ``eval.leakage``, when the dataset has one and the
  split is another), with ``sampled`` (the
  same for sampled lists) and ``generation`` (engine, model, config; ``max_new_tokens`` the cap used,
  ``eval.generate.TOKENS_PER_ITEM`` x k unless one was given, and ``notes``: a cap below that);
- ``per_request.parquet`` (and ``per_request_sampled.parquet``): per-request values, the training
  eval-log format, so ``remark eval compare`` can pair two runs;
- on a dataset that carries ProtoQA's answers (``answers.parquet``): ``metrics.json["protoqa"]`` (and
  ``["sampled"]["protoqa"]``), the lists matched per question as ProtoQA's evaluator matches them
  (``eval.protoqa_match``: ``per_responder``, ``union``, ``max_answers``), and its per-request columns
  ``protoqa/recall@K/per_responder``, ``protoqa/recall@K/union``, ``protoqa/max_answers@K``,
  ``protoqa/n_responders`` in the per-request tables, beside the catalog-matched ones;
- ``per_row.parquet`` (and ``per_row_sampled.parquet``): one row per (request, responder), Rank-GRPO's
  eval rows (``eval.score.per_row_table``: ``request_id``, ``responder_id``, ``responder_index``,
  ``split``, ``n_lists``, ``n_targets``, every per-responder metric column; sampled: the mean over the
  request's samples); a column's mean over its non-null rows is ``metrics.json``'s per-responder value;
- ``report.md`` and ``metrics.png`` (``metrics_sampled.png``).

Lines are parsed with ``catalog.lists.parse_lists`` (``parse_list``'s rules; every line a rank; the
whole completion is kept, as Rank-GRPO's eval parses every line before compaction and the cut at k)
and grounded with the dataset's grounding settings unless others are asked for
(``eval.score.grounding_choice``: recorded in ``metrics.json["settings"]["grounding"]``, a difference
counted in ``warnings``). A model from a
``remark train`` run (``runs/x/best``) is checked against the grounding its run recorded
(``eval.training_record``): a difference is a printed note, ``settings.grounding.training`` and
``warnings.grounding_differs_from_training``. ``split="all"`` evaluates every request of the dataset.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from catalog.io.errors import InputError
from catalog.io.outputs import atomic_dir, check_output_dir
from catalog.lists import parse_lists
from catalog.match import GroundingSettings, Matcher
from data_prep.dataset import dataset_identity, load_dataset
from eval.adapters import adapter_base, is_adapter_dir
from eval.bootstrap import DEFAULT_CI, BootstrapConfig
from eval.collapse import requests_collapse
from eval.generate import DEFAULT_GENERATION, NO_ADAPTER, AdapterLoad, GenerationConfig, generate_lists
from eval.leakage import overlap_against_train
from eval.metrics import DEFAULT_KS, METRICS
from eval.protoqa_match import protoqa_markdown, protoqa_result, with_protoqa
from eval.report import metrics_markdown, plot_metrics
from eval.score import (
    ALL_SPLITS,
    grounding_choice,
    grounding_record,
    per_row_table,
    requests_by_split,
    summarize,
)
from eval.training_record import training_comparison
from eval.views import VIEWS, score_lists


def parse_and_ground(
    completions: Sequence[str], matcher: Matcher
) -> tuple[list[list[str]], list[list[str | None]]]:
    """Completions -> (display strings per line, catalog id or None per line).

    Lines from ``catalog.lists.parse_lists`` and ids from ``Matcher.ground_lines``: the trainer's
    rewards take the same path. Display: "Title (Year)" for parsed lines, the raw text for unparsed ones.
    """
    parsed = parse_lists(completions)
    flat = [
        text if title is None else (title if year is None else f"{title} ({year})")
        for text, title, year in zip(parsed.texts, parsed.titles, parsed.years, strict=True)
    ]
    return parsed.split(flat), matcher.ground_lines(parsed)


def describe_lists(completions: Sequence[str], grounded: Sequence[Sequence[str | None]]) -> dict[str, Any]:
    """What the generated lists were, beside their scores: per list, the lines that hold a rank, those in
    which a title parsed, those that grounded to a catalog item; the lists with no rank at all; and the
    first three completions (cut at 300 characters). A score of 0 then says whether the model wrote no
    list, lists of unknown titles or lists of the wrong items."""
    parsed = parse_lists(completions)
    titles = parsed.split([t is not None for t in parsed.titles])
    n = max(len(completions), 1)
    return {
        "n_lists": len(completions),
        "lines_per_list": sum(parsed.n_lines) / n,
        "parsed_per_list": sum(sum(row) for row in titles) / n,
        "grounded_per_list": sum(sum(i is not None for i in row) for row in grounded) / n,
        "lists_without_lines": sum(1 for k in parsed.n_lines if k == 0),
        "examples": [c[:300] for c in completions[:3]],
    }


def lists_markdown(shape: dict[str, Any], title: str) -> str:
    examples = "\n".join(f"    {json.dumps(c, ensure_ascii=False)}" for c in shape["examples"])
    return (
        f"\n{title}: {shape['n_lists']} lists; per list {shape['lines_per_list']:.2f} lines, "
        f"{shape['parsed_per_list']:.2f} with a title, {shape['grounded_per_list']:.2f} grounded to the catalog; "
        f"{shape['lists_without_lines']} lists without a line. The first completions:\n\n{examples}\n"
    )


#: ``catalog.io.outputs.atomic_dir`` kinds of the two output folders.
SCORE_KIND = "eval-score"
RUN_KIND = "eval-run"


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def _write_rows(path: Path, table: pl.DataFrame | None) -> None:
    if table is not None:  # None: the per-responder view was not scored
        table.write_parquet(path)


def _write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2, allow_nan=True) + "\n")


#: what ``metrics.json`` must hold where commands read it back (``remark eval compare``, ``remark card``)
METRICS_SCHEMA = {"n_requests": int}
METRICS_OPTIONAL = {
    "settings": dict,
    "sampled": {"settings": dict},
    "per_responder": dict,
    "union": dict,
    "collapse": dict,
}


def read_metrics(folder: str | Path) -> dict[str, Any]:
    """``folder/metrics.json`` (an ``eval run`` or ``eval score --out`` output), checked
    (``METRICS_SCHEMA``, ``METRICS_OPTIONAL``): a damaged one is an ``InputError`` naming the field."""
    from catalog.io.files import read_json

    return read_json(
        Path(folder) / "metrics.json",
        schema=METRICS_SCHEMA,
        optional=METRICS_OPTIONAL,
        what="metrics.json",
        hint="the evaluation folder is damaged; re-run the evaluation",
    )


def write_score_outputs(
    out_dir: str | Path,
    result: dict[str, Any],
    per_request: pl.DataFrame,
    *,
    per_row: pl.DataFrame | None = None,
    inputs: Sequence[str | Path] = (),
    force: bool = False,
) -> None:
    """``metrics.json``, ``per_request.parquet``, ``per_row.parquet`` (when given), ``report.md`` and
    ``metrics.png`` for a scored file, as one folder swapped in once complete; ``inputs`` (dataset,
    predictions) are never replaced."""
    with atomic_dir(out_dir, SCORE_KIND, inputs=inputs, force=force) as tmp:
        _write_json(tmp / "metrics.json", result)
        per_request.write_parquet(tmp / "per_request.parquet")
        _write_rows(tmp / "per_row.parquet", per_row)
        (tmp / "report.md").write_text(metrics_markdown(result))
        plot_metrics(result, tmp / "metrics.png")


def evaluate_model(
    model_dir: str | Path, data_dir: str | Path, out_dir: str | Path, **kwargs: Any
) -> dict[str, Any]:
    """:func:`_evaluate_model` holding ``out_dir``'s writer lock throughout (``catalog.io.locks``: a
    second command writing it is refused, exit 2). The arguments are :func:`_evaluate_model`'s."""
    from catalog.io.locks import output_lock

    with output_lock(out_dir):
        return _evaluate_model(model_dir, data_dir, out_dir, **kwargs)


def _evaluate_model(
    model_dir: str | Path,
    data_dir: str | Path,
    out_dir: str | Path,
    *,
    split: str = "test",
    generation: GenerationConfig = DEFAULT_GENERATION,
    grounding: GroundingSettings | Mapping[str, Any] | None = None,
    grounding_by: str = "the caller",
    ks: Sequence[int] = DEFAULT_KS,
    metrics: Sequence[str] = METRICS,
    compact: bool = True,
    filters: Sequence[str] = (),
    views: Sequence[str] = VIEWS,
    config: BootstrapConfig = DEFAULT_CI,
    limit: int | None = None,
    force: bool = False,
    adapter: AdapterLoad = NO_ADAPTER,
) -> dict[str, Any]:
    """Generate, score and write the outputs listed in the module docstring; returns ``metrics.json``.

    ``model_dir`` may be a LoRA adapter folder (``eval.adapters``; ``adapter``: its base, merged or not,
    recorded in ``settings["adapter"]``).

    ``limit`` keeps the first N requests of the split (a quick look; the count is in ``settings``).
    ``grounding``: settings asked for instead of the dataset's (``eval.score.grounding_choice``).
    ``out_dir`` must be new, empty or an earlier ``remark eval run`` output (``force``: any folder but
    the model or the dataset); this is checked before anything is generated.
    """
    check_output_dir(out_dir, RUN_KIND, inputs=[model_dir, data_dir], force=force)
    ds = load_dataset(data_dir)
    choice = grounding_choice(ds, grounding, by=grounding_by)  # a bad setting fails before generation
    trained = training_comparison(model_dir, choice.used)  # a bad training record too
    requests = ds.requests if split == ALL_SPLITS else ds.requests.filter(pl.col("split") == split)
    if requests.height == 0:
        splits = sorted(set(ds.requests["split"].to_list()))
        raise InputError(
            f"no request in split {split!r}",
            path=data_dir,
            field="split",
            hint=f"splits: {splits}, or {ALL_SPLITS!r} for every request",
        )
    if limit is not None:
        requests = requests.head(limit)
    overlap = overlap_against_train(ds.requests, split, evaluated=requests)
    gen_cfg = dataclasses.replace(generation, k=max(generation.k, max(ks)))
    cap_note = gen_cfg.cap_note()
    gen = generate_lists(model_dir, requests["prompt"].to_list(), ds.meta, gen_cfg, adapter)
    matcher = Matcher(ds.catalog, choice.used)
    ids_req = requests["request_id"].to_list()
    warnings: dict[str, int] = {}
    settings = {
        "grounding": grounding_record(choice, warnings),
        "split": split,
        "data": str(data_dir),
        "dataset": dataset_identity(ds),
        "model": str(model_dir),
        "limit": limit,
    }
    grounding_rec = settings["grounding"]
    grounding_rec["training"] = None if trained is None else {k: v for k, v in trained.items() if k != "note"}
    if trained is not None and trained["differs"]:
        warnings["grounding_differs_from_training"] = len(trained["differs"])
        grounding_rec["notes"].append(trained["note"])
    if is_adapter_dir(model_dir):
        settings["adapter"] = {"base": adapter_base(model_dir, adapter.base), "merged": adapter.merge}

    with atomic_dir(out_dir, RUN_KIND, inputs=[model_dir, data_dir], force=force) as out:
        shown, grounded = parse_and_ground(gen.greedy, matcher)
        scored = score_lists(
            requests, grounded, ks=ks, metrics=metrics, views=views, compact=compact, filters=filters
        )
        result = summarize(scored, config, settings={**settings, "lists": "greedy"}, warnings=warnings)
        result["requests_by_split"] = requests_by_split(requests)
        result["lists"]["shape"] = describe_lists(gen.greedy, grounded)
        result["collapse"] = requests_collapse(
            grounded, requests, ds.requests, k=max(ks), n_items=len(ds.catalog)
        )
        if overlap is not None:
            result["split_overlap"] = overlap
        pred_rows = [
            {"request_id": r, "recommendations": s, "grounded": g, "completion": c}
            for r, s, g, c in zip(ids_req, shown, grounded, gen.greedy)
        ]
        _write_jsonl(out / "predictions.jsonl", pred_rows)
        pq = protoqa_result(ds.answers, requests, shown, ks=ks, config=config)
        if pq is not None:
            result["protoqa"] = pq[0]
        with_protoqa(scored.per_request, pq and pq[1]).write_parquet(out / "per_request.parquet")
        _write_rows(out / "per_row.parquet", per_row_table(scored, requests, ds.responder_rows))
        plot_metrics(result, out / "metrics.png", title=f"{Path(model_dir).name}: greedy, {split}")
        md = metrics_markdown(result, title=f"Greedy lists ({split}, {requests.height} requests)")
        md += lists_markdown(result["lists"]["shape"], "What the greedy lists were")
        md += protoqa_markdown(result.get("protoqa"))

        if gen.samples is not None:
            n = gen_cfg.num_samples
            flat = [c for per_req in gen.samples for c in per_req]
            s_shown, s_grounded = parse_and_ground(flat, matcher)
            s_scored = score_lists(
                requests,
                s_grounded,
                list_request=np.repeat(np.arange(requests.height), n),
                ks=ks,
                metrics=metrics,
                views=views,
                compact=compact,
                filters=filters,
            )
            sampled = summarize(
                s_scored,
                config,
                settings={**settings, "lists": f"{n} samples at temperature {gen_cfg.temperature}"},
                warnings=warnings,
            )
            sampled["lists"]["shape"] = describe_lists(flat, s_grounded)
            sampled["collapse"] = requests_collapse(
                s_grounded,
                requests,
                ds.requests,
                k=max(ks),
                n_items=len(ds.catalog),
                list_request=np.repeat(np.arange(requests.height), n),
            )
            result["sampled"] = sampled
            rows = [
                {
                    "request_id": ids_req[i // n],
                    "sample": i % n,
                    "recommendations": s,
                    "grounded": g,
                    "completion": c,
                }
                for i, (s, g, c) in enumerate(zip(s_shown, s_grounded, flat))
            ]
            _write_jsonl(out / "samples.jsonl", rows)
            s_pq = protoqa_result(
                ds.answers,
                requests,
                s_shown,
                list_request=np.repeat(np.arange(requests.height), n),
                ks=ks,
                config=config,
            )
            if s_pq is not None:
                sampled["protoqa"] = s_pq[0]
            with_protoqa(s_scored.per_request, s_pq and s_pq[1]).write_parquet(
                out / "per_request_sampled.parquet"
            )
            _write_rows(out / "per_row_sampled.parquet", per_row_table(s_scored, requests, ds.responder_rows))
            plot_metrics(
                sampled, out / "metrics_sampled.png", title=f"{Path(model_dir).name}: {n} samples, {split}"
            )
            md += "\n" + metrics_markdown(
                sampled, title=f"Sampled lists ({n} per request, T = {gen_cfg.temperature})"
            )
            md += lists_markdown(sampled["lists"]["shape"], "What the sampled lists were")
            md += protoqa_markdown(sampled.get("protoqa"))
            md += (
                f"\nDistinct grounded items per list: greedy {result['lists']['distinct_mean']:.2f}, "
                f"sampled {sampled['lists']['distinct_mean']:.2f} (docs/experiments.md, pitfall 1).\n"
            )
        result["generation"] = {
            "engine": gen.engine,
            **dataclasses.asdict(dataclasses.replace(gen_cfg, max_new_tokens=gen_cfg.cap)),
            "max_new_tokens_default": generation.max_new_tokens is None,
            "notes": [cap_note] if cap_note else [],
        }
        _write_json(out / "metrics.json", result)
        (out / "report.md").write_text(md)
    return result
