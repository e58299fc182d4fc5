"""``remark demo``: ReMaRk vs Rank-GRPO end to end on a laptop, in minutes, with nothing to download.

The pipeline (every stage written under ``--out``; files atomically):

1. data: the embedded synthetic multi-responder world (``data_prep.synthetic``: 600 requests, 48 items,
   Reddit-like responder counts, most union items named by one responder), or ProtoQA's scraped dev file
   (``--data protoqa``: a seeded 128 questions whose respondents are split into train / valid / test
   *respondents* of the same questions, as docs/experiments.md does), pooled into ``data/``
   (``remark prep``'s layout);
2. a byte-level BPE tokenizer and a ~1M-parameter Qwen2 model built locally (``remark.tiny``), trained
   on the catalog and the prompts, so nothing comes from the hub;
3. an SFT warm-up (``remark.sft.run_sft``: TRL ``SFTTrainer`` on ``remark.sft.sft_examples``; union
   targets for the synthetic world, noisy ones for ProtoQA) that teaches the list format and the catalog;
4. ReMaRk (``reward_scheme: union``, ``sampling: uniform``) and Rank-GRPO (``reward_scheme: responder``,
   ``sampling: per_responder``) from the same warm-up, for the same number of steps and the same number
   of prompts per step (everything else equal too), each ``remark.train.run_training``, validated every
   few steps on greedy *and* sampled lists (``remark.callbacks.ValidationCallback``: ``eval_log.jsonl``
   and ``sampled/eval_log.jsonl``, per-request values, ``best/``). The two runs go side by side as two
   processes with one torch thread each (``--sequential``: one after the other);
5. the SFT start and each method's best checkpoint evaluated on the test split (``eval.run``): greedy
   lists *and* sampled lists, with bootstrap CIs over requests; paired differences
   (``eval.bootstrap.compare``); steps-to-reach and validation curves with CI bands (``eval.steps``);
6. ``report.md``, ``curves.png`` (sampled validation), ``curves_greedy.png`` and ``summary.json``.

Departures from the paper's setting, all for CPU scale, and said in the report:

- a ~1M-parameter model instead of a 0.5-35B LLM; K = 5 (synthetic) or 10 (ProtoQA) instead of 20;
  G = 8 with 4 prompts per step instead of 48; a 64-token completion cap; lr 2e-4 (synthetic) or 1e-4
  (ProtoQA, docs/experiments.md) constant instead of 1e-6; no KL (beta 0); 100 steps instead of 2000.
- Validation and best-checkpoint selection on per-responder recall@K of *sampled* lists (4 per request,
  T = 1, the same sampling seed at every validation): a tiny model's greedy lists repeat items
  (docs/experiments.md, pitfall 1), so greedy recall mostly measures its top items and RL first lowers it
  by sharpening them. Greedy values are logged, plotted and tested beside them. Per-responder recall is
  Rank-GRPO's headline metric, so the selection does not favour ReMaRk's own (union) reward.
- ProtoQA items are cluster names (year-less); held-out respondents of the *same* questions are the
  evaluation targets (the questions themselves are seen in training, as in docs/experiments.md).
- One seed and one warm-up: CIs resample requests, not seeds (``experiments/protoqa_cpu`` runs seeds).

Modules: ``settings`` (``DemoSettings``, ``default_settings``), ``stages`` (data, tokenizer + model, SFT
warm-up), ``runs`` (the two RL runs), ``evaluation`` (test CIs, paired differences, steps-to-reach,
curves), ``report`` (``report.md`` from the summary), ``pipeline`` (``run_demo``).
"""

from remark.demo.pipeline import run_demo
from remark.demo.report import report_markdown
from remark.demo.runs import rl_fields, rl_worker
from remark.demo.settings import DATA_CHOICES, METHODS, DemoSettings, default_settings
from remark.demo.stages import find_protoqa, prepare_protoqa, prepare_synthetic

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
    "rl_worker",
    "run_demo",
]
