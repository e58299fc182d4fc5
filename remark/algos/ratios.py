"""Importance ratios at the rank level: per-token log-ratios replaced by their mean over the rank's tokens.

Rank-GRPO's ratio for rank k is w_k = exp(mean_{t in k}(log pi_new(t) - log pi_old(t))), broadcast to
the rank's tokens and clipped like a token ratio. TRL has token- and sequence-level ratios only, so the
trainer expresses the rank level through the log-probabilities TRL's loss consumes:

    logp'_t = logp_old_t + segmean_k(logp - logp_old)    for tokens t of a rank k,
    logp'_t = logp_t                                      for tokens of no rank (preamble, overflow, end),

so TRL's ``exp(logp' - logp_old)`` *is* w_k, with the gradient flowing through the segment mean (as
GSPO's sequence-level ratio does through the sequence mean). Segment means preserve sums, so any
sum of ``logp'`` over a rank (CISPO's ``-w A logp`` summed over tokens, the sequence-level KL mask)
keeps the gradient of the sum of ``logp``. With one update per generation (``num_iterations = 1``) the
ratio is 1 and the rank- and token-level losses have identical gradients; the two differ only when
a batch is reused.
"""

from __future__ import annotations

import torch

from remark.algos.registry import register

__all__ = ["rank_level_logps"]


@register(
    "ratio", "rank", help="Rank-GRPO: exp(mean of the rank's token log-ratios) on every token of the rank"
)
def rank_level_logps(
    logps_RT: torch.Tensor, old_logps_RT: torch.Tensor, rank_RT: torch.Tensor, mask_RT: torch.Tensor
) -> torch.Tensor:
    """logp'_RT such that exp(logp' - old) is the rank-level ratio (see the module docstring).

    Parameters
    ----------
    logps_RT, old_logps_RT : float (R, T): current (with grad) and behaviour log-probs per token.
    rank_RT : int64 (R, T): rank of each token (-1 = no rank), from ``token_rank_index``.
    mask_RT : (R, T): 1 for completion tokens, 0 for padding (padding never enters a mean).
    """
    if not (logps_RT.shape == old_logps_RT.shape == rank_RT.shape == mask_RT.shape):
        raise ValueError(
            f"shapes differ: logps {tuple(logps_RT.shape)}, old {tuple(old_logps_RT.shape)}, "
            f"rank {tuple(rank_RT.shape)}, mask {tuple(mask_RT.shape)}"
        )
    r, t = logps_RT.shape
    ranked = (rank_RT >= 0) & mask_RT.bool()
    n_ranks = int(rank_RT.max().clamp(min=-1).item()) + 1
    if n_ranks == 0:
        return logps_RT
    seg_RT = torch.where(ranked, rank_RT, torch.full_like(rank_RT, n_ranks))  # n_ranks = "no rank" bin
    flat = (seg_RT + torch.arange(r, device=rank_RT.device)[:, None] * (n_ranks + 1)).flatten()
    delta = (logps_RT - old_logps_RT) * ranked
    sums = torch.zeros(r * (n_ranks + 1), dtype=delta.dtype, device=delta.device).index_add(
        0, flat, delta.flatten()
    )
    counts = torch.zeros(r * (n_ranks + 1), dtype=delta.dtype, device=delta.device).index_add(
        0, flat, ranked.flatten().to(delta.dtype)
    )
    mean_RT = (sums / counts.clamp(min=1))[flat].view(r, t)
    return torch.where(ranked, old_logps_RT + mean_RT, logps_RT)
