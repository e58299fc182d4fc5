"""Per-rank rewards on completion rows: eligibility, the four schemes and the ``log_decay`` modifier.

All functions take an :class:`~remark.algos.encode.EncodedRows` (R rows, K slots) and return float32
tensors; they are registered (kind ``reward`` / ``modifier``) so a config names them. A scheme declares its
``output`` (one reward vector per list, or one per responder) and whether it ``draws``: reads the responder
drawn for the row's group (``EncodedRows.drawn_RV``). Definitions (docs/method.md#rank-rewards), with e_k
the eligibility of slot k:

- ``responder``: r_k = e_k * 1[L_k in R_r] for the row's drawn responder r (Rank-GRPO ``exp_inf``);
- ``union``: r_k = e_k * min(c_{L_k}, 1) (ReMaRk);
- ``marginal``: r_k = e_k * c_{L_k} / n_x, the exact expectation of ``responder`` over a uniform draw;
- ``responder_rb``: rewards_RNK[r, n, k] = e_k * 1[L_k in R_n] for every responder n (padded N, see
  ``EncodedRows.responder_mask_RN``); ``remark.algos.advantages.rank_advantages`` scales each
  responder's column over the group and averages over the request's responders (exact
  Rao-Blackwellisation of Rank-GRPO's *update*, not of its reward);
- ``log_decay`` (modifier): r_k = sum_{j >= k} hit_j d_j, d_j = 1 / log2(j + 1) (j 1-based, so d_1 = 1).

Departures from Rank-GRPO, under remark's reward slots (``segmentation: lines``): a slot with an
unparsable line is still a slot (Rank-GRPO drops such lines before numbering ranks, shifting every later
rank); an id repeated in the list is rewarded at its first position only (Rank-GRPO consumes one of the
responder's items per hit, under a casefolded title and year +-2, so a repeat can hit again while items
are left). Under Rank-GRPO's reward slots (``reward_slots="rank_grpo"``) the scorer hands each slot the id
of the responder item it consumed (``catalog.published.published_credit``), so ``responder`` here is
Rank-GRPO's hit vector exactly.
"""

from __future__ import annotations

import dataclasses

import torch

from remark.algos.encode import EncodedRows
from remark.algos.registry import get, register, spec

__all__ = ["draw_rewards_RNK", "eligibility", "log_decay", "per_responder", "rank_rewards", "rewards_RNK"]


def eligibility(enc: EncodedRows) -> torch.Tensor:
    """e_RK (bool): slot k has a grounded id, not in ``seen``, not equal to an earlier slot's id.

    e_k = 1[item_k >= 0] * (1 - seen[item_k]) * 1[k = min{j : item_j = item_k}]. The first slot of each
    code comes from one ``scatter_reduce(amin)`` over the row's code table (O(R K), not O(R K^2)).
    """
    idx = enc.index_RK
    pos_RK = torch.arange(idx.shape[1]).expand_as(idx)
    first_RV = torch.full(enc.seen_RV.shape, idx.shape[1], dtype=torch.int64)
    first_RV.scatter_reduce_(1, idx, pos_RK, reduce="amin")
    is_first = first_RV.gather(1, idx) == pos_RK
    return (enc.item_RK >= 0) & is_first & ~enc.seen_RV.gather(1, idx)


@register(
    "reward",
    "responder",
    output="list",
    draws=True,
    help="Rank-GRPO (exp_inf): a slot earns 1 if the responder drawn for its group named its item",
)
def responder_reward(enc: EncodedRows) -> torch.Tensor:
    """rewards_RK = e_RK * 1[item in drawn responder's list] (Rank-GRPO exp_inf, one responder per row)."""
    if enc.drawn_RV is None:
        raise ValueError(
            "the responder scheme needs the scored responder: pass responder_index (pooled rows, see "
            "remark.scoring.scorer.hashed_responder_index) or responder_items (per-responder rows) to encode_rows"
        )
    hit = enc.drawn_RV.gather(1, enc.index_RK)
    return (eligibility(enc) & hit).to(torch.float32)


@register(
    "reward",
    "union",
    output="list",
    draws=False,
    help="ReMaRk: a slot earns 1 if any responder named its item",
)
def union_reward(enc: EncodedRows) -> torch.Tensor:
    """rewards_RK = e_RK * min(c_item, 1): 1 if any responder named the slot's item (ReMaRk)."""
    c = enc.counts_RV.gather(1, enc.index_RK)
    return (eligibility(enc) & (c >= 1)).to(torch.float32)


@register(
    "reward",
    "marginal",
    output="list",
    draws=False,
    help="a slot earns c_i / n_x, the share of responders who named its item (responder's reward averaged over the draw)",
)
def marginal_reward(enc: EncodedRows) -> torch.Tensor:
    """rewards_RK = e_RK * c_item / n_x: E over a uniform responder draw of the ``responder`` reward."""
    if not enc.has_responders:
        raise ValueError("the marginal scheme needs n_x: pass responders to encode_rows")
    c = enc.counts_RV.gather(1, enc.index_RK)
    n = enc.n_responders_R.clamp(min=1.0)[:, None]
    return eligibility(enc).to(torch.float32) * (c / n)


@register(
    "reward",
    "responder_rb",
    output="responder",
    draws=False,
    help="Rank-GRPO's responder reward for every responder, scaled per responder and averaged (its update, Rao-Blackwellised)",
)
def responder_rb_reward(enc: EncodedRows) -> torch.Tensor:
    """rewards_RNK = e_RK[:, None] * 1[item in R_n] for every responder n (0 for padded n; mask
    ``enc.responder_mask_RN``). Scale per responder, then average: ``rank_advantages(..., mask_RN=)``."""
    if not enc.has_responders:
        raise ValueError(
            "the responder_rb scheme needs every responder's list: pass responders to encode_rows"
        )
    n = enc.member_RNV.shape[1]
    idx_RNK = enc.index_RK[:, None, :].expand(-1, n, -1)
    hit = enc.member_RNV.gather(2, idx_RNK)
    return (eligibility(enc)[:, None, :] & hit).to(torch.float32)


def _decay_weights(k: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """d_K = 1 / log2(j + 1) for j = 1..K (d_1 = 1)."""
    j = torch.arange(1, k + 1, dtype=torch.float64)
    return (1.0 / torch.log2(j + 1.0)).to(dtype)


@register("modifier", "log_decay", help="Rank-GRPO's DCG variant: r_k = sum_{j >= k} r_j / log2(j + 1)")
def log_decay(rewards_K: torch.Tensor) -> torch.Tensor:
    """r'_k = sum_{j >= k} r_j d_j on the last axis (any leading shape: ``rewards_RK``, ``rewards_RNK``).

    Rank-GRPO's DCG variant: a hit at rank j credits every rank up to j with its discounted gain.
    """
    w = rewards_K * _decay_weights(rewards_K.shape[-1], rewards_K.dtype)
    return w.flip(-1).cumsum(-1).flip(-1)


def rank_rewards(enc: EncodedRows, scheme: str, *, modifier: str | None = None) -> torch.Tensor:
    """Rewards of ``scheme`` (``rewards_RK``; ``rewards_RNK`` for ``responder_rb``), then ``modifier`` if any.

    ``scheme`` and ``modifier`` are registry names (``names("reward")``, ``names("modifier")``).
    """
    rewards = get("reward", scheme)(enc)
    if modifier is not None:
        rewards = get("modifier", modifier)(rewards)
    return rewards


def per_responder(scheme: str) -> bool:
    """Whether ``scheme`` returns one reward vector per responder (its declared ``output``), not per list."""
    return spec("reward", scheme).meta["output"] == "responder"


def rewards_RNK(enc: EncodedRows, scheme: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The rewards of ``scheme`` in one shape for every scheme: ``(rewards_RNK, mask_RN)``.

    A per-responder scheme (``output="responder"``) gives its (R, N, K) rewards with
    ``enc.responder_mask_RN``; a per-list scheme gives its (R, K) rewards as (R, 1, K) with an all-True
    (R, 1) mask. Everything downstream (filters, advantages, statistics) then has one code path:
    ``rank_advantages`` on N = 1 is the per-list scaling exactly, the maximum over N is the identity.
    """
    rewards = get("reward", scheme)(enc)
    if per_responder(scheme):
        return rewards, enc.responder_mask_RN
    return rewards[:, None, :], torch.ones(rewards.shape[0], 1, dtype=torch.bool)


def draw_rewards_RNK(enc: EncodedRows, scheme: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A drawing per-list scheme's rewards had each responder been the drawn one: ``(rewards_RNK, mask_RN)``.

    rewards_RNK[r, n] = the scheme's (R, K) rewards on ``enc`` with responder n of the row's request as the
    drawn one (``drawn_RV = member_RNV[:, n]``), for n < N (padded responders name nothing; mask
    ``enc.responder_mask_RN``). For ``responder`` this is ``responder_rb``'s rewards. ``remark diagnose``
    enumerates the draw with it; a scheme that does not draw, or gives per-responder rewards, raises.
    """
    meta = spec("reward", scheme).meta
    if not meta["draws"] or meta["output"] != "list":
        raise ValueError(
            f"{scheme!r} declares draws={meta['draws']}, output={meta['output']!r}: only a per-list scheme that "
            "draws a responder has rewards per draw"
        )
    fn = get("reward", scheme)
    per_draw = [
        fn(dataclasses.replace(enc, drawn_RV=enc.member_RNV[:, n])) for n in range(enc.member_RNV.shape[1])
    ]
    rewards = torch.stack(per_draw, 1) if per_draw else torch.zeros(enc.n_rows, 0, enc.k)
    return rewards, enc.responder_mask_RN
