"""``remark eval``: score, run, compare, baselines, steps, curves, and ProtoQA helpers (a thin layer over
``eval``).

Sub-commands:

- ``score``: a predictions JSONL against a prepared dataset -> metrics with bootstrap CIs;
- ``run``: generate lists with a model (greedy, optional samples), score them, write outputs;
- ``compare A B``: paired differences A - B with CIs on the same requests (``--lists greedy|sampled``
  picks which of an eval run's lists, and the output says which it compared); ``compare A1 A2 A3 --vs
  B1 B2 B3``: several runs (seeds) per side, run i of A paired with run i of B (or every A with one B):
  each pair's difference, their spread over seeds beside the request bootstrap of the seed average;
- ``baselines``: chance, popularity, genre-popularity, nearest-request, retrieval and seen-request levels on a split,
  with CIs (``eval.baselines``), and the split's overlap with the train split (``eval.leakage``);
- ``steps``: steps-to-reach from two training runs' eval logs (``--metric`` as the eval log, the config's
  ``validation_metric`` or the demo report write it: ``eval/recall@5/per_responder``,
  ``sampled/recall@5/per_responder`` for the sampled validation lists under ``<run>/sampled``);
- ``curves``: validation curves with CI bands (PNG);
- ``convert-protoqa``: ProtoQA prediction files -> our predictions JSONL;
- ``protoqa-evaluator``: the official ProtoQA "Max Answers @ k" (exact match), for cross-checks.

``score``, ``run`` and ``compare`` ground with the dataset's settings (``meta.json["grounding"]``) unless a
grounding flag is given (``--match-mode``, ``--year-tolerance``, ``--match-threshold``,
``--match-scorer``); a difference from the dataset's is printed on stderr and recorded in the result's
``settings.grounding``. ``score --split`` is one split or ``all``; predictions outside the scored split
are an error unless ``--on-other-split ignore`` (``eval.score``).

Modules: ``parser`` (the flags of every subcommand), ``flags`` (shared flags, constants, printing),
``score`` (``score``, ``run``), ``compare``, ``baselines``, ``steps`` (``steps``, ``curves``), ``protoqa``.
"""

from __future__ import annotations

from remark.cli.eval.baselines import run_baselines
from remark.cli.eval.compare import run_compare
from remark.cli.eval.flags import (
    DEFAULT_KS,
    DEFAULT_VIEWS,
    FILTER_NAMES,
    LISTS,
    MAX_K,
    METRIC_NAMES,
    VIEW_NAMES,
    cutoff,
    filter_names,
)
from remark.cli.eval.parser import add_parser
from remark.cli.eval.protoqa import run_convert, run_protoqa_evaluator
from remark.cli.eval.score import run_run, run_score
from remark.cli.eval.steps import run_curves, run_steps

__all__ = [
    "DEFAULT_KS",
    "DEFAULT_VIEWS",
    "FILTER_NAMES",
    "LISTS",
    "MAX_K",
    "METRIC_NAMES",
    "VIEW_NAMES",
    "add_parser",
    "cutoff",
    "filter_names",
    "run_baselines",
    "run_compare",
    "run_convert",
    "run_curves",
    "run_protoqa_evaluator",
    "run_run",
    "run_score",
    "run_steps",
]
