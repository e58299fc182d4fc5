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

Departures from Rank-GRPO's trainer (a full copy of TRL 0.21's, patched into site-packages): ranks
come from the parser's line spans, not from counting newlines; the newline ending line K and the end
token never inherit a rank's advantage; rewards of every scheme share one code path.
"""

from __future__ import annotations

from typing import Any

import torch
from accelerate.utils import gather
from trl import GRPOTrainer

from catalog.table import Catalog
from remark.algos import rank_advantages, token_advantages
from remark.algos.ratios import rank_level_logps
from remark.checkpoint import SafeCheckpointMixin
from remark.config import RemarkGRPOConfig
from remark.scoring import RankScorer, ScoredRows


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
            match_mode=args.match_mode,
            year_tolerance=args.year_tolerance,
            match_threshold=args.match_threshold,
            eos_token_ids=self.eos_token_ids,
            seed=args.seed,
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
        return self._scored.scalar_rewards()

    # -- step 2: per-token advantages -------------------------------------------------------------------
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        out = super()._generate_and_score_completions(inputs)
        scored, self._scored = self._scored, None
        if scored is None:
            raise RuntimeError("the rank reward function did not run: remark's reward must be the only one")
        args = self.args
        mode = "train" if self.model.training else "eval"
        group = self.num_generations if mode == "train" else self.num_generations_eval
        device = self.accelerator.device
        n_local = len(inputs)

        rewards = scored.rewards.to(device)
        all_rewards = gather(rewards)
        mask_RN = None
        if rewards.ndim == 3:
            mask_RN = gather(scored.enc.responder_mask_RN.to(device))
        adv_all = rank_advantages(
            all_rewards,
            group_size=group,
            mode=args.advantage_scaling,
            eps=args.advantage_eps,
            mask_RN=mask_RN,
        )
        rewards_RK = all_rewards if all_rewards.ndim == 2 else all_rewards.amax(1)
        b, k = rewards_RK.shape[0] // group, rewards_RK.shape[1]
        rewards_BGK = rewards_RK.view(b, group, k)
        zero_signal_B = (rewards_BGK == rewards_BGK[:, :1]).all(-1).all(-1)

        start = self.accelerator.process_index * n_local
        local = slice(start, start + n_local)
        adv_RK = adv_all[local]
        T = out["completion_ids"].shape[1]
        rank_RT = _pad_width(scored.rank_RT.to(device), T, -1)
        completion_mask = out["completion_mask"]
        adv_RT = token_advantages(
            adv_RK,
            rank_RT,
            n_lines_R=scored.n_lines_R.to(device),
            end_R=scored.end_R.to(device),
            mask_RT=completion_mask,
            overflow_penalty=args.overflow_penalty,
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
            kept_tokens = (out["completion_mask"] * out.get("tool_mask", 1)).sum()
            out["num_items_in_batch"] = self.accelerator.gather(kept_tokens).sum()
        out["advantages"] = adv_RT
        out["rank_ids"] = rank_RT

        self._log_rank_metrics(mode, scored, zero_signal_B, keep_R)
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
        self, mode: str, scored: ScoredRows, zero_signal_B: torch.Tensor, keep_R: torch.Tensor
    ) -> None:
        prefix = "train" if mode == "train" else "eval"
        stats = scored.stats(self.args.num_ranks)
        values = torch.tensor(list(stats.values()), device=self.accelerator.device)
        values = self.accelerator.gather(values[None]).mean(0)
        for name, v in zip(stats, values.tolist(), strict=True):
            self._metrics[mode][f"{prefix}/{name}"].append(v)
        self._metrics[mode][f"{prefix}/zero_signal_frac"].append(zero_signal_B.float().mean().item())
        kept = self.accelerator.gather(keep_R.float()).mean().item()
        self._metrics[mode][f"{prefix}/kept_frac"].append(kept)
        if self.args.pass_rate_drop is not None:
            self._metrics[mode][f"{prefix}/dropped_requests"].append(float(len(self._dropped)))

    # -- step 3: the rank-level importance ratio, and the log-ratio to the reference -------------------
    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        rank_level = self.args.rank_level_ratio
        watch_ref = self.args.divergence_log_ratio is not None and "ref_per_token_logps" in inputs
        if not (rank_level or watch_ref):
            return super()._compute_loss(model, inputs)
        inputs = dict(inputs)  # the buffered batch is reused across iterations: never mutate it
        mask = inputs["completion_mask"]
        mode = "train" if self.model.training else "eval"
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
            if not rank_level:
                return logps, entropies, aux
            old = inputs.get("old_per_token_logps")
            old = logps.detach() if old is None else old
            new = rank_level_logps(logps, old, inputs["rank_ids"], mask)
            if "ref_per_token_logps" in inputs:  # keep the KL term on the token log-probs
                inputs["ref_per_token_logps"] = inputs["ref_per_token_logps"] + (new - logps)
            return new, entropies, aux

        self._get_per_token_logps_and_entropies = wrapped
        try:
            return super()._compute_loss(model, inputs)
        finally:
            del self._get_per_token_logps_and_entropies


def _pad_width(x: torch.Tensor, width: int, value: int) -> torch.Tensor:
    if x.shape[1] >= width:
        return x[:, :width]
    return torch.nn.functional.pad(x, (0, width - x.shape[1]), value=value)


def _gather_strings(accelerator: Any, values: list[str]) -> list[str]:
    from accelerate.utils import gather_object

    return list(gather_object(values)) if accelerator.num_processes > 1 else list(values)
