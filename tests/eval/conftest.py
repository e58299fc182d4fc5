"""A tiny prepared dataset (built with data_prep's own pooling and writer) for the eval tests."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from catalog.match import Matcher
from catalog.table import Catalog
from data_prep.dataset import write_dataset
from data_prep.pool import pool_threads
from data_prep.schema import validate_threads

TITLES = [
    ("The Matrix", 1999),
    ("Arrival", 2016),
    ("Interstellar", 2014),
    ("Blade Runner", 1982),
    ("Inception", 2010),
    ("Annihilation", 2018),
    ("Contact", 1997),
    ("Moon", 2009),
]
#: request -> (seen titles, responders' titles); all in split "test" except r5 (train)
THREADS = {
    "r1": (["Contact"], [["Arrival", "Interstellar"], ["Arrival", "Moon"]]),
    "r2": ([], [["The Matrix"], ["Blade Runner", "Inception"], ["Inception"]]),
    "r3": ([], [["Annihilation"]]),
    "r4": (["Moon"], [["Arrival", "Contact"], ["Interstellar"]]),
    "r5": ([], [["Moon"]]),
}


def write_tiny_dataset(out: Path, catalog_columns: dict[str, list] | None = None) -> Path:
    """The dataset of THREADS; ``catalog_columns`` (e.g. ``popularity``, ``genre``) in TITLES order."""
    catalog = Catalog.from_frame(
        pl.DataFrame(
            {"title": [t for t, _ in TITLES], "year": [y for _, y in TITLES], **(catalog_columns or {})}
        )
    )
    years = dict(TITLES)
    rows = []
    for rid, (seen, responders) in THREADS.items():
        for j, titles in enumerate(responders):
            for t in titles:
                rows.append(
                    {
                        "request_id": rid,
                        "prompt": [{"role": "user", "content": f"Sci-fi like {responders[0][0]}?"}],
                        "responder_id": f"{rid}-u{j}",
                        "title": t,
                        "year": years[t],
                        "seen": [f"{s} ({years[s]})" for s in seen],
                        "split": "train" if rid == "r5" else "test",
                    }
                )
    threads = validate_threads(pl.DataFrame(rows))
    matcher = Matcher(catalog)
    pooled = pool_threads(threads, matcher)
    meta = {"source": "test", "domain": "movie", "has_years": True, "instruction_included": False}
    write_dataset(out, pooled, catalog, meta, grounding=matcher.settings)
    return out


@pytest.fixture
def tiny_dataset(tmp_path) -> Path:
    return write_tiny_dataset(tmp_path / "data")


#: question -> (prompt, responders' titles): four questions, four responders each
QUESTIONS = {
    "q1": (
        "Name a film with a robot",
        [["The Matrix", "Moon"], ["The Matrix"], ["Moon", "Arrival"], ["Moon"]],
    ),
    "q2": ("Old classics?", [["Contact"], ["Contact", "Blade Runner"], ["Blade Runner"], ["Contact"]]),
    "q3": ("Something about first contact", [["Arrival"], ["Contact", "Arrival"], ["Arrival"], ["Contact"]]),
    "q4": ("Dreams and heists", [["Inception"], ["Inception"], ["Interstellar", "Inception"], ["Inception"]]),
}


def write_split_dataset(out: Path, *, by: str) -> Path:
    """QUESTIONS as a dataset split ``by="respondent"`` (each question's responders halved by
    ``data_prep.holdout.holdout_responders``: requests ``<qid>`` in train, ``<qid>#test`` in test, same
    prompt) or ``by="request"`` (q1, q2, q3 in train, q4 in test)."""
    from data_prep.holdout import holdout_responders

    catalog = Catalog.from_frame(
        pl.DataFrame({"title": [t for t, _ in TITLES], "year": [y for _, y in TITLES]})
    )
    years = dict(TITLES)
    rows = [
        {
            "request_id": qid,
            "prompt": [{"role": "user", "content": prompt}],
            "responder_id": f"{qid}-u{j}",
            "title": t,
            "year": years[t],
            "seen": [],
            "split": "test" if qid == "q4" else "train",
        }
        for qid, (prompt, responders) in QUESTIONS.items()
        for j, titles in enumerate(responders)
        for t in titles
    ]
    matcher = Matcher(catalog)
    pooled = pool_threads(validate_threads(pl.DataFrame(rows)), matcher)
    if by == "respondent":
        halves = holdout_responders(pooled, fraction=0.5, seed=0)
        pooled = pl.concat(
            [
                halves.train.with_columns(split=pl.lit("train")),
                halves.heldout.with_columns(split=pl.lit("test"), request_id=pl.col("request_id") + "#test"),
            ]
        )
    meta = {"source": "test", "domain": "movie", "has_years": True, "instruction_included": False}
    write_dataset(out, pooled, catalog, meta, grounding=matcher.settings)
    return out
