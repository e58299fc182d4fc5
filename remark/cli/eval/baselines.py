"""``remark eval baselines``: the chance, popularity, training-popularity, genre-popularity, nearest-request,
retrieval and seen-request levels on a dataset's split (``eval.baselines.baseline_levels``), scored with the
metric code and the bootstrap of ``eval score``, and the split's overlap with the training split
(``eval.leakage``). The retrieval level's variant and number of neighbours are chosen on the ``valid``
split (``eval.retrieval.choose_retrieval``, at the largest ``--k``), its grid printed below the levels."""

from __future__ import annotations

import argparse

from catalog.io.errors import InputError
from remark.cli.eval.flags import bootstrap_config, emit

#: the split the retrieval level's variant and k are chosen on
VALID_SPLIT = "valid"


def run_baselines(args: argparse.Namespace) -> int:
    import polars as pl

    from data_prep.dataset import load_dataset
    from eval.baselines import LEVELS, baseline_levels
    from eval.leakage import overlap_against_train, warn
    from eval.report import baselines_markdown
    from eval.retrieval import choose_retrieval, grid_markdown
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
    train_split = args.train_split or "train"
    train = ds.requests.filter(pl.col("split") == train_split)
    if train.height == 0 and args.train_split is not None:
        splits = sorted(set(ds.requests["split"].drop_nulls().to_list()))
        raise InputError(
            f"the dataset has no request in split {train_split!r}",
            path=args.data,
            field="--train-split",
            hint=f"splits: {splits}",
        )
    catalog = ds.catalog.df
    config = bootstrap_config(args)
    choice, strongest = None, None
    if train.height:
        valid = ds.requests.filter(pl.col("split") == VALID_SPLIT) if train_split != VALID_SPLIT else None
        choice = choose_retrieval(train, valid, max(args.k), split=VALID_SPLIT)
        if choice.chosen_on is not None:
            strongest = _strongest(valid, catalog, train, choice, max(args.k))
    levels = baseline_levels(
        requests,
        catalog,
        ks=args.k,
        metrics=args.metrics,
        views=args.views,
        config=config,
        train=train if train.height else None,
        retrieval=choice,
    )
    overlap = overlap_against_train(ds.requests, args.split, train_split=train_split)
    notes = []
    if "recall" not in args.metrics:
        notes.append("no chance level: it is computed for recall only (add --metrics recall)")
    if "popularity" not in levels:
        notes.append("no popularity level: the catalog records no item's popularity")
    if "genre_popularity" not in levels:
        notes.append("no genre_popularity level: the catalog has no genre column")
    if train.height == 0:
        notes.append(
            f"no train_popularity, nearest_request, retrieval or seen_request level: the dataset has no request "
            f"in split {train_split!r} (--train-split)"
        )
    if choice is not None:
        notes.append(choice.describe())
    if strongest is not None:
        notes.append(
            f"the strongest simple baseline on the {VALID_SPLIT} requests ({strongest['metric']}, lookups "
            f"left out): {strongest['level']}"
        )
        if args.split in (VALID_SPLIT, ALL_SPLITS):
            notes.append(
                f"retrieval was chosen on the {VALID_SPLIT} requests, which this split holds: "
                "its value here is optimistic"
            )
    if train.height and "seen_request" in levels:
        share = "some" if overlap is None else f"{overlap['near_duplicate_prompt']} of {requests.height}"
        notes.append(
            f"seen_request: {share} requests are {train_split} requests (same or near-duplicate prompt); "
            "its lists are their training answers, a lookup: a model that scores near it may have memorised them"
        )
    out = {
        "data": str(args.data),
        "split": args.split,
        "n_requests": requests.height,
        "n_items": catalog.height,
        "levels": {name: {"description": LEVELS[name], **by_view} for name, by_view in levels.items()},
        "ci": config.as_dict(),
        "notes": notes,
        "train_split": train_split,
        "split_overlap": overlap,
        "retrieval": choice.as_dict() if choice is not None else None,
        "strongest_baseline": strongest,
    }
    grid = grid_markdown(out["retrieval"]) if choice is not None else []
    emit(out, args, baselines_markdown(out) + ("\n" + "\n".join(grid) + "\n" if grid else ""))
    if args.json:
        warn(overlap)
    return 0


def _strongest(valid, catalog, train, choice, k: int) -> dict:
    """The strongest simple baseline on the validation requests (``eval.baselines.strongest_baseline``)
    at the cut-off the retrieval level was chosen at: the name, that metric, and each level's value."""
    from eval.baselines import reference_levels, strongest_baseline, train_popularity_lists
    from eval.views import score_lists

    on_valid = reference_levels(valid, catalog, k, train=train, retrieval=choice)
    lists = train_popularity_lists(train, valid, k)
    means = score_lists(valid, lists, ks=(k,), metrics=("recall",), views=("per_responder",)).means()
    on_valid["train_popularity"] = {"per_responder": means[f"eval/recall@{k}/per_responder"]}
    return {
        "level": strongest_baseline(on_valid),
        "metric": choice.metric,
        "validation": {name: v["per_responder"] for name, v in on_valid.items()},
    }
