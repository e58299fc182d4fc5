"""Validation against held-out respondents during GRPO: greedy *and* sampled lists, one code path.

``HeldoutValidation`` runs at step 0 (``on_train_begin``) and every ``every`` steps on every question of a
held-out dataset (``data_prep.holdout``'s held-out side): one greedy list and ``num_samples`` sampled lists
per question from the model being trained (``eval.generate.transformers_runner``: eval mode, a forked RNG
seeded identically at every validation, so the sampled lists of two runs differ only by their weights),
grounded by ``eval.run.parse_and_ground`` and scored by ``eval.views.score_lists`` (sampled: several lists
per question via ``list_request``, mean over them). It writes the training eval-log contract
(docs/architecture.md) twice: greedy values to ``<output_dir>/eval_log.jsonl`` + ``eval/step_XXXXXX.parquet``
and sampled ones to ``<output_dir>/sampled/...``, so ``eval.steps`` (steps-to-reach, curves) reads either.

Why not ``remark.callbacks.ValidationCallback``: it validates greedy lists only and saves a best
checkpoint; at this scale greedy lists repeat one item (docs/experiments.md, pitfall 1), so the sampled
view is needed beside it, computed at the same moments from the same weights.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import polars as pl
from transformers import TrainerCallback

from catalog.io import atomic_write
from catalog.match import Matcher
from data_prep.dataset import PooledDataset
from eval.generate import GenerationConfig, render_prompts, transformers_runner
from eval.run import parse_and_ground
from eval.views import score_lists, weighted_means

VIEWS = ("per_responder", "union")
METRICS = ("recall", "ndcg")


class HeldoutValidation(TrainerCallback):
    def __init__(
        self,
        heldout: PooledDataset,
        *,
        every: int,
        k: int,
        ks: tuple[int, ...],
        max_new_tokens: int,
        num_samples: int,
        temperature: float,
        seed: int,
        batch_size: int,
        match_mode: str,
        completions_per_step: int,
    ) -> None:
        self.requests = heldout.requests
        self.meta = heldout.meta
        self.matcher = Matcher(heldout.catalog, mode=match_mode)
        self.every, self.k, self.ks, self.num_samples = every, k, ks, num_samples
        self.gen = GenerationConfig(
            k=k,
            max_new_tokens=max_new_tokens,
            batch_size=batch_size,
            num_samples=num_samples,
            temperature=temperature,
            seed=seed,
            engine="transformers",
        )
        self.sample_gen = GenerationConfig(
            k=k,
            max_new_tokens=max_new_tokens,
            batch_size=max(1, batch_size // max(num_samples, 1)),
            num_samples=num_samples,
            temperature=temperature,
            seed=seed,
            engine="transformers",
        )
        self.completions_per_step = completions_per_step
        self.eval_seconds = 0.0
        self._t0 = time.monotonic()
        self._done: set[int] = set()

    def _score(self, ids: list, list_request=None) -> tuple[dict[str, float], pl.DataFrame]:
        scored = score_lists(
            self.requests, ids, list_request=list_request, ks=self.ks, metrics=METRICS, views=VIEWS
        )
        values = {k: v for k, v in weighted_means(scored.per_request, scored.keys).items() if v == v}
        for col in ("list/length", "list/grounded", "list/distinct", "list/eligible"):
            values[col] = float(scored.per_request[col].mean())
        return values, scored.per_request

    def measure(self, model: Any, tokenizer: Any) -> dict[str, tuple[dict[str, float], pl.DataFrame]]:
        texts = render_prompts(tokenizer, self.requests["prompt"].to_list(), self.meta, self.k)
        greedy = [c[0] for c in transformers_runner(model, tokenizer, self.gen)(texts, 1, False)]
        out = {"greedy": self._score(parse_and_ground(greedy, self.matcher)[1])}
        if self.num_samples:
            samples = transformers_runner(model, tokenizer, self.sample_gen)(texts, self.num_samples, True)
            flat = [c for per in samples for c in per]
            rows = [i for i, per in enumerate(samples) for _ in per]
            out["sampled"] = self._score(parse_and_ground(flat, self.matcher)[1], rows)
        return out

    def _validate(self, args: Any, state: Any, model: Any, tokenizer: Any) -> None:
        step = int(state.global_step)
        if step in self._done:
            return
        t = time.monotonic()
        results = self.measure(model, tokenizer)
        self.eval_seconds += time.monotonic() - t
        wall = time.monotonic() - self._t0
        root = Path(args.output_dir)
        for mode, (values, per_request) in results.items():
            d = root if mode == "greedy" else root / mode
            (d / "eval").mkdir(parents=True, exist_ok=True)
            with atomic_write(d / "eval" / f"step_{step:06d}.parquet") as tmp:
                per_request.write_parquet(tmp)
            record = {
                "step": step,
                "samples": step * self.completions_per_step,
                "gpu_hours": 0.0,
                "wall_s": wall,
                "eval_s": self.eval_seconds,
                **values,
            }
            with (d / "eval_log.jsonl").open("a") as fh:
                fh.write(json.dumps(record) + "\n")
            if state.log_history is not None:
                state.log_history.append({"step": step, **{f"{mode}/{k}": v for k, v in values.items()}})
        self._done.add(step)

    def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
        self._t0 = time.monotonic()
        if state.is_world_process_zero:
            self._validate(args, state, model, processing_class)

    def on_step_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        last = state.global_step >= state.max_steps
        if state.is_world_process_zero and (state.global_step % self.every == 0 or last):
            self._validate(args, state, model, processing_class)


class Progress(TrainerCallback):
    """Writes ``{"step", "max_steps", "wall_s"}`` after every step (the launcher's progress bar reads it)."""

    def __init__(self, path: Path) -> None:
        self.path, self._t0 = path, time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        with atomic_write(self.path) as tmp:
            tmp.write_text(
                json.dumps(
                    {
                        "step": state.global_step,
                        "max_steps": state.max_steps,
                        "wall_s": time.monotonic() - self._t0,
                    }
                )
            )
