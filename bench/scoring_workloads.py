"""The completion batches of ``bench/scoring.py``: a local tokenizer and three generators of 256 rows.

- ``random``: 256 rows of 320 token ids drawn uniformly from the vocabulary without its special tokens,
  like ``bench/gpu_check.py``'s random-init model (no end token: every row runs to the cap, one long
  unparsable line full of U+FFFD);
- ``blurb``: 16 requests x 16 lists of 20 lines "N. Title (Year) - blurb" on a real catalog;
- ``plain``: the same lists as bare "Title (Year)" lines.

Lists. Each step draws 16 requests; a request has a pool of 40 catalog items (drawn by a Zipf(1.1)
popularity over a fixed random order of the catalog: models name popular titles) and its G = 16 lists
each take 20 pool items without replacement, weighted 1 / (1 + pool rank)^0.7 (the policy's mode comes
first more often). Noise per line: 10% a typo (one letter dropped or two swapped), 8% an unknown title
(two or three made-up words, a year), 5% a repeat of an earlier line of the list, 3% the year off by one;
a blurb is fixed per (request, item) from 12 phrases. 10% of the lists have no end token (cut by the
cap). Columns: 3 responders naming 8 pool items each (``union``/``counts`` from them), 2 seen items,
``responder_index`` -1 (pooled rows). Every step's rows are new (``batch(step)`` is seeded by step).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from catalog.table import Catalog
from remark.run.tiny_model import train_tokenizer

GROUP = 16
ROWS = 256
K = 20
RANDOM_TOKENS = 320
BLURBS = [
    "a slow-burn thriller about grief",
    "two friends on a road trip",
    "the one with the twist ending",
    "gorgeous animation and a great score",
    "a heist goes wrong, brilliantly",
    "based on a true story",
    "dark comedy, very quotable",
    "space, loneliness and a robot",
    "classic noir, shot in colour",
    "a family drama that earns its tears",
    "the best chase scene of the decade",
    "quiet, strange and unforgettable",
]
_SYLLABLES = [a + b for a in "bcdfghklmnprstvz" for b in "aeiou"]


def pseudo_word(rng: np.random.Generator) -> str:
    return "".join(rng.choice(_SYLLABLES, size=int(rng.integers(2, 4)))).capitalize()


def build_tokenizer(catalog: Catalog, *, vocab_size: int = 32000, seed: int = 0) -> Any:
    """Byte-level BPE (``remark.run.tiny_model.train_tokenizer``) on catalog lists, blurbs and made-up words."""
    rng = np.random.default_rng(seed)
    titles, years = catalog.df["title"].to_list(), catalog.df["year"].to_list()
    corpus = []
    for _ in range(800):
        picks = rng.choice(len(titles), size=20, replace=False)
        corpus.append(
            "\n".join(f"{i + 1}. {titles[j]} ({years[j]}) - {BLURBS[i % 12]}" for i, j in enumerate(picks))
        )
    corpus += [" ".join(pseudo_word(rng) for _ in range(40)) for _ in range(3000)]
    return train_tokenizer(corpus, vocab_size=vocab_size)


@dataclass
class Batch:
    rows: list[list[int]]
    columns: dict[str, list]


class Workload:
    """``batch(step)``: the 256 rows and dataset columns of one step (see the module docstring)."""

    def __init__(self, kind: str, catalog: Catalog, tokenizer: Any, *, seed: int = 0) -> None:
        if kind not in ("random", "blurb", "plain"):
            raise ValueError(f"unknown workload {kind!r}")
        self.kind, self.tokenizer, self.seed = kind, tokenizer, seed
        df = catalog.df
        self.ids, self.titles, self.years = (
            df["item_id"].to_list(),
            df["title"].to_list(),
            df["year"].to_list(),
        )
        order = np.random.default_rng([seed, 1]).permutation(len(self.ids))
        weight = np.empty(len(order))
        weight[order] = 1.0 / np.arange(1, len(order) + 1) ** 1.1
        self.popularity = weight / weight.sum()
        special = set(tokenizer.all_special_ids)
        self.vocab = np.array([i for i in range(len(tokenizer)) if i not in special], dtype=np.int64)
        self.eos = tokenizer.eos_token_id

    def batch(self, step: int) -> Batch:
        rng = np.random.default_rng([self.seed, 2, step])
        rows: list[list[int]] = []
        columns: dict[str, list] = {k: [] for k in ("request_id", "seen", "union", "counts", "responders")}
        for b in range(ROWS // GROUP):
            pool = rng.choice(len(self.ids), size=42, replace=False, p=self.popularity)
            seen, pool = pool[:2], pool[2:]
            responders = [[self.ids[j] for j in rng.choice(pool, size=8, replace=False)] for _ in range(3)]
            union = list(dict.fromkeys(i for r in responders for i in r))
            counts = [sum(i in r for r in responders) for i in union]
            blurb = {int(j): BLURBS[int(rng.integers(len(BLURBS)))] for j in pool}
            for _ in range(GROUP):
                if self.kind == "random":
                    rows.append(rng.choice(self.vocab, size=RANDOM_TOKENS).tolist())
                else:
                    text = self._list(rng, pool, blurb)
                    ids = self.tokenizer.encode(text, add_special_tokens=False)
                    rows.append(ids + ([self.eos] if rng.random() >= 0.1 else []))
                columns["request_id"].append(f"s{step}r{b}")
                columns["seen"].append([self.ids[j] for j in seen])
                columns["union"].append(union)
                columns["counts"].append(counts)
                columns["responders"].append(responders)
        columns["responder_index"] = [-1] * len(rows)
        return Batch(rows, columns)

    def _list(self, rng: np.random.Generator, pool: np.ndarray, blurb: dict[int, str]) -> str:
        w = 1.0 / (1.0 + np.arange(len(pool))) ** 0.7
        picks = rng.choice(pool, size=K, replace=False, p=w / w.sum())
        lines: list[str] = []
        named: list[tuple[str, int | None]] = []
        for i, j in enumerate(picks.tolist()):
            title, year = self.titles[j], self.years[j]
            u = rng.random()
            if u < 0.10:
                title = _typo(title, rng)
            elif u < 0.18:
                title = " ".join(pseudo_word(rng) for _ in range(int(rng.integers(2, 4))))
                year = int(rng.integers(1950, 2024))
            elif u < 0.23 and named:
                title, year = named[int(rng.integers(len(named)))]
            elif u < 0.26 and year is not None:
                year = int(year) + int(rng.choice([-1, 1]))
            named.append((title, year))
            shown = f"{title} ({year})" if year is not None else title
            lines.append(f"{i + 1}. {shown} - {blurb[j]}" if self.kind == "blurb" else shown)
        return "\n".join(lines)


def _typo(title: str, rng: np.random.Generator) -> str:
    letters = [i for i, c in enumerate(title) if c.isalpha()]
    if len(letters) < 2:
        return title
    i = letters[int(rng.integers(len(letters) - 1))]
    if rng.random() < 0.5:
        return title[:i] + title[i + 1 :]
    return title[:i] + title[i + 1] + title[i] + title[i + 2 :]
