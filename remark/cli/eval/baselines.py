"""``remark eval baselines``: the chance, popularity and genre-popularity levels on a dataset's split
(``eval.baselines.baseline_levels``), scored with the metric code and the bootstrap of ``eval score``."""

from __future__ import annotations

import argparse

from catalog.shared.errors import InputError
from remark.cli.eval.flags import bootstrap_config, emit


def run_baselines(args: argparse.Namespace) -> int:
    import polars as pl

    from data_prep.dataset import load_dataset
    from eval.baselines import LEVELS, baseline_levels
    from eval.report import baselines_markdown
    from eval.score import ALL_SPLITS

    ds = load_dataset(args.data)
    requests = ds.requests
    if args.split != ALL_SPLITS:
        requests = requests.filter(pl.col("split") == args.split)
    if requests.height == 0:
        splits = sorted(set(ds.requests["split"].drop_nulls().to_list()))
        raise InputError(
            f"the dataset has no request in split {args.split!r}",
            path=args.data,
            field="--split",
            hint=f"splits: {splits}, or {ALL_SPLITS!r} for every request",
        )
    catalog = ds.catalog.df
    config = bootstrap_config(args)
    levels = baseline_levels(
        requests, catalog, ks=args.k, metrics=args.metrics, views=args.views, config=config
    )
    notes = []
    if "recall" not in args.metrics:
        notes.append("no chance level: it is computed for recall only (add --metrics recall)")
    if "popularity" not in levels:
        notes.append("no popularity level: the catalog records no item's popularity")
    if "genre_popularity" not in levels:
        notes.append("no genre_popularity level: the catalog has no genre column")
    out = {
        "data": str(args.data),
        "split": args.split,
        "n_requests": requests.height,
        "n_items": catalog.height,
        "levels": {name: {"description": LEVELS[name], **by_view} for name, by_view in levels.items()},
        "ci": config.as_dict(),
        "notes": notes,
    }
    emit(out, args, baselines_markdown(out))
    return 0
