"""The lookup ceiling of the respondent split ("seen requests"): a question's own training answers, scored on
its held-out respondents with the metric code of every result (``eval.baselines.seen_request_lists``).

    python experiments/protoqa_cpu/seen_ceiling.py [--n-scraped 128] [--crowdsourced]

Builds the split the earlier experiments used (``data_prep.holdout``: each question's respondents 50% train,
then the held-out half split 50/50 into validation and test) on the ProtoQA dev files shipped in the package
and prints test per-responder recall@10 of ``seen_request``, ``nearest_request`` and ``popularity`` with the
split overlap (``eval.leakage``). A number near 1 means the split measures memorisation, not recommendation.
"""

from __future__ import annotations

import argparse

import numpy as np
import polars as pl

from catalog.match import GroundingSettings, Matcher
from data_prep.holdout import holdout_responders
from data_prep.pool import SplitSpec, pool_threads
from data_prep.readers import combine, read_protoqa
from data_prep.shipped import protoqa_file
from eval.baselines import reference_levels
from eval.leakage import overlap_lines, split_overlap


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-scraped", type=int, default=128, help="scraped questions with >= 5 clusters, seeded")
    ap.add_argument("--crowdsourced", action="store_true", help="add the 52 crowdsourced questions")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    parts = [read_protoqa(protoqa_file("scraped"), items="clusters")]
    if a.crowdsourced:
        parts.append(read_protoqa(protoqa_file("crowdsourced"), items="clusters"))
    threads = combine(parts)
    pooled = pool_threads(
        threads,
        Matcher(threads.catalog, GroundingSettings(match_mode="normalized")),
        split=SplitSpec((("train", 1.0),), seed=0, near_duplicate_threshold=None),
    )
    scraped_ids = set(parts[0].frame["request_id"].unique().to_list())
    scraped = pooled.filter(pl.col("request_id").is_in(sorted(scraped_ids)), pl.col("union").list.len() >= 5)
    ids = sorted(scraped["request_id"].to_list())
    chosen = set(
        np.random.default_rng(a.seed).choice(ids, size=min(a.n_scraped, len(ids)), replace=False).tolist()
    )
    keep = chosen | (set(pooled["request_id"].to_list()) - scraped_ids)
    selected = pooled.filter(pl.col("request_id").is_in(sorted(keep)))
    first = holdout_responders(selected, fraction=0.5, seed=a.seed)
    second = holdout_responders(first.heldout, fraction=0.5, seed=a.seed + 1)
    train = first.train.with_columns(split=pl.lit("train"))
    test = second.heldout.with_columns(split=pl.lit("test"), request_id=pl.col("request_id") + "#test")
    both = pl.concat([train, test], how="diagonal_relaxed")
    print(f"{test.height} questions; " + " ".join(overlap_lines(split_overlap(both))))
    levels = reference_levels(test, threads.catalog.df, 10, train=train)
    for name, v in levels.items():
        print(f"test per-responder recall@10, {name}: {v['per_responder']:.3f}")


if __name__ == "__main__":
    main()
