"""Rank-level rewards and advantages: registered, vectorised pure functions (no I/O, no trainer state).

Flow for a trainer (R = B * G completion rows, groups of G consecutive rows):

    enc = encode_rows(slot_ids, k=K, union=..., counts=..., responders=..., seen=..., responder_index=...)
    rewards = rank_rewards(enc, "union")            # rewards_RK (rewards_RNK for "responder_rb")
    # gather rewards (and enc.responder_mask_RN for responder_rb) across processes, then:
    adv_RK = rank_advantages(rewards, group_size=G, mode="group", mask_RN=...)
    offsets = TokenOffsetMapper(tokenizer)(completion_ids, completion_mask)
    rank_RT = token_rank_index(lines, offsets, k=K)
    adv_RT = token_advantages(adv_RK_local, rank_RT, n_lines_R=..., end_R=end_token_index(...))

Registry kinds: ``reward`` (responder, union, marginal, responder_rb), ``modifier`` (log_decay),
``baseline`` (mean, rloo, batch), ``scale`` (group, batch, none), ``ratio`` (rank), and the GRPO-family
pieces TRL lacks (``remark.algos.family``): ``objective`` (gmpo), ``aggregation`` (token, prompt),
``truncation`` (score, interrupt).
"""

from remark.algos import advantages as _advantages  # noqa: F401  (registers baselines and scales)
from remark.algos.advantages import per_responder_advantages, rank_advantages, scale_advantages
from remark.algos.encode import EncodedRows, draw_responders, encode_rows
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
from remark.algos.ratios import rank_level_logps
from remark.algos.registry import get, kinds, names, register
from remark.algos.rewards import eligibility, log_decay, rank_rewards
from remark.algos.tokens import (
    FILLER,
    LineSpan,
    TokenOffsetMapper,
    TokenOffsets,
    end_token_index,
    token_advantages,
    token_char_offsets,
    token_rank_index,
)

__all__ = [
    "FILLER",
    "EncodedRows",
    "LineSpan",
    "TokenOffsetMapper",
    "TokenOffsets",
    "batch_mean_baseline",
    "draw_responders",
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
    "per_responder_advantages",
    "prompt_weights",
    "rank_advantages",
    "rank_level_logps",
    "rank_rewards",
    "register",
    "rloo_baseline",
    "scale_advantages",
    "score_truncated",
    "token_advantages",
    "token_char_offsets",
    "token_rank_index",
    "token_weights",
    "zero_signal_groups",
]
