"""Fixtures for trainer tests: hand-built pooled datasets and tiny models (all local, CPU)."""

from __future__ import annotations

import polars as pl
import pytest

from catalog.match import Matcher
from catalog.table import Catalog
from data_prep.dataset import write_dataset
from data_prep.pool import pool_threads
from data_prep.schema import Threads

HAND_ITEMS = {
    "A": ("Alpha", 2001),
    "B": ("Beta", 2002),
    "C": ("Gamma", 2003),
    "D": ("Delta", 2004),
    "E": ("Epsilon", 2005),
    "F": ("Zeta", 2006),
}
# request -> (prompt, seen ids, responders' id lists)
HAND_REQUESTS = {
    "r1": ("Movies like Alpha please", ["F"], [["A", "B"], ["B", "C"]]),
    "r2": ("Something like Delta", [], [["D"]]),
}


def write_hand_dataset(out_dir, requests=HAND_REQUESTS, split="train"):
    """A pooled dataset written by the real pipeline (threads -> grounding -> pooling -> parquet)."""
    cat = Catalog.from_frame(
        pl.DataFrame(
            {
                "item_id": list(HAND_ITEMS),
                "title": [t for t, _ in HAND_ITEMS.values()],
                "year": [y for _, y in HAND_ITEMS.values()],
            }
        )
    )
    rows = []
    for rid, (text, seen, responders) in requests.items():
        for n, items in enumerate(responders):
            for item in items:
                title, year = HAND_ITEMS[item]
                seen_titles = [f"{HAND_ITEMS[s][0]} ({HAND_ITEMS[s][1]})" for s in seen]
                rows.append(
                    {
                        "request_id": rid,
                        "prompt": [{"role": "user", "content": text}],
                        "responder_id": f"u{n}",
                        "title": title,
                        "year": year,
                        "seen": seen_titles,
                        "split": split,
                    }
                )
    frame = pl.DataFrame(rows, schema_overrides={"year": pl.Int32})
    meta = {"source": "hand", "domain": "movie", "has_years": True, "instruction_included": False}
    pooled = pool_threads(Threads(frame, cat, meta), Matcher(cat, mode="exact"))
    return write_dataset(out_dir, pooled, cat, meta)


@pytest.fixture
def hand_dataset(tmp_path):
    return write_hand_dataset(tmp_path / "hand")


def build_hand_model(out_dir, prompts):
    """A tiny model whose tokenizer knows the hand catalog's titles (and ``prompts``)."""
    from remark.tiny import TinySpec, build_tiny_model

    lines = [f"{t} ({y})" for t, y in HAND_ITEMS.values()] + ["Xyz (1990)", "Qrs (1991)"]
    corpus = ["\n".join(lines[i:] + lines[:i]) for i in range(len(lines))] * 3
    corpus += list(prompts)
    spec = TinySpec(
        vocab_size=400, hidden_size=32, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1
    )
    return build_tiny_model(out_dir, corpus, spec=spec, seed=0)


@pytest.fixture(scope="session")
def hand_model_dir(tmp_path_factory):
    return build_hand_model(tmp_path_factory.mktemp("hand_model"), [t for t, _, _ in HAND_REQUESTS.values()])
