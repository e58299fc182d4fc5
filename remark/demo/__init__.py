"""``remark demo``: ReMaRk vs Rank-GRPO end to end on a laptop, in minutes, with nothing to download.

The pipeline (the whole output folder written atomically, ``catalog.shared.outputs.atomic_dir``; every stage in its
own process with fixed thread counts, ``remark.demo.worker_env``):

1. data: ProtoQA's scraped dev file, shipped in the package (``data_prep.shipped``; ``--data-dir`` for
   another copy): a seeded ``n_questions`` questions with at least 5 answer clusters, whose respondents
   are split into train / valid / test *respondents* of the same questions; or (``--data synthetic``)
   the embedded synthetic multi-responder world (``data_prep.synthetic``: 600 requests, 96 items, about
   5.35 responders per request and 92-93% of union items named by one responder, as published for
   Reddit-v2); pooled into ``data/`` (``remark prep``'s layout);
2. a byte-level BPE tokenizer and a ~1M-parameter Qwen2 model built locally (``remark.run.tiny_model``), trained
   on the catalog and the prompts, so nothing comes from the hub;
3. one SFT warm-up (``remark.run.sft.run_sft``: TRL ``SFTTrainer`` on ``remark.run.sft.sft_examples``; noisy
   targets for ProtoQA, union ones for the synthetic world) that teaches the list format and the catalog,
   in a process of its own with ``warmup_threads`` threads (it runs alone);
4. for each RL seed (default 0, 1, 2), ReMaRk (``reward_scheme: union``, ``sampling: uniform``) and
   Rank-GRPO (``reward_scheme: responder``, ``sampling: per_responder``) from that warm-up, for the same
   number of steps and prompts per step (everything else equal too), each ``remark.run.training.run_training``,
   validated every few steps on greedy *and* sampled lists (``remark.run.callbacks.ValidationCallback``:
   ``eval_log.jsonl`` and ``sampled/eval_log.jsonl``, per-request values, ``best/``); two processes at a
   time by default (``jobs``), which changes the time, never a number;
5. the SFT start and every run's best checkpoint evaluated on the test split (``eval.run``): greedy
   lists *and* sampled lists, with bootstrap CIs over requests; paired differences per seed
   (``eval.bootstrap.compare``) and across seeds (``eval.seeds``: the seeds' spread and
   t-interval, which cover training variance, beside the request bootstrap of the seed average, which
   covers request variance); steps-to-reach per seed and on the seed-averaged validation curves;
6. ``report.md`` (led by the headline sentence: ReMaRk - Rank-GRPO on the test split with its interval
   over test requests and whether it excludes 0; then the seed spread, steps-to-reach, tables),
   ``curves.png`` (sampled validation), ``curves_greedy.png`` and ``summary.json`` (its ``headline``
   block holds the same numbers: ``remark.demo.report.headline_block``).

Departures from the paper's setting, all for CPU scale, and said in the report:

- a ~1M-parameter model instead of a 0.5-35B LLM; K = 10 (ProtoQA) or 5 (synthetic) instead of 20;
  G = 8 with 4 prompts per step instead of 48; a 64-token completion cap; lr 2e-4 constant instead of
  1e-6; no KL (beta 0); 150 steps (synthetic 60) instead of 2000; on ProtoQA one RL seed per method
  (the budget; the report says that its interval covers questions only), synthetic three.
- Validation and best-checkpoint selection on per-responder recall@K of *sampled* lists (4 per request,
  T = 1, the run's seed): a tiny model's greedy lists repeat items, so greedy recall mostly measures its
  top items and RL first lowers it by sharpening them. Greedy values are logged, plotted and tested
  beside them. Per-responder recall is Rank-GRPO's headline metric, so the selection does not favour
  ReMaRk's own (union) reward.
- ProtoQA items are cluster names (year-less); held-out respondents of the *same* questions are the
  evaluation targets (the questions themselves are seen in training).
- Several RL seeds from *one* warm-up: the seed interval covers training-run variance given that
  warm-up, not a new warm-up's (``--seed`` changes the world and the warm-up too).

Modules: ``settings`` (``DemoSettings``, ``default_settings``), ``worker_env`` (fixed thread pools),
``jobs`` and ``worker`` (stage processes), ``stages`` (data, tokenizer + model, SFT warm-up), ``runs``
(the RL runs), ``evaluation`` (test CIs, paired differences, steps-to-reach, curves; the across-seed
statistics are ``eval.seeds``, the reference levels ``eval.baselines``), ``plots``, ``report``
(``report.md`` from the summary), ``pipeline`` (``run_demo``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from catalog._lazy import lazy_exports

#: public name -> the module that defines it (imported on first use, PEP 562: ``remark demo --help``
#: reads ``DATA_CHOICES`` without loading the pipeline's torch and transformers)
_SOURCES: dict[str, str] = {
    "run_demo": "remark.demo.pipeline",
    "report_markdown": "remark.demo.report",
    "rl_fields": "remark.demo.runs",
    "DATA_CHOICES": "remark.demo.settings",
    "METHODS": "remark.demo.settings",
    "DemoSettings": "remark.demo.settings",
    "default_settings": "remark.demo.settings",
    "settings_from_dict": "remark.demo.settings",
    "find_protoqa": "remark.demo.stages",
    "prepare_protoqa": "remark.demo.stages",
    "prepare_synthetic": "remark.demo.stages",
}

if TYPE_CHECKING:
    from remark.demo.pipeline import run_demo
    from remark.demo.report import report_markdown
    from remark.demo.runs import rl_fields
    from remark.demo.settings import DATA_CHOICES, METHODS, DemoSettings, default_settings, settings_from_dict
    from remark.demo.stages import find_protoqa, prepare_protoqa, prepare_synthetic


__getattr__, __dir__ = lazy_exports("remark.demo", _SOURCES, globals())


__all__ = [
    "DATA_CHOICES",
    "METHODS",
    "DemoSettings",
    "default_settings",
    "find_protoqa",
    "prepare_protoqa",
    "prepare_synthetic",
    "report_markdown",
    "rl_fields",
    "run_demo",
    "settings_from_dict",
]
