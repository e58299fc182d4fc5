"""Splitting by request: near-duplicate prompts found and kept on one side of a split.

A test request whose prompt (reworded, singular/plural, punctuation) is also a training prompt measures
memorisation, not generalisation. This module finds such prompts and assigns every group of them one
split; ``eval.leakage`` uses the same similarity to measure what a given split shares.

The similarity of two prompts (``similarity_texts``, :data:`SCORER`):

1. ``normalize_prompt``: lower case, punctuation removed, articles dropped, simple plurals folded;
2. a word prefix shared by at least half of the prompts and at least ``MIN_SHARED_PREFIX_WORDS`` long is
   removed (an instruction every prompt carries, as in Rank-GRPO's Reddit rows, would otherwise make
   every pair look alike); a prompt keeps it when nothing else would be left;
3. ``STOP_WORDS`` (function words and the survey templates' "name something" / "tell me") are removed,
   unless nothing else is left;
4. ``rapidfuzz.fuzz.token_sort_ratio`` (0-100: the Indel similarity of the words sorted alphabetically)
   of the results, computed as ``fuzz.ratio`` of the words sorted once (``similarity_texts`` sorts
   them): the same values, about 5 times faster in ``cdist`` (2,000 texts of 10-80 words: 2.0 s against
   14 s for the 4 million pairs on one core). Two prompts are near duplicates when it is at least :data:`NEAR_DUPLICATE_THRESHOLD`,
   or when their normalized texts are equal.

Scoring the content words matters on short questions: with the template words in, "name something that
comes in a can" and "... a carton" score 95 while the reworded "name a food that doesnt need to be
refrigerated" / "... does not need to be refrigerated." score 92, so no threshold separates them; on
content words they score 84 and 88.

The name ``normalize_prompt`` is also used by ``data_prep.schema`` for a different thing (bringing a
``prompt`` column to chat messages); this one turns one text into a comparison key.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from rapidfuzz import fuzz, process
from scipy.sparse import coo_array
from scipy.sparse.csgraph import connected_components

from data_prep.schema import SPLITS
from data_prep.timesplit import TimeSplit

#: The least ``token_sort_ratio`` (0-100, on :func:`similarity_texts`) at which two prompts are one
#: request. Measured on ProtoQA's scraped dev questions (980; the shipped
#: ``data_prep/shipped/protoqa/dev.scraped.jsonl`` is the same file), 479,710 pairs, none with equal
#: normalized text. At or above 85 (6 pairs), five are one question reworded: "name a job title someone
#: might have in / at a big company" (100), "name something (that) people get removed from their body"
#: (100), "... to prepare for (a game of) strip poker" (88), "name a food that doesnt / does not need to
#: be refrigerated" (88), "name something you'd find at most amusement parks" with two wordings of
#: "rides is not an answer" (85); one is not: "name something cats like" / "... you would like to
#: catch" (89). Just below, different questions are kept apart: "name something that comes in a can" /
#: "... a carton" (84), "... when you think of japan" / "... of ireland" (83), "past or present, name a
#: famous joan" / "... bob" (83), "name something you know about shaquille o'neal" / "... about
#: shaquille o'neal that's huge?" (82); 11 pairs score 80 or more, 43 score 70 or more. "Name
#: something you bring to the beach" / "... to a picnic" score 43. None of the 52 crowdsourced dev
#: questions scores 85 against a scraped one. Joining a different pair costs little (both go to one
#: split); missing a reworded pair puts a training question in the test split.
NEAR_DUPLICATE_THRESHOLD: float = 85.0
#: The scorer of :func:`similarity_scores` (``rapidfuzz.process.cdist``'s ``scorer``): on the sorted words
#: of :func:`similarity_texts` it is ``fuzz.token_sort_ratio`` of the unsorted ones.
SCORER = fuzz.ratio
_STOP_TEXT = (
    "name something some tell me what which who it that you your is are be of to in on at for with "
    "might would could do does did people person someone"
)
#: Words left out of the similarity: they carry the question's template, not its content.
STOP_WORDS = frozenset(_STOP_TEXT.split())
#: The shortest word prefix that :func:`similarity_texts` removes as an instruction shared by the prompts.
MIN_SHARED_PREFIX_WORDS = 8
#: Cells of one score block (uint8): rows of the queries per ``cdist`` call = this // number of choices,
#: and at most ``BLOCK_ROWS`` (texts sorted by length: a short block skips the choices out of reach).
CHUNK_CELLS = 1 << 24
BLOCK_ROWS = 256

_PUNCT = re.compile(r"[^\w\s]|_")
_ARTICLES = frozenset(("a", "an", "the"))


def _fold(word: str) -> str:
    """A simple plural folded: words over 3 letters lose "ies" -> "y", "es" after s/x/z/ch/sh, else a
    trailing "s" (not "ss", "us", "is"): fruits -> fruit, boxes -> box, berries -> berry."""
    if len(word) <= 3 or not word.endswith("s"):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "zes", "ches", "shes")):
        return word[:-2]
    if word.endswith(("ss", "us", "is")):
        return word
    return word[:-1]


def normalize_prompt(text: str) -> str:
    """A prompt's comparison key: lower case, punctuation removed, whitespace collapsed, articles
    (a, an, the) dropped, plurals folded (:func:`_fold`).

    >>> normalize_prompt("Name a fruit.") == normalize_prompt("name  fruits")
    True
    """
    words = _PUNCT.sub(" ", text.lower()).split()
    return " ".join(_fold(w) for w in words if w not in _ARTICLES)


def prompt_texts(requests: pl.DataFrame) -> list[str]:
    """The text of each row's user message(s) (``prompt``: a list of ``{role, content}``), joined by a
    newline; system and assistant messages are left out. Shape: R rows -> R strings."""
    return (
        requests.select(
            pl.col("prompt")
            .list.eval(
                pl.element()
                .filter(pl.element().struct.field("role") == "user")
                .struct.field("content")
                .fill_null("")
            )
            .list.join("\n")
            .fill_null("")
        )
        .to_series()
        .to_list()
    )


def _shared_prefix(words: list[list[str]]) -> list[str]:
    """The longest word prefix (at least MIN_SHARED_PREFIX_WORDS words) that at least half of the rows,
    and at least 2, start with while having a word after it; ``[]`` when there is none."""
    n = MIN_SHARED_PREFIX_WORDS
    need = max(2, -(-len(words) // 2))
    heads = Counter(tuple(w[:n]) for w in words if len(w) > n)
    if not heads or heads.most_common(1)[0][1] < need:
        return []
    head = list(heads.most_common(1)[0][0])
    rows = [w for w in words if len(w) > n and w[:n] == head]
    while True:
        nexts = Counter(w[n] for w in rows if len(w) > n + 1)
        if not nexts or nexts.most_common(1)[0][1] < need:
            return rows[0][:n]
        word = nexts.most_common(1)[0][0]
        rows = [w for w in rows if len(w) > n + 1 and w[n] == word]
        n += 1


def similarity_texts(texts: Sequence[str]) -> list[str]:
    """What :data:`SCORER` compares (module docstring, steps 1-3): normalized words, minus a shared
    instruction prefix and the stop words, sorted alphabetically. Computed over ``texts`` together (the
    prefix is theirs).

    >>> similarity_texts(["Name something you bring to the beach.", "Name something you bring to a picnic"])
    ['beach bring', 'bring picnic']
    """
    words = [normalize_prompt(t).split() for t in texts]
    prefix = _shared_prefix(words)
    n = len(prefix)
    if n:
        words = [w[n:] if len(w) > n and w[:n] == prefix else w for w in words]
    out = []
    for w in words:
        content = [x for x in w if x not in STOP_WORDS]
        out.append(" ".join(sorted(content or w)))
    return out


def similarity_scores(
    queries: Sequence[str], choices: Sequence[str], *, score_cutoff: float = 0
) -> np.ndarray:
    """``(Q, C)`` uint8 :data:`SCORER` scores of similarity texts (scores under ``score_cutoff`` are 0),
    one ``rapidfuzz.process.cdist`` call: chunk the queries for large inputs (:func:`near_pairs`)."""
    return process.cdist(
        list(queries), list(choices), scorer=SCORER, dtype=np.uint8, score_cutoff=score_cutoff, workers=1
    )


def _check_threshold(threshold: float) -> None:
    if not 0.0 < threshold <= 100.0:
        raise ValueError(f"threshold must be in (0, 100] (a rapidfuzz score), got {threshold}")


def _length_factor(threshold: float) -> float:
    """f with ``ratio(a, b) >= threshold`` impossible unless ``len(b) <= f len(a)`` (len(a) <= len(b)):
    ratio = 200 LCS / (la + lb) <= 200 la / (la + lb), so lb <= la (200 - threshold) / threshold."""
    return (200.0 - threshold) / threshold


def near_pairs(
    queries: Sequence[str], choices: Sequence[str], *, threshold: float = NEAR_DUPLICATE_THRESHOLD
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs of similarity texts that score at least ``threshold``: ``(qi, ci, score)``, each ``(P,)``,
    sorted by query then choice.

    Both sides are sorted by length; a block of queries (at most ``BLOCK_ROWS`` and ``CHUNK_CELLS // C``
    rows, so no more than ``CHUNK_CELLS`` bytes of scores at once) is scored against the choices whose
    length can reach the threshold (:func:`_length_factor`) only, which skips most pairs of texts of
    varied lengths.
    """
    _check_threshold(threshold)
    queries, choices = list(queries), list(choices)
    f = _length_factor(threshold)
    q_len = np.array([len(t) for t in queries], dtype=np.int64)
    c_len = np.array([len(t) for t in choices], dtype=np.int64)
    q_order, c_order = np.argsort(q_len, kind="stable"), np.argsort(c_len, kind="stable")
    c_sorted, c_sorted_len = [choices[i] for i in c_order], c_len[c_order]
    rows = max(1, min(BLOCK_ROWS, CHUNK_CELLS // max(len(choices), 1)))
    qi, ci, sc = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0, np.uint8)]
    for start in range(0, len(queries), rows):
        idx = q_order[start : start + rows]
        lo = np.searchsorted(c_sorted_len, np.ceil(q_len[idx[0]] / f - 1e-9), side="left")
        hi = np.searchsorted(c_sorted_len, np.floor(q_len[idx[-1]] * f + 1e-9), side="right")
        block = similarity_scores([queries[i] for i in idx], c_sorted[lo:hi], score_cutoff=threshold)
        q, c = np.nonzero(block)
        qi.append(idx[q])
        ci.append(c_order[lo + c])
        sc.append(block[q, c])
    qi, ci, sc = np.concatenate(qi).astype(np.int64), np.concatenate(ci).astype(np.int64), np.concatenate(sc)
    order = np.lexsort((ci, qi))
    return qi[order], ci[order], sc[order]


def twin_pairs(
    queries: Sequence[str], choices: Sequence[str], *, threshold: float = NEAR_DUPLICATE_THRESHOLD
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Near-duplicate pairs between two lists of prompt texts (raw, as :func:`prompt_texts` gives them):
    ``(qi, ci, score)``, each ``(P,)``, sorted by query then choice, for pairs with equal normalized text
    (score 100) or a :data:`SCORER` score >= ``threshold`` on :func:`similarity_texts` (computed over
    both lists together)."""
    sim = similarity_texts([*queries, *choices])
    qi, ci, score = near_pairs(sim[: len(queries)], sim[len(queries) :], threshold=threshold)
    keys = pl.DataFrame({"ci": np.arange(len(choices)), "key": [normalize_prompt(t) for t in choices]})
    exact = (
        pl.DataFrame({"qi": np.arange(len(queries)), "key": [normalize_prompt(t) for t in queries]})
        .join(keys, on="key", how="inner")
        .select("qi", "ci", pl.lit(100, pl.UInt8).alias("score"))
    )
    pairs = (
        pl.DataFrame(
            {"qi": qi, "ci": ci, "score": score}, schema={"qi": pl.Int64, "ci": pl.Int64, "score": pl.UInt8}
        )
        .vstack(exact.cast({"qi": pl.Int64, "ci": pl.Int64}))
        .group_by("qi", "ci")
        .agg(pl.col("score").max())
        .sort("qi", "ci")
    )
    return pairs["qi"].to_numpy(), pairs["ci"].to_numpy(), pairs["score"].to_numpy()


def near_duplicate_groups(texts: Sequence[str], *, threshold: float = NEAR_DUPLICATE_THRESHOLD) -> np.ndarray:
    """``(R,)`` int64 group ids: the connected components of the graph of prompts whose edges are pairs
    with equal normalized text or a :data:`SCORER` score >= ``threshold`` (module docstring).

    Equal similarity texts are scored once (``np.unique``). The U unique texts are sorted by length and
    each block of rows is scored against itself and the longer texts that can reach the threshold
    (:func:`_length_factor`): at most ``CHUNK_CELLS`` bytes of scores at once, and a fraction of U^2 / 2
    pairs. Ids are numbered by first appearance: ``[0, 0, 1]`` for a reworded pair followed by another
    question.
    """
    _check_threshold(threshold)
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


@dataclass(frozen=True)
class SplitSpec:
    """How requests without a given split are assigned one: by time when ``by_time`` is set (every such
    request then needs a timestamp), else seeded fractions over a stable hash of each near-duplicate
    group of prompts (``near_duplicate_threshold``, a rapidfuzz score; None hashes each request alone)."""

    fractions: tuple[tuple[str, float], ...] = (("train", 0.8), ("valid", 0.1), ("test", 0.1))
    seed: int = 0
    by_time: TimeSplit | None = None
    near_duplicate_threshold: float | None = NEAR_DUPLICATE_THRESHOLD

    def __post_init__(self) -> None:
        names = [n for n, _ in self.fractions]
        if not names or any(n not in SPLITS for n in names) or len(set(names)) != len(names):
            raise ValueError(f"split names must be distinct, among {list(SPLITS)}; got {names}")
        if (
            not all(0.0 <= f <= 1.0 for _, f in self.fractions)
            or not abs(sum(f for _, f in self.fractions) - 1.0) <= 1e-9
        ):
            raise ValueError(f"split fractions must be in [0, 1] and sum to 1; got {self.fractions}")
        t = self.near_duplicate_threshold
        if t is not None and not 0.0 < t <= 100.0:
            raise ValueError(
                f"near_duplicate_threshold must be in (0, 100] (a rapidfuzz score) or None; got {t}"
            )


def hash_split(request_ids: list[str], spec: SplitSpec) -> list[str]:
    """The split of each id: u = BLAKE2b(seed, id) / 2**64 falls into one of the cumulative fractions."""
    bounds, total = [], 0.0
    for name, frac in spec.fractions:
        total += frac
        bounds.append((total, name))
    out = []
    for rid in request_ids:
        digest = hashlib.blake2b(f"{spec.seed}\x00{rid}".encode(), digest_size=8).digest()
        u = int.from_bytes(digest, "big") / 2**64
        out.append(next((name for bound, name in bounds if u < bound), bounds[-1][1]))
    return out


def group_split(
    request_ids: Sequence[str],
    texts: Sequence[str],
    spec: SplitSpec,
    *,
    threshold: float = NEAR_DUPLICATE_THRESHOLD,
) -> list[str]:
    """The split of each request, like :func:`hash_split`, but every near-duplicate group
    (:func:`near_duplicate_groups`) goes to one split: the split ``hash_split`` gives the group's smallest
    request id. ``spec.by_time`` is not read (time splits are assigned before pooling)."""
    if len(request_ids) != len(texts):
        raise ValueError(f"{len(request_ids)} request ids but {len(texts)} texts")
    groups = near_duplicate_groups(texts, threshold=threshold)
    return _split_groups(list(request_ids), groups, spec)


def _split_groups(request_ids: list[str], groups: np.ndarray, spec: SplitSpec) -> list[str]:
    """Each row's split: its group's smallest request id through ``hash_split``."""
    smallest = pl.DataFrame({"g": groups, "id": request_ids}).group_by("g").agg(pl.col("id").min()).sort("g")
    split_of = dict(zip(smallest["g"].to_list(), hash_split(smallest["id"].to_list(), spec), strict=True))
    return [split_of[g] for g in groups.tolist()]
