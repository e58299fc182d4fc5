"""The ratio and objective TRL lacks, handed to TRL's loss through the per-token log-probabilities.

TRL's loss computes its importance ratio from ``exp(logp - logp_old)`` per token (or per sequence). A
rank-level ratio (``ratio`` registry, ``rank``: Rank-GRPO's) or GMPO's geometric-mean objective
(``objective`` registry, ``gmpo``) is expressed by replacing ``logp`` with a ``logp'`` whose ratio is
theirs (``remark.algos.ratios``, ``remark.algos.family``); the KL term keeps the token log-probs
(``ref`` is shifted by the same amount). :func:`logps_hook` picks the registered function by the config's
names (:func:`loss_names`) and returns the hook, or None when TRL's own ratio applies and nothing is
watched. It also measures the mean |log ratio| to the reference (``divergence_log_ratio``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from remark.algos import get, gmpo_clip_log_ratio

__all__ = ["LogpsHook", "logps_hook", "loss_names"]


def loss_names(cfg: Any) -> tuple[str | None, str | None]:
    """(ratio, objective) registry names the config asks for; None = TRL's own.

    ``rank_level_ratio: true`` is the ``ratio`` ``rank``; ``gmpo_level`` set is the ``objective`` ``gmpo``
    (its segments: each rank, or the whole sequence)."""
    ratio = "rank" if getattr(cfg, "rank_level_ratio", False) else None
    objective = "gmpo" if getattr(cfg, "gmpo_level", None) is not None else None
    return ratio, objective


@dataclass
class LogpsHook:
    """``hook(logps) -> logps'`` for one loss call on ``batch`` (a copy of TRL's batch dict, updated in place
    for the reference log-probs). ``disables_clip``: TRL's clip must not act (the objective clips itself)."""

    transform: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None
    batch: dict[str, Any]
    watch_ref: bool
    disables_clip: bool
    log: Callable[[str, float], None]
    reduce_sum: Callable[[torch.Tensor], torch.Tensor]

    def __call__(self, logps: torch.Tensor) -> torch.Tensor:
        batch, mask = self.batch, self.batch["completion_mask"]
        if self.watch_ref:
            diff = ((logps.detach() - batch["ref_per_token_logps"]).abs() * mask).sum()
            total = self.reduce_sum(torch.stack([diff, mask.sum().to(diff.dtype)]))
            self.log("train/abs_log_ratio_ref", (total[0] / total[1].clamp(min=1)).item())
        if self.transform is None:
            return logps
        old = batch.get("old_per_token_logps")
        old = logps.detach() if old is None else old
        new = self.transform(logps, old)
        if "ref_per_token_logps" in batch:  # keep the KL term on the token log-probs
            batch["ref_per_token_logps"] = batch["ref_per_token_logps"] + (new - logps)
        return new


def logps_hook(
    cfg: Any,
    batch: dict[str, Any],
    *,
    clip_low: float,
    clip_high: float,
    log: Callable[[str, float], None],
    reduce_sum: Callable[[torch.Tensor], torch.Tensor],
) -> LogpsHook | None:
    """The hook for one loss call, or None when TRL's loss needs none (module docstring)."""
    ratio, objective = loss_names(cfg)
    watch_ref = cfg.divergence_log_ratio is not None and "ref_per_token_logps" in batch
    if ratio is None and objective is None and not watch_ref:
        return None
    batch = dict(batch)  # TRL reuses its buffered batch across iterations: never mutate it
    mask, rank_ids = batch["completion_mask"], batch["rank_ids"]
    transform = None
    if ratio is not None:
        fn = get("ratio", ratio)

        def transform(logps, old):
            return fn(logps, old, rank_ids, mask)

    elif objective is not None:
        fn = get("objective", objective)
        adv = batch["advantages"]
        adv = adv.unsqueeze(1).expand_as(mask) if adv.dim() == 1 else adv
        segments = rank_ids if cfg.gmpo_level == "rank" else torch.zeros_like(rank_ids)

        def transform(logps, old):
            raw = (logps - old).detach()
            clipped = (gmpo_clip_log_ratio(raw, adv, clip_low=clip_low, clip_high=clip_high) != raw).float()
            total = reduce_sum(torch.stack([(clipped * mask).sum(), mask.sum().float()]))
            log("gmpo/clip_frac", (total[0] / total[1].clamp(min=1)).item())
            return fn(logps, old, adv, segments, mask, clip_low=clip_low, clip_high=clip_high)

    return LogpsHook(transform, batch, watch_ref, objective is not None, log, reduce_sum)
