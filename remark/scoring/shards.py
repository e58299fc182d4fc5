"""How ``remark.scoring.pool`` cuts a batch into shards and puts the scored shards back together.

- :func:`shard_bounds`: contiguous row ranges of whole groups, one per worker;
- :func:`dedupe`: a shard's dataset columns sent once per run of equal rows (a group's G rows carry
  the same request columns);
- :func:`pack_shard` (in the worker): a shard's ``ScoredRows`` as flat lists and arrays, which cost
  little to send (the parsed lines go as ``catalog.lists.ParsedLists`` columns, not objects);
- :func:`join_shards` (in the caller): the shards, in order, as the ``ScoredRows`` the serial call
  would return (token ranks padded with -1, responders padded with reward 0 / mask False, as
  ``encode_rows`` pads a batch).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from catalog.lists import ParsedLists
from remark.scoring.scorer import ScoredRows

__all__ = ["dedupe", "join_shards", "pack_shard", "shard_bounds"]


def pack_shard(scored: ScoredRows, timings: dict[str, float], t0: float, c0: float) -> dict[str, Any]:
    """``scored`` (one shard's rows) packed for the trip back; ``t0`` / ``c0``: the worker's
    ``perf_counter`` / ``process_time`` when the shard arrived."""
    lines = scored.lines
    return {
        "request_ids": scored.request_ids,
        "texts": scored.texts,
        "n_lines": lines.n_lines,
        "starts": lines.starts,
        "ends": lines.ends,
        "line_texts": lines.texts,
        "titles": lines.titles,
        "years": lines.years,
        "n_slots": np.fromiter(map(len, scored.slot_ids), dtype=np.int64, count=len(scored.slot_ids)),
        "slot_ids": [i for row in scored.slot_ids for i in row],
        "rewards_RNK": scored.rewards_RNK.numpy(),
        "mask_RN": scored.mask_RN.numpy(),
        "per_responder": scored.per_responder,
        "rank_RT": scored.rank_RT.numpy(),
        "end_R": scored.end_R.numpy(),
        "n_lines_R": scored.n_lines_R.numpy(),
        "n_fallback": scored.n_fallback,
        "timings": timings,
        "worker_s": time.perf_counter() - t0,
        "worker_cpu_s": time.process_time() - c0,
    }


def join_shards(
    parts: list[dict[str, Any]],
) -> tuple[ScoredRows, list[float], list[float], dict[str, float]]:
    """(the batch's ``ScoredRows``, wall seconds per shard, CPU seconds per shard, the slowest shard's
    seconds per stage) from the packed shards, in row order: token ranks padded with -1 to the longest
    row, responders padded to the most responders (reward 0, mask False), as ``encode_rows`` pads a
    batch."""
    texts: list[str] = []
    slot_ids: list[list[str | None]] = []
    fields = ("n_lines", "starts", "ends", "line_texts", "titles", "years")
    lines = ParsedLists.concat([ParsedLists(*(part[f] for f in fields)) for part in parts])
    for part in parts:
        flat_ids, pos = part["slot_ids"], 0
        for n in part["n_slots"].tolist():
            slot_ids.append(flat_ids[pos : pos + n])
            pos += n
        texts.extend(part["texts"])
    n_rows = len(texts)
    width = max(p["rank_RT"].shape[1] for p in parts)
    n_resp = max(p["rewards_RNK"].shape[1] for p in parts)
    k = parts[0]["rewards_RNK"].shape[2]
    rank_RT = np.full((n_rows, width), -1, dtype=np.int64)
    rewards = np.zeros((n_rows, n_resp, k), dtype=parts[0]["rewards_RNK"].dtype)
    mask = np.zeros((n_rows, n_resp), dtype=bool)
    r0 = 0
    for p in parts:
        n, t = p["rank_RT"].shape
        rank_RT[r0 : r0 + n, :t] = p["rank_RT"]
        nr = p["rewards_RNK"].shape[1]
        rewards[r0 : r0 + n, :nr] = p["rewards_RNK"]
        mask[r0 : r0 + n, :nr] = p["mask_RN"]
        r0 += n
    timings: dict[str, float] = {}
    for p in parts:
        for name, sec in p["timings"].items():
            timings[name] = max(timings.get(name, 0.0), sec)
    scored = ScoredRows(
        request_ids=[rid for p in parts for rid in p["request_ids"]],
        texts=texts,
        lines=lines,
        slot_ids=slot_ids,
        rewards_RNK=torch.from_numpy(rewards),
        mask_RN=torch.from_numpy(mask),
        per_responder=parts[0]["per_responder"],
        rank_RT=torch.from_numpy(rank_RT),
        end_R=torch.from_numpy(np.concatenate([p["end_R"] for p in parts]).astype(np.int64)),
        n_lines_R=torch.from_numpy(np.concatenate([p["n_lines_R"] for p in parts]).astype(np.int64)),
        n_fallback=sum(p["n_fallback"] for p in parts),
    )
    return scored, [p["worker_s"] for p in parts], [p["worker_cpu_s"] for p in parts], timings


def dedupe(values: Sequence[Any]) -> tuple[list[Any], list[int]]:
    """(distinct runs, index per row): a group's G rows carry equal columns, sent once."""
    uniq: list[Any] = []
    index: list[int] = []
    for v in values:
        if not uniq or not _equal(v, uniq[-1]):
            uniq.append(v)
        index.append(len(uniq) - 1)
    return uniq, index


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # e.g. arrays: not deduplicated
        return False


def shard_bounds(n_rows: int, workers: int, group_size: int | None) -> list[tuple[int, int]]:
    """[a, b) row ranges: ``workers`` contiguous shards of whole groups, as equal as groups allow."""
    unit = group_size if group_size and n_rows % group_size == 0 else 1
    n_units = n_rows // unit
    cuts = [(w * n_units) // workers * unit for w in range(workers + 1)]
    return [(a, b) for a, b in itertools.pairwise(cuts) if b > a] or [(0, 0)]
