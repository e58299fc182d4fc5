"""``RankReward``: the reward function TRL calls, and the hand-off of its scored rows to the rank step.

TRL calls a reward function with the local completion rows and the dataset columns and takes one float
per row back (``reward_funcs=[RankReward(scorer)]``); the rank step needs every rank's reward, the token
ranks and the end tokens. So a call scores the rows once (through its one :class:`~remark.scoring.scorer.Scorer`),
returns the per-list sums (``ScoredRows.scalar_R``: TRL's ``reward`` logs stay meaningful) and keeps the
``ScoredRows`` until :meth:`RankReward.take`, which the trainer calls right after TRL's generation round.
A round whose rows were never scored, or scores taken twice, raise: the hand-off is one call, one take.
With a scorer that overlaps (the scoring pool), the trainer submits the rows right after generation
(:meth:`RankReward.prefetch`) and the reward call waits only for what is left.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from remark.scoring.scorer import SCORED_COLUMNS, ScoredRows, Scorer

__all__ = ["RankReward"]


class RankReward:
    """TRL's reward function for rank rewards (module docstring); ``scorer`` may be set after construction
    (TRL needs the reward function before the trainer knows its tokenizer)."""

    __name__ = "rank_reward"  # TRL names its reward logs after the function (rewards/rank_reward/mean)

    def __init__(self, scorer: Scorer | None = None, *, group_size: int | None = None) -> None:
        self.scorer = scorer
        self.group_size = group_size
        self._scored: ScoredRows | None = None
        self._pending: tuple[Any, Any, int] | None = None  # (rows, future, step)
        self.prefetched = 0  # reward calls answered by a prefetch

    def prefetch(
        self, completion_ids: Sequence[Sequence[int]], inputs: list[dict[str, Any]], *, step: int
    ) -> None:
        """Submit a round's rows to the scorer as soon as they are generated (the trainer calls this right
        after generation); the reward call then waits only for what is left. ``inputs`` are the round's
        dataset rows, whose columns TRL hands the reward call."""
        columns = {k: [x[k] for x in inputs] for k in SCORED_COLUMNS if k in inputs[0]}
        future = self.scorer.submit(completion_ids, columns, group_size=self.group_size, step=step)
        self._pending = (completion_ids, future, step)

    def __call__(
        self, completion_ids: Sequence[Sequence[int]], trainer_state: Any = None, **columns: Any
    ) -> list[float]:
        if self.scorer is None:
            raise RuntimeError("RankReward has no scorer yet (set RankReward.scorer before training)")
        step = int(getattr(trainer_state, "global_step", 0))
        pending, self._pending = self._pending, None
        if pending is not None and pending[0] is completion_ids and pending[2] == step:
            self._scored = pending[1].result()  # the prefetched rows are these rows
            self.prefetched += 1
        else:
            self._scored = self.scorer.submit(
                completion_ids, columns, group_size=self.group_size, step=step
            ).result()
        return self._scored.scalar_R().tolist()

    def take(self) -> ScoredRows:
        """The rows scored by the last call, once."""
        scored, self._scored = self._scored, None
        if scored is None:
            raise RuntimeError(
                "the rank reward did not run for this round: remark's reward must be TRL's only one"
            )
        return scored
