"""Searching over G (and other knobs) with short training runs as the budget.

- :func:`successive_halving` (no dependency) is enough for a 1-D search over G (docs/references.md#group-size): every
  candidate trains ``min_steps``; the best 1/eta go on with eta times the steps, until one is left or the
  steps reach ``max_steps``. Kim & Lee use BOHB; on a handful of G values the Bayesian part has nothing to
  model, and halving alone keeps the "cheap rungs first" saving.
- :func:`tune` runs optuna's TPE sampler with its ``HyperbandPruner`` for joint searches (e.g. G and the
  learning rate). optuna is an optional extra (``pip install remark[tune]``) imported only here, inside
  the function. Its pruning does not work for multi-objective studies, so there is one score to maximise.

Both take a user callable, so they know nothing of the trainer: ``evaluate(G, steps) -> score`` and
``evaluate(params, steps) -> score`` return a validation score (higher is better) after training
``steps`` optimizer steps in total. A callable that can resume its own run from the previous rung saves
the repeated steps; one that cannot simply retrains.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from catalog.io.errors import InputError

TUNE_HINT = "optuna is needed for joint searches: pip install remark[tune]"


@dataclass(frozen=True)
class Rung:
    round: int
    steps: int
    scores: dict[int, float]  # G -> score at this rung
    kept: list[int]


@dataclass(frozen=True)
class HalvingResult:
    best: int
    rungs: list[Rung]
    total_steps: int  # sum over rungs of (candidates evaluated x steps): the cost if every call retrains
    history: list[tuple[int, int, float]] = field(default_factory=list)  # (G, steps, score) in call order


def successive_halving(
    evaluate: Callable[[int, int], float],
    candidates,
    *,
    min_steps: int,
    max_steps: int | None = None,
    eta: int = 2,
) -> HalvingResult:
    """Successive halving over group sizes: rung i trains the survivors for ``min_steps * eta**i`` steps
    (capped at ``max_steps``) and keeps the best ``ceil(n / eta)``; ties keep the smaller G (cheaper).
    Stops when one candidate is left or a rung has used ``max_steps``; the best of the last rung wins.
    """
    cand = list(candidates)
    if not cand or any(isinstance(c, bool) or not float(c).is_integer() or c < 2 for c in cand):
        raise InputError(f"candidates must be integers >= 2, got {cand}", field="candidates")
    gs = sorted({int(c) for c in cand})
    if min_steps < 1 or eta < 2 or (max_steps is not None and max_steps < min_steps):
        raise InputError(
            f"need min_steps >= 1, eta >= 2 and max_steps >= min_steps (got {min_steps}, {eta}, {max_steps})",
            field="steps",
        )
    survivors, rungs, history, total, i = gs, [], [], 0, 0
    while True:
        steps = min_steps * eta**i
        last = max_steps is not None and steps >= max_steps
        steps = min(steps, max_steps) if max_steps is not None else steps
        scores = {}
        for g in survivors:
            score = float(evaluate(g, steps))
            if not math.isfinite(score):
                raise InputError(f"evaluate({g}, {steps}) returned {score}", field="evaluate")
            scores[g] = score
            history.append((g, steps, score))
        total += steps * len(survivors)
        order = sorted(survivors, key=lambda g: (-scores[g], g))
        kept = order[: max(1, math.ceil(len(order) / eta))]
        rungs.append(Rung(round=i, steps=steps, scores=scores, kept=sorted(kept)))
        if last or len(kept) == 1:
            return HalvingResult(best=order[0], rungs=rungs, total_steps=total, history=history)
        survivors, i = sorted(kept), i + 1


@dataclass(frozen=True)
class TuneResult:
    best_params: dict
    best_value: float
    n_complete: int
    n_pruned: int
    trials: list[dict]  # {"number", "params", "value", "state", "steps"} per trial


def _suggest(trial, name: str, spec):
    kind, *rest = spec
    if kind == "categorical":
        return trial.suggest_categorical(name, list(rest[0]))
    if kind in ("int", "float"):
        low, high, *opt = rest
        log = bool(opt) and opt[0] == "log"
        fn = trial.suggest_int if kind == "int" else trial.suggest_float
        return fn(name, low, high, log=log)
    raise InputError(
        f"unknown search-space kind {kind!r} for {name!r}",
        field="space",
        hint='use ("categorical", [...]), ("int", lo, hi[, "log"]) or ("float", lo, hi[, "log"])',
    )


def tune(
    evaluate: Callable[[dict, int], float],
    space: Mapping[str, tuple],
    *,
    n_trials: int,
    min_steps: int,
    max_steps: int,
    eta: int = 3,
    seed: int = 0,
) -> TuneResult:
    """Joint search with optuna TPE + HyperbandPruner (maximise the score).

    ``space`` maps a name to ``("categorical", choices)``, ``("int", lo, hi[, "log"])`` or
    ``("float", lo, hi[, "log"])``, e.g. ``{"G": ("categorical", [4, 8, 16]), "lr": ("float", 1e-7,
    1e-5, "log")}``. Each trial calls ``evaluate(params, steps)`` at the rungs ``min_steps * eta**i``
    (and ``max_steps``), reports each score to the pruner and stops when it says so.
    """
    try:
        import optuna
    except ImportError:
        raise ImportError(TUNE_HINT) from None
    if n_trials < 1 or min_steps < 1 or max_steps < min_steps or eta < 2:
        raise InputError(
            f"need n_trials >= 1, 1 <= min_steps <= max_steps, eta >= 2 (got {n_trials}, {min_steps}, {max_steps}, {eta})",
            field="tune",
        )
    rungs = [min_steps * eta**i for i in range(64) if min_steps * eta**i < max_steps] + [max_steps]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        direction="maximize",
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.HyperbandPruner(
            min_resource=min_steps, max_resource=max_steps, reduction_factor=eta
        ),
    )
    steps_of: dict[int, int] = {}

    def objective(trial) -> float:
        params = {name: _suggest(trial, name, spec) for name, spec in space.items()}
        score = float("nan")
        for steps in rungs:
            score = float(evaluate(params, steps))
            steps_of[trial.number] = steps
            if not math.isfinite(score):
                raise InputError(f"evaluate({params}, {steps}) returned {score}", field="evaluate")
            trial.report(score, steps)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return score

    study.optimize(objective, n_trials=n_trials)
    state = optuna.trial.TrialState
    trials = [
        {
            "number": t.number,
            "params": t.params,
            "value": t.value if t.value is not None else t.intermediate_values.get(steps_of.get(t.number, 0)),
            "state": t.state.name.lower(),
            "steps": steps_of.get(t.number, 0),
        }
        for t in study.trials
    ]
    return TuneResult(
        best_params=dict(study.best_params),
        best_value=float(study.best_value),
        n_complete=sum(t.state == state.COMPLETE for t in study.trials),
        n_pruned=sum(t.state == state.PRUNED for t in study.trials),
        trials=trials,
    )
