"""Training callbacks: validation with best-checkpoint selection, and a divergence guard.

``ValidationCallback`` (every ``validation_steps`` and at step 0): greedy lists for the requests of the
validation split from the model being trained (``eval.generate.transformers_runner``; with
``engine="vllm"`` from the trainer's colocated vLLM engine, ``eval.generate.vllm_runner``, synced to the
current weights first, so no second engine is started and no weights are copied when nothing changed
since the last sync), grounded with the
run's grounding settings (the reward's: ``run_training`` passes the same ``GroundingSettings``) and
scored by the same functions as ``remark eval`` (``eval.views.score_lists``), so that training and
evaluation never compute "the same" metric in two places. Each validation appends one line to
``<output_dir>/eval_log.jsonl`` and writes per-request values to ``<output_dir>/eval/step_XXXXXX.parquet``
(docs/architecture.md, "Training eval log"); with ``num_samples`` sampled lists are scored too and
written the same way under ``<output_dir>/sampled/`` (so every log tool reads them as a run), and keeps the best model by ``validation_metric`` in
``<output_dir>/best`` (``best.json`` says which step). ReMaRk can peak early (docs/experiments.md#how-runs-are-compared), so the best
checkpoint, not the last, is what a run hands to evaluation. On resume, log lines past the resumed step
are dropped (they belong to the abandoned continuation) and the best so far is read back.

Experiment tracking: once attached to the trainer (``attach``, done by ``run_training``), each
validation's values go to the trainer's loggers (``report_to``: TensorBoard, wandb, ...) through its
callback handler's ``on_log``, beside TRL's and the trainer's own logs (rank rewards, zero-signal share,
parsed / grounded / hits per list), with the 95% bootstrap CI of ``validation_metric`` over requests and,
given a baseline run's folder, the steps-to-reach of the baseline's last validated value
(``eval.steps.steps_to_reach``, recomputed at every validation).

``DivergenceGuard`` stops training when the logged KL to the reference (``kl``, TRL's k3 estimate) or
the mean |log pi - log pi_ref| (``train/abs_log_ratio_ref``) passes its threshold, writing
``stopped.json``; the best checkpoint stays in place.

Validation runs on the main process only (DDP: the others wait at the next collective). Under
DeepSpeed ZeRO-3 the weights are sharded, so validation during training is refused: evaluate saved
checkpoints with ``remark eval run`` instead.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import polars as pl
from transformers import TrainerCallback

from catalog.io.errors import InputError
from catalog.io.outputs import atomic_dir, atomic_write
from catalog.match import GroundingSettings, Matcher
from data_prep.dataset import PooledDataset
from eval.generate import GenerationConfig, render_prompts, transformers_runner, vllm_runner
from eval.metric_registry import VALIDATION_METRICS, validation_ks
from eval.run import parse_and_ground
from eval.views import VIEWS, score_lists, weighted_means


class ValidationCallback(TrainerCallback):
    """Greedy validation every N steps; eval log, per-request values and the best checkpoint."""

    def __init__(
        self,
        dataset: PooledDataset,
        *,
        split: str,
        k: int,
        every: int,
        metric: str,
        max_new_tokens: int,
        grounding: GroundingSettings | None = None,
        max_requests: int | None = None,
        batch_size: int = 32,
        completions_per_step: int = 1,
        num_samples: int = 0,
        temperature: float = 1.0,
        seed: int = 0,
        baseline_run: str | Path | None = None,
        engine: str = "transformers",
    ) -> None:
        if engine not in ("transformers", "vllm"):
            raise ValueError(f"engine must be 'transformers' or 'vllm', got {engine!r}")
        self.engine = engine
        self._vllm_engine: Any = None  # the trainer's colocated_engine (attach)
        if baseline_run is not None:  # the baseline must log the metric: fail before training, listing names
            from eval.steps import resolve_metric

            resolve_metric([baseline_run], metric)
        self.baseline_run = None if baseline_run is None else Path(baseline_run)
        self._report: Any = None  # the trainer's callback_handler.on_log (attach)
        requests = dataset.requests.filter(pl.col("split") == split)
        if max_requests is not None:
            requests = requests.head(max_requests)
        if requests.height == 0:
            raise InputError(
                f"validation split {split!r} has no request",
                field="valid_split",
                hint="set validation_steps: 0",
            )
        self.requests = requests
        self.meta = dataset.meta
        # the run's grounding (run_training passes the reward's settings); None = the dataset's own
        self.matcher = Matcher(dataset.catalog, grounding or dataset.grounding)
        self.k = k
        self.every = every
        self.metric = metric
        self.gen = GenerationConfig(
            k=k,
            max_new_tokens=max_new_tokens,
            batch_size=batch_size,
            engine=engine,
            num_samples=num_samples,
            temperature=temperature,
            seed=seed,
        )
        self.completions_per_step = completions_per_step
        self.best: dict[str, Any] | None = None
        #: writes ``best/``'s model card into its temporary folder: (folder, best, planned steps);
        #: ``run_training`` sets it (``remark.run.cards.write_folder_card``)
        self.card_writer: Any = None
        self._t0 = time.monotonic()
        self._wall_before = 0.0
        self._done: set[int] = set()

    # -- files ---------------------------------------------------------------------------------------
    @staticmethod
    def _log_path(args: Any) -> Path:
        return Path(args.output_dir) / "eval_log.jsonl"

    def _restore(self, args: Any, step: int) -> None:
        for log in (self._log_path(args), Path(args.output_dir) / "sampled" / "eval_log.jsonl"):
            self._truncate(log, step)
        best = Path(args.output_dir) / "best" / "best.json"
        if best.is_file():
            self.best = read_best(best)

    def _truncate(self, log: Path, step: int) -> None:
        """Drop log lines past ``step`` (an abandoned continuation); remember what was validated."""
        from catalog.io.files import iter_jsonl

        if log.is_file():
            lines = iter_jsonl(log, schema=LOG_LINE_SCHEMA, hint="the run's eval log is damaged")
            kept = [x for _, x in lines if x["step"] <= step]
            with atomic_write(log) as tmp:
                tmp.write_text("".join(json.dumps(x) + "\n" for x in kept))
            self._wall_before = max([self._wall_before, *(x["wall_s"] for x in kept)])
            self._done |= {x["step"] for x in kept}

    def attach(self, trainer: Any) -> None:
        """Send each validation's values to the trainer's loggers (``report_to``: TensorBoard, wandb, ...)
        through its callback handler's ``on_log``, as its own logs go (``run_training`` calls this)."""
        self._report = trainer.callback_handler.on_log
        if self.engine == "vllm":
            self._vllm_engine = trainer.colocated_engine

    def tracked(
        self, out: Path, per_request: dict[str, pl.DataFrame], values: dict[str, float]
    ) -> dict[str, float]:
        """What the loggers get beside the values: the 95% CI of ``metric`` over requests
        (``validation/<metric>/ci_low|ci_high``, ``eval.bootstrap``) and, with a baseline run, the
        steps-to-reach of its last validation's value (``reach/<metric>/...``, ``eval.steps``)."""
        from eval.bootstrap import intervals

        lists = "sampled" if self.metric.startswith("sampled/") else "eval"
        rest = self.metric.removeprefix("sampled/").removeprefix("eval/")
        key = f"eval/{rest}"
        table = per_request.get(lists)
        extra: dict[str, float] = {}
        if table is not None and key in table.columns and self.metric in values:
            iv = intervals(table, [key])[key]
            extra |= {
                f"validation/{self.metric}/ci_low": iv["ci_low"],
                f"validation/{self.metric}/ci_high": iv["ci_high"],
            }
        if self.baseline_run is not None:
            from eval.steps import resolve_metric, steps_to_reach

            try:
                (run, k), (base, _) = resolve_metric([out, self.baseline_run], self.metric)
                r = steps_to_reach(run, base, key=k)
            except InputError as err:  # e.g. validated on other requests: say so once, train on
                print(f"note: steps-to-reach against {self.baseline_run} is off: {err}")
                self.baseline_run = None
                return {k: v for k, v in extra.items() if v == v}
            name = f"reach/{self.metric}"
            extra |= {f"{name}/reached": float(r["reached"]), f"{name}/baseline_value": r["baseline_value"]}
            extra[f"{name}/baseline_step"] = float(r["baseline_step"])
            if r["reached"]:
                extra |= {f"{name}/fraction": r["fraction"], f"{name}/step": r["step"]}
                extra |= {f"{name}/ci_low": r["ci_low"], f"{name}/ci_high": r["ci_high"]}
        return {k: v for k, v in extra.items() if v == v and abs(v) != float("inf")}

    # -- hooks ---------------------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
        zero3 = os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE") == "3" or "zero3" in str(
            args.deepspeed or ""
        )
        if zero3:
            raise InputError(
                "validation during training is not supported under DeepSpeed (sharded weights)",
                field="validation_steps",
                hint="set validation_steps: 0 and run `remark eval run` on saved checkpoints",
            )
        self._t0 = time.monotonic()
        if state.is_world_process_zero:
            self._restore(args, state.global_step)
            if state.global_step not in self._done:
                self._validate(args, state, model, processing_class, control)

    def on_step_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        if self.every and state.global_step % self.every == 0 and state.is_world_process_zero:
            self._validate(args, state, model, processing_class, control)

    def measure(
        self, model: Any, tokenizer: Any, *, sampled: bool = False
    ) -> tuple[dict[str, float], pl.DataFrame]:
        """Lists for the validation requests -> (mean of each metric, per-request values).

        Greedy by default; ``sampled`` scores ``num_samples`` lists per request at the temperature (a
        request's value is the mean over its lists; ``list/distinct`` counts distinct items per list).
        """
        n = self.gen.num_samples if sampled else 1
        texts = render_prompts(tokenizer, self.requests["prompt"].to_list(), self.meta, self.k)
        if self.engine == "vllm":
            llm = self._vllm_engine() if self._vllm_engine is not None else None
            if llm is None:
                raise RuntimeError(
                    "vLLM validation needs the trainer's colocated engine (attach the trainer)"
                )
            runs = vllm_runner(llm, tokenizer, self.gen)(texts, n, sampled)
        else:
            was_training = model.training
            model.eval()
            try:
                runs = transformers_runner(model, tokenizer, self.gen)(texts, n, sampled)
            finally:
                model.train(was_training)
        _, ids = parse_and_ground([c for per in runs for c in per], self.matcher)
        ks = validation_ks(self.k)
        scored = score_lists(
            self.requests,
            ids,
            list_request=[i for i, per in enumerate(runs) for _ in per],
            ks=ks,
            metrics=VALIDATION_METRICS,
            views=VIEWS,
        )
        values = {k: v for k, v in weighted_means(scored.per_request, scored.keys).items() if v == v}
        values["list/distinct"] = float(scored.per_request["list/distinct"].mean())
        return values, scored.per_request

    def _record(self, root: Path, record: dict[str, Any], per_request: pl.DataFrame) -> None:
        root.mkdir(parents=True, exist_ok=True)
        with atomic_write(root / "eval" / f"step_{record['step']:06d}.parquet") as tmp:
            per_request.write_parquet(tmp)
        with (root / "eval_log.jsonl").open("a") as fh:
            fh.write(json.dumps(record) + "\n")

    def _validate(
        self, args: Any, state: Any, model: Any, tokenizer: Any, control: Any = None
    ) -> dict[str, float]:
        step = int(state.global_step)
        values, per_request = self.measure(model, tokenizer)
        wall = self._wall_before + time.monotonic() - self._t0
        n_gpu = max(1, int(getattr(args, "world_size", 1)))
        stamp = {
            "step": step,
            "samples": step * self.completions_per_step,
            "gpu_hours": wall * n_gpu / 3600.0,
            "wall_s": wall,
        }
        out = Path(args.output_dir)
        self._record(out, {**stamp, **values}, per_request)
        tables = {"eval": per_request}
        if self.gen.num_samples:
            sampled, per_request_s = self.measure(model, tokenizer, sampled=True)
            self._record(out / "sampled", {**stamp, **sampled}, per_request_s)
            values.update({f"sampled/{k.removeprefix('eval/')}": v for k, v in sampled.items()})
            tables["sampled"] = per_request_s
        self._done.add(step)
        value = values.get(self.metric)
        if value is not None and (self.best is None or value > self.best["value"]):
            self.best = {"step": step, "metric": self.metric, "value": value}
            with atomic_dir(
                out / "best", "train-best", force=True, field="output_dir"
            ) as tmp:  # the run owns output_dir
                model.save_pretrained(tmp)
                tokenizer.save_pretrained(tmp)
                (tmp / "best.json").write_text(json.dumps(self.best, indent=2) + "\n")
                if self.card_writer is not None:  # inside the swap: best/ never exists without its card
                    self.card_writer(tmp, self.best, int(state.max_steps))
        logs = {**values, **self.tracked(out, tables, values)}
        if state.log_history is not None:
            state.log_history.append({"step": step, **logs})
        if self._report is not None and control is not None:
            should_log = (
                control.should_log
            )  # the handler clears it: the trainer's own log of this step must stay
            self._report(args, state, control, logs=logs)
            control.should_log = should_log
        return values


#: what a resumed run reads back from its own files (``catalog.io.files.check_fields``)
BEST_SCHEMA = {"step": int, "metric": str, "value": float}
STOPPED_SCHEMA = {"step": int, "metric": str, "value": float}
LOG_LINE_SCHEMA = {"step": int, "wall_s": float}


def read_best(path: str | Path) -> dict[str, Any]:
    """``best/best.json`` (``BEST_SCHEMA``); a damaged one is an ``InputError`` naming the file and field."""
    from catalog.io.files import read_json

    return read_json(
        path, schema=BEST_SCHEMA, what="best.json", hint="best/ is damaged; remove it to start the best anew"
    )


def read_stopped(path: str | Path) -> dict[str, Any]:
    """``stopped.json`` (``STOPPED_SCHEMA``), as the divergence guard writes it."""
    from catalog.io.files import read_json

    return read_json(
        path, schema=STOPPED_SCHEMA, optional={"reason": str, "limit": float}, what="stopped.json"
    )


class DivergenceGuard(TrainerCallback):
    """Stop when the KL (or mean |log-ratio|) to the reference passes a threshold; say why in stopped.json."""

    def __init__(self, *, max_kl: float | None = None, max_abs_log_ratio: float | None = None) -> None:
        self.limits = {"kl": max_kl, "train/abs_log_ratio_ref": max_abs_log_ratio}
        self.tripped: dict[str, Any] | None = None

    def on_log(self, args, state, control, logs=None, **kwargs):
        for key, limit in self.limits.items():
            value = (logs or {}).get(key)
            if limit is not None and value is not None and value > limit:
                self.tripped = {"step": state.global_step, "metric": key, "value": value, "limit": limit}
                control.should_training_stop = True
                if state.is_world_process_zero:
                    path = Path(args.output_dir) / "stopped.json"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    with atomic_write(path) as tmp:
                        tmp.write_text(json.dumps({"reason": "divergence", **self.tripped}, indent=2) + "\n")
                break
        return control
