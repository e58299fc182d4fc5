"""Completions -> per-rank rewards and token ranks: the glue between the parser, the matcher and ``remark.algos``.

``RankScorer.score`` takes a batch of completion rows (token ids as TRL hands them to reward functions,
plus the dataset columns of each row) and returns everything the trainer needs, computed once:
parsed lines, grounded slot ids, the encoded rows, per-rank rewards (``rewards_RK``, or ``rewards_RNK``
for ``responder_rb``), per-token ranks and the end-token index. Text, lines and token offsets come from
the same decode (``TokenOffsetMapper``), so reward ranks and token ranks cannot disagree.

The responder a ``responder``-scheme row is scored against: the row's own responder for per-responder
rows (Rank-GRPO's dataset), else one drawn per (seed, step, request) by a hash, so that every process
and a resumed run draw the same responder for a group, whatever the row order (docs/experiments.md
pitfall 4: all G lists of a group are scored against one responder).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from catalog.match import GroundingSettings, Matcher
from catalog.parse import ParsedLine, parse_list
from catalog.table import Catalog
from remark.algos import EncodedRows, TokenOffsetMapper, encode_rows, rank_rewards, token_rank_index


def hashed_responder_index(
    request_ids: Sequence[str], n_responders: Sequence[int], *, seed: int, step: int
) -> list[int]:
    """One responder per (seed, step, request): blake2b of ``"seed:step:request_id"`` modulo n_x."""
    out = []
    for rid, n in zip(request_ids, n_responders, strict=True):
        if n < 1:
            raise ValueError(f"request {rid!r} has no responder to draw")
        digest = hashlib.blake2b(f"{seed}:{step}:{rid}".encode(), digest_size=8).digest()
        out.append(int.from_bytes(digest, "little") % int(n))
    return out


@dataclass
class ScoredRows:
    """One batch of scored completion rows (R rows, K ranks, T tokens)."""

    texts: list[str]
    lines: list[list[ParsedLine]]
    slot_ids: list[list[str | None]]
    enc: EncodedRows
    rewards: torch.Tensor  # (R, K) or (R, N, K)
    rank_RT: torch.Tensor  # int64, -1 = no rank
    end_R: torch.Tensor  # int64, position of the end token, -1 = none (truncated)
    n_lines_R: torch.Tensor

    def scalar_rewards(self) -> list[float]:
        """One number per row for TRL's logging: sum over ranks (mean over responders for RNK)."""
        if self.rewards.ndim == 2:
            return self.rewards.sum(-1).tolist()
        mask = self.enc.responder_mask_RN.to(self.rewards.dtype)
        per = (self.rewards.sum(-1) * mask).sum(-1) / mask.sum(-1).clamp(min=1)
        return per.tolist()

    def stats(self, k: int) -> dict[str, float]:
        """Per-list diagnostics: lines, parsed, grounded, hits; and the mean reward at each rank."""
        n = max(len(self.lines), 1)
        rewards_RK = self.rewards if self.rewards.ndim == 2 else self.rewards.amax(1)
        out = {
            "lines_per_list": sum(len(x) for x in self.lines) / n,
            "parsed_per_list": sum(ln.title is not None for row in self.lines for ln in row[:k]) / n,
            "grounded_per_list": sum(i is not None for row in self.slot_ids for i in row[:k]) / n,
            "hits_per_list": float(rewards_RK.gt(0).sum()) / n,
            "complete_frac": float((self.n_lines_R >= k).float().mean()) if len(self.lines) else 0.0,
            "truncated_frac": float((self.end_R < 0).float().mean()) if len(self.lines) else 0.0,
        }
        means = rewards_RK.mean(0) if len(self.lines) else torch.zeros(k)
        out.update({f"rank_reward/{i + 1:02d}": float(v) for i, v in enumerate(means)})
        return out


class RankScorer:
    """Parse, ground and reward completion rows for one catalog and one reward scheme."""

    def __init__(
        self,
        catalog: Catalog,
        tokenizer: Any,
        *,
        k: int,
        scheme: str,
        log_decay: bool = False,
        grounding: GroundingSettings | None = None,
        eos_token_ids: Sequence[int] | None = None,
        seed: int = 0,
    ) -> None:
        """``grounding``: the run's settings (``run_training`` passes the dataset's, plus any override the
        config asks for); the validation and ``remark eval`` ground with the same object."""
        self.matcher = Matcher(catalog, grounding or GroundingSettings())
        self.offsets = TokenOffsetMapper(tokenizer)
        if eos_token_ids is None:
            eos_token_ids = [] if tokenizer.eos_token_id is None else [tokenizer.eos_token_id]
        self.eos_ids = {int(i) for i in eos_token_ids}
        self.k = k
        self.scheme = scheme
        self.modifier = "log_decay" if log_decay else None
        self.seed = seed

    def score(
        self,
        completion_ids: Sequence[Sequence[int]],
        columns: dict[str, Sequence[Any]],
        *,
        group_size: int | None,
        step: int,
        max_responders: int | None = None,
    ) -> ScoredRows:
        """Score R rows. ``columns`` holds the dataset columns per row (``request_id``, ``seen``, ``union``,
        ``counts``, ``responders``, ``responder_index`` with -1 for pooled rows)."""
        offsets = self.offsets([list(ids) for ids in completion_ids])
        lines = [parse_list(text) for text in offsets.texts]
        slot_ids = self.matcher.ground_lines(lines)
        responders = columns["responders"]
        own = [int(i) for i in columns["responder_index"]]
        drawn = hashed_responder_index(
            columns["request_id"], [len(r) for r in responders], seed=self.seed, step=step
        )
        responder_index = [o if o >= 0 else d for o, d in zip(own, drawn, strict=True)]
        enc = encode_rows(
            slot_ids,
            k=self.k,
            union=columns["union"],
            counts=columns["counts"],
            responders=responders,
            seen=columns["seen"],
            responder_index=responder_index,
            max_responders=max_responders,
            group_size=group_size,
            request_ids=columns["request_id"],
        )
        rewards = rank_rewards(enc, self.scheme, modifier=self.modifier)
        rank_RT = token_rank_index(lines, offsets, k=self.k)
        end_R = torch.tensor(
            [next((t for t, i in enumerate(ids) if i in self.eos_ids), -1) for ids in completion_ids],
            dtype=torch.int64,
        )
        return ScoredRows(offsets.texts, lines, slot_ids, enc, rewards, rank_RT, end_R, enc.n_lines_R)
