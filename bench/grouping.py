"""Benchmark: near-duplicate grouping of prompts, the blocked method against the quadratic code it replaced.

Run by hand (not a test)::

    python bench/grouping.py                      # both cases (the baselines on subsamples)
    python bench/grouping.py --quick              # smaller sizes, a smoke run
    python bench/grouping.py --case long --json out.json

Two cases, both synthetic and seeded:

- ``ordinary``: ``--n`` prompts (100,000) of 4-30 words from a Zipf vocabulary of 30,000 made-up words
  (syllables joined, so many words look alike), a third of the words stop words, punctuation and case
  varied; 5% are edited copies of an earlier prompt (a word dropped, added, misspelt, pluralised or
  upper-cased): near duplicates to find.
- ``long``: ``--long-n`` prompts (150) of about ``--long-chars`` characters (100,000) of Zipf words; 10% are
  copies of an earlier one with an edit per 50 words.

Sides, in the same process and run:

- ``new``: ``data_prep.request_split.near_duplicate_groups(texts)`` as callers run it (``method="auto"``,
  which takes ``"blocked"`` at these sizes), on every prompt;
- ``baseline``: :func:`old_near_duplicate_groups`, the function this change replaced, kept here verbatim
  (``cdist`` of every pair within reach, uint8 scores, the cutoff applied to the unrounded score), on a
  subsample (``--baseline-n`` / ``--baseline-long-n``); its time is extrapolated to the whole case by the
  number of pairs, (N / n)^2 for ordinary prompts, N (N - 1) / (n (n - 1)) for long ones, and labelled so;
- on that subsample, the new code's ``"exact"`` and ``"blocked"`` methods, and how their groups differ
  (texts whose group holds other texts under one method than under the other).

Wall and CPU seconds (``time.process_time``) are printed: the machine's load changes wall time most.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np
from flags import add_output_flags, bench_parser, check_json_output, run_script
from scipy.sparse import coo_array
from scipy.sparse.csgraph import connected_components

from catalog.io.outputs import JSON_FORMATS, atomic_file
from data_prep.request_split import (
    BLOCK_ROWS,
    CHUNK_CELLS,
    NEAR_DUPLICATE_THRESHOLD,
    STOP_WORDS,
    near_duplicate_groups,
    similarity_scores,
    similarity_texts,
)

JSON_KIND = "bench-grouping"
_SYLLABLE_TEXT = (
    "ka lo mi ren to sa vel nor is an te por qu li da mon ser ba ch el ri go un fa ne ho tri ster pa wi ly de "
    "ol ex im ar co bu ge ta"
)
SYLLABLES = _SYLLABLE_TEXT.split()


def _length_factor(threshold: float) -> float:
    return (200.0 - threshold) / threshold


def old_near_duplicate_groups(texts, *, threshold: float = NEAR_DUPLICATE_THRESHOLD) -> np.ndarray:
    """The pre-change ``data_prep.request_split.near_duplicate_groups`` (uint8 scores), verbatim but for
    the threshold check."""
    if len(texts) == 0:
        return np.zeros(0, np.int64)
    unique, inverse = np.unique(np.asarray(similarity_texts(texts), dtype=object), return_inverse=True)
    lengths = np.array([len(t) for t in unique], dtype=np.int64)
    order = np.argsort(lengths, kind="stable")
    ordered, ordered_len = [unique[i] for i in order], lengths[order]
    f = _length_factor(threshold)
    rows = max(1, min(BLOCK_ROWS, CHUNK_CELLS // len(unique)))
    a, b = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for start in range(0, len(unique), rows):  # rows against themselves and the later (longer) texts
        end = min(start + rows, len(unique))
        hi = np.searchsorted(ordered_len, np.floor(ordered_len[end - 1] * f + 1e-9), side="right")
        block = similarity_scores(ordered[start:end], ordered[start:hi], score_cutoff=threshold)
        q, c = np.nonzero(block)
        a.append(order[q + start])
        b.append(order[c + start])
    a, b = np.concatenate(a), np.concatenate(b)
    graph = coo_array((np.ones(len(a), np.int8), (a, b)), shape=(len(unique), len(unique)))
    _, labels = connected_components(graph, directed=False)
    _, first, inv = np.unique(labels[inverse.ravel()], return_index=True, return_inverse=True)
    return np.argsort(np.argsort(first)).astype(np.int64)[inv.ravel()]


def vocabulary(rng: np.random.Generator, n: int) -> tuple[list[str], np.ndarray]:
    """``n`` made-up words (1-4 syllables) in a seeded order, and Zipf(1.05) probabilities by that order."""
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(SYLLABLES, size=rng.integers(1, 5))))
    p = 1 / np.arange(1, n + 1) ** 1.05
    return [str(w) for w in rng.permutation(sorted(words))], p / p.sum()  # ranks not alphabetical


def edit(rng: np.random.Generator, words: list[str], vocab: list[str], p: np.ndarray) -> list[str]:
    """One edit: a word dropped, added, two letters swapped, a plural, or upper case."""
    w = list(words)
    i = int(rng.integers(0, len(w)))
    op = int(rng.integers(0, 5))
    if op == 0 and len(w) > 3:
        del w[i]
    elif op == 1:
        w.insert(i, vocab[int(rng.choice(len(vocab), p=p))])
    elif op == 2 and len(w[i]) > 3:
        j = int(rng.integers(0, len(w[i]) - 1))
        w[i] = w[i][:j] + w[i][j + 1] + w[i][j] + w[i][j + 2 :]
    elif op == 3:
        w[i] += "s"
    else:
        w = [x.upper() if rng.random() < 0.3 else x for x in w]
    return w


def ordinary_prompts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab, p = vocabulary(rng, 30_000)
    stop = sorted(STOP_WORDS)
    raw: list[list[str]] = []
    out = []
    for _ in range(n):
        if raw and rng.random() < 0.05:
            w = edit(rng, raw[int(rng.integers(0, len(raw)))], vocab, p)
        else:
            w = [vocab[i] for i in rng.choice(len(vocab), size=int(rng.integers(4, 31)), p=p)]
            w = [x if rng.random() > 0.3 else str(rng.choice(stop)) for x in w]
        raw.append(w)
        out.append(" ".join(w).capitalize() + str(rng.choice([".", "?", "!", ""])))
    return out


def long_prompts(n: int, chars: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab, p = vocabulary(rng, 30_000)
    per_word = float(np.dot(p, [len(w) + 1 for w in vocab]))  # mean characters per word, with its space
    out: list[str] = []
    for _ in range(n):
        if out and rng.random() < 0.1:
            w = out[int(rng.integers(0, len(out)))].split()
            for _ in range(len(w) // 50):
                w = edit(rng, w, vocab, p)
        else:
            w = [vocab[i] for i in rng.choice(len(vocab), size=int(chars / per_word), p=p)]
        out.append(" ".join(w))
    return out


def timed(fn, *args, **kwargs) -> tuple[Any, float, float]:
    """(result, wall seconds, CPU seconds of this process)."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - w0, time.process_time() - c0


def differing(a: np.ndarray, b: np.ndarray) -> int:
    """Texts whose group holds other texts under ``a`` than under ``b``."""
    same_a, same_b = a[:, None] == a[None, :], b[:, None] == b[None, :]
    return int((same_a != same_b).any(axis=1).sum())


def run_case(name: str, texts: list[str], n_base: int, pairs_factor: float) -> dict[str, Any]:
    chars = np.array([len(t) for t in texts])
    print(f"\n{name}: {len(texts):,} prompts, {chars.mean():,.0f} characters on average")
    groups, wall, cpu = timed(near_duplicate_groups, texts)
    sizes = np.bincount(groups)
    print(
        f"  new (auto): {wall:.1f} s wall, {cpu:.1f} s CPU; {sizes.size:,} groups, the largest {sizes.max()}"
    )
    sub = texts[:n_base]
    old, old_wall, old_cpu = timed(old_near_duplicate_groups, sub)
    exact, ex_wall, ex_cpu = timed(near_duplicate_groups, sub, method="exact")
    blocked, bl_wall, bl_cpu = timed(near_duplicate_groups, sub, method="blocked")
    extrapolated = old_wall * pairs_factor
    print(
        f"  baseline on the first {n_base:,}: {old_wall:.1f} s wall ({old_cpu:.1f} s CPU); extrapolated to "
        f"{len(texts):,} (x{pairs_factor:,.0f} pairs): {extrapolated:,.0f} s; ratio {extrapolated / wall:,.0f}"
    )
    print(
        f"  on the first {n_base:,}: exact {ex_wall:.1f} s ({len(set(exact.tolist())):,} groups), blocked "
        f"{bl_wall:.2f} s ({len(set(blocked.tolist())):,} groups), baseline {len(set(old.tolist())):,} groups; "
        f"texts grouped differently, blocked vs exact: {differing(blocked, exact)}, exact vs baseline: "
        f"{differing(exact, old)}"
    )
    return {
        "prompts": len(texts),
        "mean_chars": float(chars.mean()),
        "new": {"wall_s": wall, "cpu_s": cpu, "groups": int(sizes.size), "largest": int(sizes.max())},
        "subsample": {
            "prompts": n_base,
            "baseline": {"wall_s": old_wall, "cpu_s": old_cpu, "groups": len(set(old.tolist()))},
            "exact": {"wall_s": ex_wall, "cpu_s": ex_cpu, "groups": len(set(exact.tolist()))},
            "blocked": {"wall_s": bl_wall, "cpu_s": bl_cpu, "groups": len(set(blocked.tolist()))},
            "differ_blocked_vs_exact": differing(blocked, exact),
            "differ_exact_vs_baseline": differing(exact, old),
        },
        "baseline_extrapolated_wall_s": extrapolated,
        "pairs_factor": pairs_factor,
        "ratio": extrapolated / wall,
    }


def main() -> dict[str, Any]:
    ap = bench_parser(__file__, __doc__)
    ap.add_argument("--case", choices=("both", "ordinary", "long"), default="both")
    ap.add_argument("--n", type=int, default=100_000, help="ordinary prompts (default %(default)s)")
    ap.add_argument("--baseline-n", type=int, default=10_000, help="the baseline's subsample (ordinary)")
    ap.add_argument("--long-n", type=int, default=150, help="long prompts (default %(default)s)")
    ap.add_argument("--long-chars", type=int, default=100_000, help="characters per long prompt")
    ap.add_argument("--baseline-long-n", type=int, default=12, help="the baseline's subsample (long)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    add_output_flags(ap)
    a = ap.parse_args()
    check_json_output(a, JSON_KIND)
    if a.quick:
        a.n, a.baseline_n, a.long_n, a.long_chars, a.baseline_long_n = 5_000, 1_000, 12, 20_000, 6
    print(f"{os.cpu_count()} CPUs, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    out: dict[str, Any] = {"threshold": NEAR_DUPLICATE_THRESHOLD, "seed": a.seed}
    if a.case in ("both", "ordinary"):
        texts = ordinary_prompts(a.n, a.seed)
        out["ordinary"] = run_case("ordinary", texts, a.baseline_n, (a.n / a.baseline_n) ** 2)
    if a.case in ("both", "long"):
        texts = long_prompts(a.long_n, a.long_chars, a.seed)
        factor = a.long_n * (a.long_n - 1) / (a.baseline_long_n * (a.baseline_long_n - 1))
        out["long"] = run_case("long", texts, a.baseline_long_n, factor)
    out["load_average_after"] = list(os.getloadavg())
    if a.json:
        with atomic_file(a.json, JSON_KIND, formats=JSON_FORMATS, force=a.force, field="--json") as tmp:
            tmp.write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    run_script(main)
