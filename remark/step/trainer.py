"""``RemarkGRPOTrainer``: TRL's ``GRPOTrainer`` fed with per-token rank advantages.

The data path (``docs/architecture.md#the-data-path``), and the only places it touches TRL:

1. **Score** (TRL's reward call): TRL generates, computes its log-probs and calls our one reward
   function, ``remark.scoring.reward.RankReward``, with the local rows. Its one scorer (``RankScorer``, or
   with ``scoring_workers`` the ``ScoringPool`` around it) parses, grounds and rewards every rank once, and
   it returns the per-list sums, so TRL's ``reward`` logs stay meaningful.
   TRL's signature takes one float per row back, so the ``ScoredRows`` wait in the reward object until
   the trainer takes them right after TRL's round (``RankReward.take``): one call, one take.
2. **Rank step** (``_generate_and_score_completions``): :func:`remark.step.rank_step.rank_step` turns the
   scored rows into a ``RankBatch`` (truncation, modifiers, the one gather per round, filters, refills,
   group scaling per rank, the token map, loss weights). The trainer replaces TRL's scalar advantages
   with its (B, T) advantages (TRL's loss takes them as they are, huggingface/trl#4525), masks the
   filtered rows, passes the aggregation weights as TRL's loss-only ``tool_mask`` and the token ranks as
   ``rank_ids``. With refills the rounds' TRL batches are merged row for row (``remark.step.refill``).
3. **Loss** (``_compute_loss``): TRL's own, with the rank-level ratio or GMPO's objective substituted
   through the log-probabilities for that call (``remark.step.logps_hook``).

Generation with ``use_vllm`` (colocate) goes through TRL's vLLM path with remark's engine settings and
weight sync (``remark.step.colocated_engine``: the policy's dtype, the run's seed, a sync that is correct on
vLLM's CPU backend and rebuilds tied heads); ``colocated_engine`` hands the synced engine to validation.

Refill prompts come from a second shuffled pass over the training set (TRL's ``RepeatSampler`` with seed
``seed + 1``); every process walks the same stream and takes its slice, skipping dropped requests. The
stream restarts on resume (it is not checkpointed). Departures from Rank-GRPO: ``docs/method.md``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from trl import GRPOTrainer

from catalog.table import Catalog
from remark.config import RemarkGRPOConfig
from remark.config.effects import colocated_vllm
from remark.scoring.reward import RankReward
from remark.scoring.scorer import RankScorer
from remark.step.checkpoint import SafeCheckpointMixin
from remark.step.colocated_engine import EngineSettings, VLLMEngineMixin
from remark.step.logps_hook import logps_hook
from remark.step.rank_step import RankSettings, Round, rank_step
from remark.step.refill import merge_batches

logger = logging.getLogger(__name__)


class AcceleratorGather:
    """``remark.step.rank_step.Gather`` over an ``accelerate.Accelerator`` (identity on one process)."""

    def __init__(self, accelerator: Any) -> None:
        self.accelerator = accelerator
        self.rank, self.world = accelerator.process_index, accelerator.num_processes
        self.device = accelerator.device

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.accelerator.gather(x.to(self.device)) if self.world > 1 else x

    def objects(self, xs: list) -> list:
        from accelerate.utils import gather_object

        return list(gather_object(list(xs))) if self.world > 1 else list(xs)


class RemarkGRPOTrainer(SafeCheckpointMixin, VLLMEngineMixin, GRPOTrainer):
    """GRPO with rank-level advantages (ReMaRk and Rank-GRPO recipes, chosen by ``RemarkGRPOConfig``)."""

    def __init__(
        self,
        model: Any,
        args: RemarkGRPOConfig,
        train_dataset: Any,
        catalog: Catalog,
        *,
        processing_class: Any = None,
        callbacks: list | None = None,
        peft_config: Any = None,
        rollout_func: Any = None,
        card_writer: Callable[[str, str], bool] | None = None,
    ) -> None:
        """``card_writer(output_dir, text) -> bool`` writes TRL's draft model card (False: it was not the
        run's to write); without one no draft card is written, so a trainer built outside ``remark train``
        never touches a ``README.md`` in its output folder."""
        if not isinstance(args, RemarkGRPOConfig):
            raise TypeError("RemarkGRPOTrainer needs a RemarkGRPOConfig (remark.config.load_config)")
        self.rank_reward = RankReward()
        self.card_writer = card_writer
        if colocated_vllm(args):
            _note_cpu_kv_cache(args)
        super().__init__(
            model=model,
            reward_funcs=[self.rank_reward],
            args=args,
            train_dataset=train_dataset,
            processing_class=processing_class,
            callbacks=callbacks,
            peft_config=peft_config,
            rollout_func=rollout_func,
            vllm_settings=EngineSettings(
                seed=args.seed,
                bf16=bool(args.bf16),
                fp16=bool(args.fp16),
                kv_cache_gib=args.vllm_kv_cache_gib,
                enforce_eager=args.vllm_enforce_eager,
            ),
        )
        scorer = RankScorer(
            catalog,
            self.processing_class,
            k=args.num_ranks,
            scheme=args.reward_scheme,
            segmentation=args.segmentation,
            grounding=args.grounding(),
            eos_token_ids=self.eos_token_ids,
            seed=args.seed,
        )
        if args.scoring_workers:  # rows are scored in worker processes from the end of generation on
            from remark.scoring.pool import ScoringPool

            self.rank_reward.scorer = ScoringPool(scorer, workers=args.scoring_workers)
        else:
            self.rank_reward.scorer = scorer
        self._round_inputs: list[dict[str, Any]] | None = None
        if self.accelerator.num_processes == 1 and self.num_generations_eval == self.num_generations:
            self.rank_reward.group_size = self.num_generations  # every group is local: check its rows
        self.rank_settings = RankSettings.from_config(args)
        self.gather = AcceleratorGather(self.accelerator)
        self.dropped: frozenset[str] = frozenset()  # requests dropped by pass_rate_drop, for good
        self._refill_stream: Any = None
        from remark.planning.adaptive import GroupSizeAdvisor

        self._advisor = next(
            (c for c in self.callback_handler.callbacks if isinstance(c, GroupSizeAdvisor)), None
        )

    def create_model_card(self, model_name: Any = None, dataset_name: Any = None, tags: Any = None) -> None:
        """TRL's draft card, ``output_dir/README.md``, handed to the ``card_writer`` (``remark train``'s writes
        it atomically as a file the run owns, and never replaces a ``README.md`` the run did not write)."""
        if self.card_writer is None or not self.is_world_process_zero():
            return
        import tempfile

        out = self.args.output_dir
        with (
            tempfile.TemporaryDirectory() as scratch
        ):  # TRL saves to args.output_dir; take its text from here
            try:
                self.args.output_dir = scratch
                super().create_model_card(model_name=model_name, dataset_name=dataset_name, tags=tags)
            finally:
                self.args.output_dir = out
            text = (Path(scratch) / "README.md").read_text(encoding="utf-8")
        if not self.card_writer(out, text):
            logger.info("%s/README.md is not the run's: TRL's draft model card was not written", out)

    # -- steps 1 and 2: TRL's round (which scores), then the rank step ------------------------------------
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        train = self.model.training
        batches: list[dict[str, Any]] = []
        trl_round = super()._generate_and_score_completions  # TRL's generation, log-probs and reward call

        def generate(rows: list[dict[str, Any]]) -> Round:
            self._round_inputs = rows  # for _generate's prefetch
            out = trl_round(rows)
            batches.append(out)
            mask = out["completion_mask"]
            return Round(self.rank_reward.take(), mask, mask * out.get("tool_mask", 1))

        batch = rank_step(
            generate(inputs),
            self.rank_settings,
            self.gather,
            group_size=self.num_generations if train else self.num_generations_eval,
            train=train,
            dropped=self.dropped,
            refill=lambda dropped: generate(self._refill_inputs(len(inputs), dropped)),
            with_groups=train and self._advisor is not None,
        )
        self.dropped = batch.dropped
        out = merge_batches(batches, batch.rows, self._tokenizer.pad_token_id)
        out["completion_mask"] = batch.completion_mask
        out["advantages"] = batch.advantages
        out["rank_ids"] = batch.rank_ids
        out["num_items_in_batch"] = batch.num_items
        tool_mask = out.get("tool_mask", torch.ones_like(batch.completion_mask))
        out["tool_mask"] = tool_mask * batch.loss_weights[:, None]
        prefix = "train" if train else "eval"
        for name, value in batch.stats.items():
            self._metrics[prefix][f"{prefix}/{name}"].append(value)
        if batch.groups is not None:  # online group-size planning takes pass rates in [0, 1]
            ids, rewards_BGK = batch.groups
            scale = rewards_BGK.amax().clamp(min=1.0)
            self._advisor.update_from_rewards(ids, (rewards_BGK / scale).clamp(0.0, 1.0).cpu())
        return out

    def _generate(self, prompts: list) -> tuple:
        """TRL's generation; with a scorer that overlaps (``scoring_workers``) the rows are submitted at
        once, so scoring overlaps with TRL's log-prob passes before its reward call (``RankReward.prefetch``)."""
        out = super()._generate(prompts)
        inputs, self._round_inputs = self._round_inputs, None
        if self.rank_reward.scorer.overlaps and inputs is not None and len(inputs) == len(out[1]):
            self.rank_reward.prefetch(out[1], inputs, step=self.state.global_step)
        return out

    def _refill_inputs(self, n_local: int, dropped: frozenset[str]) -> list[dict[str, Any]]:
        """This process's next ``n_local`` rows (n_local / G prompts x G) from the refill stream."""
        group = self.num_generations
        if self._refill_stream is None:
            from trl.trainer.utils import RepeatSampler

            sampler = RepeatSampler(self.train_dataset, mini_repeat_count=1, seed=self.args.seed + 1)

            def stream():
                while True:
                    yield from sampler

            self._refill_stream = stream()
        n_global = n_local * self.accelerator.num_processes // group
        picked: list[int] = []
        skipped = 0
        while len(picked) < n_global:
            idx = next(self._refill_stream)
            if self.train_dataset[idx]["request_id"] in dropped and skipped < len(self.train_dataset):
                skipped += 1
                continue
            picked.append(idx)
        per_process = n_local // group
        rank = self.accelerator.process_index
        return [
            self.train_dataset[i]
            for i in picked[rank * per_process : (rank + 1) * per_process]
            for _ in range(group)
        ]

    # -- step 3: the ratio or objective through the log-probs -------------------------------------------
    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        mode = "train" if self.model.training else "eval"
        hook = logps_hook(
            self.args,
            inputs,
            clip_low=self.epsilon_low,
            clip_high=self.epsilon_high,
            log=lambda name, value: self._metrics[mode][name].append(value),
            reduce_sum=lambda x: self.accelerator.reduce(x, reduction="sum"),
        )
        if hook is None:
            return super()._compute_loss(model, inputs)
        original = self._get_per_token_logps_and_entropies

        def patched(*a, **kw):
            logps, entropies, aux = original(*a, **kw)
            return hook(logps), entropies, aux

        bounds = (self.epsilon_low, self.epsilon_high)
        self._get_per_token_logps_and_entropies = patched
        if hook.disables_clip:  # GMPO clipped in log space already: TRL's clip must not act
            self.epsilon_low = self.epsilon_high = math.inf
        try:
            return super()._compute_loss(model, hook.batch)
        finally:
            del self._get_per_token_logps_and_entropies
            self.epsilon_low, self.epsilon_high = bounds


def _note_cpu_kv_cache(args: RemarkGRPOConfig) -> None:
    """On CPU without a KV cache size, say how vLLM will size it (a share of the host's RAM)."""
    import os

    cpu = args.use_cpu or not torch.cuda.is_available()
    quiet = int(os.environ.get("RANK", "0")) != 0 or os.environ.get("VLLM_CPU_KVCACHE_SPACE")
    if cpu and args.vllm_kv_cache_gib is None and not quiet:
        print(
            f"note: vLLM on CPU reserves vllm_gpu_memory_utilization ({args.vllm_gpu_memory_utilization}) x the "
            "host's RAM for its KV cache; set vllm_kv_cache_gib (e.g. 1) to size it"
        )
