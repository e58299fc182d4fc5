"""Group-size planning: how often a group of G samples carries signal, what G costs, and which G to use.

First principles (docs/references.md#group-size; Kim & Lee 2026 publish neither formula nor cost model):

- **Signal probability.** With 0/1 rewards at pass rate p, a group of G i.i.d. samples has a non-zero
  advantage only when the rewards are not all equal::

      q(G, p) = 1 - p^G - (1 - p)^G

  For graded rewards the condition is std > eps, i.e. not all G rewards within eps of each other:
  ``q = 1 - sum_v pi_v^G`` over the distinct reward values v. From S observed rewards of a request this is
  estimated without bias (for G <= S) by the U-statistic ``1 - sum_v C(n_v, G) / C(S, G)``
  (:func:`signal_prob_samples`); when only a pass rate ``mean(r) / max(r)`` is known, the Bernoulli formula
  is the approximation used (exact for 0/1, not a bound for graded rewards).
- **Estimating mean_x q(G, p_x)** from measured pass rates: ``plugin`` averages q(G, p_hat_x). With few
  samples per request that is biased where it matters most: a request seen 0/8 times gets p_hat = 0 and
  q = 0 at every G, although a larger G would find its rare successes. ``beta`` (used by ``auto`` when
  ``n_samples`` is known) fits a Beta(alpha, beta) prior to the counts k_x ~ BetaBinomial(n_x, alpha, beta)
  by maximum marginal likelihood and averages the posterior expectation per request::

      E[q(G, p) | k, n] = 1 - B(a + G, b) / B(a, b) - B(a, b + G) / B(a, b),  a = alpha + k, b = beta + n - k

- **Cost.** Peak memory ~ m0 + m1 G and step time ~ t0 + t1 G, least-squares lines through the profile
  points (:func:`fit_cost_model`, with R^2 and RMSE as fit quality; two points fit exactly and say so).
- **Objective** (one scalar, maximised over the candidates that fit the memory budget). The GRPO update of
  one request is the group mean of (r_g - mean r) grad log pi(y_g). Its expectation is (1 - 1/G) times the
  true policy gradient (the group mean contains r_g itself), and it is exactly zero when the group has no
  signal (probability 1 - q). Its noise variance shrinks as 1/G, but what that is worth depends on the
  gradient noise scale, which pass rates cannot measure; crediting it in full (x G) makes the objective
  increase with G forever, so the answer would always be "the largest G that fits", which contradicts the
  measured optimum far below the memory cap (Kim & Lee: G* = 12 at 96 % of G = 64's accuracy for 28 %
  of its memory). We therefore count expected useful gradient, not its precision::

      signal_per_s(G)   = mean_x q(G, p_x) * (1 - 1/G) / step_s(G)     (default)
      signal_per_step(G) = mean_x q(G, p_x) * (1 - 1/G)                 (when wall-clock does not matter)

  ``signal_per_s`` has an interior optimum whenever step time grows with G: q saturates at 1 while the
  cost keeps growing linearly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import betaln, comb

from catalog.io.errors import InputError


def _as_groups(G) -> np.ndarray:
    g = np.atleast_1d(np.asarray(G))
    if g.size == 0 or not np.all(np.isfinite(g)) or np.any(g != np.round(g)) or np.any(g < 2):
        raise InputError(
            f"group sizes must be integers >= 2, got {g.tolist()}",
            field="G",
            hint="a GRPO group needs at least two samples; G <= 0 is not a group size",
        )
    return g.astype(float)


def signal_prob(G, p) -> np.ndarray:
    """q(G, p) = 1 - p^G - (1 - p)^G for 0/1 rewards. G (m,), p (n,) -> (m, n).

    >>> float(signal_prob(2, 0.5)[0, 0])
    0.5
    """
    g = _as_groups(G)[:, None]
    p = np.atleast_1d(np.asarray(p, dtype=float))[None, :]
    if np.any((p < 0) | (p > 1)) or not np.all(np.isfinite(p)):
        raise InputError("pass rates must be in [0, 1]", field="pass_rate")
    return 1.0 - p**g - (1.0 - p) ** g


def signal_prob_samples(G, rewards_NS: np.ndarray, *, eps: float = 1e-6) -> np.ndarray:
    """P(std > eps) of a group of G for graded rewards, from S observed rewards per request. -> (m, N).

    Rewards within ``eps`` (binned as round(r / eps)) count as equal. For G <= S the estimate is the
    unbiased U-statistic 1 - sum_v C(n_v, G) / C(S, G) (the chance that G of the S samples, drawn without
    replacement, are all equal); for G > S it is the plug-in 1 - sum_v (n_v / S)^G, which under-states q.
    """
    g = _as_groups(G)
    r = np.asarray(rewards_NS, dtype=float)
    if r.ndim != 2 or r.shape[1] < 2:
        raise InputError(
            f"rewards must have shape (N requests, S >= 2 samples), got {r.shape}", field="rewards"
        )
    n, s = r.shape
    codes = np.sort(np.round(r / eps), axis=1)
    new_run = np.ones_like(codes, dtype=bool)
    new_run[:, 1:] = codes[:, 1:] != codes[:, :-1]
    run_id = np.cumsum(new_run, axis=1) - 1  # (N, S): which distinct value each sorted sample belongs to
    counts = np.zeros((n, s))
    np.add.at(counts, (np.repeat(np.arange(n), s), run_id.ravel()), 1.0)  # counts[x, v] = n_v
    total = np.where(g <= s, comb(s, g), 1.0)  # C(S, G); unused (plug-in) when G > S
    u = comb(counts[None], g[:, None, None]).sum(-1) / total[:, None]
    plug = ((counts[None] / s) ** g[:, None, None]).sum(-1)
    return 1.0 - np.where((g <= s)[:, None], u, plug)


def fit_beta_prior(k: np.ndarray, n: np.ndarray) -> tuple[float, float]:
    """Maximum marginal likelihood Beta(alpha, beta) for successes k (N,) out of n (N,) trials.

    Maximises sum_x [ln B(k_x + alpha, n_x - k_x + beta) - ln B(alpha, beta)] over log alpha, log beta in
    [-7, 7] (L-BFGS-B); the binomial coefficients do not depend on the prior and are dropped.
    """
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)

    def nll(x):
        a, b = np.exp(x)
        return -float(np.sum(betaln(k + a, n - k + b) - betaln(a, b)))

    res = minimize(nll, x0=np.zeros(2), method="L-BFGS-B", bounds=[(-7, 7), (-7, 7)])
    a, b = np.exp(res.x)
    return float(a), float(b)


def expected_signal_prob(
    G, pass_rate: np.ndarray, *, n_samples: np.ndarray | None = None, method: str = "auto"
) -> tuple[np.ndarray, str]:
    """mean_x q(G, p_x) for candidate G (m,) from pass rates (N,). -> (q (m,), method used).

    ``plugin``: mean_x q(G, p_hat_x). ``beta``: empirical-Bayes posterior expectation (module docstring),
    needs ``n_samples``; k_x = round(p_hat_x n_x). ``auto``: ``beta`` when ``n_samples`` is given.
    """
    p = np.asarray(pass_rate, dtype=float)
    if p.size == 0:
        raise InputError("no pass rates to plan from", field="pass_rate")
    if method == "auto":
        method = "plugin" if n_samples is None else "beta"
    if method == "plugin":
        return signal_prob(G, p).mean(axis=1), method
    if method != "beta":
        raise InputError(f"unknown estimator {method!r}", field="estimator", hint="use auto, plugin or beta")
    if n_samples is None:
        raise InputError("the beta estimator needs n_samples per request", field="n_samples")
    g = _as_groups(G)[:, None]
    n = np.asarray(n_samples, dtype=float)
    k = np.round(p * n)
    alpha, beta = fit_beta_prior(k, n)
    a, b = (alpha + k)[None, :], (beta + n - k)[None, :]
    all_pass = np.exp(betaln(a + g, b) - betaln(a, b))
    all_fail = np.exp(betaln(a, b + g) - betaln(a, b))
    return (1.0 - all_pass - all_fail).mean(axis=1), method


@dataclass(frozen=True)
class LineFit:
    """y ~ intercept + slope * G by least squares, with its fit quality."""

    intercept: float
    slope: float
    r2: float
    rmse: float
    max_abs_resid: float
    n: int
    exact: bool  # two distinct G: the line goes through them and the quality says nothing

    def __call__(self, G) -> np.ndarray:
        return self.intercept + self.slope * np.asarray(G, dtype=float)


def fit_line(x: np.ndarray, y: np.ndarray) -> LineFit:
    """Least-squares line through (x, y) (n,) with R^2 = 1 - SS_res / SS_tot (1 when y is constant and fit)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    design = np.stack([np.ones_like(x), x], axis=1)
    (c0, c1), *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - (c0 + c1 * x)
    ss_res, ss_tot = float(resid @ resid), float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else float(ss_res < 1e-12)
    return LineFit(
        intercept=float(c0),
        slope=float(c1),
        r2=r2,
        rmse=float(np.sqrt(ss_res / x.size)),
        max_abs_resid=float(np.abs(resid).max()),
        n=int(x.size),
        exact=len(np.unique(x)) == 2 and x.size == 2,
    )


@dataclass(frozen=True)
class CostModel:
    """Peak memory (GB) and step time (s) as lines in G, fitted on profiled G in [g_min, g_max]."""

    memory: LineFit
    step: LineFit
    g_min: float
    g_max: float


def fit_cost_model(G, peak_mem_gb, step_s) -> CostModel:
    """Fit memory ~ m0 + m1 G and step time ~ t0 + t1 G from profile points, each (n,)."""
    g = np.asarray(G, dtype=float)
    if g.size < 2 or len(np.unique(g)) < 2:
        raise InputError(
            f"a cost model needs profile points at >= 2 distinct G, got {sorted(set(g.tolist()))}",
            field="points",
            hint="profile at least two group sizes",
        )
    if np.any(g < 1):
        raise InputError("profiled G must be positive", field="G")
    return CostModel(fit_line(g, peak_mem_gb), fit_line(g, step_s), float(g.min()), float(g.max()))


#: objective name -> f(G (m,), q (m,), step_s (m,)) -> (m,). Formulas and the reasoning: module docstring.
OBJECTIVES: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]] = {
    "signal_per_s": lambda g, q, t: q * (1.0 - 1.0 / g) / t,
    "signal_per_step": lambda g, q, t: q * (1.0 - 1.0 / g),
}


@dataclass(frozen=True)
class Candidate:
    G: int
    q: float
    mem_gb: float
    step_s: float
    objective: float
    fits_memory: bool
    extrapolated: bool  # outside the profiled G range


@dataclass(frozen=True)
class Plan:
    recommended: int
    candidates: list[Candidate]
    objective: str
    estimator: str
    memory_budget_gb: float
    cost: CostModel

    def to_dict(self) -> dict:
        return {
            "recommended_G": self.recommended,
            "objective": self.objective,
            "estimator": self.estimator,
            "memory_budget_gb": self.memory_budget_gb,
            "cost_model": asdict(self.cost),
            "candidates": [asdict(c) for c in self.candidates],
        }


def plan_group_size(
    cost: CostModel,
    pass_rate: np.ndarray,
    *,
    memory_budget_gb: float,
    candidates=(2, 4, 8, 12, 16, 24, 32, 48, 64),
    n_samples: np.ndarray | None = None,
    estimator: str = "auto",
    objective: str = "signal_per_s",
    extrapolate: bool = False,
) -> Plan:
    """Score each candidate G and recommend the best one that fits the memory budget (ties: smaller G).

    Only candidates inside the profiled range [g_min, g_max] can be recommended unless ``extrapolate``:
    the cost lines are fitted on a few noisy points (the shipped H200 profile's step time even falls
    with G), and a line carried far past its data picks G nobody measured. Out-of-range candidates are
    still scored and listed (``extrapolated``). Candidates whose predicted step time is not positive (a
    bad extrapolation) count as not fitting.
    """
    if objective not in OBJECTIVES:
        raise InputError(
            f"unknown objective {objective!r}", field="objective", hint=f"use one of {sorted(OBJECTIVES)}"
        )
    if not memory_budget_gb > 0:
        raise InputError(f"the memory budget must be > 0 GB, got {memory_budget_gb}", field="memory_budget")
    g = np.unique(_as_groups(candidates))
    q, used = expected_signal_prob(g, pass_rate, n_samples=n_samples, method=estimator)
    mem, step = cost.memory(g), cost.step(g)
    fits = (mem <= memory_budget_gb) & (step > 0)
    outside = (g < cost.g_min) | (g > cost.g_max)
    eligible = fits & (extrapolate | ~outside)
    obj = np.where(step > 0, OBJECTIVES[objective](g, q, np.where(step > 0, step, 1.0)), -np.inf)
    if not fits.any():
        raise InputError(
            f"no candidate G fits in {memory_budget_gb:g} GB (smallest needs {mem.min():.1f} GB)",
            field="memory_budget",
            hint="raise the budget, try smaller G, or cut requests per step",
        )
    if not eligible.any():
        raise InputError(
            f"no candidate G inside the profiled range {cost.g_min:g}..{cost.g_max:g} fits in {memory_budget_gb:g} GB",
            field="candidates",
            hint="profile the G you want to use (bench/gpu_check.py), or allow extrapolation (--extrapolate)",
        )
    best = int(g[np.flatnonzero(eligible)[np.argmax(obj[eligible])]])
    rows = [
        Candidate(
            G=int(gi),
            q=float(qi),
            mem_gb=float(mi),
            step_s=float(si),
            objective=float(oi),
            fits_memory=bool(fi),
            extrapolated=bool(xi),
        )
        for gi, qi, mi, si, oi, fi, xi in zip(g, q, mem, step, obj, fits, outside)
    ]
    return Plan(best, rows, objective, used, float(memory_budget_gb), cost)
