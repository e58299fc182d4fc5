"""Successive halving over G (by hand) and the optuna joint search (TPE + Hyperband)."""

from __future__ import annotations

import math
import sys

import pytest

from catalog.io.errors import InputError
from remark.planning.search import TUNE_HINT, successive_halving, tune


def peaked_at_8(g: int, steps: int) -> float:
    """Best at G = 8, and longer training lifts every candidate equally."""
    return -abs(math.log2(g) - 3) + 0.001 * steps


def test_successive_halving_by_hand():
    # 6 candidates, eta = 2, 10 steps first. Scores are -|log2 G - 3| + steps / 1000.
    # rung 0: 6 x 10 steps; 8 scores 0.01, 4 and 16 score -0.99: keeps ceil(6/2) = 3 -> 4, 8, 16.
    # rung 1: 3 x 20 steps; keeps ceil(3/2) = 2: 8, then 4 (ties 16 at -0.98; the smaller G wins).
    # rung 2: 2 x 40 steps; keeps 8. Total 60 + 60 + 80 = 200 steps.
    calls = []

    def evaluate(g, steps):
        calls.append((g, steps))
        return peaked_at_8(g, steps)

    res = successive_halving(evaluate, [64, 2, 4, 8, 16, 32], min_steps=10, eta=2)
    assert res.best == 8
    assert [r.steps for r in res.rungs] == [10, 20, 40]
    assert [r.kept for r in res.rungs] == [[4, 8, 16], [4, 8], [8]]
    assert res.total_steps == 200 == sum(s for _, s in calls)
    assert res.history[0] == (2, 10, peaked_at_8(2, 10))


def test_successive_halving_stops_at_max_steps():
    res = successive_halving(peaked_at_8, [2, 4, 8, 16, 32, 64, 128, 256], min_steps=10, max_steps=15, eta=2)
    assert [r.steps for r in res.rungs] == [10, 15]
    assert res.best == 8


@pytest.mark.parametrize(
    ("candidates", "kw"),
    [
        ([], {}),
        ([0, 4], {}),
        ([2, 4.5], {}),
        ([2, 4], {"min_steps": 0}),
        ([2, 4], {"eta": 1}),
        ([2, 4], {"max_steps": 5}),
    ],
)
def test_successive_halving_rejects_bad_input(candidates, kw):
    args = {"min_steps": 10} | kw
    with pytest.raises(InputError):
        successive_halving(peaked_at_8, candidates, **args)


def test_successive_halving_rejects_a_nan_score():
    with pytest.raises(InputError, match="returned nan"):
        successive_halving(lambda g, s: float("nan"), [2, 4], min_steps=1)


def test_tune_finds_the_joint_optimum_and_prunes():
    pytest.importorskip("optuna")

    def evaluate(params, steps):
        return -((math.log2(params["G"]) - 3) ** 2) - (math.log10(params["lr"]) + 6) ** 2 + 0.001 * steps

    space = {"G": ("categorical", [2, 4, 8, 16, 32]), "lr": ("float", 1e-8, 1e-4, "log")}
    res = tune(evaluate, space, n_trials=30, min_steps=1, max_steps=27, seed=0)
    assert res.best_params["G"] == 8
    assert abs(math.log10(res.best_params["lr"]) + 6) < 0.5
    assert res.n_pruned > 0 and res.n_complete + res.n_pruned == 30
    assert {t["state"] for t in res.trials} <= {"complete", "pruned"}


def test_tune_without_optuna_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)
    with pytest.raises(ImportError, match=r"pip install remark\[tune\]"):
        tune(lambda p, s: 0.0, {"G": ("categorical", [2, 4])}, n_trials=1, min_steps=1, max_steps=2)
    assert "remark[tune]" in TUNE_HINT


def test_tune_rejects_an_unknown_space_kind():
    pytest.importorskip("optuna")
    with pytest.raises(InputError, match="search-space kind"):
        tune(lambda p, s: 0.0, {"G": ("choice", [2, 4])}, n_trials=1, min_steps=1, max_steps=2)
