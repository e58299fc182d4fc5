"""Splitting by request: near-duplicate prompts found and kept on one side of a split.

A test request whose prompt (reworded, singular/plural, punctuation, another Unicode spelling) is also a
training prompt measures memorisation, not generalisation. This module finds such prompts and assigns
every group of them one split; ``eval.leakage`` uses the same similarity to measure what a given split
shares.

The similarity of two prompts (``similarity_texts``, :data:`SCORER`):

1. ``normalize_prompt``: Unicode NFKC and case folding (an NFC, NFD or fullwidth spelling of one prompt
   is one text), invisible format characters removed, punctuation removed, whitespace collapsed,
   articles dropped, simple plurals folded;
2. a word prefix shared by at least half of the prompts and at least ``MIN_SHARED_PREFIX_WORDS`` long is
   removed (an instruction every prompt carries, as in Rank-GRPO's Reddit rows, would otherwise make
   every pair look alike); a prompt keeps it when nothing else would be left;
3. ``STOP_WORDS`` (function words and the survey templates' "name something" / "tell me") are removed,
   unless nothing else is left;
4. ``rapidfuzz.fuzz.token_sort_ratio`` (0-100: the Indel similarity of the words sorted alphabetically)
   of the results, computed as ``fuzz.ratio`` of the words sorted once (``similarity_texts`` sorts
   them): the same values, faster in ``cdist``. Two prompts are near duplicates when it is at least
   :data:`NEAR_DUPLICATE_THRESHOLD`, compared as floats (never rounded), or when their normalized texts
   are equal.

Scoring the content words matters on short questions: with the template words in, "name something that
comes in a can" and "... a carton" score 95 while the reworded "name a food that doesnt need to be
refrigerated" / "... does not need to be refrigerated." score 92, so no threshold separates them; on
content words they score 84.2 and 88.1.

Finding the pairs (:func:`near_duplicate_groups`, :func:`near_pairs`; ``method``):

- ``"exact"``: every pair of texts whose lengths can reach the threshold is scored (``cdist`` in
  blocks). Its work grows as the square of the number of texts times their length.
- ``"blocked"``: equal similarity texts are collapsed first. A pair is then scored only when the words
  the two texts share (with multiplicity, ``len(word) + 1`` characters each) carry at least
  ``SHARED_WORD_SHARE`` of their characters, so the groups are the connected components of the pairs
  that reach the threshold *and* share that much (plus equal texts). Such pairs are found without
  forming all pairs, by prefix filtering as in all-pairs similarity joins (:func:`_candidates`): each
  text's words are ranked rarest first, and two texts that share that much share a word in both
  prefixes, with enough of both texts left from that word on; a bound over hashed word buckets and
  then the exact count of shared characters drop the rest (:func:`_enough_shared`); each remaining pair
  is scored (``cpdist``). Pairs of two texts longer than ``LONG_CHARS`` are judged by their *word
  score* instead, 200 (shared characters - 1) / (len(a) + len(b)), from a sparse product
  (:func:`_long_pairs`): a lower bound of the character score, equal to it when the texts differ by
  whole words, that costs no character comparison.

  The departures from ``"exact"``: a pair that reaches the threshold through unequal words is not
  joined unless its shared words carry the share: a typo in a prompt of one or two content words
  ("rensamon triisloser" / "rensamon triisolser": 0.24), "flip" / "flop", short texts of look-alike
  words; two long texts are joined only when their shared words alone reach the
  threshold (unrelated long texts drawn from one vocabulary score near the threshold on characters, as
  sorted words of one language align well; bench/RESULTS.md). On ProtoQA's 1,032 dev questions, whose
  near-duplicate pairs' shared words carry 0.28 of their characters or more, the groups equal
  ``"exact"``'s (tests/data_prep/test_request_split.py).
- ``"auto"`` (the default): ``"exact"`` when its work (``EXACT_MAX_WORK``: 64-bit words of the
  bit-parallel comparison, summed over the pairs) is small, as on ProtoQA (1,032 questions), else
  ``"blocked"``.

Both give the same groups for the same texts in any order (the groups are connected components; ids
are numbered by first appearance).

The name ``normalize_prompt`` is also used by ``data_prep.schema`` for a different thing (bringing a
``prompt`` column to chat messages); this one turns one text into a comparison key.
"""

from __future__ import annotations

import hashlib
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO

import numpy as np
import polars as pl
from rapidfuzz import fuzz, process
from scipy.sparse import coo_array, csr_array
from scipy.sparse.csgraph import connected_components

from data_prep.schema import SPLITS
from data_prep.timesplit import TimeSplit

#: The least ``token_sort_ratio`` (0-100, on :func:`similarity_texts`, compared as a float) at which two
#: prompts are one request. Measured on ProtoQA's scraped dev questions (980; the shipped
#: ``data_prep/shipped/protoqa/dev.scraped.jsonl``), 479,710 pairs, none with equal normalized text.
#: At or above 84.5 (6 pairs), five are one question reworded: "name a job title someone might have in /
#: at a big company" (100), "name something (that) people get removed from their body" (100), "... to
#: prepare for (a game of) strip poker" (88.372), "name a food that doesnt / does not need to be
#: refrigerated" (88.136), "name something you'd find at most amusement parks" with two wordings of
#: "rides is not an answer" (84.906); one is not: "name something cats like" / "... you would like to
#: catch" (88.889). Just below, different questions are kept apart: "name something that comes in a can"
#: / "... a carton" (84.211), "past or present, name a famous joan" / "... bob" (83.019), "... when you
#: think of japan" / "... of ireland" (82.609), "name something you know about shaquille o'neal" / "...
#: about shaquille o'neal that's huge?" (82.143); 11 pairs score 80 or more, 42 score 70 or more. "Name
#: something you bring to the beach" / "... to a picnic" score 43.5. The threshold sits between the
#: amusement-park pair and the can / carton pair. No crowdsourced dev question (52) scores above 80.0
#: against a scraped one. Joining a different pair costs little (both go to one split); missing a
#: reworded pair puts a training question in the test split.
NEAR_DUPLICATE_THRESHOLD: float = 84.5
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
#: Cells of one score block (bytes of uint8 scores; float32 blocks hold a quarter as many): rows of the
#: queries per ``cdist`` call = cells // number of choices, and at most ``BLOCK_ROWS`` (texts sorted by
#: length: a short block skips the choices out of reach).
CHUNK_CELLS = 1 << 24
BLOCK_ROWS = 256
#: ``"blocked"``: the least share of a pair's characters (both texts, ``len(word) + 1`` per shared word)
#: that its shared words must carry for the pair to be scored (module docstring). ProtoQA's near-duplicate
#: pairs have 0.28 or more ("cat like" / "catch like"; reworded questions 0.39 or more).
SHARED_WORD_SHARE = 0.25
#: ``"blocked"``: pairs of two texts longer than this (characters of the similarity text) are judged by
#: their word score (:func:`_long_pairs`), not scored character by character.
LONG_CHARS = 2_000
#: ``"auto"``: ``"exact"`` when its work is at most this many 64-bit words of the bit-parallel comparison
#: (sum over the pairs within reach of ``ceil(len(a) / 64) * len(b)``), else ``"blocked"``.
EXACT_MAX_WORK = 2e8
#: ``"blocked"``: buckets of the words' hashes. A pair's shared characters are at most the sum over the
#: buckets of the smaller of its two texts' characters there: a cheap bound that drops most candidates
#: before their shared characters are counted exactly.
MASS_BUCKET_BITS = 5
MASS_BUCKETS = 1 << MASS_BUCKET_BITS
#: ``"blocked"``: about the most candidate pairs formed, checked or scored at once.
CANDIDATE_BATCH = 1 << 22
#: Threads of ``cdist`` / ``cpdist``.
WORKERS = 1

Method = Literal["auto", "exact", "blocked"]
METHODS = ("auto", "exact", "blocked")

_PUNCT = re.compile(r"[^\w\s\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]|_")
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"))
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


def unicode_key(text: str) -> str:
    """``text`` in one Unicode spelling: NFKC, case folded (then NFKC again: folding can decompose),
    soft hyphens and zero-width characters removed. NFC, NFD and fullwidth spellings give one key.

    >>> unicode_key("Ｃａｆｅ\u0301") == unicode_key("café") == "café"
    True
    """
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold()).translate(_INVISIBLE)


def normalize_prompt(text: str) -> str:
    """A prompt's comparison key: :func:`unicode_key`, punctuation removed (combining marks kept in
    their word), whitespace collapsed, articles (a, an, the) dropped, plurals folded (:func:`_fold`).

    >>> normalize_prompt("Name a fruit.") == normalize_prompt("ＮＡＭＥ  fruits")
    True
    """
    words = _PUNCT.sub(" ", unicode_key(text)).split()
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
    queries: Sequence[str], choices: Sequence[str], *, score_cutoff: float = 0, dtype: Any = np.uint8
) -> np.ndarray:
    """``(Q, C)`` :data:`SCORER` scores of similarity texts (scores under ``score_cutoff`` are 0), one
    ``rapidfuzz.process.cdist`` call: chunk the queries for large inputs (:func:`near_pairs`). ``dtype``
    uint8 rounds the scores (for ranking); ``np.float32`` keeps them (for a threshold)."""
    return process.cdist(
        list(queries), list(choices), scorer=SCORER, dtype=dtype, score_cutoff=score_cutoff, workers=WORKERS
    )


def _check_threshold(threshold: float) -> None:
    if not 0.0 < threshold <= 100.0:
        raise ValueError(f"threshold must be in (0, 100] (a rapidfuzz score), got {threshold}")


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")


def _length_factor(threshold: float) -> float:
    """f with ``ratio(a, b) >= threshold`` impossible unless ``len(b) <= f len(a)`` (len(a) <= len(b)):
    ratio = 200 LCS / (la + lb) <= 200 la / (la + lb), so lb <= la (200 - threshold) / threshold."""
    return (200.0 - threshold) / threshold


def _float_rows(n_choices: int) -> int:
    """Query rows per float32 ``cdist`` block (``CHUNK_CELLS`` bytes / 4 per score)."""
    return max(1, min(BLOCK_ROWS, CHUNK_CELLS // (4 * max(n_choices, 1))))


def _exact_work(q_len: np.ndarray, c_len: np.ndarray, threshold: float, *, same: bool) -> float:
    """The work of ``"exact"`` (``EXACT_MAX_WORK``'s unit) on texts of these lengths: for each query,
    ``ceil(len / 64)`` times the summed length of the choices within reach (the longer ones, for
    ``same``)."""
    if q_len.size == 0 or c_len.size == 0:
        return 0.0
    f = _length_factor(threshold)
    c_sorted = np.sort(c_len)
    cum = np.concatenate([[0], np.cumsum(c_sorted, dtype=np.float64)])
    hi = np.searchsorted(c_sorted, np.floor(q_len * f + 1e-9), side="right")
    if same:
        lo = np.searchsorted(c_sorted, q_len, side="left")
    else:
        lo = np.searchsorted(c_sorted, np.ceil(q_len / f - 1e-9), side="left")
    return float((np.ceil(q_len / 64) * (cum[hi] - cum[np.minimum(lo, hi)])).sum())


def _use_exact(method: str, q_len: np.ndarray, c_len: np.ndarray, threshold: float, *, same: bool) -> bool:
    if method != "auto":
        return method == "exact"
    return _exact_work(q_len, c_len, threshold, same=same) <= EXACT_MAX_WORK


def _lengths(texts: Sequence[str]) -> np.ndarray:
    return np.fromiter((len(t) for t in texts), np.int64, len(texts))


def near_pairs(
    queries: Sequence[str],
    choices: Sequence[str],
    *,
    threshold: float = NEAR_DUPLICATE_THRESHOLD,
    method: Method = "auto",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs of similarity texts that score at least ``threshold``: ``(qi, ci, score)``, each ``(P,)``
    (``score`` float32), sorted by query then choice. ``method``: module docstring.

    ``"exact"``: both sides are sorted by length; a block of queries (at most ``BLOCK_ROWS`` rows and
    ``CHUNK_CELLS`` bytes of scores at once) is scored against the choices whose length can reach the
    threshold (:func:`_length_factor`) only. ``"blocked"``: the pairs whose shared words carry
    ``SHARED_WORD_SHARE`` of their characters, each scored; a pair of two texts longer than
    ``LONG_CHARS`` comes with its word score (:func:`_long_pairs`).
    """
    _check_threshold(threshold)
    _check_method(method)
    queries, choices = list(queries), list(choices)
    q_len, c_len = _lengths(queries), _lengths(choices)
    if _use_exact(method, q_len, c_len, threshold, same=False):
        qi, ci, sc = _exact_pairs(queries, choices, threshold)
    else:
        qi, ci, sc = _blocked_pairs(queries, choices, threshold)
    order = np.lexsort((ci, qi))
    return qi[order], ci[order], sc[order]


def _exact_pairs(
    queries: list[str], choices: list[str], threshold: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``near_pairs``' ``"exact"`` method: every pair within reach scored, in blocks."""
    f = _length_factor(threshold)
    q_len, c_len = _lengths(queries), _lengths(choices)
    q_order, c_order = np.argsort(q_len, kind="stable"), np.argsort(c_len, kind="stable")
    c_sorted, c_sorted_len = [choices[i] for i in c_order], c_len[c_order]
    rows = _float_rows(len(choices))
    qi, ci, sc = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0, np.float32)]
    for start in range(0, len(queries), rows):
        idx = q_order[start : start + rows]
        lo = np.searchsorted(c_sorted_len, np.ceil(q_len[idx[0]] / f - 1e-9), side="left")
        hi = np.searchsorted(c_sorted_len, np.floor(q_len[idx[-1]] * f + 1e-9), side="right")
        block = similarity_scores(
            [queries[i] for i in idx], c_sorted[lo:hi], score_cutoff=threshold, dtype=np.float32
        )
        q, c = np.nonzero(block)
        qi.append(idx[q])
        ci.append(c_order[lo + c])
        sc.append(block[q, c])
    return np.concatenate(qi).astype(np.int64), np.concatenate(ci).astype(np.int64), np.concatenate(sc)


@dataclass
class _Words:
    """The words of some similarity texts: ``counts`` (texts x words, each word's count in the text),
    ``weight`` (``len(word) + 1``), ``lengths`` (characters), ``words`` (each text's word list) and the
    prefix entries (module docstring): ``p_text``, ``p_word`` and ``p_rest``, the characters of the
    entry's word and of the text's commoner words (``count * weight`` each); ``buckets`` (texts x
    ``MASS_BUCKETS``): the characters of the text's words whose hash falls in each bucket."""

    counts: csr_array
    weight: np.ndarray
    lengths: np.ndarray
    words: list[list[str]] = field(repr=False)
    p_text: np.ndarray = field(repr=False)
    p_word: np.ndarray = field(repr=False)
    p_rest: np.ndarray = field(repr=False)
    buckets: np.ndarray = field(repr=False)


def _words(texts: list[str], threshold: float) -> _Words:
    """:class:`_Words` of ``texts``; words are ranked rarest first (ties: first appearance in
    ``texts``), and a text's prefix keeps a word while it and the commoner words carry at least
    ``SHARED_WORD_SHARE`` of the least length a pair with the text can have (``"blocked"``)."""
    n = len(texts)
    words = [t.split() for t in texts]
    vocab: dict[str, int] = {}
    ids = np.fromiter(
        (vocab.setdefault(w, len(vocab)) for ws in words for w in ws), np.int64, sum(len(w) for w in words)
    )
    v = max(len(vocab), 1)
    weight = np.fromiter((len(w) + 1 for w in vocab), np.int64, len(vocab))
    owner = np.repeat(np.arange(n, dtype=np.int64), [len(w) for w in words])
    codes, count = np.unique(owner * v + ids, return_counts=True)
    text, word = codes // v, codes % v
    counts = csr_array((count, (text, word)), shape=(n, v))
    df = np.bincount(word, minlength=v)
    rank = np.empty(v, np.int64)
    rank[np.lexsort((np.arange(v), df))] = np.arange(v)
    order = np.lexsort((rank[word], text))  # each text's words, rarest first
    text, word, mass = text[order], word[order], (count * weight[word])[order]
    lengths = _lengths(texts)
    least = lengths * (1.0 + threshold / (200.0 - threshold))  # the text and its shortest partner
    before = np.cumsum(mass) - mass  # mass of the entries ahead, over all texts
    first = np.searchsorted(text, np.arange(n), side="left")
    ahead = before - before[np.minimum(first, max(text.size - 1, 0))][text] if text.size else before
    rest = np.bincount(text, weights=mass, minlength=n)[text] - ahead  # this word and the commoner ones
    keep = rest >= SHARED_WORD_SHARE * least[text] - 1e-9
    bucket = (word.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - MASS_BUCKET_BITS)
    per = np.bincount(text * MASS_BUCKETS + bucket.astype(np.int64), weights=mass, minlength=n * MASS_BUCKETS)
    kind = np.uint8 if per.max(initial=0) <= 255 else np.uint16 if per.max() <= 65535 else np.int64
    buckets = per.reshape(n, MASS_BUCKETS).astype(kind)
    return _Words(counts, weight, lengths, words, text[keep], word[keep], rest[keep], buckets)


def _candidates(
    words: _Words, threshold: float, n_queries: int | None = None
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Candidate pairs ``(a, b)`` of ``words``' texts, in blocks of about ``CANDIDATE_BATCH``: with
    ``n_queries`` None, pairs of any two texts (``a < b``); else a query (``a < n_queries``) and a choice
    (``b``, counted from the first choice). A pair sharing several prefix words can come in several
    blocks.

    A pair is a candidate when its lengths can reach the threshold and some word w in both prefixes
    leaves room for the shared words to carry ``SHARED_WORD_SHARE`` of the pair's characters: the
    shared words are w and commoner ones (when w is the rarest shared word), so both texts' ``p_rest``
    at w must reach ``SHARED_WORD_SHARE * (len(a) + len(b))`` (positional filtering). Per prefix entry
    this bounds the partner's length (``budget``), and a sorted search by (word, length) finds the
    partners within it on the shorter text's side. Pairs of two texts longer than ``LONG_CHARS``
    are left to :func:`_long_pairs` (such texts share many words: one pair would be formed per word).
    """
    f = _length_factor(threshold)
    lengths = words.lengths
    t, w = words.p_text, words.p_word
    budget = words.p_rest / SHARED_WORD_SHARE - lengths[t]  # the longest partner this entry allows
    args = (t, w, budget, lengths, f)
    if n_queries is None:
        every = np.arange(t.size)
        yield from _pairs_by_word(*args, every, every, same=True)
        return
    q, c = np.flatnonzero(t < n_queries), np.flatnonzero(t >= n_queries)
    for a, b in _pairs_by_word(*args, q, c):
        yield a, b - n_queries
    for b, a in _pairs_by_word(*args, c, q, strict=True):  # the query is the longer text
        yield a, b - n_queries


def _pairs_by_word(
    t: np.ndarray,
    w: np.ndarray,
    budget: np.ndarray,
    lengths: np.ndarray,
    f: float,
    short: np.ndarray,
    long: np.ndarray,
    *,
    strict: bool = False,
    same: bool = False,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Blocks of pairs ``(a, b)`` of texts, a from the ``short`` prefix entries and b from the ``long``
    ones, ``len(a) <= len(b)`` (``<`` with ``strict``), that share an entry's word within both budgets
    and the length window; ``same`` (one entry list): each pair once per word, as ``(min, max)``."""
    short = short[lengths[t[short]] <= LONG_CHARS]  # two long texts: _long_pairs
    span = int(lengths.max(initial=0)) + 2
    key = w[long] * span + lengths[t[long]]
    order = np.argsort(key, kind="stable")
    key, long = key[order], long[order]
    la = lengths[t[short]]
    upper = np.minimum(np.floor(budget[short] + 1e-9), np.floor(la * f + 1e-9))
    lo = np.searchsorted(key, w[short] * span + la, side="right" if strict else "left")
    if same:  # long holds every entry (long[i] == i before sorting): start after the entry itself
        where = np.empty(long.size, np.int64)
        where[order] = np.arange(long.size)
        lo = np.maximum(lo, where[short] + 1)
    hi = np.searchsorted(key, w[short] * span + np.maximum(upper, la - 1), side="right")
    counts = np.maximum(hi - lo, 0)
    ends = np.cumsum(counts)
    s = 0
    while s < short.size:
        base = ends[s - 1] if s else 0
        e = max(s + 1, int(np.searchsorted(ends, base + CANDIDATE_BATCH, side="right")))
        reps = counts[s:e]
        total = int(reps.sum())
        if total:
            ai = np.repeat(np.arange(s, e), reps)
            other = long[lo[ai] + np.arange(total) - np.repeat(ends[s:e] - reps - base, reps)]
            ok = budget[other] >= la[ai] - 1e-9
            ta, tb = t[short[ai[ok]]], t[other[ok]]
            if same:
                ta, tb = np.minimum(ta, tb), np.maximum(ta, tb)
            yield _unique_pairs(ta, tb, len(lengths))  # a pair sharing many words comes once
        s = e


def _score_pairs(
    queries: list[str], choices: list[str], qi: np.ndarray, ci: np.ndarray, threshold: float
) -> np.ndarray:
    """float32 :data:`SCORER` score of each pair ``(queries[qi], choices[ci])``, 0 under ``threshold``."""
    out = np.zeros(qi.size, np.float32)
    qa, ca = np.asarray(queries, dtype=object), np.asarray(choices, dtype=object)
    for s in range(0, qi.size, CANDIDATE_BATCH):
        e = min(s + CANDIDATE_BATCH, qi.size)
        out[s:e] = process.cpdist(
            qa[qi[s:e]], ca[ci[s:e]], scorer=SCORER, score_cutoff=threshold, dtype=np.float32, workers=WORKERS
        )
    return out


def _shared_mass(words: _Words, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Characters of the words each pair of texts shares: sum over words of min(count, count) (len + 1)."""
    out = np.zeros(a.size, np.float64)
    step = max(1, CANDIDATE_BATCH // 64)
    for s in range(0, a.size, step):
        both = words.counts[a[s : s + step]].minimum(words.counts[b[s : s + step]])
        out[s : s + step] = both @ words.weight
    return out


def _enough_shared(words: _Words, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs whose shared words carry at least ``SHARED_WORD_SHARE`` of their characters, with
    those characters: the bucket bound first (``MASS_BUCKETS``), the exact count on what it leaves."""
    size = (words.lengths[a] + words.lengths[b]).astype(np.float64)
    need = SHARED_WORD_SHARE * size - 1e-9
    bound = np.zeros(a.size, np.int64)
    step = max(1, CANDIDATE_BATCH // 4)
    for s in range(0, a.size, step):
        e = s + step
        bound[s:e] = np.minimum(words.buckets[a[s:e]], words.buckets[b[s:e]]).sum(axis=1, dtype=np.int64)
    keep = np.flatnonzero(bound >= need)
    mass = _shared_mass(words, a[keep], b[keep])
    ok = mass >= need[keep]
    return a[keep[ok]], b[keep[ok]], mass[ok]


def _long_pairs(
    words: _Words, threshold: float, n_queries: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(a, b, score)``: the pairs of texts both longer than ``LONG_CHARS`` (``a < b``; with
    ``n_queries``: a query and a choice, ``b`` counted from the first choice) whose *word score*
    reaches the threshold: 200 (m - 1) / (len(a) + len(b)), m the characters of the words they share
    (min(count, count) (len + 1) per word). Those words, in their sorted order and with their spaces,
    are a common subsequence of the two texts, so the word score never exceeds :data:`SCORER`'s; it
    equals it when the texts differ by whole words. m comes from a sparse product of the long texts'
    words (each word's i-th copy a column of weight ``len + 1``), in row blocks; every pair of long
    texts is formed."""
    f = _length_factor(threshold)
    long = np.flatnonzero(words.lengths > LONG_CHARS)
    left = long if n_queries is None else long[long < n_queries]
    right = long if n_queries is None else long[long >= n_queries]
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = [(np.zeros(0, np.int64),) * 2 + (np.zeros(0),)]
    if left.size and right.size:
        counts = words.counts[long].tocoo()
        copies = np.zeros(words.counts.shape[1], np.int64)
        np.maximum.at(copies, counts.col, counts.data)
        offset = np.concatenate([[0], np.cumsum(copies)])
        k = np.arange(counts.data.sum()) - np.repeat(np.cumsum(counts.data) - counts.data, counts.data)
        tokens = csr_array(
            (
                np.ones(k.size),
                (np.repeat(counts.row, counts.data), np.repeat(offset[counts.col], counts.data) + k),
            ),
            shape=(long.size, int(offset[-1])),
        )
        where = np.searchsorted(long, np.concatenate([left, right]))
        lt, rt = tokens[where[: left.size]], tokens[where[left.size :]]
        rt = (rt.multiply(np.repeat(words.weight, copies)[None, :].astype(np.float64))).T.tocsc()
        step = max(1, CANDIDATE_BATCH // right.size)
        for s in range(0, left.size, step):
            shared = (lt[s : s + step] @ rt).tocoo()
            found.append((left[s + shared.row], right[shared.col], shared.data))
    a, b, mass = (np.concatenate(x) for x in zip(*found, strict=True))
    la, lb = words.lengths[a], words.lengths[b]
    score = (200.0 * (mass - 1.0) / np.maximum(la + lb, 1)).astype(np.float32)
    ok = np.maximum(la, lb) <= np.floor(np.minimum(la, lb) * f + 1e-9)
    ok &= 200.0 * (mass - 1.0) >= threshold * (la + lb)  # as floats, not the rounded score
    if n_queries is None:
        ok &= a < b
    order = np.lexsort((b[ok], a[ok]))
    a, b, score = a[ok][order], b[ok][order], score[ok][order]
    return (a, b, score) if n_queries is None else (a, b - n_queries, score)


def _blocked_pairs(
    queries: list[str], choices: list[str], threshold: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``near_pairs``' ``"blocked"`` method (module docstring): the candidates whose shared words carry
    ``SHARED_WORD_SHARE`` of their characters, each scored once; pairs of long texts by their word
    score (:func:`_long_pairs`)."""
    words = _words([*queries, *choices], threshold)
    nq = len(queries)
    found_q, found_c, found_s = [], [], []
    for qi, ci in _candidates(words, threshold, nq):
        qi, ci, _ = _enough_shared(words, qi, ci + nq)
        score = _score_pairs(queries, choices, qi, ci - nq, threshold)
        hit = score > 0
        found_q.append(qi[hit])
        found_c.append(ci[hit] - nq)
        found_s.append(score[hit])
    qi, ci, score = _long_pairs(words, threshold, nq)
    qi, ci, score = (np.concatenate(x) for x in ([*found_q, qi], [*found_c, ci], [*found_s, score]))
    _, first = np.unique(qi * max(len(choices), 1) + ci, return_index=True)
    return qi[first], ci[first], score[first]


def _unique_pairs(a: np.ndarray, b: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct pairs, sorted (``n``: more than any ``b``); by sorting the codes (``np.unique``'s
    hash path is slower on these)."""
    codes = np.sort(a * max(n, 1) + b)
    codes = codes[np.concatenate([[True], codes[1:] != codes[:-1]])] if codes.size else codes
    return codes // max(n, 1), codes % max(n, 1)


def twin_pairs(
    queries: Sequence[str],
    choices: Sequence[str],
    *,
    threshold: float = NEAR_DUPLICATE_THRESHOLD,
    method: Method = "auto",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Near-duplicate pairs between two lists of prompt texts (raw, as :func:`prompt_texts` gives them):
    ``(qi, ci, score)``, each ``(P,)`` (``score`` float32), sorted by query then choice, for pairs with
    equal normalized text (score 100) or a :data:`SCORER` score >= ``threshold`` on
    :func:`similarity_texts` (computed over both lists together; :func:`near_pairs`)."""
    sim = similarity_texts([*queries, *choices])
    qi, ci, score = near_pairs(sim[: len(queries)], sim[len(queries) :], threshold=threshold, method=method)
    keys = pl.DataFrame({"ci": np.arange(len(choices)), "key": [normalize_prompt(t) for t in choices]})
    exact = (
        pl.DataFrame({"qi": np.arange(len(queries)), "key": [normalize_prompt(t) for t in queries]})
        .join(keys, on="key", how="inner")
        .select("qi", "ci", pl.lit(100.0, pl.Float32).alias("score"))
    )
    pairs = (
        pl.DataFrame(
            {"qi": qi, "ci": ci, "score": score},
            schema={"qi": pl.Int64, "ci": pl.Int64, "score": pl.Float32},
        )
        .vstack(exact.cast({"qi": pl.Int64, "ci": pl.Int64}))
        .group_by("qi", "ci")
        .agg(pl.col("score").max())
        .sort("qi", "ci")
    )
    return pairs["qi"].to_numpy(), pairs["ci"].to_numpy(), pairs["score"].to_numpy()


def near_duplicate_groups(
    texts: Sequence[str], *, threshold: float = NEAR_DUPLICATE_THRESHOLD, method: Method = "auto"
) -> np.ndarray:
    """``(R,)`` int64 group ids: the connected components of the graph of prompts whose edges are pairs
    with equal normalized text or a :data:`SCORER` score >= ``threshold`` (module docstring; ``method``
    says which pairs are scored).

    Equal similarity texts are scored once (``np.unique``, which also fixes the order the methods see,
    whatever the input order). ``"exact"``: the U unique texts are sorted by length and each block of
    rows is scored against itself and the longer texts that can reach the threshold
    (:func:`_length_factor`). Ids are numbered by first appearance: ``[0, 0, 1]`` for a reworded pair
    followed by another question.
    """
    _check_threshold(threshold)
    _check_method(method)
    if len(texts) == 0:
        return np.zeros(0, np.int64)
    unique, inverse = np.unique(np.asarray(similarity_texts(texts), dtype=object), return_inverse=True)
    uniq = unique.tolist()
    lengths = _lengths(uniq)
    if _use_exact(method, lengths, lengths, threshold, same=True):
        labels = _exact_labels(uniq, threshold)
    else:
        labels = _blocked_labels(uniq, threshold)
    _, first, inv = np.unique(labels[inverse.ravel()], return_index=True, return_inverse=True)
    return np.argsort(np.argsort(first)).astype(np.int64)[inv.ravel()]


def _components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    graph = coo_array((np.ones(len(a), np.int8), (a, b)), shape=(n, n))
    return connected_components(graph, directed=False)[1]


def _exact_labels(uniq: list[str], threshold: float) -> np.ndarray:
    """Component labels of the unique texts, every pair within reach scored (``"exact"``)."""
    lengths = _lengths(uniq)
    order = np.argsort(lengths, kind="stable")
    ordered, ordered_len = [uniq[i] for i in order], lengths[order]
    f = _length_factor(threshold)
    rows = _float_rows(len(uniq))
    a, b = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for start in range(0, len(uniq), rows):  # rows against themselves and the later (longer) texts
        end = min(start + rows, len(uniq))
        hi = np.searchsorted(ordered_len, np.floor(ordered_len[end - 1] * f + 1e-9), side="right")
        block = similarity_scores(
            ordered[start:end], ordered[start:hi], score_cutoff=threshold, dtype=np.float32
        )
        q, c = np.nonzero(block)
        a.append(order[q + start])
        b.append(order[c + start])
    return _components(len(uniq), np.concatenate(a), np.concatenate(b))


def _blocked_labels(uniq: list[str], threshold: float) -> np.ndarray:
    """Component labels of the unique texts by ``"blocked"`` (module docstring): the candidates whose
    shared words carry ``SHARED_WORD_SHARE`` of their characters, scored block by block, and the pairs
    of long texts whose word score reaches the threshold (:func:`_long_pairs`)."""
    words = _words(uniq, threshold)
    edges_a, edges_b = [], []
    for qi, ci in _candidates(words, threshold):
        qi, ci, _ = _enough_shared(words, qi, ci)
        hit = _score_pairs(uniq, uniq, qi, ci, threshold) > 0
        edges_a.append(qi[hit])
        edges_b.append(ci[hit])
    lq, lc, _ = _long_pairs(words, threshold)
    return _components(len(uniq), np.concatenate([*edges_a, lq]), np.concatenate([*edges_b, lc]))


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


def group_balance(
    groups: Sequence[int] | np.ndarray,
    splits: Sequence[str | None],
    fractions: Sequence[tuple[str, float]] | dict[str, float],
    request_ids: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Whether one near-duplicate group alone holds more requests than the share of the split it went to.

    A group goes to one split whole, so a group larger than ``fraction * N`` requests (N: all the
    requests) overfills its split by itself, and the fractions asked for cannot hold (5,000 copies of one
    prompt among 5,200 requests at 0.8 / 0.1 / 0.1 put at least 96% in one split). Splits without a
    fraction (given with the input) are not checked; a group of one request never warns.

    Returns a JSON-able dict: ``{"n_requests", "n_groups", "largest_group" (size), "largest_group_split",
    "oversized_groups" (how many groups overfill their split), "warning"}``; ``warning`` is None or one
    sentence naming the group that overfills its split the most (its smallest request id when
    ``request_ids`` is given).
    """
    share = dict(fractions)
    frame = pl.DataFrame(
        {
            "g": np.asarray(groups, dtype=np.int64),
            "split": pl.Series(list(splits), dtype=pl.String),
            "id": list(request_ids) if request_ids is not None else [None] * len(splits),
        },
        schema={"g": pl.Int64, "split": pl.String, "id": pl.String},
    )
    n = frame.height
    out: dict[str, Any] = {
        "n_requests": n,
        "n_groups": 0,
        "largest_group": 0,
        "largest_group_split": None,
        "oversized_groups": 0,
        "warning": None,
    }
    if n == 0:
        return out
    sizes = (
        frame.group_by("g")
        .agg(pl.len().alias("size"), pl.col("split").mode().sort().first(), pl.col("id").min())
        .with_columns(
            pl.col("split").replace_strict(share, default=None, return_dtype=pl.Float64).alias("frac")
        )
        .with_columns(over=pl.col("size") - pl.col("frac") * n)
        .sort(["size", "id"], descending=[True, False], nulls_last=True)
    )
    top = sizes.row(0, named=True)
    out.update(n_groups=sizes.height, largest_group=top["size"], largest_group_split=top["split"])
    bad = sizes.filter((pl.col("size") >= 2) & (pl.col("over") > 0)).sort(
        ["over", "id"], descending=[True, False], nulls_last=True
    )
    out["oversized_groups"] = bad.height
    if bad.height:
        g = bad.row(0, named=True)
        example = f" (request {g['id']} among them)" if g["id"] is not None else ""
        others = f"; {bad.height - 1} other group(s) overfill theirs too" if bad.height > 1 else ""
        out["warning"] = (
            f"one near-duplicate group holds {g['size']} of {n} requests ({g['size'] / n:.1%}){example}, more "
            f"than the {g['frac']:.0%} share of the {g['split']} split it went to: the split fractions cannot "
            f"hold{others}; look at the repeated prompt, or deduplicate the requests"
        )
    return out


@dataclass(frozen=True)
class GroupSplit:
    """:func:`split_by_groups`' result: each request's split and near-duplicate group id, and
    :func:`group_balance` of them."""

    splits: list[str]
    groups: np.ndarray
    balance: dict[str, Any]


def split_by_groups(
    request_ids: Sequence[str],
    texts: Sequence[str],
    spec: SplitSpec,
    *,
    threshold: float = NEAR_DUPLICATE_THRESHOLD,
    method: Method = "auto",
) -> GroupSplit:
    """Each request's split, like :func:`hash_split`, but every near-duplicate group
    (:func:`near_duplicate_groups`) goes to one split: the split ``hash_split`` gives the group's smallest
    request id; with the groups and their balance (:func:`group_balance`: a warning when one group
    overfills its split). ``spec.by_time`` is not read (time splits are assigned before pooling)."""
    if len(request_ids) != len(texts):
        raise ValueError(f"{len(request_ids)} request ids but {len(texts)} texts")
    groups = near_duplicate_groups(texts, threshold=threshold, method=method)
    splits = _split_groups(list(request_ids), groups, spec)
    return GroupSplit(splits, groups, group_balance(groups, splits, spec.fractions, request_ids))


def group_split(
    request_ids: Sequence[str],
    texts: Sequence[str],
    spec: SplitSpec,
    *,
    threshold: float = NEAR_DUPLICATE_THRESHOLD,
    file: TextIO | None = None,
) -> list[str]:
    """:func:`split_by_groups`' splits; its balance warning, if any, is printed on ``file`` (stderr) as
    one line, ``warning: ...``."""
    result = split_by_groups(request_ids, texts, spec, threshold=threshold)
    if result.balance["warning"]:
        print(f"warning: {result.balance['warning']}", file=file or sys.stderr)
    return result.splits


def _split_groups(request_ids: list[str], groups: np.ndarray, spec: SplitSpec) -> list[str]:
    """Each row's split: its group's smallest request id through ``hash_split``."""
    smallest = pl.DataFrame({"g": groups, "id": request_ids}).group_by("g").agg(pl.col("id").min()).sort("g")
    split_of = dict(zip(smallest["g"].to_list(), hash_split(smallest["id"].to_list(), spec), strict=True))
    return [split_of[g] for g in groups.tolist()]
