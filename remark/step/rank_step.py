"""The rank step: scored completion rows -> per-token advantages, token ranks, kept rows and loss weights.

One pure function, :func:`rank_step`, between scoring (``remark.scoring.scorer``) and TRL's loss. It owns every
piece of rank-level credit assignment, each done once per generation round:

1. per round: the ``truncation`` rule on the scheme's rewards, then the reward ``modifier`` (log_decay),
   per-list statistics, and **one gather** of rewards, responder mask, statistics and loss tokens (plus
   the request ids when the pass-rate filter or the group-size advisor needs them); then, on the gathered
   batch, the zero-signal groups and the pass rates (``zero_signal_groups`` once per round);
2. refills (``refill_batch``, DAPO's dynamic sampling / Olmo 3's active sampling): while a process's
   batch lacks groups with signal, ``refill`` generates and scores another round (``refill_max_rounds`` at
   most); each process keeps its own groups, and since every decision is taken on gathered values, every
   process knows every other's choice: the final batch needs no further gather;
3. on the final batch: rank advantages (``baseline`` and ``scale``, responders averaged for a
   per-responder scheme), the token map (``token_advantages``: overflow, filler, end shaping), the kept
   rows (``zero_signal_filter``, ``pass_rate_drop``), the aggregation weights (TRL's loss-only
   ``tool_mask``) and TRL's token count.

``gather`` is the only thing that knows about processes (:class:`Gather`: the trainer's wraps accelerate;
tests use :class:`LocalGather` or threads). No TRL, no model: the step is tested on hand-made rows.

Order: truncation is applied before the modifier, so with ``log_decay`` a line cut by the length cap
credits no earlier rank either (it is not an item at all).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, Protocol

import torch

from catalog.lists import ParsedLists
from remark.algos import get, rank_advantages, token_advantages, zero_signal_groups
from remark.scoring.scorer import ScoredRows
from remark.step.refill import take_rows

__all__ = ["Gather", "LocalGather", "RankBatch", "RankSettings", "Round", "modified_rewards", "rank_step"]

#: Per-list statistics of the sampled batch, logged as ``train/<name>`` (then ``rank_reward/<k>``).
STAT_NAMES = (
    "lines_per_list",
    "parsed_per_list",
    "grounded_per_list",
    "hits_per_list",
    "complete_frac",
    "truncated_frac",
    "token_map_fallback_frac",
    "reward_per_list",
)


class Gather(Protocol):
    """Concatenation across processes along dim 0 (process order), as ``accelerate.utils.gather`` does."""

    rank: int
    world: int
    device: torch.device

    def __call__(self, x: torch.Tensor) -> torch.Tensor: ...

    def objects(self, xs: list) -> list: ...


class LocalGather:
    """One process: every gather is the identity."""

    rank, world = 0, 1

    def __init__(self, device: torch.device | str = "cpu") -> None:
        self.device = torch.device(device)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def objects(self, xs: list) -> list:
        return list(xs)


@dataclass(frozen=True)
class RankSettings:
    """The config fields the rank step reads (``RemarkGRPOConfig`` has them all: :meth:`from_config`)."""

    num_ranks: int = 20
    truncation: str = "score"
    modifier: str | None = None  # a ``modifier`` name (``log_decay: true`` -> "log_decay")
    advantage_scaling: str = "group"
    advantage_eps: float = 1e-4
    advantage_baseline: str = "mean"
    zero_signal_filter: bool = False
    pass_rate_drop: float | None = None
    refill_batch: bool = False
    refill_max_rounds: int = 8
    loss_aggregation: str = "token"
    overflow_penalty: float = -0.1
    filler_penalty: float = -0.1
    end_shaping: str = "remark"
    eos_complete_bonus: float = 0.1
    eos_early_penalty: float = -0.1

    @classmethod
    def from_config(cls, cfg: Any) -> RankSettings:
        values = {f.name: getattr(cfg, f.name) for f in fields(cls) if hasattr(cfg, f.name)}
        if hasattr(cfg, "log_decay"):
            values["modifier"] = "log_decay" if cfg.log_decay else None
        return cls(**values)


@dataclass(frozen=True)
class Round:
    """One generation round as the rank step sees it: the scored local rows and TRL's masks (R, T)."""

    scored: ScoredRows
    completion_mask: torch.Tensor
    loss_mask: torch.Tensor  # completion_mask * TRL's tool_mask (the tokens TRL's loss counts)


@dataclass(frozen=True)
class RankBatch:
    """What TRL's loss takes from the rank step, for this process's rows of the final batch.

    ``rows`` lists the (round, local row) pairs of the final batch in order (one round and every row
    unless refills replaced groups); every tensor below is (R, T) or (R,) over those rows.
    """

    rows: list[tuple[int, int]]
    advantages: torch.Tensor  # float (R, T): TRL's "advantages"
    rank_ids: torch.Tensor  # int64 (R, T): token ranks, for the rank-level ratio and GMPO's segments
    completion_mask: torch.Tensor  # (R, T): TRL's mask with the rows filtered out zeroed
    keep: torch.Tensor  # bool (R,): rows that enter the loss
    loss_weights: torch.Tensor  # float (R,): aggregation weights (multiply TRL's tool_mask)
    num_items: torch.Tensor  # loss tokens of the whole (all processes) final batch: TRL's num_items_in_batch
    dropped: frozenset[str]  # requests no longer trained on (pass_rate_drop), after this step
    stats: dict[str, float]  # metrics of the step, keyed without the train/ or eval/ prefix
    groups: tuple[list[str], torch.Tensor] | None = None  # (request ids (B,), rewards_BGK) of the final batch


# -- one round: modifiers, statistics, one gather, filters ----------------------------------------------
@dataclass
class _Gathered:
    """A round's values over every process's rows (global row index = process * R_local + row)."""

    rewards: torch.Tensor  # (R_all, N, K), after truncation and modifier
    mask_RN: torch.Tensor  # float 0/1 (R_all, N)
    stats: torch.Tensor  # (R_all, S)
    tokens: torch.Tensor  # (R_all,) loss tokens of each row
    request_ids: list[str] | None
    zero_R: torch.Tensor  # bool (R_all,): the row's group has no signal
    pass_R: torch.Tensor  # bool (R_all,): the row's group reached pass_rate_drop


def modified_rewards(scored: ScoredRows, s: RankSettings, device: torch.device | str = "cpu") -> torch.Tensor:
    """(R, N, K) rewards of the scheme after the truncation rule, then the modifier (both registered).

    A list is cut (``cut_R``) when it has no end token and its text does not end with a newline: its last
    line (rank ``n_lines - 1``) may be unfinished, and ``truncation: interrupt`` gives it 0."""
    rewards = scored.rewards_RNK.to(device)
    cut_R = (scored.end_R < 0) & torch.tensor([not t.endswith("\n") for t in scored.texts], dtype=torch.bool)
    last_rank_R = scored.n_lines_R.to(torch.int64) - 1
    rewards = get("truncation", s.truncation)(
        rewards, last_rank_R=last_rank_R.to(device), cut_R=cut_R.to(device)
    )
    if s.modifier is not None:
        rewards = get("modifier", s.modifier)(rewards)
    return rewards


def _parsed_in_first(lines: ParsedLists, k: int) -> list[int]:
    """Per row, how many of its first ``k`` lines have a title (from the columns, no ParsedLine built)."""
    head = [lines.titles[lo : min(hi, lo + k)] for lo, hi in itertools.pairwise(lines.row_bounds())]
    return [len(t) - t.count(None) for t in head]


def _row_stats(scored: ScoredRows, rewards: torch.Tensor, mask_RN: torch.Tensor, k: int) -> torch.Tensor:
    """(R, S + K) per-list statistics: STAT_NAMES, then the reward at each rank (best responder).

    ``reward_per_list`` is the list's summed reward after truncation and modifier, averaged over the
    request's responders (TRL's own ``reward`` log is the sum before them, ``ScoredRows.scalar_R``)."""
    rewards_RK = rewards.amax(1)
    w = mask_RN.to(rewards.dtype)
    n = len(scored.texts)
    cols = [
        [float(n) for n in scored.lines.n_lines],
        [float(k_parsed) for k_parsed in _parsed_in_first(scored.lines, k)],
        [float(sum(i is not None for i in row[:k])) for row in scored.slot_ids],
    ]
    out = torch.tensor(cols, dtype=torch.float32).T.reshape(n, 3).to(rewards_RK.device)
    extra = torch.stack(
        [
            rewards_RK.gt(0).sum(1).float(),
            (scored.n_lines_R.to(rewards_RK.device) >= k).float(),
            (scored.end_R.to(rewards_RK.device) < 0).float(),
            torch.full((n,), scored.n_fallback / max(n, 1), device=rewards_RK.device),
            (rewards.sum(-1) * w).sum(-1) / w.sum(-1).clamp(min=1),
        ],
        1,
    )
    return torch.cat([out, extra, rewards_RK.float()], 1)


def _gather_round(rnd: Round, s: RankSettings, gather: Gather, group_size: int, want_ids: bool) -> _Gathered:
    scored, dev = rnd.scored, gather.device
    rewards = modified_rewards(scored, s, dev)
    r, n, k = rewards.shape
    mask = scored.mask_RN.to(dev)
    if scored.per_responder and gather.world > 1:  # processes may hold different N: pad to the largest
        n_all = int(gather(torch.tensor([n], device=dev)).max())
        rewards = torch.nn.functional.pad(rewards, (0, 0, 0, n_all - n))
        mask = torch.nn.functional.pad(mask, (0, n_all - n))
        n = n_all
    stats = _row_stats(scored, rewards, mask, k)
    tokens = rnd.loss_mask.sum(1).to(dev, torch.float32)
    packed = gather(torch.cat([rewards.reshape(r, n * k), mask.float(), stats, tokens[:, None]], 1))
    ids = gather.objects(scored.request_ids) if want_ids else None
    g_rewards = packed[:, : n * k].reshape(-1, n, k)
    g_mask = packed[:, n * k : n * k + n]
    zero_B = zero_signal_groups(g_rewards, group_size=group_size)
    rewards_BGK = g_rewards.amax(1).view(-1, group_size, k)
    if s.pass_rate_drop is not None:
        pass_B = rewards_BGK.mean((1, 2)) / rewards_BGK.amax((1, 2)).clamp(min=1e-12) >= s.pass_rate_drop
    else:
        pass_B = torch.zeros_like(zero_B)
    return _Gathered(
        rewards=g_rewards,
        mask_RN=g_mask,
        stats=packed[:, n * k + n : -1],
        tokens=packed[:, -1],
        request_ids=ids,
        zero_R=zero_B.repeat_interleave(group_size),
        pass_R=pass_B.repeat_interleave(group_size),
    )


# -- the step ---------------------------------------------------------------------------------------------
class _Rounds:
    """The rounds of one step and what was decided on them: each round's gathered values, the requests
    dropped so far and which rows may enter the loss. Every decision is taken on gathered values, so
    every process takes the same ones."""

    def __init__(
        self,
        s: RankSettings,
        gather: Gather,
        group_size: int,
        *,
        train: bool,
        dropped: frozenset[str],
        with_groups: bool,
    ) -> None:
        self.s, self.gather, self.g, self.train = s, gather, group_size, train
        self.pass_filter = train and s.pass_rate_drop is not None
        self.want_ids = self.pass_filter or with_groups
        self.dropped = set(dropped)
        self.rounds: list[Round] = []
        self.gathered: list[_Gathered] = []

    def add(self, rnd: Round) -> None:
        """Gather a round; requests whose group reached ``pass_rate_drop`` are dropped for good."""
        got = _gather_round(rnd, self.s, self.gather, self.g, self.want_ids)
        if self.pass_filter:
            self.dropped.update(got.request_ids[i] for i in got.pass_R.nonzero().flatten().tolist())
        self.rounds.append(rnd)
        self.gathered.append(got)

    def keep_R(self, i: int) -> torch.Tensor:
        """bool (R_all,): the global rows of round ``i`` that may enter the loss."""
        got = self.gathered[i]
        keep = ~got.zero_R if (self.train and self.s.zero_signal_filter) else torch.ones_like(got.zero_R)
        if self.pass_filter:
            keep &= torch.tensor([x not in self.dropped for x in got.request_ids], device=keep.device)
        return keep

    def refill(self, refill: Callable[[frozenset[str]], Round]) -> tuple[list[list[tuple[int, int]]], dict]:
        """Refill rounds until every process holds ``R / G`` groups with signal (or the rounds run out).

        Returns, per process, the (round, global row) pairs of its final batch, and the refill metrics."""
        g, world = self.g, self.gather.world
        need = self.rounds[0].completion_mask.shape[0] // g
        kept: list[list[tuple[int, int]]] = [[] for _ in range(world)]  # (round, global group)
        spare: list[list[tuple[int, int]]] = [[] for _ in range(world)]
        n_prompts = 0
        for i in range(1 + self.s.refill_max_rounds):
            if i > 0:
                if all(len(k) >= need for k in kept):
                    break
                self.add(refill(frozenset(self.dropped)))
                n_prompts += need * world
            keep_B = self.keep_R(i).view(-1, g).all(1).tolist()
            for p in range(world):
                for b in range(p * need, (p + 1) * need):
                    (kept[p] if keep_B[b] and len(kept[p]) < need else spare[p]).append((i, b))
        chosen = [k + sp[: need - len(k)] for k, sp in zip(kept, spare, strict=True)]
        stats = {
            "refill_rounds": float(len(self.rounds) - 1),
            "refill_prompts": float(n_prompts),
            "refill_short_groups": float(sum(need - len(k) for k in kept)),
        }
        return [[(i, b * g + j) for i, b in rows for j in range(g)] for rows in chosen], stats


def rank_step(
    first: Round,
    settings: RankSettings,
    gather: Gather,
    *,
    group_size: int,
    train: bool = True,
    dropped: frozenset[str] = frozenset(),
    refill: Callable[[frozenset[str]], Round] | None = None,
    with_groups: bool = False,
) -> RankBatch:
    """Rank advantages on the tokens of this process's final batch (module docstring).

    Parameters
    ----------
    first : the sampled round (this process's R rows, groups of ``group_size`` consecutive global rows).
    settings : the rank fields of the config (:class:`RankSettings`).
    gather : concatenation across processes (:class:`Gather`); :class:`LocalGather` for one process.
    train : False for evaluation batches: no filters, no refills, no pass-rate bookkeeping.
    dropped : requests already dropped by ``pass_rate_drop`` (the returned batch has the updated set).
    refill : ``refill(dropped) -> Round`` generates and scores R further rows (R / G new prompts, skipping
        ``dropped``); used when ``settings.refill_batch`` (then R must be a multiple of G).
    with_groups : also return the final batch's (request ids, rewards_BGK) (the group-size advisor).
    """
    s, g = settings, group_size
    n_local = first.completion_mask.shape[0]
    state = _Rounds(s, gather, g, train=train, dropped=dropped, with_groups=with_groups)
    state.add(first)
    stats: dict[str, float] = {}
    if train and s.refill_batch and refill is not None:
        chosen, stats = state.refill(refill)
    else:
        chosen = [[(0, p * n_local + r) for r in range(n_local)] for p in range(gather.world)]
    rounds, gathered = state.rounds, state.gathered
    # the final batch, every process's rows in process order, rounds grouped as they first appear
    chosen = [[x for i in dict.fromkeys(i for i, _ in rows) for x in rows if x[0] == i] for rows in chosen]
    mine = chosen[gather.rank]
    every = [x for rows in chosen for x in rows]
    rewards = take_rows([x.rewards for x in gathered], every)
    mask_RN = take_rows([x.mask_RN for x in gathered], every)
    keep_all = take_rows([state.keep_R(i).float() for i in range(len(gathered))], every)
    tokens = take_rows([x.tokens for x in gathered], every) * keep_all
    adv_RK = rank_advantages(
        rewards,
        group_size=g,
        mode=s.advantage_scaling,
        eps=s.advantage_eps,
        baseline=s.advantage_baseline,
        mask_RN=mask_RN,
    )
    local = slice(gather.rank * n_local, (gather.rank + 1) * n_local)
    local_rows = [(i, r - gather.rank * n_local) for i, r in mine]
    width_rounds = [x.completion_mask for x in rounds]
    completion_mask = take_rows(width_rounds, local_rows)
    rank_ids = take_rows(
        [_fit(x.scored.rank_RT.to(gather.device), x.completion_mask.shape[1]) for x in rounds],
        local_rows,
        value=-1,
    )
    adv_RT = token_advantages(
        adv_RK[local],
        rank_ids,
        n_lines_R=take_rows([x.scored.n_lines_R.to(gather.device) for x in rounds], local_rows),
        end_R=take_rows([x.scored.end_R.to(gather.device) for x in rounds], local_rows),
        mask_RT=completion_mask,
        overflow_penalty=s.overflow_penalty,
        filler_penalty=s.filler_penalty,
        end_shaping=s.end_shaping,
        complete_bonus=s.eos_complete_bonus,
        early_stop_penalty=s.eos_early_penalty,
    )
    keep = keep_all[local].bool()
    if not keep.all():
        completion_mask = completion_mask * keep[:, None].to(completion_mask.dtype)
        adv_RT = adv_RT * keep[:, None].to(adv_RT.dtype)
    weights = get("aggregation", s.loss_aggregation)(tokens, group_size=g)[local]
    sampled = gathered[0]
    means = sampled.stats.mean(0).tolist() if sampled.stats.shape[0] else [0.0] * sampled.stats.shape[1]
    stats = {
        **dict(zip(STAT_NAMES, means, strict=False)),
        **{f"rank_reward/{k + 1:02d}": v for k, v in enumerate(means[len(STAT_NAMES) :])},
        "zero_signal_frac": sampled.zero_R.float().mean().item() if n_local else 0.0,
        "kept_frac": keep_all.float().mean().item(),
        **({"dropped_requests": float(len(state.dropped))} if s.pass_rate_drop is not None else {}),
        **stats,
    }
    groups = None
    if with_groups:
        ids = [gathered[i].request_ids[r] for i, r in every]
        groups = (ids[::g], rewards.amax(1).view(-1, g, rewards.shape[-1]))
    return RankBatch(
        rows=local_rows,
        advantages=adv_RT,
        rank_ids=rank_ids,
        completion_mask=completion_mask,
        keep=keep,
        loss_weights=weights,
        num_items=torch.tensor(int(tokens.sum().item()), dtype=first.loss_mask.dtype, device=gather.device),
        dropped=frozenset(state.dropped),
        stats=stats,
        groups=groups,
    )


def _fit(x: torch.Tensor, width: int) -> torch.Tensor:
    """(R, T') token ranks cut or padded (-1) to TRL's width T."""
    if x.shape[1] >= width:
        return x[:, :width]
    return torch.nn.functional.pad(x, (0, width - x.shape[1]), value=-1)
