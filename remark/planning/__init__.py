"""Planning tools: ScaleRL compute curves on training eval logs, and the GRPO group-size planner.

- :mod:`.curves`: ``R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)``: predict, fit (variable projection),
  profile interval on the ceiling A, crossovers, comparison of two recipes.
- :mod:`.group_size`: signal probability q(G, p), cost model, objective, :func:`plan_group_size`.
- :mod:`.search`: successive halving over G; optuna TPE + Hyperband joint search (``remark[tune]``).
- :mod:`.logs`: readers for eval logs, pass rates and cost profiles (the contracts in
  docs/architecture.md).
- :mod:`.adaptive`: ``GroupSizeAdvisor``, a ``transformers.TrainerCallback`` (imported on its own, so
  that this package does not pull in transformers).
"""

from .curves import CurveFit, CurveParams, compare_fits, crossover, crossovers, fit_curve, predict
from .group_size import (
    OBJECTIVES,
    CostModel,
    Plan,
    expected_signal_prob,
    fit_cost_model,
    plan_group_size,
    signal_prob,
    signal_prob_samples,
)
from .logs import DEFAULT_METRIC, read_eval_log, read_pass_rates, read_profile
from .search import successive_halving, tune

__all__ = [
    "DEFAULT_METRIC",
    "OBJECTIVES",
    "CostModel",
    "CurveFit",
    "CurveParams",
    "Plan",
    "compare_fits",
    "crossover",
    "crossovers",
    "expected_signal_prob",
    "fit_cost_model",
    "fit_curve",
    "plan_group_size",
    "predict",
    "read_eval_log",
    "read_pass_rates",
    "read_profile",
    "signal_prob",
    "signal_prob_samples",
    "successive_halving",
    "tune",
]
