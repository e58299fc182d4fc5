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

Registry kinds (``remark.algos.registry``, one ``Protocol`` each, checked at registration): ``reward``
(responder, union, marginal: ``output="list"``; responder_rb: ``output="responder"``), ``modifier``
(log_decay), ``baseline`` (mean, rloo, batch), ``scale`` (group, batch, none: each the TRL
``scale_rewards`` value of the same name), ``ratio`` (rank), ``segmentation`` (lines, newlines), and the
GRPO-family pieces TRL lacks (``remark.algos.family``): ``objective`` (gmpo), ``aggregation`` (token,
prompt), ``truncation`` (score, interrupt).
"""

from remark.algos import advantages as _advantages  # noqa: F401  (registers baselines and scales)
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
from remark.algos.registry import define_kind, get, kinds, names, register, spec
from remark.algos.rewards import eligibility, log_decay, per_responder, rank_rewards, rewards_RNK
from remark.algos.tokens import (
    END_SHAPINGS,
    FILLER,
    LineSpan,
    end_token_index,
    newline_rank_index,
    token_advantages,
    token_rank_index,
)

__all__ = [
    "END_SHAPINGS",
    "FILLER",
    "EncodedRows",
    "LineSpan",
    "TokenOffsetMapper",
    "TokenOffsets",
    "batch_mean_baseline",
    "define_kind",
    "eligibility",
    "encode_rows",
    "end_token_index",
    "get",
    "gmpo_clip_log_ratio",
    "gmpo_logps",
    "interrupt_truncated",
    "kinds",
    "log_decay",
    "names",
    "newline_rank_index",
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
