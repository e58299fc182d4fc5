"""Rows of several generation rounds as one batch (DAPO's dynamic sampling, Olmo 3's active sampling).

When ``refill_batch`` replaces groups without signal, the final batch is made of rows of several
generation rounds: ``remark.step.rank_step`` decides which (round, row) pairs (``RankBatch.rows``), and the
trainer concatenates those rows of TRL's per-round batch dicts with :func:`merge_batches`. Both use
:func:`take_rows`, so TRL's tensors and the rank step's line up row for row and column for column: every
per-row tensor is padded to the widest round used, on the side TRL pads it (prompts left, completions
right). Pure tensor bookkeeping: no model, no trainer state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["ROW_KEYS", "merge_batches", "take_rows"]

#: Per-row tensors of TRL's batch that a merge concatenates: key -> (side padded, pad value; None = pad id).
ROW_KEYS = {
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
#: Entries of TRL's batch that the trainer replaces after the rank step (never merged).
REPLACED = ("advantages", "num_items_in_batch")


def take_rows(
    per_round: Sequence[torch.Tensor],
    rows: Sequence[tuple[int, int]],
    *,
    side: str = "right",
    value: float = 0,
) -> torch.Tensor:
    """The ``(round, row)`` rows of per-round tensors, in the order given; dim 1 padded on ``side`` with
    ``value`` to the widest round used (1-D tensors are taken as they are)."""
    used = sorted({i for i, _ in rows})
    if not used:
        return per_round[0][:0]
    width = max(per_round[i].shape[1] for i in used) if per_round[used[0]].dim() > 1 else 0
    parts, start, offset = [], {}, 0
    for i in used:
        x = per_round[i]
        if x.dim() > 1 and x.shape[1] < width:
            pad = (width - x.shape[1], 0) if side == "left" else (0, width - x.shape[1])
            x = torch.nn.functional.pad(x, (0, 0) * (x.dim() - 2) + pad, value=value)
        parts.append(x)
        start[i], offset = offset, offset + x.shape[0]
    index = torch.tensor([start[i] + r for i, r in rows], dtype=torch.int64, device=parts[0].device)
    return torch.cat(parts).index_select(0, index)


def merge_batches(
    batches: Sequence[dict[str, Any]], rows: Sequence[tuple[int, int]], pad_id: int
) -> dict[str, Any]:
    """TRL's batch dicts of several rounds -> one dict holding ``rows`` (``RankBatch.rows``), in order.

    One round with all its rows in order is returned as it is. Entries in :data:`REPLACED` are left out
    (the trainer sets them); any other entry must be a per-row tensor of :data:`ROW_KEYS`.
    """
    first = batches[0]
    n_first = first["completion_ids"].shape[0]
    if len(batches) == 1 and list(rows) == [(0, r) for r in range(n_first)]:
        return dict(first)
    keys = set(first)
    for batch in batches:
        if set(batch) != keys:
            raise RuntimeError(f"generation rounds returned different keys: {sorted(set(batch) ^ keys)}")
    unknown = sorted(key for key in keys if key not in ROW_KEYS and key not in REPLACED)
    if unknown or any(not isinstance(first[key], torch.Tensor) for key in keys if key in ROW_KEYS):
        raise RuntimeError(f"refill_batch cannot merge batch entries {unknown or 'that are not tensors'}")
    out = {}
    for key in first:
        if key in REPLACED:
            continue
        side, value = ROW_KEYS[key]
        out[key] = take_rows(
            [b[key] for b in batches], rows, side=side, value=pad_id if value is None else value
        )
    return out
