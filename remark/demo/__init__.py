"""``remark demo``: ReMaRk vs Rank-GRPO end to end on a laptop, in minutes, with nothing to download.

The pipeline (the whole output folder written atomically, ``catalog.io.outputs.atomic_dir``; every stage in its
own process with fixed thread counts, ``remark.demo.worker_env``):

1. data: ProtoQA's dev files, shipped in the package (``data_prep.shipped``; ``--data-dir`` for another
   copy): the scraped questions with at least 5 answer clusters split by *question* into train / valid /
   test, near-duplicate prompts kept on one side (``data_prep.request_split``), and the 52 crowdsourced
   questions as a second, out-of-distribution test set (``data_crowd/``); item popularity counts training
   mentions only. Or (``--data synthetic``) the embedded synthetic multi-responder world
   (``data_prep.synthetic``, split by request). Pooled in ``remark prep``'s layout;
2. a byte-level BPE tokenizer and a ~1M-parameter Qwen2 model built locally (``remark.run.tiny_model``), the
   tokenizer trained on the training split only, so nothing comes from the hub or from a test question;
3. one SFT warm-up (``remark.run.sft.run_sft``: TRL ``SFTTrainer`` on the training questions' answer lists)
   in a process of its own with ``warmup_threads`` threads (it runs alone);
4. the learning-rate grid (``lr_grid``, default 1e-4, 3e-4, 1e-3) on the first RL seed: ReMaRk
   (``reward_scheme: union``, ``sampling: uniform``) and Rank-GRPO (``reward_scheme: responder``,
   ``sampling: per_responder``) at each rate from that warm-up, everything else equal, each
   ``remark.run.training.run_training``, validated every few steps on greedy *and* sampled lists of the
   validation questions (``remark.run.callbacks.ValidationCallback``; ``best/`` by the primary metric);
   each method's rate chosen by its best validation value alone and written to ``tuning.json`` before any
   test question is read (``remark.demo.runs.choose_rates``); every further RL seed (``--seeds``) runs
   both methods at their chosen rates; two processes at a time by default (``jobs``: the time, never a
   number);
5. the only read of the test questions: the SFT start and every chosen run's best checkpoint evaluated on
   the held-out scraped questions and on the crowdsourced ones (``eval.run``): greedy *and* sampled
   lists, bootstrap CIs over requests, paired differences per seed and across seeds (``eval.seeds``), the
   reference levels on the same requests (chance, popularity, the nearest training request's answers:
   ``eval.baselines``) and the split overlap (``eval.leakage``: zero test questions among the training
   ones); steps-to-reach against the other method's final and best validation values;
6. ``report.md`` (led by the headline sentence: ReMaRk - Rank-GRPO on the held-out test questions with its
   interval and :func:`remark.demo.report.resolution`'s verdict; then the protocol, the scale, steps-to-reach,
   tables), ``curves.png``, ``curves_greedy.png``, ``tuning.json`` and ``summary.json`` (its ``headline``
   block holds the same numbers: ``remark.demo.report.headline_block``).

Departures from the paper's setting, all for CPU scale, and said in the report:

- a ~1M-parameter model trained from scratch on a few hundred questions instead of a 0.5-35B LLM: on
  questions it never saw it can only carry over word-level associations, so the levels are low and the
  nearest-request baseline is a strong reference; K = 10 (ProtoQA) or 5 (synthetic) instead of 20;
  G = 8 with 4 prompts per step instead of 48; a 64-token completion cap; no KL (beta 0); 150 steps
  (synthetic 60) instead of 2000; one RL seed by default (the report says that its interval covers
  questions only; ``--seeds 0 1 2`` adds the seed interval).
- Validation and best-checkpoint selection on per-responder recall@K of *sampled* lists (4 per request,
  T = 1, the run's seed): a tiny model's greedy lists repeat items. Greedy values are logged, plotted and
  tested beside them, each against the SFT start. Per-responder recall is Rank-GRPO's headline metric, so
  the selection does not favour ReMaRk's own (union) reward.
- ProtoQA items are cluster names (year-less).
- Several RL seeds from *one* warm-up: the seed interval covers training-run variance given that
  warm-up, not a new warm-up's (``--seed`` changes the split and the warm-up too).

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
_LAZY_EXPORTS: dict[str, str] = {
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


__getattr__, __dir__ = lazy_exports("remark.demo", _LAZY_EXPORTS, globals())


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
