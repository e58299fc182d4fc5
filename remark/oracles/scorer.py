"""``OracleScorer``: ``RankScorer``'s answers from slow, independent pieces, for the tests.

Every stage is the plain, explained path of the library or a loop of the oracles, never the fast code
``RankScorer`` runs: per-token decoding (``LoopOffsetMapper``), the per-completion parser
(``catalog.parse.parse_list``), the explaining matcher (``Matcher.ground_many``, with its own caches),
the responder drawn by ``blake2b("seed:step:request_id") mod n_x`` in a loop, the rewards of
``remark.oracles.rank_loops.reference_rewards``, and the token ranks and end tokens of
``remark.oracles.token_loops``. Under Rank-GRPO's reward slots (``segmentation: newlines``) the slots,
their catalog ids and the hits come from ``catalog.oracles.published`` instead: a character loop parser,
a scan of the catalog rows and a count of the responder's (folded title, year) pairs, so the rewards
are Rank-GRPO's hit vector computed without ids. It is a ``remark.scoring.scorer.Scorer`` like the
serial scorer and the pool, so the same test drives all three.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import torch

from catalog.match import GroundingSettings, Matcher
from catalog.oracles.published import loop_hits, loop_slots, loop_verbatim_id
from catalog.parse import parse_list
from catalog.table import Catalog
from remark.algos import per_responder, spec
from remark.algos.registry import scheme_problem
from remark.oracles.rank_loops import reference_rewards
from remark.oracles.token_loops import LoopOffsetMapper, loop_end_index, loop_newline_ranks, loop_token_ranks
from remark.scoring.scorer import Done, ScoredRows

__all__ = ["TOKEN_RANK_LOOPS", "OracleScorer"]

#: segmentation -> its token ranks written as a loop from the segmentation's definition (every registered
#: segmentation has one: ``tests/remark/scoring/test_scorer_oracle.py``)
TOKEN_RANK_LOOPS = {"lines": loop_token_ranks, "newlines": loop_newline_ranks}


class OracleScorer:
    """Scores like ``RankScorer(catalog, tokenizer, **settings)``, slowly (module docstring)."""

    overlaps = False

    def __init__(
        self,
        catalog: Catalog,
        tokenizer: Any,
        *,
        k: int,
        scheme: str,
        segmentation: str = "lines",
        grounding: GroundingSettings | None = None,
        eos_token_ids: Sequence[int] | None = None,
        seed: int = 0,
    ) -> None:
        self.matcher = Matcher(catalog, grounding or GroundingSettings())
        self.offsets = LoopOffsetMapper(tokenizer)
        if eos_token_ids is None:
            eos_token_ids = [] if tokenizer.eos_token_id is None else [tokenizer.eos_token_id]
        self.eos_ids = [int(i) for i in eos_token_ids]
        self.k, self.scheme, self.seed = k, scheme, seed
        if segmentation not in TOKEN_RANK_LOOPS:
            raise ValueError(
                f"no loop oracle for segmentation {segmentation!r}: add its case to TOKEN_RANK_LOOPS in "
                "remark/oracles/scorer.py"
            )
        self.token_ranks = TOKEN_RANK_LOOPS[segmentation]
        self.published = spec("segmentation", segmentation).meta["reward_slots"] == "rank_grpo"
        if (problem := scheme_problem(scheme, segmentation)) is not None:
            raise ValueError(": ".join(problem))
        self.year_tolerance = self.matcher.settings.year_tolerance
        rows = catalog.df.select("item_id", "title", "year", "popularity").rows()
        # catalog rows, the more popular first, then the smaller id (unknown popularity last)
        rows.sort(key=lambda row: (row[3] is None, -(row[3] or 0.0), row[0]))
        self.catalog_rows = [(i, t, y) for i, t, y, _ in rows]

    def submit(
        self,
        completion_ids: Sequence[Sequence[int]],
        columns: dict[str, Sequence[Any]],
        *,
        group_size: int | None,
        step: int,
    ) -> Done:
        return Done(self.score(completion_ids, columns, group_size=group_size, step=step))

    def responder_index(self, request_id: str, n: int, own: int, step: int) -> int:
        if own >= 0:
            return own
        digest = hashlib.blake2b(f"{self.seed}:{step}:{request_id}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "little") % n

    def published_rewards(
        self, texts: list[str], responders: list, index: list[int], seen: Sequence[Sequence[str]]
    ) -> tuple[list[list[str | None]], list[list[float]]]:
        """Rank-GRPO's slots (their verbatim ids) and hit vectors, by ``catalog.oracles.published``'s loops."""
        pairs = {(t, y) for _, t, y in self.catalog_rows if y is not None}
        info = {i: (t, y) for i, t, y in self.catalog_rows}
        slot_ids, got = [], []
        for r, text in enumerate(texts):
            slots = loop_slots(text)
            slot_ids.append([loop_verbatim_id(self.catalog_rows, t, y) for t, y in slots])
            truth = [info[i] for i in responders[r][index[r]]]
            seen_titles = {info[i][0] for i in seen[r] if i in info}
            hits = loop_hits(slots, pairs, truth, seen_titles, k=self.k, year_tolerance=self.year_tolerance)
            got.append([float(h) for h in hits])
        return slot_ids, got

    def score(
        self,
        completion_ids: Sequence[Sequence[int]],
        columns: dict[str, Sequence[Any]],
        *,
        group_size: int | None,
        step: int,
    ) -> ScoredRows:
        rows = [[int(i) for i in row] for row in completion_ids]
        offsets = self.offsets(rows)
        lines = [parse_list(text) for text in offsets.texts]
        responders = [list(r) for r in columns["responders"]]
        index = [
            self.responder_index(str(rid), len(resp), int(own), step)
            for rid, resp, own in zip(
                columns["request_id"], responders, columns["responder_index"], strict=True
            )
        ]
        if self.published:
            slot_ids, got = self.published_rewards(offsets.texts, responders, index, columns["seen"])
        else:
            slot_ids = []
            for row in lines:
                matches = self.matcher.ground_many([ln.title for ln in row], [ln.year for ln in row])
                slot_ids.append(
                    [m.item_id if ln.title is not None else None for ln, m in zip(row, matches, strict=True)]
                )
            got = reference_rewards(
                slot_ids,
                k=self.k,
                scheme=self.scheme,
                responders=responders,
                seen=columns["seen"],
                responder_index=index,
            )
        n = len(rows)
        if per_responder(self.scheme):
            width = max((len(r) for r in got), default=0)
            rewards = torch.zeros(n, width, self.k)
            mask = torch.zeros(n, width, dtype=torch.bool)
            for r, per in enumerate(got):
                for j, vec in enumerate(per):
                    rewards[r, j] = torch.tensor(vec)
                    mask[r, j] = True
        else:
            rewards = torch.tensor(got, dtype=torch.float32).reshape(n, 1, self.k)
            mask = torch.ones(n, 1, dtype=torch.bool)
        return ScoredRows(
            request_ids=[str(x) for x in columns["request_id"]],
            texts=offsets.texts,
            lines=lines,
            slot_ids=slot_ids,
            rewards_RNK=rewards,
            mask_RN=mask,
            per_responder=per_responder(self.scheme),
            rank_RT=self.token_ranks(lines, offsets, k=self.k),
            end_R=loop_end_index(rows, self.eos_ids),
            n_lines_R=torch.tensor([len(s) for s in slot_ids], dtype=torch.int64),
            n_fallback=offsets.n_fallback,
        )
