"""``RemarkGRPOTrainer``: TRL's ``GRPOTrainer`` fed with per-token rank advantages. A thin subclass.

What it changes, and where (the maintainers' advice in huggingface/trl#4525, references.md):

1. TRL calls our one reward function with the local completion rows and the dataset columns. It
   parses, grounds and rewards every rank (``remark.scoring.RankScorer``), keeps the result for step 2
   and returns the per-row sum, so TRL's own ``reward`` logs stay meaningful.
2. ``_generate_and_score_completions`` calls TRL, then replaces its scalar advantages: the per-rank
   rewards of all processes are gathered (groups of G rows can straddle processes), scaled per group
   and rank (``remark.algos.rank_advantages``), the local rows are sliced back, and each token gets
   its rank's advantage (``remark.algos.token_advantages``: overflow penalty, end-token shaping). The
   result is a (B, T) ``advantages`` tensor, which TRL's loss takes as is. ``rank_ids`` (B, T) travels
   with the batch for the rank-level ratio.
3. ``_compute_loss`` is TRL's, with the rank-level importance ratio (``remark.algos.ratios``) swapped
   in through the log-probabilities when ``rank_level_ratio`` is on.

Filters: ``zero_signal_filter`` drops groups whose G reward vectors are all equal from the loss
(their advantages are 0 anyway under group scaling; dropping them stops them diluting the token
normaliser); ``pass_rate_drop`` stops training on a request once a group's mean rank reward reaches the
threshold (its rows are masked from then on; they are still generated, since TRL's sampler is fixed).

The GRPO family (``remark.algos.family``, recipes in ``configs/recipes``): the baseline, the loss
aggregation weights (passed to TRL's loss as its loss-only ``tool_mask``) and the truncation rule are
registered functions picked by name; GMPO's objective enters through the log-probabilities like the
rank-level ratio, with TRL's clip bounds set to infinity for that call. ``refill_batch`` (DAPO's dynamic
sampling, Olmo 3's active sampling): after scoring, groups with no signal (or of dropped requests) are
replaced by groups generated from further prompts, drawn from a second shuffled pass over the training
set (TRL's ``RepeatSampler`` with seed ``seed + 1``), until the batch is full or ``refill_max_rounds``
rounds are spent; the kept rows are concatenated (padded to common widths) and the rank advantages are
computed once, on the final batch. Each process refills its own groups (a process's generation batch
must hold whole groups), and every process runs the same number of rounds. The refill stream restarts
on resume (it is not checkpointed).

Departures from Rank-GRPO's trainer (a full copy of TRL 0.21's, patched into site-packages): ranks
come from the parser's line spans, not from counting newlines; the newline ending line K and the end
token never inherit a rank's advantage; rewards of every scheme share one code path.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import torch
from accelerate.utils import gather
from trl import GRPOTrainer

from catalog.table import Catalog
from remark.algos import get, rank_advantages, token_advantages, zero_signal_groups
from remark.algos.family import gmpo_clip_log_ratio
from remark.checkpoint import SafeCheckpointMixin
from remark.config import RemarkGRPOConfig
from remark.refill import _merge_rounds, _Round
from remark.scoring import RankScorer, ScoredRows

logger = logging.getLogger(__name__)


class RemarkGRPOTrainer(SafeCheckpointMixin, GRPOTrainer):
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
    ) -> None:
        if not isinstance(args, RemarkGRPOConfig):
            raise TypeError("RemarkGRPOTrainer needs a RemarkGRPOConfig (remark.config.load_config)")
        self._catalog = catalog
        self._scored: ScoredRows | None = None
        self._dropped: set[str] = set()
        self._refill_stream: Any = None

        def rank_reward(completion_ids, **columns):
            return self._score_rows(completion_ids, columns)

        super().__init__(
            model=model,
            reward_funcs=[rank_reward],
            args=args,
            train_dataset=train_dataset,
            processing_class=processing_class,
            callbacks=callbacks,
            peft_config=peft_config,
            rollout_func=rollout_func,
        )
        self.scorer = RankScorer(
            catalog,
            self.processing_class,
            k=args.num_ranks,
            scheme=args.reward_scheme,
            log_decay=args.log_decay,
            grounding=args.grounding(),
            eos_token_ids=self.eos_token_ids,
            seed=args.seed,
        )
        from remark.planning.adaptive import GroupSizeAdvisor

        self._advisor = next(
            (c for c in self.callback_handler.callbacks if isinstance(c, GroupSizeAdvisor)), None
        )
        if args.vllm_importance_sampling_correction and not args.use_vllm:
            logger.info(
                "vllm_importance_sampling_correction (%s) is a no-op: generation uses transformers, whose sampling "
                "log-probs are the policy's own",
                args.vllm_importance_sampling_mode,
            )

    # -- step 1: rank rewards, computed once per local batch ---------------------------------------------
    def _score_rows(self, completion_ids: list[list[int]], columns: dict[str, list]) -> list[float]:
        single = self.accelerator.num_processes == 1
        mode = "train" if self.model.training else "eval"
        group = self.num_generations if mode == "train" else self.num_generations_eval
        max_n = None
        if self.args.reward_scheme == "responder_rb":
            # every process pads the responder axis to the global max, so gathers line up
            local = torch.tensor(max(len(r) for r in columns["responders"]), device=self.accelerator.device)
            max_n = int(self.accelerator.gather(local[None]).max())
        self._scored = self.scorer.score(
            completion_ids,
            columns,
            group_size=group if single else None,
            step=self.state.global_step,
            max_responders=max_n,
        )
        scored = self._scored
        cut_R = (scored.end_R < 0) & torch.tensor(
            [not t.endswith("\n") for t in scored.texts], dtype=torch.bool
        )
        scored.rewards = get("truncation", self.args.truncation)(
            scored.rewards, last_rank_R=scored.n_lines_R.to(torch.int64) - 1, cut_R=cut_R
        )
        return scored.scalar_rewards()

    # -- step 2: per-token advantages (after refilling zero-signal groups when asked) -----------------------
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        mode = "train" if self.model.training else "eval"
        first = self._generate_round(inputs)
        rounds = [first]
        selected = [(0, r) for r in range(len(inputs))]
        if self.args.refill_batch and mode == "train":
            rounds, selected = self._refill(rounds)
        return self._finish_batch(rounds, selected, mode)

    def _generate_round(self, inputs: list[dict[str, Any]]) -> _Round:
        """TRL's generation and scoring of ``inputs`` (which calls our reward function), kept with its scores."""
        out = super()._generate_and_score_completions(inputs)
        scored, self._scored = self._scored, None
        if scored is None:
            raise RuntimeError("the rank reward function did not run: remark's reward must be the only one")
        device = self.accelerator.device
        rank_RT = _pad_width(scored.rank_RT.to(device), out["completion_ids"].shape[1], -1)
        mask_RN = scored.enc.responder_mask_RN.to(device) if scored.rewards.ndim == 3 else None
        return _Round(
            out=out,
            inputs=list(inputs),
            rewards=scored.rewards.to(device),
            mask_RN=mask_RN,
            rank_RT=rank_RT,
            n_lines_R=scored.n_lines_R.to(device),
            end_R=scored.end_R.to(device),
            stats=scored.stats(self.args.num_ranks),
        )

    def _group_keep(self, rnd: _Round, group: int) -> torch.Tensor:
        """Which local groups of a round carry signal and belong to no dropped request (bool, n_local / G)."""
        all_rewards = gather(rnd.rewards)
        zero_B = zero_signal_groups(all_rewards, group_size=group)
        n_local = len(rnd.inputs)
        local = slice(
            self.accelerator.process_index * n_local, (self.accelerator.process_index + 1) * n_local
        )
        keep_R = ~zero_B.repeat_interleave(group)[local]
        if self.args.pass_rate_drop is not None:
            rewards_RK = all_rewards if all_rewards.ndim == 2 else all_rewards.amax(1)
            keep_R &= self._update_dropped(
                rnd.inputs, rewards_RK.view(-1, group, rewards_RK.shape[-1]), local, group
            )
        return keep_R.view(-1, group).all(1)

    def _refill(self, rounds: list[_Round]) -> tuple[list[_Round], list[tuple[int, int]]]:
        """Replace groups without signal by groups of further prompts until every process's batch is full.

        Returns the rounds and the (round, local row) pairs of the final batch, in order. Groups of G
        consecutive local rows must not straddle processes (``validate_remark_layout``).
        """
        group = self.num_generations
        n_local = len(rounds[0].inputs)
        need = n_local // group
        kept: list[tuple[int, int]] = []  # (round, local group)
        spare: list[tuple[int, int]] = []
        n_prompts = 0
        for i in range(1 + self.args.refill_max_rounds):
            if i > 0:
                short = torch.tensor([float(len(kept) < need)], device=self.accelerator.device)
                if self.accelerator.gather(short).sum().item() == 0:
                    break
                new_inputs = self._refill_inputs(n_local, group)
                n_prompts += len(new_inputs) // group
                rounds.append(self._generate_round(new_inputs))
            keep_B = self._group_keep(rounds[i], group).tolist()
            for b, ok in enumerate(keep_B):
                (kept if ok and len(kept) < need else spare).append((i, b))
        n_rounds = len(rounds) - 1
        chosen = kept + spare[: need - len(kept)]  # still short: zero-signal groups, masked later
        metrics = self._metrics["train"]
        metrics["train/refill_rounds"].append(float(n_rounds))
        metrics["train/refill_prompts"].append(
            self.accelerator.gather(torch.tensor([float(n_prompts)], device=self.accelerator.device))
            .sum()
            .item()
        )
        metrics["train/refill_short_groups"].append(
            self.accelerator.gather(torch.tensor([float(need - len(kept))], device=self.accelerator.device))
            .sum()
            .item()
        )
        return rounds, [(i, b * group + g) for i, b in chosen for g in range(group)]

    def _refill_inputs(self, n_local: int, group: int) -> list[dict[str, Any]]:
        """This process's next n_local rows (n_local / G prompts x G) from the refill stream.

        Every process walks the same stream (same seed) and takes its slice, skipping dropped requests.
        """
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
            if self.train_dataset[idx]["request_id"] in self._dropped and skipped < len(self.train_dataset):
                skipped += 1
                continue
            picked.append(idx)
        per_process = n_local // group
        mine = picked[
            self.accelerator.process_index * per_process : (self.accelerator.process_index + 1) * per_process
        ]
        return [self.train_dataset[i] for i in mine for _ in range(group)]

    def _finish_batch(
        self, rounds: list[_Round], selected: list[tuple[int, int]], mode: str
    ) -> dict[str, Any]:
        """Rank advantages, per-token advantages, filters and aggregation weights on the final local batch."""
        args = self.args
        group = self.num_generations if mode == "train" else self.num_generations_eval
        device = self.accelerator.device
        merged = not (len(rounds) == 1 and selected == [(0, r) for r in range(len(rounds[0].inputs))])
        if not merged:
            rnd = rounds[0]
            out, inputs = rnd.out, rnd.inputs
            rewards, mask_RN, rank_RT, n_lines_R, end_R = (
                rnd.rewards,
                rnd.mask_RN,
                rnd.rank_RT,
                rnd.n_lines_R,
                rnd.end_R,
            )
        else:
            out, inputs, rewards, mask_RN, rank_RT, n_lines_R, end_R = _merge_rounds(
                rounds, selected, self._tokenizer.pad_token_id
            )
        n_local = len(inputs)

        all_rewards = gather(rewards)
        all_mask_RN = gather(mask_RN) if mask_RN is not None else None
        adv_all = rank_advantages(
            all_rewards,
            group_size=group,
            mode=args.advantage_scaling,
            eps=args.advantage_eps,
            baseline=args.advantage_baseline,
            mask_RN=all_mask_RN,
        )
        rewards_RK = all_rewards if all_rewards.ndim == 2 else all_rewards.amax(1)
        b, k = rewards_RK.shape[0] // group, rewards_RK.shape[1]
        rewards_BGK = rewards_RK.view(b, group, k)
        zero_signal_B = zero_signal_groups(all_rewards, group_size=group)

        start = self.accelerator.process_index * n_local
        local = slice(start, start + n_local)
        if self._advisor is not None and mode == "train":  # online group-size planning (pass rates in [0, 1])
            ids = _gather_strings(self.accelerator, [x["request_id"] for x in inputs])
            scale = rewards_BGK.amax().clamp(min=1.0)
            self._advisor.update_from_rewards(ids[::group], (rewards_BGK / scale).clamp(0.0, 1.0).cpu())
        completion_mask = out["completion_mask"]
        adv_RT = token_advantages(
            adv_all[local],
            rank_RT,
            n_lines_R=n_lines_R,
            end_R=end_R,
            mask_RT=completion_mask,
            overflow_penalty=args.overflow_penalty,
            filler_penalty=args.filler_penalty,
            complete_bonus=args.eos_complete_bonus,
            early_stop_penalty=args.eos_early_penalty,
        )

        keep_R = torch.ones(n_local, dtype=torch.bool, device=device)
        if args.zero_signal_filter and mode == "train":
            keep_R &= ~zero_signal_B.repeat_interleave(group)[local]
        if args.pass_rate_drop is not None and mode == "train":
            keep_R &= self._update_dropped(inputs, rewards_BGK, local, group)
        if not keep_R.all():
            out["completion_mask"] = completion_mask * keep_R[:, None].to(completion_mask.dtype)
            adv_RT = adv_RT * keep_R[:, None].to(adv_RT.dtype)
        loss_mask = out["completion_mask"] * out.get("tool_mask", 1)
        out["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        weight_R = get("aggregation", args.loss_aggregation)(gather(loss_mask.sum(1)), group_size=group)[
            local
        ]
        out["tool_mask"] = out.get("tool_mask", torch.ones_like(completion_mask)) * weight_R[:, None].to(
            device
        )
        out["advantages"] = adv_RT
        out["rank_ids"] = rank_RT

        # statistics of the sampled batch (the policy's own), not of the refilled one
        first_zero = (
            zero_signal_groups(gather(rounds[0].rewards), group_size=group) if merged else zero_signal_B
        )
        self._log_rank_metrics(mode, rounds[0].stats, first_zero, keep_R)
        return out

    def _update_dropped(
        self, inputs: list[dict[str, Any]], rewards_BGK: torch.Tensor, local: slice, group: int
    ) -> torch.Tensor:
        """Mark requests whose group's mean rank reward reached ``pass_rate_drop``; keep mask for local rows."""
        pass_rate_B = rewards_BGK.mean((1, 2)) / rewards_BGK.amax((1, 2)).clamp(min=1e-12)
        request_ids = _gather_strings(self.accelerator, [x["request_id"] for x in inputs])
        for b in torch.nonzero(pass_rate_B >= self.args.pass_rate_drop).flatten().tolist():
            self._dropped.add(request_ids[b * group])
        local_ids = request_ids[local]
        return torch.tensor([rid not in self._dropped for rid in local_ids], device=rewards_BGK.device)

    def _log_rank_metrics(
        self, mode: str, stats: dict[str, float], zero_signal_B: torch.Tensor, keep_R: torch.Tensor
    ) -> None:
        """Rank statistics and zero-signal fraction of the sampled batch (before refills); kept fraction."""
        prefix = "train" if mode == "train" else "eval"
        values = torch.tensor(list(stats.values()), device=self.accelerator.device)
        values = self.accelerator.gather(values[None]).mean(0)
        for name, v in zip(stats, values.tolist(), strict=True):
            self._metrics[mode][f"{prefix}/{name}"].append(v)
        self._metrics[mode][f"{prefix}/zero_signal_frac"].append(zero_signal_B.float().mean().item())
        kept = self.accelerator.gather(keep_R.float()).mean().item()
        self._metrics[mode][f"{prefix}/kept_frac"].append(kept)
        if self.args.pass_rate_drop is not None:
            self._metrics[mode][f"{prefix}/dropped_requests"].append(float(len(self._dropped)))

    # -- step 3: the ratio or objective through the log-probs, and the log-ratio to the reference ------
    def _logps_transform(self, inputs: dict[str, Any], mode: str) -> Any:
        """fn(logps, old) -> logps' for the rank-level ratio or GMPO's objective; None for TRL's own ratio."""
        args = self.args
        mask = inputs["completion_mask"]
        if args.rank_level_ratio:
            return lambda logps, old: get("ratio", "rank")(logps, old, inputs["rank_ids"], mask)
        if args.gmpo_level is None:
            return None
        adv = inputs["advantages"]
        adv = adv.unsqueeze(1).expand_as(mask) if adv.ndim == 1 else adv
        segments = inputs["rank_ids"] if args.gmpo_level == "rank" else torch.zeros_like(inputs["rank_ids"])
        clip = {"clip_low": self.epsilon_low, "clip_high": self.epsilon_high}

        def gmpo(logps: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
            raw = (logps - old).detach()
            clipped = (gmpo_clip_log_ratio(raw, adv, **clip) != raw).float()
            total = self.accelerator.reduce(
                torch.stack([(clipped * mask).sum(), mask.sum().float()]), reduction="sum"
            )
            self._metrics[mode]["gmpo/clip_frac"].append((total[0] / total[1].clamp(min=1)).item())
            return get("objective", "gmpo")(logps, old, adv, segments, mask, **clip)

        return gmpo

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        mode = "train" if self.model.training else "eval"
        transform = self._logps_transform(inputs, mode)
        watch_ref = self.args.divergence_log_ratio is not None and "ref_per_token_logps" in inputs
        if transform is None and not watch_ref:
            return super()._compute_loss(model, inputs)
        inputs = dict(inputs)  # the buffered batch is reused across iterations: never mutate it
        mask = inputs["completion_mask"]
        original = self._get_per_token_logps_and_entropies

        def wrapped(*a, **kw):
            logps, entropies, aux = original(*a, **kw)
            if watch_ref:
                diff = ((logps.detach() - inputs["ref_per_token_logps"]).abs() * mask).sum()
                total = self.accelerator.reduce(
                    torch.stack([diff, mask.sum().to(diff.dtype)]), reduction="sum"
                )
                self._metrics[mode]["train/abs_log_ratio_ref"].append(
                    (total[0] / total[1].clamp(min=1)).item()
                )
            if transform is None:
                return logps, entropies, aux
            old = inputs.get("old_per_token_logps")
            old = logps.detach() if old is None else old
            new = transform(logps, old)
            if "ref_per_token_logps" in inputs:  # keep the KL term on the token log-probs
                inputs["ref_per_token_logps"] = inputs["ref_per_token_logps"] + (new - logps)
            return new, entropies, aux

        bounds = (self.epsilon_low, self.epsilon_high)
        self._get_per_token_logps_and_entropies = wrapped
        if self.args.gmpo_level is not None:  # GMPO clipped in log space already: TRL's clip must not act
            self.epsilon_low = self.epsilon_high = math.inf
        try:
            return super()._compute_loss(model, inputs)
        finally:
            del self._get_per_token_logps_and_entropies
            self.epsilon_low, self.epsilon_high = bounds


def _pad_width(x: torch.Tensor, width: int, value: int) -> torch.Tensor:
    if x.shape[1] >= width:
        return x[:, :width]
    return torch.nn.functional.pad(x, (0, width - x.shape[1]), value=value)


def _gather_strings(accelerator: Any, values: list[str]) -> list[str]:
    from accelerate.utils import gather_object

    return list(gather_object(values)) if accelerator.num_processes > 1 else list(values)
