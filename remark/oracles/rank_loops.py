"""Slow, per-element Python reference for rank rewards and advantages (tests and ``bench/rewards.py``).

Written straight from the formulas of docs/method.md on plain Python lists of ids, with no tensors and no shared
code with the vectorised path (``encode``/``rewards``/``advantages``), so agreement between the two is
evidence for both. Never use it in training: it loops over every row, slot and list.

Each reward scheme has its case in :data:`SCHEMES`; the property tests run every registered scheme
(``remark.algos.names("reward")``) against its case, and a registered scheme without one fails them.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Sequence

__all__ = ["SCHEMES", "random_rows", "reference_advantages", "reference_rewards"]


def _eligible(slots: Sequence[Hashable | None], seen: set, k: int) -> list[bool]:
    out = []
    for j in range(k):
        item = slots[j] if j < len(slots) else None
        ok = item is not None and item not in seen
        for i in range(j):
            if i < len(slots) and slots[i] == item:
                ok = False
        out.append(ok)
    return out


def _hits(
    slots: Sequence[Hashable | None], elig: list[bool], member: Callable[[Hashable], bool]
) -> list[float]:
    return [1.0 if ok and member(slots[j]) else 0.0 for j, ok in enumerate(elig)]


def _responder(slots, elig, resp, drawn):
    return _hits(slots, elig, lambda x: x in resp[drawn])


def _union(slots, elig, resp, drawn):
    return _hits(slots, elig, lambda x: any(x in s for s in resp))


def _marginal(slots, elig, resp, drawn):
    row = []
    for j, ok in enumerate(elig):
        c = sum(1 for s in resp if ok and slots[j] in s)
        row.append(c / len(resp) if ok and resp else 0.0)
    return row


def _responder_rb(slots, elig, resp, drawn):
    return [_hits(slots, elig, lambda x, s=s: x in s) for s in resp]


#: scheme -> its loop reference on one row: ``fn(slots, eligible, responders, drawn)`` with ``eligible`` the
#: K eligibility flags, ``responders`` the request's responders as sets of ids and ``drawn`` the index of the
#: row's drawn responder (None when not drawn); returns the row's K rewards, or one list of K per responder.
SCHEMES: dict[str, Callable[..., list]] = {
    "marginal": _marginal,
    "responder": _responder,
    "responder_rb": _responder_rb,
    "union": _union,
}


def reference_rewards(
    slot_ids: Sequence[Sequence[Hashable | None]],
    *,
    k: int,
    scheme: str,
    responders: Sequence[Sequence[Sequence[Hashable]]],
    seen: Sequence[Sequence[Hashable]] | None = None,
    responder_index: Sequence[int] | None = None,
    log_decay: bool = False,
) -> list:
    """Per-row rewards: ``[R][K]`` floats, or ``[R][n_x][K]`` (unpadded) for a per-responder scheme."""
    if scheme not in SCHEMES:
        raise ValueError(
            f"no loop reference for reward scheme {scheme!r}: add its case to SCHEMES in remark/oracles/rank_loops.py"
        )
    out = []
    for r, slots in enumerate(slot_ids):
        resp = [set(items) for items in responders[r]]
        elig = _eligible(slots, set(seen[r]) if seen is not None else set(), k)
        row = SCHEMES[scheme](slots, elig, resp, None if responder_index is None else responder_index[r])
        if log_decay:
            row = [_decay(v) for v in row] if row and isinstance(row[0], list) else _decay(row)
        out.append(row)
    return out


def _decay(hits: list[float]) -> list[float]:
    k = len(hits)
    return [sum(hits[j] / math.log2(j + 2) for j in range(i, k)) for i in range(k)]


def _std(xs: list[float]) -> float:
    if len(xs) < 2:
        return 0.0
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def reference_advantages(
    rewards: list, *, group_size: int, mode: str, eps: float = 1e-4
) -> list[list[float]]:
    """``[R][K]`` advantages from ``[R][K]`` rewards, or from ``[R][n_x][K]`` (``responder_rb``: each
    responder scaled over its group, then the mean over responders)."""
    per_responder = bool(rewards) and bool(rewards[0]) and isinstance(rewards[0][0], list)
    if not per_responder:
        return _scale(rewards, group_size, mode, eps, batch_pool=None)
    n_rows = len(rewards)
    k = len(rewards[0][0]) if rewards[0] else 0
    n_max = max(len(row) for row in rewards)
    # batch std for responder_rb pools every valid (request, responder, list)
    pool = None
    if mode == "batch":
        pool = [[row[n][j] for row in rewards for n in range(len(row))] for j in range(k)]
    per_n = []
    for n in range(n_max):
        rows = [row[n] if n < len(row) else [0.0] * k for row in rewards]
        per_n.append(_scale(rows, group_size, mode, eps, batch_pool=pool))
    out = []
    for r in range(n_rows):
        n_x = len(rewards[r])
        out.append([sum(per_n[n][r][j] for n in range(n_x)) / n_x if n_x else 0.0 for j in range(k)])
    return out


def _scale(
    rows: list[list[float]], g: int, mode: str, eps: float, batch_pool: list | None
) -> list[list[float]]:
    n_rows = len(rows)
    k = len(rows[0]) if rows else 0
    out = [[0.0] * k for _ in range(n_rows)]
    for j in range(k):
        column = [rows[r][j] for r in range(n_rows)]
        if mode == "batch":
            batch_std = _std(batch_pool[j] if batch_pool is not None else column)
        for start in range(0, n_rows, g):
            group = column[start : start + g]
            mean = sum(group) / g
            if mode == "group":
                s = _std(group) + eps
            elif mode == "batch":
                s = batch_std + eps
            elif mode == "none":
                s = 1.0
            else:
                raise ValueError(f"unknown mode {mode!r}")
            for i, v in enumerate(group):
                out[start + i][j] = (v - mean) / s
    return out


def random_rows(
    seed: int, *, n_requests: int, group_size: int, k: int, max_responders: int = 6, pool: int = 40
) -> dict:
    """A random batch of completion rows in ``encode_rows``' keyword form (plus ``slot_ids``).

    Each request has 1..``max_responders`` responders naming 0..5 ids from a small per-request pool
    (so responders overlap), a few seen ids, and G lists of 0..K+3 slots mixing pool ids, outside
    ids, repeats and ungrounded (None) lines. One responder is drawn per group.
    """
    rnd = random.Random(seed)
    rows: dict[str, list] = {
        k_: [] for k_ in ("slot_ids", "union", "counts", "responders", "seen", "responder_index")
    }
    for b in range(n_requests):
        ids = [f"i{rnd.randrange(pool)}" for _ in range(12)]
        responders = [rnd.sample(ids, rnd.randint(0, 5)) for _ in range(rnd.randint(1, max_responders))]
        responders = [list(dict.fromkeys(r)) for r in responders]
        union = list(dict.fromkeys(i for r in responders for i in r))
        counts = [sum(i in r for r in responders) for i in union]
        seen = rnd.sample(ids, rnd.randint(0, 2))
        drawn = rnd.randrange(len(responders))
        for _ in range(group_size):
            slots = []
            for _ in range(rnd.randint(0, k + 3)):
                u = rnd.random()
                if u < 0.15:
                    slots.append(None)
                elif u < 0.25 and slots:
                    slots.append(rnd.choice(slots))
                elif u < 0.35:
                    slots.append(f"o{b}_{rnd.randrange(5)}")
                else:
                    slots.append(rnd.choice(ids))
            rows["slot_ids"].append(slots)
            rows["union"].append(union)
            rows["counts"].append(counts)
            rows["responders"].append(responders)
            rows["seen"].append(seen)
            rows["responder_index"].append(drawn)
    return rows
