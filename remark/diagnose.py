"""Responder-noise diagnostic (``remark diagnose``): how much of Rank-GRPO's signal is the responder draw.

For a pooled dataset and G lists per request (read from a file, or sampled by a built-in policy) it
reports, for every registered reward scheme (``names("reward")``: ``responder``, ``union``, ``marginal``,
``responder_rb`` and any other) under one advantage scaling:

(a) ``responder_share``: the share of the advantage variance explained by the responder draw. Pick a
    request x, one of its G lists g and a rank k uniformly (over all (x, g, k) entries of the
    diagnosed requests; the lists are fixed samples), and a responder r uniformly among x's n_x
    responders (Rank-GRPO draws one per group, so r is shared by the G lists). By the law of total
    variance ``Var(A) = E_{x,g,k}[Var_r(A | x, g, k)] + Var_{x,g,k}(E_r[A | x, g, k])``; the share is
    ``E[Var_r] / Var(A)``: the part of the variance that the list cannot explain and the draw does.
    Every responder is enumerated (no sampling: ``remark.algos.draw_rewards_RNK``). It is 0 for schemes
    that do not draw a responder (their declared ``draws``).
(b) ``zero_signal_frac``: the fraction of groups whose G lists all get the same reward vector (so
    every advantage of the group is 0); for a drawing scheme (``responder``) the expectation over the
    draw, for a per-responder one (``responder_rb``) identical for every responder.
(c) ``mean_abs_adv``: mean |A| over (x, g, k) (and over the draw for a drawing scheme).
(d) ``single_vote_share``: the share of union items with c_i = 1 (a property of the data).

Beside them, ``mean_reward``: the mean reward per slot (over the draw, or over the request's responders,
where the scheme has one reward per responder).

The ``popularity`` policy samples each list as K distinct items (without replacement) with probability
proportional to the item's total count over the training split's union (a catalog-wide popularity
prior, so most slots miss a given request: a weak, untrained policy). Requests are processed in
batches of ``batch_size`` (48, Rank-GRPO's step), which is what ``batch`` scaling pools over.

Pass rates (``--pass-rates-out``, docs/architecture.md "Pass rates"): per request, the mean over its G
lists and K slots of a [0, 1] reward (``union`` by default: the share of slots that hit), with
``n_samples = G * K``. The reward is a scheme that rewards each list from the list and its request alone
(:func:`pass_rate_schemes`: per-list and no draw, ``remark.algos.registry.lists_alone``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import polars as pl
import torch

from remark.algos import (
    draw_rewards_RNK,
    encode_rows,
    lists_alone,
    names,
    per_responder_advantages,
    rank_advantages,
    rewards_RNK,
    spec,
)

__all__ = [
    "Diagnosis",
    "SchemeStats",
    "diagnose",
    "diagnose_memory",
    "iter_popularity_groups",
    "pass_rate_schemes",
    "popularity_lists",
    "popularity_prior",
]


def pass_rate_schemes() -> list[str]:
    """The reward schemes a pass rate can use: those that reward each list from the list and its request
    alone (``remark.algos.registry.lists_alone`` of their declared facts), sorted."""
    return [s for s in names("reward") if lists_alone(spec("reward", s).meta)]


@dataclass(frozen=True)
class SchemeStats:
    """(a)-(c) for one scheme, plus the mean reward per slot (over the draw for a drawing scheme, over the
    request's responders for a per-responder one)."""

    scheme: str
    responder_share: float
    zero_signal_frac: float
    mean_abs_adv: float
    mean_reward: float


@dataclass(frozen=True)
class Diagnosis:
    """What ``remark diagnose`` reports; ``pass_rates`` has one row per diagnosed request."""

    n_requests: int
    group_size: int
    k: int
    scale: str
    policy: str
    seed: int | None
    single_vote_share: float
    schemes: dict[str, SchemeStats]
    pass_rates: pl.DataFrame
    notes: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_requests": self.n_requests,
            "group_size": self.group_size,
            "k": self.k,
            "scale": self.scale,
            "policy": self.policy,
            "seed": self.seed,
            "single_vote_share": self.single_vote_share,
            "schemes": {name: asdict(s) for name, s in self.schemes.items()},
            "mean_pass_rate": float(self.pass_rates["pass_rate"].mean()) if self.pass_rates.height else 0.0,
            "notes": self.notes,
        }

    def format_table(self) -> str:
        lines = [
            f"{self.n_requests} requests, G = {self.group_size}, K = {self.k}, scale {self.scale}, "
            f"policy {self.policy}" + (f" (seed {self.seed})" if self.seed is not None else ""),
            f"(d) union items named by one responder (c_i = 1): {100 * self.single_vote_share:.1f}%",
            "",
            f"{'scheme':<14}{'(a) draw share':>16}{'(b) zero-signal':>17}{'(c) mean |A|':>14}{'mean r':>9}",
        ]
        for s in self.schemes.values():
            lines.append(
                f"{s.scheme:<14}{100 * s.responder_share:>15.1f}%{100 * s.zero_signal_frac:>16.1f}%"
                f"{s.mean_abs_adv:>14.4f}{s.mean_reward:>9.4f}"
            )
        for key, value in self.notes.items():
            lines.append(f"note: {key}: {value}")
        return "\n".join(lines)


class _Accumulator:
    """Running sums for (a)-(c) over (x, g, k) entries; float64."""

    def __init__(self) -> None:
        self.entries = 0
        self.sum_within = 0.0
        self.sum_mean = 0.0
        self.sum_mean_sq = 0.0
        self.sum_abs = 0.0
        self.sum_reward = 0.0
        self.groups = 0
        self.zero_groups = 0.0

    def add_draws(
        self, adv_RNK: torch.Tensor, rewards_RNK: torch.Tensor, mask_RN: torch.Tensor, g: int
    ) -> None:
        """Every responder n as the draw, each with weight 1 / n_x."""
        w = mask_RN.to(torch.float64)
        nx_R = w.sum(1).clamp(min=1)
        adv = adv_RNK.to(torch.float64)
        mean_RK = (adv * w[:, :, None]).sum(1) / nx_R[:, None]
        sq_RK = (adv.square() * w[:, :, None]).sum(1) / nx_R[:, None]
        self._add(mean_RK, (sq_RK - mean_RK.square()).clamp(min=0))
        self.sum_abs += float(((adv.abs() * w[:, :, None]).sum(1) / nx_R[:, None]).sum())
        self.sum_reward += float(
            ((rewards_RNK.to(torch.float64) * w[:, :, None]).sum(1) / nx_R[:, None]).sum()
        )
        r, n, k = rewards_RNK.shape
        r_BGNK = rewards_RNK.view(r // g, g, n, k)
        same_BN = (r_BGNK == r_BGNK[:, :1]).all(3).all(1)
        w_BN = w.view(r // g, g, n)[:, 0]
        self.zero_groups += float(((same_BN * w_BN).sum(1) / w_BN.sum(1).clamp(min=1)).sum())
        self.groups += r // g

    def add_fixed(
        self, adv_RK: torch.Tensor, rewards_RNK: torch.Tensor, mask_RN: torch.Tensor, g: int
    ) -> None:
        """A scheme whose advantages do not depend on a draw: its rewards in one shape (``rewards_RNK``,
        N = 1 for a per-list scheme); the mean reward of a slot is its mean over the valid responders."""
        adv = adv_RK.to(torch.float64)
        self._add(adv, torch.zeros_like(adv))
        self.sum_abs += float(adv.abs().sum())
        r = rewards_RNK.shape[0]
        flat = rewards_RNK.reshape(r // g, g, -1)
        self.zero_groups += float((flat == flat[:, :1]).all(2).all(1).sum())
        self.groups += r // g
        w = mask_RN.to(torch.float64)
        self.sum_reward += float(
            ((rewards_RNK.to(torch.float64) * w[:, :, None]).sum(1) / w.sum(1).clamp(min=1)[:, None]).sum()
        )

    def _add(self, mean_RK: torch.Tensor, within_RK: torch.Tensor) -> None:
        self.entries += mean_RK.numel()
        self.sum_within += float(within_RK.sum())
        self.sum_mean += float(mean_RK.sum())
        self.sum_mean_sq += float(mean_RK.square().sum())

    def stats(self, scheme: str) -> SchemeStats:
        n = max(self.entries, 1)
        within = self.sum_within / n
        between = max(self.sum_mean_sq / n - (self.sum_mean / n) ** 2, 0.0)
        total = within + between
        return SchemeStats(
            scheme=scheme,
            responder_share=within / total if total > 0 else 0.0,
            zero_signal_frac=self.zero_groups / max(self.groups, 1),
            mean_abs_adv=self.sum_abs / n,
            mean_reward=self.sum_reward / n,
        )


def popularity_prior(requests: pl.DataFrame, *, split: str | None = "train") -> tuple[list[str], np.ndarray]:
    """Items and weights of the popularity policy: total c_i of each item over ``split``'s unions
    (every request when ``split`` is None). Items sorted by id, so the prior is deterministic."""
    lf = requests.lazy()
    if split is not None:
        lf = lf.filter(pl.col("split") == split)
    prior = (
        lf.select("union", "counts")
        .explode("union", "counts")
        .drop_nulls("union")
        .group_by("union")
        .agg(pl.col("counts").cast(pl.Float64).sum().alias("weight"))
        .filter(pl.col("weight") > 0)
        .sort("union")
        .collect()
    )
    return prior["union"].to_list(), prior["weight"].to_numpy()


def iter_popularity_groups(
    n_requests: int, items: Sequence[str], weights: np.ndarray, *, group_size: int, k: int, seed: int
) -> Iterator[list[list[str]]]:
    """The groups of :func:`popularity_lists` one request at a time: the same draws (rows are sampled in
    the same chunks with the same generator), drawn only as they are consumed, so memory holds one
    chunk of rows rather than ``n_requests`` x G lists."""
    if len(items) == 0:
        raise ValueError("the popularity prior is empty: the split has no union items with a positive count")
    gen = torch.Generator().manual_seed(seed)
    w = torch.as_tensor(np.asarray(weights, dtype=np.float64))
    take = min(k, len(items))
    names = np.asarray(items, dtype=object)
    rows = n_requests * group_size
    chunk = max(1, 2_000_000 // len(items))
    pending: list[list[str]] = []
    drawn = 0
    for _ in range(n_requests):
        while len(pending) < group_size:
            n = min(chunk, rows - drawn)
            idx = torch.multinomial(w.expand(n, -1), take, replacement=False, generator=gen).numpy()
            pending.extend(names[idx].tolist())
            drawn += n
        group, pending = pending[:group_size], pending[group_size:]
        yield group


def popularity_lists(
    n_requests: int, items: Sequence[str], weights: np.ndarray, *, group_size: int, k: int, seed: int
) -> list[list[list[str]]]:
    """``n_requests`` x G lists of min(K, len(items)) distinct items drawn without replacement with
    probability proportional to ``weights`` (``torch.multinomial``, seeded)."""
    return list(iter_popularity_groups(n_requests, items, weights, group_size=group_size, k=k, seed=seed))


#: bytes one (row, responder, rank) entry costs at the peak of a batch (float32 rewards and advantages,
#: float64 copies of both, their products with the mask and squares)
BYTES_PER_ENTRY = 64
#: bytes one (row, rank) slot costs (the row's id list and its encoding: codes, eligibility, masks)
BYTES_PER_SLOT = 100
#: bytes one row costs beside its slots (the Python lists holding its ids and request fields)
BYTES_PER_ROW = 1000


def diagnose_memory(n_responders: Sequence[int], *, group_size: int, k: int, batch_size: int) -> int:
    """Peak bytes :func:`diagnose` needs beyond the dataset: one batch is held at a time, so the largest
    batch's ``rows x (BYTES_PER_ROW + K x (BYTES_PER_SLOT + N x BYTES_PER_ENTRY))``, rows = requests of
    the batch x G and N its largest responder count (``n_responders`` in request order; requests without
    responders are left out, as :func:`diagnose` does). The constants are fitted to peak RSS measured on
    the synthetic dataset (G from 200 to 2000, batches of 8 and 48, K = 5 and 20): the estimate was
    within -15% and +60% of the measurement."""
    kept = np.asarray([n for n in n_responders if n > 0], dtype=np.int64)
    peak = 0
    for start in range(0, len(kept), batch_size):
        part = kept[start : start + batch_size]
        rows = len(part) * group_size
        peak = max(peak, rows * (BYTES_PER_ROW + k * (BYTES_PER_SLOT + int(part.max()) * BYTES_PER_ENTRY)))
    return peak


class _Forward:
    """Groups from an iterator, read by increasing request index: only the groups not yet passed are
    held (``diagnose`` reads batch after batch)."""

    def __init__(self, groups: Iterator[Sequence[Sequence[str | None]]]) -> None:
        self._groups = groups
        self._next = 0

    def take(self, indices: Sequence[int]) -> list[Sequence[Sequence[str | None]]]:
        out = []
        for i in indices:
            while self._next <= i:
                group = next(self._groups)
                self._next += 1
            out.append(group)
        return out


def diagnose(
    requests: pl.DataFrame,
    lists: Sequence[Sequence[Sequence[str | None]]]
    | Mapping[str, Sequence[Sequence[str | None]]]
    | Iterator[Sequence[Sequence[str | None]]],
    *,
    group_size: int,
    k: int = 20,
    scale: str = "group",
    eps: float = 1e-4,
    batch_size: int = 48,
    pass_rate_scheme: str = "union",
    policy: str = "lists",
    seed: int | None = None,
) -> Diagnosis:
    """Compute (a)-(d) and per-request pass rates.

    ``requests``: pooled rows (``request_id``, ``seen``, ``responders``, ``union``, ``counts``);
    ``lists``: G lists of grounded ids (None = unparsed/ungrounded line) per request, aligned with
    ``requests`` or keyed by ``request_id``, or an iterator of them in request order (read one batch at a
    time: :func:`iter_popularity_groups`). Requests with no responder are left out (noted). One batch of
    ``batch_size`` requests x G lists is held at a time (:func:`diagnose_memory` estimates its peak).
    """
    if group_size < 2:
        raise ValueError(f"group_size must be >= 2 (group-relative advantages), got {group_size}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if pass_rate_scheme not in pass_rate_schemes():
        raise ValueError(
            f"pass_rate_scheme must be one of {pass_rate_schemes()} (per-list schemes with no responder draw), "
            f"got {pass_rate_scheme!r}"
        )
    ids = requests["request_id"].to_list()
    if isinstance(lists, Mapping):
        missing = [r for r in ids if r not in lists]
        if missing:
            raise ValueError(f"no lists for {len(missing)} requests (first: {missing[0]!r})")
        lists = [lists[r] for r in ids]
    if isinstance(lists, Iterator):
        source = _Forward(lists)
    else:
        if len(lists) != len(ids):
            raise ValueError(f"{len(lists)} groups of lists for {len(ids)} requests")
        source = None
    n_resp = [len(x) for x in requests["responders"].to_list()]
    keep = [i for i, n in enumerate(n_resp) if n > 0]
    notes: dict[str, Any] = {}
    if len(keep) < len(ids):
        notes["requests_without_responders_skipped"] = len(ids) - len(keep)
    cols = {c: requests[c].to_list() for c in ("seen", "responders", "union", "counts")}
    schemes = names("reward")
    draws = {s: spec("reward", s).meta["draws"] for s in schemes}
    acc = {s: _Accumulator() for s in schemes}
    pass_ids: list[str] = []
    pass_vals: list[np.ndarray] = []
    g = group_size
    for start in range(0, len(keep), batch_size):
        chunk = keep[start : start + batch_size]
        groups = source.take(chunk) if source is not None else [lists[i] for i in chunk]
        for i, group in zip(chunk, groups):
            if len(group) != group_size:
                raise ValueError(
                    f"request {ids[i]!r} has {len(group)} lists; expected group_size = {group_size}"
                )
        rep = [i for i in chunk for _ in range(g)]
        enc = encode_rows(
            [slots for group in groups for slots in group],
            k=k,
            union=[cols["union"][i] for i in rep],
            counts=[cols["counts"][i] for i in rep],
            responders=[cols["responders"][i] for i in rep],
            seen=[cols["seen"][i] or [] for i in rep],
            group_size=g,
            request_ids=[ids[i] for i in rep],
        )
        for scheme in schemes:
            if draws[scheme]:  # every responder as the drawn one
                r_RNK, mask_RN = draw_rewards_RNK(enc, scheme)
                per_RNK = per_responder_advantages(r_RNK, group_size=g, mode=scale, eps=eps, mask_RN=mask_RN)
                acc[scheme].add_draws(per_RNK, r_RNK, mask_RN, g)
                continue
            r_RNK, mask_RN = rewards_RNK(enc, scheme)  # N = 1 for a per-list scheme: its own scaling
            adv = rank_advantages(r_RNK, group_size=g, mode=scale, eps=eps, mask_RN=mask_RN)
            acc[scheme].add_fixed(adv, r_RNK, mask_RN, g)
            if scheme == pass_rate_scheme:
                pass_vals.append(r_RNK.view(len(chunk), g * k).double().mean(1).numpy())
        pass_ids.extend(ids[i] for i in chunk)
    stats = {s: acc[s].stats(s) for s in schemes}
    counts = requests[keep]["counts"].explode().drop_nulls() if keep else pl.Series([], dtype=pl.UInt32)
    single = float((counts == 1).sum() / counts.len()) if counts.len() else 0.0
    pass_rates = pl.DataFrame(
        {
            "request_id": pass_ids,
            "pass_rate": np.clip(np.concatenate(pass_vals), 0.0, 1.0) if pass_vals else np.zeros(0),
            "n_samples": [g * k] * len(pass_ids),
        },
        schema={"request_id": pl.String, "pass_rate": pl.Float64, "n_samples": pl.Int64},
    )
    return Diagnosis(
        n_requests=len(keep),
        group_size=g,
        k=k,
        scale=scale,
        policy=policy,
        seed=seed,
        single_vote_share=single,
        schemes=stats,
        pass_rates=pass_rates,
        notes=notes,
    )
