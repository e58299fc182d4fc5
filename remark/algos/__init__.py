"""Rank-level rewards and advantages: registered, vectorised pure functions (no I/O, no trainer state).

Flow for a trainer (R = B * G completion rows, groups of G consecutive rows; ``remark.step.rank_step`` runs
it on scored rows):

    enc = encode_rows(slot_ids, k=K, union=..., counts=..., responders=..., seen=..., responder_index=...)
    rewards, mask_RN = rewards_RNK(enc, "union")     # (R, N, K): N = 1 for a per-list scheme
    # truncation, then a modifier (log_decay); gather rewards and mask across processes, then:
    adv_RK = rank_advantages(rewards, group_size=G, mode="group", mask_RN=mask_RN)
    offsets = TokenOffsetMapper(tokenizer)(completion_ids, completion_mask)
    rank_RT = get("segmentation", "lines")(lines, offsets, k=K)      # token_rank_index
    adv_RT = token_advantages(adv_RK_local, rank_RT, n_lines_R=..., end_R=end_token_index(...))

Registry kinds (``remark.algos.registry``, one ``Protocol`` each, checked at registration; every entry
with a one-line help: ``describe(kind)``): ``reward``, ``modifier``, ``baseline``, ``scale`` (each the TRL
``scale_rewards`` value of the same name), ``ratio``, ``segmentation``, and the GRPO-family pieces TRL
lacks (``remark.algos.family``): ``objective``, ``aggregation``, ``truncation``. ``names(kind)`` lists
what is registered.

The names are imported on first use (PEP 562 ``__getattr__``, as ``catalog`` does): importing
``remark.algos.registry`` then loads no torch, and ``remark diagnose --help`` lists the registered reward
schemes from their declarations (``remark.algos.registry.offered``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from catalog._lazy import lazy_exports

#: public name -> the module that defines it
_LAZY_EXPORTS: dict[str, str] = {
    "per_responder_advantages": "remark.algos.advantages",
    "rank_advantages": "remark.algos.advantages",
    "scale_advantages": "remark.algos.advantages",
    "encode_rows": "remark.algos.encode",
    "EncodedRows": "remark.algos.encode",
    "batch_mean_baseline": "remark.algos.family",
    "gmpo_clip_log_ratio": "remark.algos.family",
    "gmpo_logps": "remark.algos.family",
    "interrupt_truncated": "remark.algos.family",
    "prompt_weights": "remark.algos.family",
    "rloo_baseline": "remark.algos.family",
    "score_truncated": "remark.algos.family",
    "token_weights": "remark.algos.family",
    "zero_signal_groups": "remark.algos.family",
    "TokenOffsetMapper": "remark.algos.offsets",
    "TokenOffsets": "remark.algos.offsets",
    "rank_level_logps": "remark.algos.ratios",
    "declared": "remark.algos.registry",
    "define_kind": "remark.algos.registry",
    "describe": "remark.algos.registry",
    "get": "remark.algos.registry",
    "kinds": "remark.algos.registry",
    "lists_alone": "remark.algos.registry",
    "names": "remark.algos.registry",
    "offered": "remark.algos.registry",
    "register": "remark.algos.registry",
    "spec": "remark.algos.registry",
    "draw_rewards_RNK": "remark.algos.rewards",
    "eligibility": "remark.algos.rewards",
    "log_decay": "remark.algos.rewards",
    "per_responder": "remark.algos.rewards",
    "rank_rewards": "remark.algos.rewards",
    "rewards_RNK": "remark.algos.rewards",
    "END_SHAPINGS": "remark.algos.tokens",
    "end_token_index": "remark.algos.tokens",
    "FILLER": "remark.algos.tokens",
    "LineSpan": "remark.algos.tokens",
    "newline_rank_index": "remark.algos.tokens",
    "token_advantages": "remark.algos.tokens",
    "token_rank_index": "remark.algos.tokens",
}

if TYPE_CHECKING:
    from remark.algos.advantages import per_responder_advantages, rank_advantages, scale_advantages
    from remark.algos.encode import EncodedRows, encode_rows
    from remark.algos.family import (
        batch_mean_baseline,
        gmpo_clip_log_ratio,
        gmpo_logps,
        interrupt_truncated,
        prompt_weights,
        rloo_baseline,
        score_truncated,
        token_weights,
        zero_signal_groups,
    )
    from remark.algos.offsets import TokenOffsetMapper, TokenOffsets
    from remark.algos.ratios import rank_level_logps
    from remark.algos.registry import (
        declared,
        define_kind,
        describe,
        get,
        kinds,
        lists_alone,
        names,
        offered,
        register,
        spec,
    )
    from remark.algos.rewards import (
        draw_rewards_RNK,
        eligibility,
        log_decay,
        per_responder,
        rank_rewards,
        rewards_RNK,
    )
    from remark.algos.tokens import (
        END_SHAPINGS,
        FILLER,
        LineSpan,
        end_token_index,
        newline_rank_index,
        token_advantages,
        token_rank_index,
    )


__getattr__, __dir__ = lazy_exports("remark.algos", _LAZY_EXPORTS, globals())

__all__ = [
    "END_SHAPINGS",
    "FILLER",
    "EncodedRows",
    "LineSpan",
    "TokenOffsetMapper",
    "TokenOffsets",
    "batch_mean_baseline",
    "declared",
    "define_kind",
    "describe",
    "draw_rewards_RNK",
    "eligibility",
    "encode_rows",
    "end_token_index",
    "get",
    "gmpo_clip_log_ratio",
    "gmpo_logps",
    "interrupt_truncated",
    "kinds",
    "lists_alone",
    "log_decay",
    "names",
    "newline_rank_index",
    "offered",
    "per_responder",
    "per_responder_advantages",
    "prompt_weights",
    "rank_advantages",
    "rank_level_logps",
    "rank_rewards",
    "register",
    "rewards_RNK",
    "rloo_baseline",
    "scale_advantages",
    "score_truncated",
    "spec",
    "token_advantages",
    "token_rank_index",
    "token_weights",
    "zero_signal_groups",
]
