"""ScaleRL compute curves: predict, fit, a profile interval on the ceiling, and crossovers.

The curve (Khatri et al., arXiv 2510.13786, eq. 1)::

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)
         = R0 + (A - R0) * s(C),   s(C) = expit(B * (log C - log C_mid))

R0 is fixed (the starting score), A is the ceiling, B the efficiency (steepness in log compute), C_mid
the compute at which half the gain A - R0 is reached. ``s`` is written as a logistic in log C so that
C = 0 gives exactly R0 and very large or small ratios never overflow.

Where this departs from the paper, and why:

- The paper grid-searches A and C_mid and fits B with ``curve_fit``. We fit by **variable projection**:
  for fixed (B, log C_mid) the model is linear in theta = A - R0, so the least-squares theta has a closed
  form, ``theta* = clip(<s, y - R0> / <s, s>, 0, upper - R0)`` (clipping a 1-D convex quadratic to an
  interval gives the exact constrained optimum). What remains is a 2-parameter problem in (B, log C_mid),
  solved by ``scipy.optimize.least_squares`` (bounded trust-region reflective) started from the best point
  of a vectorised grid over (B, log C_mid). We chose the projected 2-D problem over a 3-D fit of
  (A, B, log C_mid) because the sigmoid's SSE surface has a long, curved valley along A <-> C_mid when
  the data do not pass the midpoint; eliminating A exactly removes that valley from the optimiser's view,
  and the grid start (cheap, because A is closed form on every grid node) avoids local minima.
- Bounds: A in [R0, upper] (upper = 1 for scores in [0, 1]), B in [0.1, 10], C_mid within a factor of
  100 below the first positive compute and above the last.
- The interval on A is a **profile-likelihood** interval: SSE_p(A) = min over (B, log C_mid) of the SSE
  with A held fixed, and the interval is {A : SSE_p(A) <= SSE_min * (1 + F_{1, n-3}(level) / (n - 3))}.
  This is the F form of the likelihood-ratio interval for nonlinear least squares (Bates & Watts 1988,
  ch. 6): the noise variance is unknown and estimated from the same n points, so F is more honest than
  the chi-square(1) threshold at the small n of an eval log. Ends are found with ``brentq``.
- The ceiling is flagged **unbounded** when the data end before the fitted midpoint (C_max < C_mid: A is
  not identifiable there, per docs/references.md#scalerl-curves), when the profile does not rise above the threshold
  before A reaches its upper bound, or when a curve with its midpoint at or after the last point
  (C_mid >= C_max, refitted under that constraint) is within the same threshold: noise can make a fit
  that has not reached its midpoint look saturated, and the point estimate of C_mid alone would then
  call A identified. Recipes should be ranked by A only after ~2-3 x C_mid.
- Points at C = 0 carry no information about (A, B, C_mid) (the model equals R0 there); they are used only
  for the default R0 and are left out of n.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy.optimize import brentq, least_squares
from scipy.special import expit
from scipy.stats import f as f_dist

from catalog.io.errors import InputError

B_BOUNDS = (0.1, 10.0)
CMID_FACTOR = 100.0


@dataclass(frozen=True)
class CurveParams:
    """One ScaleRL curve: ``R(C) = r0 + (a - r0) / (1 + (c_mid / C)^b)``."""

    r0: float
    a: float
    b: float
    c_mid: float

    def __call__(self, c: np.ndarray | float) -> np.ndarray:
        return predict(c, r0=self.r0, a=self.a, b=self.b, c_mid=self.c_mid)


def _sigmoid_part(c: np.ndarray, b: np.ndarray | float, log_c_mid: np.ndarray | float) -> np.ndarray:
    """s(C) = 1 / (1 + (C_mid / C)^B) = expit(B (log C - log C_mid)); C = 0 gives 0. Broadcasts."""
    with np.errstate(divide="ignore"):
        log_c = np.log(np.asarray(c, dtype=float))
    return expit(b * (log_c - log_c_mid))


def predict(c: np.ndarray | float, *, r0: float, a: float, b: float, c_mid: float) -> np.ndarray:
    """Curve values R(C) for compute ``c`` of shape (n,) (or a scalar) -> shape (n,).

    ``R(C) = r0 + (a - r0) / (1 + (c_mid / C)^b)``; ``C = 0`` gives ``r0``, ``C -> inf`` gives ``a``.
    """
    c_arr = np.atleast_1d(np.asarray(c, dtype=float))
    if np.any(c_arr < 0) or not np.all(np.isfinite(c_arr)):
        raise InputError("compute values must be finite and >= 0", field="at")
    if not (b > 0 and c_mid > 0):
        raise InputError(f"B and C_mid must be > 0 (got B={b}, C_mid={c_mid})", field="curve")
    return r0 + (a - r0) * _sigmoid_part(c_arr, b, math.log(c_mid))


def validate_points(c: np.ndarray, r: np.ndarray, *, upper: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Check (compute, score) points: >= 3, finite, compute >= 0 and strictly increasing, scores in [0, upper].

    Raises :class:`InputError` naming the 1-based point and what to do; returns float arrays.
    """
    c = np.asarray(c, dtype=float).ravel()
    r = np.asarray(r, dtype=float).ravel()
    if c.shape != r.shape:
        raise InputError(f"{c.size} compute values but {r.size} scores", field="points")
    if c.size < 3:
        raise InputError(
            f"a curve fit needs at least 3 points, got {c.size}",
            field="points",
            hint="log more validations (eval every N steps) before fitting",
        )
    for name, arr in (("compute", c), ("score", r)):
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise InputError(f"{name} is not finite at point {bad[0] + 1}", row=int(bad[0]) + 1, field=name)
    if c[0] < 0:
        raise InputError("compute must be >= 0", row=1, field="compute")
    steps = np.flatnonzero(np.diff(c) <= 0)
    if steps.size:
        i = int(steps[0]) + 1
        raise InputError(
            f"compute is not increasing: point {i + 1} has {c[i]:g} after {c[i - 1]:g}",
            row=i + 1,
            field="compute",
            hint="sort the points and drop repeated validations (a resumed run may log a step twice)",
        )
    bad = np.flatnonzero((r < 0) | (r > upper))
    if bad.size:
        i = int(bad[0])
        raise InputError(
            f"score {r[i]:g} at point {i + 1} is outside [0, {upper:g}]",
            row=i + 1,
            field="score",
            hint="curves are fitted to rates such as recall in [0, 1]; pass a fraction, not a percentage",
        )
    return c, r


def _grid(c: np.ndarray, lo: float, hi: float, n_b: int = 25, n_m: int = 41):
    """Grid over B and log C_mid in [lo, hi], and s on it: B (n_b,), L (n_m,), s (n_b, n_m, n)."""
    b = np.geomspace(*B_BOUNDS, n_b)
    log_m = np.linspace(lo, hi, n_m)
    s = _sigmoid_part(c[None, None, :], b[:, None, None], log_m[None, :, None])
    return b, log_m, s


def _log_cmid_bounds(c: np.ndarray) -> tuple[float, float]:
    pos = c[c > 0]
    return math.log(pos[0] / CMID_FACTOR), math.log(pos[-1] * CMID_FACTOR)


def _theta_star(s: np.ndarray, y: np.ndarray, theta_max: float) -> np.ndarray:
    """Closed-form theta = A - R0 for fixed s: clip(<s, y> / <s, s>, 0, theta_max), over the last axis."""
    num = (s * y).sum(-1)
    den = (s * s).sum(-1)
    return np.clip(np.divide(num, den, out=np.zeros_like(num), where=den > 0), 0.0, theta_max)


def _best_on_grid(c, y, theta_max, theta_fixed, lo, hi) -> tuple[float, float]:
    b, log_m, s = _grid(c, lo, hi)
    theta = _theta_star(s, y, theta_max) if theta_fixed is None else np.full(s.shape[:2], theta_fixed)
    sse = ((theta[..., None] * s - y) ** 2).sum(-1)
    i, j = np.unravel_index(int(np.argmin(sse)), sse.shape)
    return float(b[i]), float(log_m[j])


def _solve(c, y, theta_max, theta_fixed=None, log_m_lo=None) -> tuple[float, float, float, float]:
    """Minimise the SSE over (B, log C_mid >= log_m_lo); theta projected (None) or fixed.

    -> (theta, B, log C_mid, SSE).
    """
    lo, hi = _log_cmid_bounds(c)
    lo = lo if log_m_lo is None else log_m_lo
    if theta_fixed is not None and theta_fixed == 0.0:
        return 0.0, 1.0, 0.5 * (lo + hi), float((y * y).sum())
    x0 = np.array(_best_on_grid(c, y, theta_max, theta_fixed, lo, hi))

    def theta_of(x):
        if theta_fixed is not None:
            return theta_fixed
        return float(_theta_star(_sigmoid_part(c, x[0], x[1]), y, theta_max))

    def resid(x):
        return theta_of(x) * _sigmoid_part(c, x[0], x[1]) - y

    bounds = ([B_BOUNDS[0], lo], [B_BOUNDS[1], hi])
    x0 = np.clip(x0, bounds[0], bounds[1])
    sol = least_squares(resid, x0, bounds=bounds, method="trf", x_scale=[1.0, 1.0], xtol=1e-12, ftol=1e-12)
    x = sol.x
    return theta_of(x), float(x[0]), float(x[1]), float((resid(x) ** 2).sum())


@dataclass(frozen=True)
class CurveFit:
    """A fitted curve with its profile interval on A.

    ``a_interval`` is (lo, hi); ``a_lo_closed`` / ``a_hi_closed`` say whether the profile crossed the
    threshold inside the bounds (False: that end is the bound itself, the data cannot rule beyond it).
    ``unbounded`` flags a ceiling that is not identified; ``reason`` says why.
    """

    params: CurveParams
    sse: float
    n: int
    c_max: float
    a_interval: tuple[float, float]
    a_lo_closed: bool
    a_hi_closed: bool
    unbounded: bool
    reason: str | None
    level: float

    @property
    def c_max_over_c_mid(self) -> float:
        """How far the data go past the midpoint; rank by A only when this is >= ~2-3."""
        return self.c_max / self.params.c_mid

    def to_dict(self) -> dict:
        out = asdict(self.params) | {k: v for k, v in asdict(self).items() if k != "params"}
        out["a_interval"] = list(self.a_interval)
        out["c_max_over_c_mid"] = self.c_max_over_c_mid
        return out


def fit_curve(
    c: np.ndarray,
    r: np.ndarray,
    *,
    r0: float | None = None,
    upper: float = 1.0,
    level: float = 0.95,
) -> CurveFit:
    """Fit A, B, C_mid to points ``c`` (n,), ``r`` (n,) with R0 fixed; profile interval on A.

    ``r0`` defaults to the first point's score (the step-0 validation when the log has one; when the
    first point is already past step 0 that underestimates nothing but biases R0 up: pass it).
    Points must be increasing in compute with scores in [0, upper] (:func:`validate_points`).
    """
    c, r = validate_points(c, r, upper=upper)
    r0 = float(r[0]) if r0 is None else float(r0)
    if not 0.0 <= r0 <= upper:
        raise InputError(f"R0 = {r0:g} is outside [0, {upper:g}]", field="r0")
    keep = c > 0
    cp, y = c[keep], r[keep] - r0
    if cp.size < 3:
        raise InputError(
            f"a curve fit needs at least 3 points with compute > 0, got {cp.size}", field="points"
        )
    theta_max = upper - r0
    theta, b, log_m, sse = _solve(cp, y, theta_max)
    params = CurveParams(r0=r0, a=r0 + theta, b=b, c_mid=math.exp(log_m))
    n = int(cp.size)

    def profile(a: float) -> float:
        return _solve(cp, y, theta_max, theta_fixed=a - r0)[3]

    reasons = []
    if n <= 3:
        lo, hi, lo_closed, hi_closed = r0, upper, False, False
        reasons.append(f"{n} points leave no degrees of freedom for an interval")
    else:
        thr = sse * (1.0 + f_dist.ppf(level, 1, n - 3) / (n - 3))
        thr = max(thr, sse + 1e-15)
        a_hat = params.a

        def end(bound: float) -> tuple[float, bool]:
            if abs(bound - a_hat) < 1e-12 or profile(bound) <= thr:
                return bound, False
            return float(
                brentq(lambda a: profile(a) - thr, min(a_hat, bound), max(a_hat, bound), xtol=1e-6)
            ), True

        hi, hi_closed = end(upper)
        lo, lo_closed = end(r0)
        if not hi_closed:
            reasons.append(f"the profile of A stays below the {level:.0%} threshold up to A = {upper:g}")
        if cp[-1] >= params.c_mid and _solve(cp, y, theta_max, log_m_lo=math.log(cp[-1]))[3] <= thr:
            reasons.append(
                f"a midpoint at or after the last point (C_mid >= {cp[-1]:g}) fits within the {level:.0%} threshold"
            )
    if cp[-1] < params.c_mid:
        reasons.insert(0, f"the data end at C = {cp[-1]:g}, before the midpoint C_mid = {params.c_mid:g}")
    unbounded = bool(reasons)
    return CurveFit(
        params=params,
        sse=sse,
        n=n,
        c_max=float(cp[-1]),
        a_interval=(float(lo), float(hi)),
        a_lo_closed=lo_closed,
        a_hi_closed=hi_closed,
        unbounded=unbounded,
        reason="; ".join(reasons) or None,
        level=level,
    )


def crossovers(
    p: CurveParams, q: CurveParams, *, lo: float | None = None, hi: float | None = None, n_grid: int = 400
) -> list[float]:
    """All C in [lo, hi] where curve ``p`` and curve ``q`` are equal (ascending; empty when none).

    The bracket search runs on a log grid of ``n_grid`` points (default range: 1e-3 x the smaller C_mid to
    1e3 x the larger), and each sign change of R_p - R_q is refined by ``brentq``. C = 0 is never reported
    (curves with the same R0 always meet there). Identical curves have no crossing.
    """
    lo = 1e-3 * min(p.c_mid, q.c_mid) if lo is None else lo
    hi = 1e3 * max(p.c_mid, q.c_mid) if hi is None else hi
    if not 0 < lo < hi:
        raise InputError(f"the search range must satisfy 0 < lo < hi (got {lo:g}, {hi:g})", field="range")
    grid = np.geomspace(lo, hi, n_grid)

    def diff(c):
        return p(c) - q(c)

    d = diff(grid)
    if np.all(np.abs(d) <= 1e-15):
        return []
    found: list[float] = [float(grid[i]) for i in np.flatnonzero(d == 0.0)]
    for i in np.flatnonzero(d[:-1] * d[1:] < 0):
        found.append(float(brentq(lambda x: float(diff(x)[0]), grid[i], grid[i + 1], xtol=1e-12, rtol=1e-12)))
    return sorted(found)


def crossover(p: CurveParams, q: CurveParams, **kw) -> float | None:
    """The first C > 0 where the two curves cross (see :func:`crossovers`), or None when they never do."""
    found = crossovers(p, q, **kw)
    return found[0] if found else None


def compare_fits(a: CurveFit, b: CurveFit, *, min_multiple: float = 2.0) -> dict:
    """Which of two fitted recipes has the higher ceiling, and whether the data can tell.

    Decidable only when both ceilings are bounded, both runs reach ``min_multiple`` x their C_mid
    (docs/references.md#scalerl-curves: rank by A only after ~2-3 x C_mid), and the two intervals on A do not overlap.
    -> {"higher": "a" | "b", "decidable": bool, "why": str, "crossover": the first C or None,
    "crossovers": all of them, "last_crossover": the last C (past it the higher-A recipe stays ahead)}.
    """
    higher = "a" if a.params.a >= b.params.a else "b"
    problems = []
    for name, f in (("a", a), ("b", b)):
        if f.unbounded:
            problems.append(f"{name}'s ceiling is unbounded ({f.reason})")
        elif f.c_max_over_c_mid < min_multiple:
            problems.append(
                f"{name}'s data end at {f.c_max_over_c_mid:.2f} x C_mid (< {min_multiple:g}): too early to rank by A"
            )
    overlap = a.a_interval[0] <= b.a_interval[1] and b.a_interval[0] <= a.a_interval[1]
    if not problems and overlap:
        problems.append("the intervals on A overlap")
    cross = crossovers(a.params, b.params)
    return {
        "higher": higher,
        "decidable": not problems,
        "why": "; ".join(problems) or f"{higher}'s interval on A lies above the other's",
        "crossover": cross[0] if cross else None,
        "crossovers": cross,
        "last_crossover": cross[-1] if cross else None,
    }
