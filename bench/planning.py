"""Planning tools by simulation: curve-fit recovery, interval coverage, the unbounded flag, q estimators.

Run by hand (not a test):  python bench/planning.py [--seeds 100]

1. ScaleRL fits on noisy synthetic curves (R0 = 0.1, A = 0.6, B = 1.5, C_mid = 1000, 40 evenly spaced
   validations from 0 to ``end``): for each (noise sd, end / C_mid), the median and 95th percentile of
   |A_hat - A|, the share within 0.02, the coverage of the 95 % profile interval on A, the share flagged
   unbounded, and the mean fit time.
2. Signal probability at G = 4..64 from pass rates measured with 8 samples per request (true p ~
   Beta(0.3, 1.5), 3000 requests): the truth, the plug-in estimate and the empirical-Bayes beta estimate.
Prints markdown tables (copy into bench/RESULTS.md).
"""

from __future__ import annotations

import time

import numpy as np
from flags import bench_parser, run_script

from remark.planning.curves import CurveParams, fit_curve
from remark.planning.group_size import expected_signal_prob, signal_prob

TRUE = CurveParams(r0=0.1, a=0.6, b=1.5, c_mid=1000.0)


def curve_table(seeds: int) -> None:
    print(
        "| noise sd | end / C_mid | median abs err A | p95 abs err A | within 0.02 | coverage 95% | unbounded | ms/fit |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for sd in (0.005, 0.01):
        for mult in (0.5, 1.0, 1.5, 2.0, 3.0, 5.0):
            errs, cover, unb, secs = [], [], [], []
            for seed in range(seeds):
                rng = np.random.default_rng(seed)
                c = np.linspace(0.0, mult * TRUE.c_mid, 41)
                r = np.clip(TRUE(c) + rng.normal(0.0, sd, c.size), 0.0, 1.0)
                r[0] = TRUE.r0
                t0 = time.perf_counter()
                fit = fit_curve(c, r)
                secs.append(time.perf_counter() - t0)
                errs.append(abs(fit.params.a - TRUE.a))
                cover.append(fit.a_interval[0] <= TRUE.a <= fit.a_interval[1])
                unb.append(fit.unbounded)
            e = np.array(errs)
            print(
                f"| {sd} | {mult} | {np.median(e):.4f} | {np.quantile(e, 0.95):.4f} | {np.mean(e < 0.02):.2f} "
                f"| {np.mean(cover):.2f} | {np.mean(unb):.2f} | {1e3 * np.mean(secs):.0f} |"
            )


def q_table() -> None:
    rng = np.random.default_rng(0)
    p = rng.beta(0.3, 1.5, 3000)
    k = rng.binomial(8, p)
    g = [4, 8, 16, 32, 64]
    truth = signal_prob(g, p).mean(1)
    plug, _ = expected_signal_prob(g, k / 8)
    beta, _ = expected_signal_prob(g, k / 8, n_samples=np.full(p.size, 8))
    print("| G | true mean q | plug-in | beta (empirical Bayes) |")
    print("|---|---|---|---|")
    for i, gi in enumerate(g):
        print(f"| {gi} | {truth[i]:.3f} | {plug[i]:.3f} | {beta[i]:.3f} |")


def main() -> None:
    ap = bench_parser(__file__, __doc__)
    ap.add_argument("--seeds", type=int, default=100)
    args = ap.parse_args()
    curve_table(args.seeds)
    print()
    q_table()


if __name__ == "__main__":
    run_script(main)
