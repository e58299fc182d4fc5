"""The demo's validation plot: each method's seed-averaged curve with its band, every seed's own curve,
and the steps-to-reach target and crossing, all labelled (matplotlib, no display needed)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from catalog.io.outputs import atomic_write
from remark.demo.settings import METHODS


def plot_validation(result: dict[str, Any], path: Path, *, lists: str, k: int, steps: int) -> Path:
    """PNG of one validation lists' curves (``validation_results(...)[lists]``)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.2, 4.4))
    ax = fig.subplots()
    colors = {"remark": "tab:blue", "rank_grpo": "tab:orange"}
    curves = result["curves"]
    n_seeds = len(next(iter(curves.values()))["seeds"])
    for m, (label, _, _) in METHODS.items():
        pooled = curves[m]["pooled"]
        x = np.asarray(pooled["x"], dtype=float)
        ax.plot(
            x,
            pooled["mean"],
            color=colors[m],
            marker=".",
            linewidth=2,
            label=f"{label}, mean of {n_seeds} seeds",
        )
        low, high = np.asarray(pooled["low"], dtype=float), np.asarray(pooled["high"], dtype=float)
        ok = np.isfinite(low) & np.isfinite(high)
        if ok.any():
            ax.fill_between(x[ok], low[ok], high[ok], color=colors[m], alpha=0.15, linewidth=0)
        for i, c in enumerate(curves[m]["seeds"].values()):
            ax.plot(
                c["x"],
                c["mean"],
                color=colors[m],
                linewidth=0.8,
                alpha=0.5,
                linestyle="--",
                label=f"{label}, each seed" if i == 0 else None,
            )
    reach = result["pooled"]["remark_reaches_rank_grpo"]
    target = reach.get("baseline_value", math.nan)
    if math.isfinite(target):
        ax.axhline(
            target,
            color="grey",
            linestyle="-.",
            linewidth=1,
            label=f"Rank-GRPO at step {reach['baseline_step']} (mean of seeds): {target:.3f}",
        )
        if reach.get("reached"):
            ax.axvline(
                reach["step"],
                color="grey",
                linestyle=":",
                linewidth=1.2,
                label=f"ReMaRk reaches it at step {reach['step']:.0f} ({reach['fraction']:.0%} of the steps)",
            )
    ax.set_xlabel(f"RL step (optimizer steps, {steps} in all)")
    ax.set_ylabel(f"validation recall@{k} per responder ({lists} lists)")
    ax.set_title(
        f"ReMaRk vs Rank-GRPO from one warm-up: validation curves\n(band: 95% CI over validation requests "
        f"of the mean of {n_seeds} seeds)",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    with atomic_write(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    return path
