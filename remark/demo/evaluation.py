"""The demo's numbers: test evaluation, paired differences per seed and across seeds, steps-to-reach, curves.

- the SFT start and each run's best checkpoint on the test split (``eval.run.evaluate_model``, in
  ``remark.demo.worker`` ``eval`` jobs): greedy lists *and* sampled lists, with bootstrap CIs over
  requests; the sampling seed is the demo's ``seed`` for every model, so lists differ by model only;
- paired differences on the same test requests per RL seed (``eval.bootstrap.compare``), and across
  seeds (``eval.seeds``): the per-seed values' spread and t-interval (training variance) beside
  the request bootstrap of the seed average (request variance);
- the headline cell (``remark_vs_rank_grpo``, per-responder view) again without the test requests whose
  responder count is an outlier (``data_prep.outliers``): ``without_outliers``;
- steps-to-reach per seed (``eval.steps.steps_to_reach``) and on the seed-averaged validation curves
  (``eval.seeds.pooled_steps_to_reach``), and the curves themselves for the plot.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from remark.demo.jobs import Job
from remark.demo.runs import run_dir, run_name
from remark.demo.settings import METHODS, DemoSettings

#: Test views reported (recall@K in each).
VIEWS = ("per_responder", "union", "single_mention")
#: Paired differences, in report order: key -> (a, b) for ``a - b`` (``sft`` is the shared start).
PAIRS = {
    "remark_vs_rank_grpo": ("remark", "rank_grpo"),
    "remark_vs_sft": ("remark", "sft"),
    "rank_grpo_vs_sft": ("rank_grpo", "sft"),
}
#: Lists -> per-request table written by ``eval.run.evaluate_model``.
TABLES = {"sampled": "per_request_sampled.parquet", "greedy": "per_request.parquet"}


def _ks(k: int) -> tuple[int, ...]:
    return tuple(sorted({min(5, k), k}))


def evaluate_models(
    s: DemoSettings, data_dir: Path, models: dict[str, Path], out: Path, on_done: Callable[[str], None]
) -> dict[str, dict[str, Any]]:
    """``eval.run.evaluate_model`` on the test split for each model: greedy + sampled lists, CIs."""
    from eval.bootstrap import BootstrapConfig
    from eval.generate import GenerationConfig
    from eval.run import evaluate_model

    gen = GenerationConfig(
        k=s.k,
        max_new_tokens=s.max_completion_length,
        batch_size=64,
        num_samples=s.eval_samples,
        temperature=1.0,
        seed=s.seed,
        engine="vllm" if s.use_vllm else "transformers",
        # passed as a size, not through VLLM_CPU_KVCACHE_SPACE: vLLM parses that as whole GiB
        kv_cache_gib=s.vllm_kv_cache_gib if s.use_vllm else None,
    )
    ci = BootstrapConfig(n_resamples=s.ci_resamples, seed=s.seed)
    results = {}
    for name, model_dir in models.items():
        results[name] = evaluate_model(
            model_dir,
            data_dir,
            out / name,
            split="test",
            generation=gen,
            ks=_ks(s.k),
            metrics=("recall", "ndcg"),
            config=ci,
        )
        on_done(name)
    return results


def test_models(s: DemoSettings, chosen: dict[str, float]) -> dict[str, Path]:
    """Evaluation name -> model folder (relative to the demo folder): the SFT start, then the best checkpoint
    of every seed's run at its method's chosen rate (``remark.demo.runs.choose_rates``)."""
    models = {"sft": Path("sft_model")}
    for seed in s.rl_seeds:
        for m in METHODS:
            models[run_name(m, seed)] = run_dir(m, seed, chosen[m]) / "best"
    return models


#: Test sets: name -> folder of its evaluations inside the demo folder.
TEST_SETS = {"test": "eval", "crowd": "eval_crowd"}


def eval_jobs(s: DemoSettings, data_dirs: dict[str, Path], chosen: dict[str, float]) -> list[Job]:
    """The test evaluations of every test set (``data_dirs``: name -> dataset, see :data:`TEST_SETS`) split
    over ``s.jobs`` processes (round robin; the order changes no number). The only reads of a test split."""
    jobs = []
    for name, data_dir in data_dirs.items():
        models = list(test_models(s, chosen).items())
        n = max(1, min(s.jobs, len(models)))
        groups = [dict(models[i::n]) for i in range(n)]
        spec = {"settings": dataclasses.asdict(s), "data_dir": str(data_dir), "out": TEST_SETS[name]}
        jobs += [
            Job(
                f"eval-{name}-{i}",
                "eval",
                spec | {"models": {k: str(v) for k, v in g.items()}},
                threads=s.threads,
            )
            for i, g in enumerate(groups)
        ]
    return jobs


def _key(s: DemoSettings, view: str) -> str:
    return f"eval/recall@{s.k}/{view}"


def _by_view(flat: dict[str, dict[str, float]], n_requests: int) -> dict[str, Any]:
    """``{"eval/recall@5/union": cell}`` -> ``{"union": {"recall@5": cell}, "n_requests": n}``."""
    from eval.views import split_key

    out: dict[str, Any] = {"n_requests": n_requests}
    for key, cell in flat.items():
        metric, view = split_key(key)
        out.setdefault(view, {})[metric] = cell
    return out


def paired(eval_dir: Path, a: str, b: str, s: DemoSettings) -> dict[str, Any]:
    """Paired differences ``a - b`` on the same test requests, greedy and sampled (``eval.bootstrap.compare``)."""
    import polars as pl

    from eval.bootstrap import BootstrapConfig, compare

    ci = BootstrapConfig(n_resamples=s.ci_resamples, seed=s.seed)
    out = {}
    for lists, name in TABLES.items():
        pa, pb = eval_dir / a / name, eval_dir / b / name
        if not (pa.is_file() and pb.is_file()):
            continue
        fa, fb = pl.read_parquet(pa), pl.read_parquet(pb)
        keys = [c for c in fa.columns if c.startswith("eval/")]
        out[lists] = _by_view(compare(fa, fb, keys, ci), fa.height)
    return out


def _names(method: str, s: DemoSettings) -> list[str]:
    """Evaluation names of ``method`` over the seeds (``sft``: the one shared start, once per seed)."""
    return [("sft" if method == "sft" else run_name(method, seed)) for seed in s.rl_seeds]


def per_seed_pairs(eval_dir: Path, s: DemoSettings) -> dict[str, dict[str, Any]]:
    """``{pair: {"seed<k>": paired(...)}}`` for every pair of :data:`PAIRS` and every RL seed."""
    out: dict[str, dict[str, Any]] = {}
    for key, (a, b) in PAIRS.items():
        out[key] = {}
        for seed, na, nb in zip(s.rl_seeds, _names(a, s), _names(b, s), strict=True):
            out[key][f"seed{seed}"] = paired(eval_dir, na, nb, s)
    return out


#: The pair whose per-responder cell is also computed without the flagged requests (``without_outliers``).
OUTLIER_PAIR = "remark_vs_rank_grpo"


def across_seeds(
    eval_dir: Path, s: DemoSettings, pairs: dict[str, dict[str, Any]], flagged: Sequence[str] = ()
) -> dict[str, Any]:
    """Per model and per pair, recall@K in every view and lists: the per-seed spread (``seed_spread_S``)
    and the seed average with its bootstrap interval over requests (``pooled_interval`` /
    ``pooled_difference``). ``flagged``: test request ids whose responder count is an outlier
    (``data_prep.outliers.outlier_requests`` of the test split); the per-responder cell of
    :data:`OUTLIER_PAIR` gets ``without_outliers`` (:func:`_without_outliers`)."""
    import polars as pl

    from eval.bootstrap import BootstrapConfig
    from eval.seeds import pooled_difference, pooled_interval, seed_spread_S
    from eval.views import weighted_means

    ci = BootstrapConfig(n_resamples=s.ci_resamples, seed=s.seed)
    metric = f"recall@{s.k}"

    def frames(method: str, table: str) -> list[pl.DataFrame]:
        return [pl.read_parquet(eval_dir / name / table) for name in _names(method, s)]

    tables = {k: v for k, v in TABLES.items() if k != "sampled" or s.eval_samples}
    models: dict[str, Any] = {}
    for m in ("sft", *METHODS):
        models[m] = {}
        for lists, table in tables.items():
            fr = frames(m, table)
            models[m][lists] = {}
            for view in VIEWS:
                key = _key(s, view)
                per_seed = [weighted_means(f, [key])[key] for f in fr]
                models[m][lists][view] = {
                    "seeds": seed_spread_S(per_seed),
                    "requests": pooled_interval(fr, key, ci),
                }
    diffs: dict[str, Any] = {}
    for pair, (a, b) in PAIRS.items():
        diffs[pair] = {}
        for lists, table in tables.items():
            fa, fb = frames(a, table), frames(b, table)
            diffs[pair][lists] = {}
            for view in VIEWS:
                per_seed = [pairs[pair][f"seed{seed}"][lists][view][metric]["mean"] for seed in s.rl_seeds]
                cell = {
                    "seeds": seed_spread_S(per_seed),
                    "requests": pooled_difference(fa, fb, _key(s, view), ci),
                }
                if view == "per_responder":  # the headline view: every figure the verdict rests on
                    cell["verdict"] = _verdict(fa, fb, _key(s, view), ci, per_seed, cell["requests"], pair)
                    if pair == OUTLIER_PAIR:
                        cell["without_outliers"] = _without_outliers(fa, fb, _key(s, view), ci, pair, flagged)
                diffs[pair][lists][view] = cell
    return {"metric": metric, "models": models, "paired": diffs}


def _verdict(
    fa, fb, key: str, ci, per_seed: list[float], requests: dict[str, Any], pair: str
) -> dict[str, Any]:
    """``eval.verdicts.verdict`` of A - B from the S paired per-request tables: the one rule for "resolved"
    (at least three seeds; the t-interval over seeds and the sign-flip test over requests both exclude 0),
    with the percentile interval, wins / ties / losses, the question-macro mean and the top-5 share."""
    from eval.verdicts import request_differences, verdict

    d_SR, w_R = request_differences(fa, fb, key)
    names = tuple(_LABEL[m] for m in PAIRS[pair])
    return verdict(d_SR, w_R, per_seed, config=ci, names=names, requests=requests)


def _without_outliers(fa, fb, key: str, ci, pair: str, flagged: Sequence[str]) -> dict[str, Any] | None:
    """The headline cell on the S paired tables less the ``flagged`` requests: ``requests``
    (``eval.seeds.pooled_difference``), ``seeds`` (``seed_spread_S`` of the per-seed differences
    sum_r w_r vA_sr / sum_r w_r - sum_r w_r vB_sr / sum_r w_r over the kept requests), ``verdict``
    (:func:`_verdict`), ``n_removed``, ``removed`` (the flagged ids the tables hold, sorted) and ``rule``
    (``data_prep.outliers.RULE``). None when no flagged id is in the tables, or none is left."""
    import polars as pl

    from data_prep.outliers import RULE
    from eval.seeds import pooled_difference, seed_spread_S
    from eval.views import weighted_means

    removed = sorted(set(flagged) & set(fa[0]["request_id"].to_list()))
    if not removed or len(removed) == fa[0].height:
        return None
    ka, kb = ([f.filter(~pl.col("request_id").is_in(removed)) for f in side] for side in (fa, fb))
    per_seed = [
        weighted_means(a, [key])[key] - weighted_means(b, [key])[key] for a, b in zip(ka, kb, strict=True)
    ]
    requests = pooled_difference(ka, kb, key, ci)
    return {
        "n_removed": len(removed),
        "removed": removed,
        "rule": RULE,
        "seeds": seed_spread_S(per_seed),
        "requests": requests,
        "verdict": _verdict(ka, kb, key, ci, per_seed, requests, pair),
    }


#: Method labels for verdict sentences.
_LABEL = {"sft": "the SFT start", **{m: METHODS[m][0] for m in METHODS}}


def validation_results(s: DemoSettings, out: Path, chosen: dict[str, float]) -> dict[str, Any]:
    """Per validation lists (sampled first), for the runs at the chosen rates: steps-to-reach per seed and on
    the seed-averaged curves, both ways, against the other method's final *and* best validation value; and
    the curves (per seed from the eval logs; seed-averaged with bootstrap bands)."""
    from eval.seeds import TARGETS, pooled_curve, pooled_steps_to_reach
    from eval.steps import CURVE_CI, REACH_CI, read_eval_log, steps_to_reach

    reach_cfg = dataclasses.replace(REACH_CI, n_resamples=s.ci_resamples, seed=s.seed)
    curve_cfg = dataclasses.replace(
        CURVE_CI, n_resamples=min(CURVE_CI.n_resamples, s.ci_resamples), seed=s.seed
    )
    key = s.greedy_metric  # the eval log's name of the metric, in greedy and sampled logs alike
    directions = {
        "remark_reaches_rank_grpo": ("remark", "rank_grpo"),
        "rank_grpo_reaches_remark": ("rank_grpo", "remark"),
    }
    results: dict[str, Any] = {}
    for lists, (sub, metric) in s.validation_logs().items():
        runs = {m: [out / run_dir(m, seed, chosen[m]) / sub for seed in s.rl_seeds] for m in METHODS}
        per_seed: dict[str, Any] = {}
        for i, seed in enumerate(s.rl_seeds):
            per_seed[f"seed{seed}"] = {
                name: {
                    target: _reach(
                        steps_to_reach, runs[a][i], runs[b][i], key, reach_cfg, target, read_eval_log
                    )
                    for target in TARGETS
                }
                for name, (a, b) in directions.items()
            }
        pooled = {
            name: {
                target: _pooled_reach(pooled_steps_to_reach, runs[a], runs[b], key, reach_cfg, target)
                for target in TARGETS
            }
            for name, (a, b) in directions.items()
        }
        curves = {}
        for m in METHODS:
            logs = [[r for r in read_eval_log(run) if key in r] for run in runs[m]]
            curves[m] = {
                "pooled": pooled_curve(runs[m], key, curve_cfg),
                "seeds": {
                    f"seed{seed}": {"x": [r["step"] for r in log], "mean": [float(r[key]) for r in log]}
                    for seed, log in zip(s.rl_seeds, logs, strict=True)
                },
            }
        results[lists] = {"metric": metric, "pooled": pooled, "per_seed": per_seed, "curves": curves}
    return results


def _start_target(target: str) -> dict[str, Any]:
    return {
        "target": target,
        "reached": None,
        "undefined": "the other method's best validation value is at step 0, its start: nothing to reach",
    }


def _reach(steps_to_reach, a: Path, b: Path, key: str, cfg, target: str, read_eval_log) -> dict[str, Any]:
    """``eval.steps.steps_to_reach`` of ``a`` against ``b``'s final or best validation value."""
    step = None
    if target == "best":
        log = [r for r in read_eval_log(b) if key in r]
        step = max(log, key=lambda r: (float(r[key]), -r["step"]))["step"]
        if step <= 0:
            return _start_target(target)
    return {"target": target, **steps_to_reach(a, b, key=key, baseline_step=step, config=cfg)}


def _pooled_reach(
    pooled_steps_to_reach, a: list[Path], b: list[Path], key: str, cfg, target: str
) -> dict[str, Any]:
    try:
        return pooled_steps_to_reach(a, b, key, cfg, target=target)
    except ValueError as err:
        if "after step 0" in str(err):
            return _start_target(target)
        raise
