"""One scoring path in a process of its own, for bench/scoring.py (run by hand).

Why a process per path: the paths share process-wide caches (``normalize_title``'s ``lru_cache``, the
parser's line caches) and the CPU's caches. Timed in one process, whichever path ran second found the
first one's titles already normalised (bench/RESULTS.md records how much that biased an earlier round).
Here each path keeps only its own caches, as it would in a trainer.

``serve(conn, path, tree, catalog_path, tokenizer_dir, k, group)`` answers commands on a ``multiprocessing`` pipe:

- ``("warm", batches)``: the process caches are emptied and a new scorer scores the batches (the
  warm-up), untimed;
- ``("time", batch, step, cold)``: score one batch and answer ``(cpu_ms, wall_ms, stages_ms, digest)``;
  with ``cold`` a new scorer is built and every process cache is emptied first (off the clock), else the
  warm scorer scores it;
- ``None``: exit.

``path`` is ``"new"`` (``remark.scoring.scorer.RankScorer`` of this checkout) or ``"baseline"``:
``RankScorer`` of the code in ``tree``, a checkout of an earlier commit (bench/scoring.py extracts it with
``git archive``), imported ahead of the installed package.
The digest is a sha256 per output field, computed the same way for every version, so the caller can
compare paths that cannot share objects.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import sys
import time
from typing import Any

FIELDS = ("texts", "lines", "slot_ids", "rewards", "rank_RT", "end_R")


def digest(scored: Any) -> dict[str, str]:
    """sha256 per field of a ``ScoredRows`` of any version (lines as (rank, start, end, text, title, year))."""

    def h(obj: Any) -> str:
        return hashlib.sha256(json.dumps(obj, separators=(",", ":")).encode()).hexdigest()

    def t(x: Any) -> str:
        return hashlib.sha256(
            f"{x.dtype}{tuple(x.shape)}".encode() + x.contiguous().numpy().tobytes()
        ).hexdigest()

    lines = [[[p.rank, p.start, p.end, p.text, p.title, p.year] for p in row] for row in scored.lines]
    return {
        "texts": h(scored.texts),
        "lines": h(lines),
        "slot_ids": h(scored.slot_ids),
        "rewards": t(scored.rewards_RNK) + t(scored.mask_RN),
        "rank_RT": t(scored.rank_RT),
        "end_R": t(scored.end_R),
    }


def clear_process_caches() -> None:
    """Empty every process-wide cache of the loaded ``catalog`` / ``remark`` modules (any version): each
    ``functools`` cache, and ``catalog.lists.clear_caches`` where it exists."""
    for name, mod in list(sys.modules.items()):
        if mod is None or name.split(".")[0] not in ("catalog", "remark"):
            continue
        for value in list(vars(mod).values()):
            if not isinstance(value, type) and callable(getattr(value, "cache_clear", None)):
                value.cache_clear()
    lists = sys.modules.get("catalog.lists")
    if lists is not None and hasattr(lists, "clear_caches"):
        lists.clear_caches()


def serve(
    conn: Any, path: str, tree: str | None, catalog_path: str, tokenizer_dir: str, k: int, group: int
) -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if tree is not None:
        # spawn re-imported bench/scoring.py here (as __mp_main__), and with it the installed packages:
        # drop them, so that the tree's versions are imported instead
        for name in [n for n in sys.modules if n.split(".")[0] in ("catalog", "remark", "eval", "data_prep")]:
            del sys.modules[name]
        sys.path.insert(0, tree)
    import torch
    from transformers import AutoTokenizer

    from catalog.table import load_catalog

    # the baseline commit (bench/scoring.py's default) may predate remark/scoring/ as a package: kept so
    # that the recorded comparison can be rerun against it
    try:
        from remark.scoring.scorer import RankScorer
    except ImportError:
        from remark.scoring import RankScorer

    torch.set_num_threads(1)
    if tree is not None and not os.path.realpath(sys.modules["remark"].__file__).startswith(
        os.path.realpath(tree)
    ):
        raise RuntimeError(
            f"the baseline path imported remark from {sys.modules['remark'].__file__}, not {tree}"
        )
    catalog = load_catalog(catalog_path)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)

    def new_scorer() -> Any:
        return RankScorer(catalog, tokenizer, k=k, scheme="union")

    warm = None
    while (msg := conn.recv()) is not None:
        if msg[0] == "warm":  # from empty caches: the cold steps' rows are the warm steps' rows
            warm = new_scorer()
            clear_process_caches()
            for step, (rows, columns) in enumerate(msg[1]):
                warm.score(rows, columns, group_size=group, step=step)
            conn.send("ok")
            continue
        _, (rows, columns), step, cold = msg
        if cold:
            scorer = new_scorer()
            clear_process_caches()
        else:
            scorer = warm
        gc.collect()  # the garbage of earlier commands is not charged to this call
        c0, t0 = time.process_time(), time.perf_counter()
        scored = scorer.score(rows, columns, group_size=group, step=step)
        cpu_ms, wall_ms = 1e3 * (time.process_time() - c0), 1e3 * (time.perf_counter() - t0)
        stages = {k: 1e3 * v for k, v in getattr(scorer, "last_timings", {}).items()}
        conn.send((cpu_ms, wall_ms, stages, digest(scored)))
