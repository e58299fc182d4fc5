"""``run_demo``: the stages in order under one set of progress bars, then ``summary.json`` and ``report.md``.

The output folder holds ``demo_settings.json`` (the marker that a demo wrote it: a non-empty folder
without it is refused), one folder per stage (``data``, ``base_model``, ``sft_model``, ``remark``,
``rank_grpo``, ``eval``; replaced on every run), ``curves*.png``, ``summary.json`` and ``report.md``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from catalog.errors import InputError
from catalog.io import atomic_write
from remark.demo.evaluation import evaluate_models, paired, validation_results
from remark.demo.report import report_markdown, report_notes
from remark.demo.runs import auto_threads, run_methods, train_diagnostics
from remark.demo.settings import METHODS, DemoSettings
from remark.demo.stages import build_model, prepare_protoqa, prepare_synthetic, warm_up

MARKER = "demo_settings.json"
STAGE_DIRS = ("data", "base_model", "sft_model", "eval", *METHODS)

#: Paired differences on the test split, in report order: key -> (a, b) for ``a - b``.
PAIRS = {
    "remark_vs_rank_grpo": ("remark", "rank_grpo"),
    "remark_vs_sft": ("remark", "sft"),
    "rank_grpo_vs_sft": ("rank_grpo", "sft"),
}


def run_demo(
    s: DemoSettings, out: str | Path, *, console: Any = None, progress_disable: bool = False
) -> dict[str, Any]:
    """Run the whole demo into ``out``; returns the summary (also ``out/summary.json``)."""
    import torch
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    out = Path(out)
    console = console or Console()
    _prepare_out(out)
    with atomic_write(out / MARKER) as tmp:
        tmp.write_text(json.dumps(dataclasses.asdict(s), indent=2) + "\n")
    threads = s.threads or auto_threads()
    torch.set_num_threads(threads)
    _quiet_libraries()
    load_start = os.getloadavg()[0]
    t_start = time.monotonic()
    stages: dict[str, float] = {}
    columns = (
        TextColumn("{task.description:<22}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[info]}"),
    )
    with Progress(*columns, console=console, disable=progress_disable) as bar:
        t = time.monotonic()
        task = bar.add_task("data", total=1, info="")
        if s.data == "synthetic":
            ds, data_dir = prepare_synthetic(out / "data", s)
        else:
            ds, data_dir = prepare_protoqa(s.data_dir, out / "data", s)
        bar.update(task, completed=1, info=f"{ds.requests.height} requests, {len(ds.catalog)} items")
        stages["data"] = time.monotonic() - t

        t = time.monotonic()
        task = bar.add_task("tokenizer + model", total=1, info="")
        base = build_model(ds, out / "base_model", s)
        n_params = _n_params(base)
        bar.update(task, completed=1, info=f"{n_params / 1e6:.2f}M parameters")
        stages["tokenizer + model"] = time.monotonic() - t

        t = time.monotonic()
        task = bar.add_task("SFT warm-up", total=None, info="")
        sft = warm_up(
            ds,
            base,
            out / "sft_model",
            s,
            lambda step, total: bar.update(task, completed=step, total=total),
            console=console,
        )
        bar.update(task, info=f"loss {sft['first_loss']:.2f} -> {sft['final_loss']:.2f}")
        stages["SFT warm-up"] = time.monotonic() - t

        t = time.monotonic()
        tasks = {m: bar.add_task(METHODS[m][0], total=s.steps, info="") for m in METHODS}

        def rl_step(m: str, rec: dict[str, Any]) -> None:
            info = f"reward {rec.get('reward', float('nan')):.2f}"
            if "train/zero_signal_frac" in rec:
                info += f", flat groups {rec['train/zero_signal_frac']:.0%}"
            bar.update(tasks[m], completed=rec["step"], info=info)

        runs = run_methods(s, data_dir, out / "sft_model", out, rl_step, threads=threads)
        for m in METHODS:
            bar.update(tasks[m], completed=s.steps)
        stages["RL (both methods)"] = time.monotonic() - t

        t = time.monotonic()
        models = {"sft": out / "sft_model"}
        for m in METHODS:
            models[m] = out / m / "best"
            if not (models[m] / "config.json").is_file():
                raise RuntimeError(f"{METHODS[m][0]} wrote no best checkpoint under {models[m]}")
        task = bar.add_task("test evaluation + CIs", total=len(models) + 1, info="")
        results = evaluate_models(s, data_dir, models, out / "eval", lambda name: bar.advance(task))
        pairs = {key: paired(out / "eval", a, b, s) for key, (a, b) in PAIRS.items()}
        reach, curves, plots = validation_results(s, out)
        bar.advance(task)
        stages["evaluation + report"] = time.monotonic() - t

    def cells(res: dict[str, Any]) -> dict[str, Any]:
        keep = ("n_requests", "per_responder", "union", "single_mention", "lists", "ci")
        return {k: res[k] for k in keep if k in res}

    def best(m: str, field: str) -> Any:
        found = runs[m]["summary"]["best"]
        return found[field] if found else None

    description, stats_line = _data_description(s, ds)
    summary: dict[str, Any] = {
        "settings": dataclasses.asdict(s),
        "metric": s.metric,
        "data": {"dir": str(data_dir), "description": description, "stats_line": stats_line},
        "model": {"parameters": n_params, "vocab": _vocab(base)},
        "sft": sft,
        "runs": {
            m: {
                "label": METHODS[m][0],
                "reward_scheme": METHODS[m][1],
                "sampling": METHODS[m][2],
                "best_step": best(m, "step"),
                "best_value": best(m, "value"),
                "wall_s": runs[m]["wall_s"],
                "train": train_diagnostics(out / m),
            }
            for m in METHODS
        },
        "test": {
            name: {"greedy": cells(r), "sampled": cells(r["sampled"]) if "sampled" in r else None}
            for name, r in results.items()
        },
        "paired": pairs,
        "steps_to_reach": reach,
        "curves": curves,
        "machine": {
            "cpus": os.cpu_count(),
            "load_start": load_start,
            "load_end": os.getloadavg()[0],
            "python": platform.python_version(),
            "torch": torch.__version__,
            "threads_in_process": threads,
            "threads_per_rl_run": 1 if s.parallel else threads,
        },
        "timing": {"stages": stages, "total_s": time.monotonic() - t_start},
        "files": {"report": "report.md", "plots": plots, "summary": "summary.json"},
    }
    summary["notes"] = report_notes(summary)
    summary = _finite_or_none(summary)
    with atomic_write(out / "summary.json") as tmp:
        tmp.write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
    with atomic_write(out / "report.md") as tmp:
        tmp.write_text(report_markdown(summary))
    return summary


def _quiet_libraries() -> None:
    """No hub progress bars or notices on the console (the demo draws its own bars)."""
    import datasets
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    datasets.disable_progress_bars()
    # transformers' own deprecation notice about a field TRL sets; nothing the user can act on
    warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*", category=FutureWarning)


def _prepare_out(out: Path) -> None:
    """Refuse a non-empty folder the demo did not write; clear the demo's own stage folders."""
    import shutil

    if out.exists() and not out.is_dir():
        raise InputError("--out is a file", path=out, hint="pass a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise InputError(
            "--out is a non-empty folder that no demo wrote",
            path=out,
            hint="pass an empty or new folder (the demo replaces its own earlier outputs only)",
        )
    for name in STAGE_DIRS:
        if (out / name).exists():
            shutil.rmtree(out / name)
    out.mkdir(parents=True, exist_ok=True)


def _n_params(model_dir: Path) -> int:
    from safetensors import safe_open

    total = 0
    for path in model_dir.glob("*.safetensors"):
        with safe_open(str(path), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 (safe_open is not a dict)
                total += int(np.prod(f.get_slice(name).get_shape()))
    return total


def _data_description(s: DemoSettings, ds) -> tuple[str, str]:
    from data_prep.stats import dataset_stats

    st = dataset_stats(ds.requests)
    splits = ", ".join(f"{k} {v['requests']}" for k, v in sorted(st["by_split"].items()))
    line = (
        f"{st['requests']} requests ({splits}), "
        f"{len(ds.catalog)} catalog items, {st['n_responders']['mean']:.2f} responders per request "
        f"(max {st['n_responders']['max']}), {st['union_size']['mean']:.1f} union items per request, "
        f"{st['single_mention_item_share']:.0%} of union items named by one responder"
    )
    if s.data == "synthetic":
        offbeat = ds.meta.get("generator", {}).get("offbeat_prob")
        line += (
            "; each request names a genre and one or two seed movies; a responder names movies of that genre "
            f"(by popularity) or, with probability {offbeat}, an offbeat favourite from anywhere"
        )
        return "the embedded synthetic multi-responder world", line
    return "ProtoQA scraped dev (held-out respondents of the same questions)", line


def _vocab(model_dir: Path) -> int:
    from transformers import AutoTokenizer

    return len(AutoTokenizer.from_pretrained(model_dir))


def _finite_or_none(obj: Any) -> Any:
    """JSON without NaN/inf: non-finite floats become None (a bound that does not exist)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite_or_none(v) for v in obj]
    if isinstance(obj, np.generic):
        return _finite_or_none(obj.item())
    return obj
