"""How ``remark.scoring.pool`` cuts a batch into shards and puts the scored shards back together.

- :func:`shard_bounds`: contiguous row ranges of whole groups, one per worker;
- :func:`pack_shard` (in the worker): a shard's ``RowStages`` as flat lists and arrays, which cost
  little to send (the parsed lines go as ``catalog.lists.ParsedLists`` columns, not objects);
- :func:`join_shards` (in the caller): the shards, in order, as the ``RowStages`` the serial call
  makes (token ranks padded with -1 to the longest row).
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import numpy as np
import torch

from catalog.lists import ParsedLists
from remark.scoring.scorer import RowStages

__all__ = ["join_shards", "pack_shard", "shard_bounds"]


def pack_shard(stages: RowStages, t0: float, c0: float) -> dict[str, Any]:
    """``stages`` (one shard's rows) packed for the trip back; ``t0`` / ``c0``: the worker's
    ``perf_counter`` / ``process_time`` when the shard arrived."""
    lines = stages.lines
    return {
        "texts": stages.texts,
        "n_lines": lines.n_lines,
        "starts": lines.starts,
        "ends": lines.ends,
        "line_texts": lines.texts,
        "titles": lines.titles,
        "years": lines.years,
        "n_slots": np.fromiter(map(len, stages.slot_ids), dtype=np.int64, count=len(stages.slot_ids)),
        "slot_ids": [i for row in stages.slot_ids for i in row],
        "rank_RT": stages.rank_RT.numpy(),
        "end_R": stages.end_R.numpy(),
        "n_fallback": stages.n_fallback,
        "timings": stages.timings,
        "worker_s": time.perf_counter() - t0,
        "worker_cpu_s": time.process_time() - c0,
    }


def join_shards(parts: list[dict[str, Any]]) -> tuple[RowStages, list[float], list[float], dict[str, float]]:
    """(the batch's ``RowStages``, wall seconds per shard, CPU seconds per shard, the slowest shard's
    seconds per stage) from the packed shards, in row order: token ranks padded with -1 to the longest
    row, as ``RankScorer.row_stages`` pads a batch."""
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
    width = max(p["rank_RT"].shape[1] for p in parts)
    rank_RT = np.full((len(texts), width), -1, dtype=np.int64)
    r0 = 0
    for p in parts:
        n, t = p["rank_RT"].shape
        rank_RT[r0 : r0 + n, :t] = p["rank_RT"]
        r0 += n
    timings: dict[str, float] = {}
    for p in parts:
        for name, sec in p["timings"].items():
            timings[name] = max(timings.get(name, 0.0), sec)
    stages = RowStages(
        texts=texts,
        lines=lines,
        slot_ids=slot_ids,
        rank_RT=torch.from_numpy(rank_RT),
        end_R=torch.from_numpy(np.concatenate([p["end_R"] for p in parts]).astype(np.int64)),
        n_fallback=sum(p["n_fallback"] for p in parts),
        timings=timings,
    )
    return stages, [p["worker_s"] for p in parts], [p["worker_cpu_s"] for p in parts], timings


def shard_bounds(n_rows: int, workers: int, group_size: int | None) -> list[tuple[int, int]]:
    """[a, b) row ranges: ``workers`` contiguous shards of whole groups, as equal as groups allow."""
    unit = group_size if group_size and n_rows % group_size == 0 else 1
    n_units = n_rows // unit
    cuts = [(w * n_units) // workers * unit for w in range(workers + 1)]
    return [(a, b) for a, b in itertools.pairwise(cuts) if b > a] or [(0, 0)]
