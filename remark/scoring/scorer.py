"""Completions -> per-rank rewards and token ranks: the glue between the parser, the matcher and ``remark.algos``.

``RankScorer.score`` takes a batch of completion rows (token ids as TRL hands them to reward functions,
plus the dataset columns of each row) and returns a ``ScoredRows``, computed once: parsed lines, grounded
slot ids, the scheme's rank rewards in one shape for every scheme (``rewards_RNK``, N = 1 for a per-list
scheme), the token ranks of the configured segmentation and the end-token index. Text, lines and token
offsets come from the same decode (``TokenOffsetMapper``), so reward ranks and token ranks cannot disagree
under ``segmentation: lines``. Truncation, modifiers and everything after belong to ``remark.step.rank_step``.

Every scorer has one shape, :class:`Scorer`: ``submit(completion_ids, columns, *, group_size, step)``
returns a :class:`ScoreFuture` whose ``result()`` is the ``ScoredRows``. ``RankScorer`` scores at once
(its future is done); ``remark.scoring.pool.ScoringPool`` scores in worker processes while the caller
goes on; ``remark.oracles.scorer.OracleScorer`` scores with slow independent loops, for the tests. The
dataset columns a scorer reads are :data:`SCORED_COLUMNS`, in one place. ``remark.scoring.reward``'s
``RankReward`` is the reward function TRL calls; it holds one scorer and keeps the scored rows for the
rank step.

Reward slots follow the segmentation's ``reward_slots`` (``remark.algos.registry``): ``lines`` grounds
every line of remark's parser with the run's ``GroundingSettings`` (``catalog.match``); ``rank_grpo``
(``segmentation: newlines``, the ``rank_grpo_published`` recipe) takes the lines Rank-GRPO's parser keeps,
their verbatim catalog ids and Rank-GRPO's consumption rule with year +- ``year_tolerance``
(``catalog.published``): the row stages find the slots' ids, and the assembly credits each slot with the
responder item it consumes before encoding, so that the ``responder`` reward is Rank-GRPO's hit vector.
Only the ``responder`` scheme is defined on those slots (the constructor refuses the others, as does
``remark.config.validate``).

The responder a ``responder``-scheme row is scored against: the row's own responder for per-responder
rows (Rank-GRPO's dataset), else one drawn per (seed, step, request) by a hash, so that every process
and a resumed run draw the same responder for a group, whatever the row order (docs/experiments.md,
pitfall 4: all G lists of a group are scored against one responder).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from catalog.lists import ParsedLists, parse_lists
from catalog.match import GroundingSettings, Matcher
from catalog.published import VerbatimIndex, published_credit, published_slots_many
from catalog.table import Catalog
from remark.algos import TokenOffsetMapper, encode_rows, per_responder, rewards_RNK, spec
from remark.algos.offsets import FlatRows
from remark.algos.registry import scheme_problem
from remark.algos.tokens import first_end_index

#: The dataset columns a scorer reads from each row (``RankScorer.assemble``); the rest stay with TRL.
SCORED_COLUMNS = ("request_id", "seen", "union", "counts", "responders", "responder_index")


class ScoreFuture(Protocol):
    """A submitted batch: ``result()`` waits for and returns its ``ScoredRows`` (``timeout`` in seconds)."""

    def result(self, timeout: float | None = None) -> ScoredRows: ...

    def done(self) -> bool: ...


class Scorer(Protocol):
    """What scores completion rows: the serial scorer, the pool of scoring workers and the oracle.

    ``overlaps`` is True when ``submit`` returns before the rows are scored (the trainer then submits
    right after generation, so that scoring overlaps TRL's log-prob passes)."""

    overlaps: bool

    def submit(
        self,
        completion_ids: Sequence[Sequence[int]],
        columns: dict[str, Sequence[Any]],
        *,
        group_size: int | None,
        step: int,
    ) -> ScoreFuture: ...


@dataclass
class Done:
    """The future of rows scored at once."""

    scored: ScoredRows

    def result(self, timeout: float | None = None) -> ScoredRows:
        return self.scored

    def done(self) -> bool:
        return True


def hashed_responder_index(
    request_ids: Sequence[str], n_responders: Sequence[int], *, seed: int, step: int
) -> list[int]:
    """One responder per (seed, step, request): blake2b of ``"seed:step:request_id"`` modulo n_x (hashed
    once per distinct request id: a group's G rows share theirs)."""
    out = []
    drawn: dict[tuple[str, int], int] = {}
    for rid, n in zip(request_ids, n_responders, strict=True):
        key = (f"{seed}:{step}:{rid}", n)
        got = drawn.get(key)
        if got is None:
            if n < 1:
                raise ValueError(f"request {rid!r} has no responder to draw")
            digest = hashlib.blake2b(key[0].encode(), digest_size=8).digest()
            got = drawn[key] = int.from_bytes(digest, "little") % int(n)
        out.append(got)
    return out


@dataclass
class ScoredRows:
    """One generation round's local completion rows, scored (R rows, K ranks, N responders, T tokens).

    ``rewards_RNK`` are the scheme's rewards as the scorer computed them, before truncation and modifiers
    (``remark.step.rank_step`` applies those): (R, N, K) for a per-responder scheme, with ``mask_RN`` the
    responders that exist, and (R, 1, K) with an all-True mask for a per-list scheme
    (``remark.algos.rewards_RNK``); ``per_responder`` is the scheme's declared output.
    """

    request_ids: list[str]
    texts: list[str]
    lines: ParsedLists  # rows of ParsedLine; the flat columns are what scoring reads
    slot_ids: list[list[str | None]]  # grounded id per reward slot (see the segmentation's reward_slots)
    rewards_RNK: torch.Tensor
    mask_RN: torch.Tensor
    per_responder: bool
    rank_RT: torch.Tensor  # int64 token ranks of the segmentation; -1 = no rank, FILLER = whitespace
    end_R: torch.Tensor  # int64, position of the end token, -1 = none (truncated)
    n_lines_R: torch.Tensor  # int64, reward slots of the list (can exceed K)
    n_fallback: int = 0  # rows whose token offsets needed incremental decoding (TokenOffsets.n_fallback)

    def __post_init__(self) -> None:
        self.lines = ParsedLists.from_rows(self.lines)  # rows of ParsedLine (the reference path) -> columns

    def scalar_R(self) -> torch.Tensor:
        """One number per row for TRL's logs: the sum over ranks, averaged over the row's responders.

        Taken before truncation and modifiers (TRL sees the raw per-list hit count of the scheme)."""
        mask = self.mask_RN.to(self.rewards_RNK.dtype)
        return (self.rewards_RNK.sum(-1) * mask).sum(-1) / mask.sum(-1).clamp(min=1)


class RankScorer:
    """Parse, ground and reward completion rows for one catalog, one reward scheme and one segmentation.

    A :class:`Scorer` that scores at once (``overlaps`` False); ``settings`` are its keyword arguments,
    from which ``ScoringPool`` builds the same scorer in each worker process."""

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
        """``grounding``: the run's settings (``run_training`` passes the dataset's, plus any override the
        config asks for); the validation and ``remark eval`` ground with the same object. ``scheme`` is
        looked up when a batch is assembled, never here: the pool's workers build this scorer for its row
        stages only, so a scheme registered in the trainer's process alone works with them."""
        self.catalog, self.tokenizer = catalog, tokenizer
        self.settings: dict[str, Any] = dict(
            k=k,
            scheme=scheme,
            segmentation=segmentation,
            grounding=grounding,
            eos_token_ids=eos_token_ids,
            seed=seed,
        )
        self.matcher = Matcher(catalog, grounding or GroundingSettings())
        self.offsets = TokenOffsetMapper(tokenizer)
        if eos_token_ids is None:
            eos_token_ids = [] if tokenizer.eos_token_id is None else [tokenizer.eos_token_id]
        self.eos_ids = [int(i) for i in eos_token_ids]
        self.k = k
        self.scheme = scheme
        entry = spec("segmentation", segmentation)
        self.token_ranks = entry.fn
        self.reward_slots = entry.meta["reward_slots"]
        #: Rank-GRPO's verbatim (title, year) index, for ``reward_slots == "rank_grpo"`` (else None)
        self.verbatim: VerbatimIndex | None = None
        if (problem := scheme_problem(scheme, segmentation)) is not None:
            raise ValueError(": ".join(problem))
        if self.reward_slots == "rank_grpo":
            self.verbatim = VerbatimIndex(catalog)
        self.year_tolerance = self.matcher.settings.year_tolerance
        self.seed = seed
        self.last_timings: dict[str, float] = {}  # seconds per stage of the last score()

    def submit(
        self,
        completion_ids: Sequence[Sequence[int]],
        columns: dict[str, Sequence[Any]],
        *,
        group_size: int | None,
        step: int,
    ) -> Done:
        """:meth:`score`, as a :class:`Scorer` (the future is done on return)."""
        return Done(self.score(completion_ids, columns, group_size=group_size, step=step))

    def score(
        self,
        completion_ids: Sequence[Sequence[int]],
        columns: dict[str, Sequence[Any]],
        *,
        group_size: int | None,
        step: int,
    ) -> ScoredRows:
        """Score R rows. ``columns`` holds the dataset columns per row (``request_id``, ``seen``, ``union``,
        ``counts``, ``responders``, ``responder_index`` with -1 for pooled rows). ``group_size`` (when the
        rows of every group are all here) checks that groups are G consecutive rows of one request.

        Two parts: :meth:`row_stages` (decode, offsets, parse, ground, token ranks, end tokens: each row on
        its own, so that ``remark.scoring.pool`` can spread rows over worker processes) and
        :meth:`assemble` (responders, encoding, rewards: the batch, from the :data:`SCORED_COLUMNS` of
        ``columns``). Seconds per stage of the last call are in ``last_timings``.
        """
        stages = self.row_stages(completion_ids)
        scored = self.assemble(stages, columns, group_size=group_size, step=step)
        self.last_timings = dict(stages.timings) | self.last_timings
        return scored

    def row_stages(self, completion_ids: Sequence[Sequence[int]] | FlatRows) -> RowStages:
        """Texts, parsed lines, slot ids, token ranks and end tokens of R rows (lists of ids, or
        ``FlatRows``): a function of each row's ids alone (the caches below change no answer), so any
        split of the rows gives the same rows back."""
        clock = _Clock()
        if isinstance(completion_ids, FlatRows):  # the pool's shards: no per-row lists
            rows: Any = completion_ids
        else:
            rows = [
                ids if type(ids) is list else (ids.tolist() if hasattr(ids, "tolist") else list(ids))
                for ids in completion_ids
            ]
        offsets = self.offsets(rows)
        clock.lap("decode_offsets")
        lines = parse_lists(offsets.texts)  # the lines of the logs and statistics under either rule
        if self.verbatim is not None:  # Rank-GRPO's parser: the lines it keeps, renumbered
            slots = published_slots_many(offsets.texts)
            clock.lap("parse")
            slot_ids = self.verbatim.ids(slots)
        else:
            clock.lap("parse")
            slot_ids = lines.split(self.matcher.ground_titles(lines.titles, lines.years))
        clock.lap("ground")
        rank_RT = self.token_ranks(lines, offsets, k=self.k)
        end_R = first_end_index(offsets.ids_flat, offsets.lengths, self.eos_ids)
        clock.lap("token_ranks")
        return RowStages(offsets.texts, lines, slot_ids, rank_RT, end_R, offsets.n_fallback, clock.laps)

    def assemble(
        self, stages: RowStages, columns: dict[str, Sequence[Any]], *, group_size: int | None, step: int
    ) -> ScoredRows:
        """Responders, encoded rows and rewards for the row stages of a batch (see :meth:`score`)."""
        clock = _Clock()
        responders = columns["responders"]
        own = [int(i) for i in columns["responder_index"]]
        drawn = hashed_responder_index(
            columns["request_id"], [len(r) for r in responders], seed=self.seed, step=step
        )
        responder_index = [o if o >= 0 else d for o, d in zip(own, drawn, strict=True)]
        reward_ids = stages.slot_ids
        if self.verbatim is not None:  # each slot -> the responder item it consumes (Rank-GRPO's hits)
            reward_ids = published_credit(
                stages.slot_ids,
                scored_items(responders, responder_index),
                columns["seen"],
                index=self.verbatim,
                k=self.k,
                year_tolerance=self.year_tolerance,
            )
        enc = encode_rows(
            reward_ids,
            k=self.k,
            union=columns["union"],
            counts=columns["counts"],
            responders=responders,
            seen=columns["seen"],
            responder_index=responder_index,
            group_size=group_size,
            request_ids=columns["request_id"],
        )
        rewards, mask_RN = rewards_RNK(enc, self.scheme)
        clock.lap("rewards")
        self.last_timings = clock.laps
        return ScoredRows(
            request_ids=[str(x) for x in columns["request_id"]],
            texts=stages.texts,
            lines=stages.lines,
            slot_ids=stages.slot_ids,
            rewards_RNK=rewards,
            mask_RN=mask_RN,
            per_responder=per_responder(self.scheme),
            rank_RT=stages.rank_RT,
            end_R=stages.end_R,
            n_lines_R=enc.n_lines_R,
            n_fallback=stages.n_fallback,
        )


def scored_items(responders: Sequence[Sequence[Sequence[Any]]], responder_index: Sequence[int]) -> list:
    """Per row, the item ids of the responder it is scored against (``responders[r][responder_index[r]]``)."""
    out = []
    for r, (resp, i) in enumerate(zip(responders, responder_index, strict=True)):
        if not 0 <= i < len(resp):
            raise ValueError(f"row {r}: responder_index {i} is out of range for {len(resp)} responders")
        out.append(resp[i])
    return out


@dataclass
class RowStages:
    """The per-row part of scoring R rows (T = the longest row): what :meth:`RankScorer.row_stages` returns."""

    texts: list[str]
    lines: ParsedLists
    slot_ids: list[list[str | None]]
    rank_RT: torch.Tensor  # int64, -1 = no rank (also past a row's end)
    end_R: torch.Tensor  # int64, -1 = no end token
    n_fallback: int = 0
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage


class _Clock:
    """Seconds between laps (``time.perf_counter``)."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = self.laps.get(name, 0.0) + now - self._t
        self._t = now
