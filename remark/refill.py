"""Batches of several generation rounds, for refilling zero-signal groups (DAPO / Olmo 3 active sampling).

``RemarkGRPOTrainer._refill`` generates further groups when a batch has groups without signal; each
generation round is kept as a :class:`_Round` (TRL's batch dict, the dataset rows and their rank
scores), and :func:`_merge_rounds` concatenates the selected rows of several rounds into one batch,
padding every per-row tensor to a common width on the side TRL pads it (prompts left, completions right).
Pure tensor bookkeeping: no model, no trainer state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

#: Per-row tensors of TRL's batch that the refill concatenates: key -> (side padded, pad value; None = pad id).
_ROW_KEYS = {
    "prompt_ids": ("left", None),
    "prompt_mask": ("left", 0),
    "completion_ids": ("right", None),
    "completion_mask": ("right", 0),
    "old_per_token_logps": ("right", 0.0),
    "ref_per_token_logps": ("right", 0.0),
    "sampling_per_token_logps": ("right", 0.0),
    "importance_sampling_ratio": ("right", 1.0),
    "tool_mask": ("right", 1),
}


@dataclass
class _Round:
    """One generation round's local rows: TRL's batch, the dataset rows and the rank scoring."""

    out: dict[str, Any]
    inputs: list[dict[str, Any]]
    rewards: torch.Tensor  # local (R, K) or (R, N, K)
    mask_RN: torch.Tensor | None
    rank_RT: torch.Tensor
    n_lines_R: torch.Tensor
    end_R: torch.Tensor
    stats: dict[str, float]


def _pad_to(x: torch.Tensor, width: int, side: str, value: float) -> torch.Tensor:
    if x.ndim < 2 or x.shape[1] >= width:
        return x
    pad = (width - x.shape[1], 0) if side == "left" else (0, width - x.shape[1])
    return torch.nn.functional.pad(x, pad, value=value)


def _merge_rounds(rounds: list[_Round], selected: list[tuple[int, int]], pad_id: int) -> tuple:
    """The selected (round, row) pairs of several rounds as one batch, tensors padded to common widths."""
    keys = set(rounds[0].out)
    for rnd in rounds:
        if set(rnd.out) != keys:
            raise RuntimeError(f"generation rounds returned different keys: {sorted(set(rnd.out) ^ keys)}")
    unknown = {
        key
        for key, v in rounds[0].out.items()
        if isinstance(v, torch.Tensor) and v.ndim >= 1 and key not in _ROW_KEYS and key != "advantages"
    }
    if unknown or any(not isinstance(v, torch.Tensor) for key, v in rounds[0].out.items()):
        raise RuntimeError(
            f"refill_batch cannot merge batch entries {sorted(unknown) or 'that are not tensors'}"
        )
    by_round: dict[int, list[int]] = {}
    for i, row in selected:
        by_round.setdefault(i, []).append(row)
    order = list(by_round)

    def cat(tensors: list[torch.Tensor], side: str, value: float) -> torch.Tensor:
        if tensors[0].ndim < 2:
            return torch.cat(tensors)
        width = max(t.shape[1] for t in tensors)
        return torch.cat([_pad_to(t, width, side, value) for t in tensors])

    def pick(get_tensor, side="right", value=0.0):
        parts = []
        for i in order:
            rows = torch.tensor(by_round[i], device=rounds[i].rewards.device)
            parts.append(get_tensor(rounds[i]).index_select(0, rows))
        return cat(parts, side, value)

    out = {}
    for key in rounds[0].out:
        if key in ("advantages", "num_items_in_batch"):
            continue
        side, value = _ROW_KEYS[key]
        out[key] = pick(lambda rnd, key=key: rnd.out[key], side, pad_id if value is None else value)
    inputs = [rounds[i].inputs[r] for i in order for r in by_round[i]]
    rewards = [rnd.rewards for rnd in rounds]
    if rewards[0].ndim == 3:  # responder_rb: pad the responder axis to the widest round
        n = max(r.shape[1] for r in rewards)
        for rnd in rounds:
            extra = n - rnd.rewards.shape[1]
            rnd.rewards = torch.nn.functional.pad(rnd.rewards, (0, 0, 0, extra))
            rnd.mask_RN = torch.nn.functional.pad(rnd.mask_RN, (0, extra))
    merged_rewards = pick(lambda rnd: rnd.rewards)
    mask_RN = pick(lambda rnd: rnd.mask_RN) if rewards[0].ndim == 3 else None
    rank_RT = pick(lambda rnd: rnd.rank_RT, "right", -1)
    n_lines_R = pick(lambda rnd: rnd.n_lines_R)
    end_R = pick(lambda rnd: rnd.end_R)
    return out, inputs, merged_rewards, mask_RN, rank_RT, n_lines_R, end_R
