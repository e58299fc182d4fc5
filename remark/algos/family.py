"""The GRPO family on rank-level advantages: the pieces TRL lacks, as registered pure functions.

TRL 1.16 already has most of the family (``loss_type`` grpo/bnpo/dr_grpo/dapo/cispo/sapo/luspo/vespo,
``importance_sampling_level`` token/sequence, ``scale_rewards``, clip-higher, off-policy sequence masking,
the unbiased KL, truncated importance sampling, an FP32 head); recipes use those options directly
(``remark/configs/recipes``, ``docs/recipes.md``). What it lacks lives here, beside the other kinds:

- ``baseline`` ``rloo`` (RLOO: Kool et al. 2019, "Buy 4 REINFORCE samples, get a baseline for free!";
  Ahmadian et al. 2024, arXiv 2402.14740): baseline_{b,g,k} = mean of rank k over the *other* G - 1 lists,
  so A = r_g - (S - r_g) / (G - 1) = G / (G - 1) * (r_g - mean_g r). That is the papers' estimator (and
  TRL's RLOOTrainer's); we add no further G/(G-1) or (G-1)/G factor. Needs only G >= 2.
- ``baseline`` ``batch`` (REINFORCE++: Hu et al. 2025, arXiv 2501.03262): the mean of rank k over every
  list of the batch; with the ``batch`` scale (std of rank k over the batch) this is REINFORCE++'s global
  normalisation (r - mean_batch) / std_batch, per rank. Departure: REINFORCE++ folds a k1 KL penalty into
  the reward; here KL stays a loss term (TRL's ``beta``), so the baseline sees rank rewards only.
- ``objective`` ``gmpo`` (GMPO: Zhao et al. 2025, arXiv 2507.20673): the geometric-mean objective, per
  segment s of tokens (a rank, or the whole response): each token's log-ratio l_t = logp_t - logp_old_t
  is clipped in log space in the direction of its advantage (min(l, c_high) when A > 0, max(l, -c_low)
  when A < 0), the clipped log-ratios are averaged over the segment and exponentiated:
  rho_s = exp(mean_{t in s} l~_t) = (prod_{t in s} r~_t)^(1/|s|), and the objective is A_s * rho_s. As with
  the rank-level ratio (``remark.algos.ratios``) it reaches TRL's loss through the log-probabilities:
  logp'_t = logp_old_t + mean_{t in s} l~_t, with TRL's own clip switched off (the trainer does that),
  so TRL's per-token ``-exp(logp' - logp_old) * A`` is ``-A_s * rho_s`` on every token of s. Departure: GMPO
  takes one advantage per response; ranks carry their own advantages, so at the ``rank`` level each rank
  is a segment (tokens of no rank, such as the end token, are their own segment), and at the
  ``sequence`` level each token is clipped by the sign of its own advantage.
- ``aggregation`` ``token`` / ``prompt`` (ScaleRL: Khatri et al. 2025, arXiv 2510.13786): per-row loss
  weights for TRL's token-sum losses (``dapo``, ``cispo``, normalised by the N tokens of the generation
  batch). ``prompt`` weights row r of group b by N / (n_B * n_b) (n_b = group b's loss tokens, n_B = groups
  with any), so that sum_t w l_t / N = (1/n_B) sum_b (1/n_b) sum_{t in b} l_t: the average over prompts of
  each prompt's token mean. ``token`` is 1 everywhere (TRL's own aggregation).
- ``truncation`` ``score`` / ``interrupt`` (ScaleRL's forced length interruption, in list terms): a
  completion cut at ``max_completion_length`` is ended there and scored on the lines it completed; the
  cut last line is not an item, so its rank earns 0 (``score`` keeps whatever the cut line grounds to).
- :func:`zero_signal_groups`: groups whose G reward vectors are all equal (DAPO's and Olmo 3's filter).
"""

from __future__ import annotations

import torch

from remark.algos.registry import register

__all__ = [
    "batch_mean_baseline",
    "gmpo_clip_log_ratio",
    "gmpo_logps",
    "interrupt_truncated",
    "prompt_weights",
    "rloo_baseline",
    "score_truncated",
    "token_weights",
    "zero_signal_groups",
]


# -- baselines: fn(rewards_BGK) -> baseline broadcastable to (B, G, K) ---------------------------------
@register("baseline", "rloo", help="the mean of the rank over the other G - 1 lists (RLOO)")
def rloo_baseline(rewards_BGK: torch.Tensor) -> torch.Tensor:
    """baseline_BGK = (sum_g' r_{b,g',k} - r_{b,g,k}) / (G - 1): the mean of the other G - 1 lists (RLOO)."""
    g = rewards_BGK.shape[1]
    if g < 2:
        raise ValueError(f"a leave-one-out baseline needs G >= 2 lists per request, got G = {g}")
    return (rewards_BGK.sum(1, keepdim=True) - rewards_BGK) / (g - 1)


@register("baseline", "batch", help="the mean of the rank over every list of the batch (REINFORCE++)")
def batch_mean_baseline(rewards_BGK: torch.Tensor) -> torch.Tensor:
    """baseline_11K = mean of rank k over every (b, g) of the batch (REINFORCE++'s global mean)."""
    return rewards_BGK.mean((0, 1), keepdim=True)


# -- GMPO ------------------------------------------------------------------------------------------------
def gmpo_clip_log_ratio(
    log_ratio_RT: torch.Tensor, adv_RT: torch.Tensor, *, clip_low: float, clip_high: float
) -> torch.Tensor:
    """l~_RT = min(l, clip_high) where A > 0, max(l, -clip_low) where A < 0, l where A = 0.

    GMPO's token clip in log space (its code: sgn(A) * min(sgn(A) l, sgn(A) clamp(l, -c_low, c_high))):
    a token whose ratio already moved in its advantage's direction past the bound stops contributing
    gradient, as PPO's clip does, but only inside its segment's geometric mean.
    """
    upper = torch.minimum(log_ratio_RT, torch.full_like(log_ratio_RT, clip_high))
    lower = torch.maximum(log_ratio_RT, torch.full_like(log_ratio_RT, -clip_low))
    return torch.where(adv_RT > 0, upper, torch.where(adv_RT < 0, lower, log_ratio_RT))


@register(
    "objective",
    "gmpo",
    help="GMPO: the advantage times the geometric mean of the segment's token ratios, clipped in log space",
)
def gmpo_logps(
    logps_RT: torch.Tensor,
    old_logps_RT: torch.Tensor,
    adv_RT: torch.Tensor,
    segment_RT: torch.Tensor,
    mask_RT: torch.Tensor,
    *,
    clip_low: float,
    clip_high: float,
) -> torch.Tensor:
    """logp'_RT = logp_old + mean over the token's segment of the clipped log-ratios (module docstring).

    Parameters
    ----------
    logps_RT, old_logps_RT : float (R, T): current (with grad) and behaviour log-probs per token.
    adv_RT : float (R, T): per-token advantages (a rank's tokens share one).
    segment_RT : int64 (R, T): segment of each token within its row (ranks from ``token_rank_index``, or
        0 everywhere for the sequence level); -1 = a segment of its own (a token of no rank).
    mask_RT : (R, T): 1 for completion tokens, 0 for padding (padding keeps ``logps_RT`` and enters no mean).
    clip_low, clip_high : the log-space clip bounds (GMPO: 0.4 and 0.4, i.e. ratios in (e^-0.4, e^0.4)).

    Returns logp'_RT with exp(logp' - old) = rho of the token's segment; the gradient flows through every
    unclipped token of the segment.
    """
    if not (logps_RT.shape == old_logps_RT.shape == adv_RT.shape == segment_RT.shape == mask_RT.shape):
        raise ValueError(
            f"shapes differ: logps {tuple(logps_RT.shape)}, old {tuple(old_logps_RT.shape)}, adv "
            f"{tuple(adv_RT.shape)}, segment {tuple(segment_RT.shape)}, mask {tuple(mask_RT.shape)}"
        )
    if clip_low < 0 or clip_high < 0:
        raise ValueError(f"GMPO clip bounds must be >= 0, got clip_low={clip_low}, clip_high={clip_high}")
    r, t = logps_RT.shape
    valid = mask_RT.bool()
    clipped = gmpo_clip_log_ratio(logps_RT - old_logps_RT, adv_RT, clip_low=clip_low, clip_high=clip_high)
    n_seg = int(segment_RT.max().clamp(min=-1).item()) + 1
    # tokens with segment -1 get a segment of their own: n_seg + t
    own = n_seg + torch.arange(t, device=segment_RT.device).expand(r, t)
    seg_RT = torch.where(segment_RT >= 0, segment_RT, own)
    width = n_seg + t
    flat = (seg_RT + torch.arange(r, device=seg_RT.device)[:, None] * width).flatten()
    w = valid.to(clipped.dtype)
    sums = torch.zeros(r * width, dtype=clipped.dtype, device=clipped.device).index_add(
        0, flat, (clipped * w).flatten()
    )
    counts = torch.zeros(r * width, dtype=clipped.dtype, device=clipped.device).index_add(
        0, flat, w.flatten()
    )
    mean_RT = (sums / counts.clamp(min=1))[flat].view(r, t)
    return torch.where(valid, old_logps_RT + mean_RT, logps_RT)


# -- loss aggregation: fn(tokens_R, *, group_size) -> weight_R ------------------------------------------
@register("aggregation", "token", help="weight 1 on every row: TRL's own aggregation for loss_type")
def token_weights(tokens_R: torch.Tensor, *, group_size: int) -> torch.Tensor:
    """w_R = 1: TRL's own aggregation for the chosen ``loss_type``."""
    return torch.ones(tokens_R.shape, dtype=torch.float32, device=tokens_R.device)


@register(
    "aggregation",
    "prompt",
    help="ScaleRL: the mean over prompt groups of each group's token mean (loss_type dapo or cispo)",
)
def prompt_weights(tokens_R: torch.Tensor, *, group_size: int) -> torch.Tensor:
    """w_R = N / (n_B * n_b(r)) (ScaleRL's prompt-level aggregation for token-sum losses).

    ``tokens_R``: loss tokens of every completion row of the generation batch (all processes, after
    filters), groups of ``group_size`` consecutive rows; n_b = tokens of row r's group, N = sum_b n_b,
    n_B = number of groups with n_b > 0. Rows of empty groups get 0. With TRL's ``dapo``/``cispo``
    normaliser N, sum_{r,t} w_r l_{r,t} / N = (1/n_B) sum_b (1/n_b) sum_{r in b, t} l_{r,t}.
    """
    r = tokens_R.shape[0]
    if group_size < 1 or r % group_size:
        raise ValueError(f"{r} rows do not split into groups of {group_size} consecutive rows")
    tokens = tokens_R.to(torch.float32)
    n_b = tokens.view(-1, group_size).sum(1)
    groups = (n_b > 0).sum().clamp(min=1)
    w_B = torch.where(n_b > 0, tokens.sum() / (groups * n_b.clamp(min=1)), torch.zeros_like(n_b))
    return w_B.repeat_interleave(group_size)


# -- truncated completions: fn(rewards, *, last_rank_R, cut_R) -> rewards --------------------------------
@register("truncation", "score", help="a list cut at the length cap is scored as parsed")
def score_truncated(rewards: torch.Tensor, *, last_rank_R: torch.Tensor, cut_R: torch.Tensor) -> torch.Tensor:
    """rewards unchanged: a truncated list is scored as parsed (its cut last line may still ground)."""
    return rewards


@register(
    "truncation", "interrupt", help="ScaleRL's forced interruption: the cut last line of a list earns 0"
)
def interrupt_truncated(
    rewards: torch.Tensor, *, last_rank_R: torch.Tensor, cut_R: torch.Tensor
) -> torch.Tensor:
    """rewards with rank ``last_rank_R[r]`` zeroed where ``cut_R[r]`` (ScaleRL's forced interruption).

    ``rewards``: (R, ..., K), e.g. (R, K) or (R, N, K); ``last_rank_R``: int (R,) rank of each row's last line (-1 = none);
    ``cut_R``: bool (R,) the completion hit the length cap in the middle of that line. Ranks >= K (overflow
    lines) carry no reward and are left alone.
    """
    r, k = rewards.shape[0], rewards.shape[-1]
    hit_R = cut_R.bool() & (last_rank_R >= 0) & (last_rank_R < k)
    drop_RK = torch.zeros(r, k, dtype=torch.bool, device=rewards.device)
    rows = hit_R.nonzero().flatten()
    drop_RK[rows, last_rank_R[rows]] = True
    # broadcast over any axes between rows and ranks (the responders of (R, N, K) rewards)
    return rewards.masked_fill(drop_RK.view(r, *([1] * (rewards.dim() - 2)), k), 0.0)


# -- filters ---------------------------------------------------------------------------------------------
def zero_signal_groups(rewards: torch.Tensor, *, group_size: int) -> torch.Tensor:
    """zero_B: True where all G reward vectors of group b are equal (every advantage of the group is 0).

    ``rewards``: (R, K) rank rewards, or (R, N, K) per-responder rewards (``responder_rb``: equal across
    the G lists for every responder), groups of ``group_size`` consecutive rows.
    """
    r = rewards.shape[0]
    if group_size < 1 or r % group_size:
        raise ValueError(f"{r} rows do not split into groups of {group_size} consecutive rows")
    grouped = rewards.reshape(r // group_size, group_size, -1)
    return (grouped == grouped[:, :1]).all(-1).all(-1)
