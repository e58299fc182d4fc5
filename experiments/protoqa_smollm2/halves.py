"""Validation on the held-out halves for the SmolLM2 experiment: the library's ``ValidationCallback``, with
its lists generated once per step for both halves.

``Half`` is a ``remark.run.callbacks.ValidationCallback`` (so ``run_training`` attaches it to the trainer:
with ``engine="vllm"`` it generates with the trainer's colocated vLLM engine, synced to the current
weights) that

- writes under ``<output_dir>/<subdir>/`` instead of the run root when ``subdir`` is set (the test half:
  ``<run>/test/``, as protoqa_cpu's ``hooks.Side`` does; the validation half logs at the run root);
- is timed (``seconds``);
- takes its generated lists from a ``Lists`` cache shared with the other half: both halves hold the same
  questions in the same order, with the same weights and sampling seed, so protoqa_cpu generated the very
  same lists twice; here the second half scores the first half's lists (the cache key is the step, greedy
  or sampled, and a hash of the rendered prompts in order, so a different question order regenerates).
  Step 0 (the warm-up's weights, the same in every run) is kept on disk too (``Lists(folder=...)``), so
  later runs score the first run's step-0 lists instead of generating them again.

Generation and scoring are the library's functions (``eval.generate.render_prompts``,
``transformers_runner`` / ``vllm_runner``, ``eval.run.parse_and_ground``, ``eval.views.score_lists``),
called as ``ValidationCallback.measure`` calls them; only the split between generating and scoring is new.

``LossLog`` keeps the SFT trainer's losses for the warm-up's ``done.json``.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from hooks import _Under  # protoqa_cpu's: args with another output_dir
from transformers import TrainerCallback

from catalog.io.outputs import atomic_write
from remark.run.callbacks import ValidationCallback


class Lists:
    """Generated lists by (step, mode, prompts hash): in memory for the current step, on disk for step 0."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder, self.memory = folder, {}
        self.hits = self.misses = 0

    def _file(self, step: int, mode: str, digest: str) -> Path | None:
        if self.folder is None or step != 0:
            return None
        return self.folder / f"step0_{mode}_{digest}.json"

    def get(self, step: int, mode: str, digest: str) -> list[list[str]] | None:
        runs = self.memory.get((step, mode, digest))
        path = self._file(step, mode, digest)
        if runs is None and path is not None and path.is_file():
            runs = json.loads(path.read_text())
        if runs is None:
            self.misses += 1
        else:
            self.hits += 1
        return runs

    def put(self, step: int, mode: str, digest: str, runs: list[list[str]]) -> None:
        self.memory = {k: v for k, v in self.memory.items() if k[0] == step}  # only this step's lists
        self.memory[(step, mode, digest)] = runs
        path = self._file(step, mode, digest)
        if path is not None and not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_write(path) as tmp:
                tmp.write_text(json.dumps(runs))


class Half(ValidationCallback):
    """A ``ValidationCallback`` writing under ``<output_dir>/<subdir>`` (or the root), timed, with its lists
    shared through ``lists`` (see the module docstring)."""

    def __init__(self, dataset: Any, *, subdir: str | None = None, lists: Lists | None = None, **kw: Any):
        super().__init__(dataset, **kw)
        self.subdir, self.lists, self.seconds, self._step = subdir, lists, 0.0, -1

    def _args(self, args: Any) -> Any:
        return args if self.subdir is None else _Under(args, Path(args.output_dir) / self.subdir)

    def on_train_begin(self, args, state, control, **kwargs):
        t = time.monotonic()
        super().on_train_begin(self._args(args), state, control, **kwargs)
        self.seconds += time.monotonic() - t

    def on_step_end(self, args, state, control, **kwargs):
        t = time.monotonic()
        super().on_step_end(self._args(args), state, control, **kwargs)
        self.seconds += time.monotonic() - t

    def _validate(self, args, state, model, tokenizer, control=None):
        self._step = int(state.global_step)
        return super()._validate(args, state, model, tokenizer, control)

    def generate(self, model: Any, tokenizer: Any, texts: list[str], sampled: bool) -> list[list[str]]:
        """The lists, as ``ValidationCallback.measure`` generates them."""
        from eval.generate import transformers_runner, vllm_runner

        n = self.gen.num_samples if sampled else 1
        if self.engine == "vllm":
            llm = self._vllm_engine() if self._vllm_engine is not None else None
            if llm is None:
                raise RuntimeError(
                    "vLLM validation needs the trainer's colocated engine (attach the trainer)"
                )
            return vllm_runner(llm, tokenizer, self.gen)(texts, n, sampled)
        was_training = model.training
        model.eval()
        try:
            return transformers_runner(model, tokenizer, self.gen)(texts, n, sampled)
        finally:
            model.train(was_training)

    def measure(self, model: Any, tokenizer: Any, *, sampled: bool = False):
        """``ValidationCallback.measure`` with the generated lists taken from / given to ``lists``."""
        from eval.generate import render_prompts
        from eval.metric_registry import VALIDATION_METRICS, validation_ks
        from eval.run import parse_and_ground
        from eval.views import VIEWS, score_lists, weighted_means

        texts = render_prompts(tokenizer, self.requests["prompt"].to_list(), self.meta, self.k)
        mode = "sampled" if sampled else "greedy"
        gen = {"gen": repr(self.gen), "engine": self.engine, "texts": texts}
        digest = hashlib.sha256(json.dumps(gen).encode()).hexdigest()[:16]
        runs = None if self.lists is None else self.lists.get(self._step, mode, digest)
        if runs is None:
            runs = self.generate(model, tokenizer, texts, sampled)
            if self.lists is not None:
                self.lists.put(self._step, mode, digest, runs)
        _, ids = parse_and_ground([c for per in runs for c in per], self.matcher)
        scored = score_lists(
            self.requests,
            ids,
            list_request=[i for i, per in enumerate(runs) for _ in per],
            ks=validation_ks(self.k),
            metrics=VALIDATION_METRICS,
            views=VIEWS,
        )
        values = {k: v for k, v in weighted_means(scored.per_request, scored.keys).items() if v == v}
        values["list/distinct"] = float(scored.per_request["list/distinct"].mean())
        return values, scored.per_request


class LossLog(TrainerCallback):
    """The trainer's logged losses (``losses``) and its step count (``steps``)."""

    def __init__(self) -> None:
        self.losses: list[float] = []
        self.steps = 0

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.losses.append(float(logs["loss"]))
            print(
                f"[{time.strftime('%H:%M:%S')}] sft step {state.global_step}/{state.max_steps}: "
                f"loss {self.losses[-1]:.4f}",
                flush=True,
            )

    def on_train_end(self, args, state, control, **kwargs):
        self.steps = state.global_step
