"""Online group-size adaptation: a ``transformers.TrainerCallback`` that re-plans G from live pass rates.

Kim & Lee (2026) adapt G during training (fixed 64: reward 0.682 at cost 145.2; adaptive: 0.689 at
38.5). Their rule is not public; ours re-runs :func:`.group_size.plan_group_size` every ``every_n_steps``
on the pass rates the trainer has seen recently, and **never changes G inside a run**: the
recommendation is logged and written into each checkpoint, and applied when training resumes from it.
Changing G mid-run would change the generation batch, the data sampler's repeat count and the memory
peak under a running optimizer; a checkpoint boundary is the one place all of that is rebuilt anyway.

What the trainer feeds it (either, or both):

- ``update(request_ids, pass_rates, n_samples=None)``: per-request pass rates (as ``remark diagnose``
  writes them);
- ``update_from_rewards(request_ids, rewards)``: the group rewards it just computed, ``(B, G)`` (one reward
  per list) or ``(B, G, K)`` (rank rewards). Rank-level advantages are scaled per rank, so a rank slot
  carries signal exactly when its G rewards are not all equal: each (request, rank) is one unit with pass
  rate ``p_{x,k} = mean_g r_{g,x,k}`` from n = G samples, and the planner's signal probability becomes the
  expected fraction of non-zero rank advantages. Rewards must lie in [0, 1]; fractional ones are treated
  as Bernoulli at their mean (docs/references.md#group-size: pass rate = mean(r) / max(r)).

Pass the *gathered* (global) rewards so that every process computes the same recommendation; only the
world process zero writes files. Within one call, repeated ids (Rank-GRPO's per-responder rows) pool
their counts; a later call replaces an id's earlier estimate (the policy has moved). Each unit is stamped
with ``step=`` when given, else with the last ``global_step`` seen by ``on_step_end`` (rewards computed
during step t carry t - 1); only units with ``step - stamp <= window_steps`` are used.

Logging: metrics ``plan/recommended_G``, ``plan/signal_prob`` (at the recommended G),
``plan/signal_prob_current`` and ``plan/n_units`` are merged into the next ``on_log`` call's ``logs`` and
into the matching ``state.log_history`` entry. Reporting integrations (wandb, tensorboard) run before
user callbacks, so a trainer that wants them there should merge :meth:`GroupSizeAdvisor.pop_metrics` into
its own ``log()`` (TRL's GRPOTrainer merges its ``_metrics`` the same way).

Resume protocol (for ``remark train --resume``, wired by the trainer): before building the config, call
:func:`resolve_group_size(configured_G, checkpoint_dir, adapt=cfg.adapt_group_size)`; it reads
``<checkpoint>/group_size_recommendation.json`` and returns the G to use and a sentence for the log. Set
``num_generations`` to it and keep requests per step fixed (the generation batch becomes requests x G;
TRL requires it to be divisible by ``num_generations``, so pass only valid G as ``candidates``). The data
sampler's position is not comparable across G: resume with ``ignore_data_skip=True`` when G changed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from transformers import TrainerCallback

from catalog.io.errors import InputError

from .group_size import CostModel, fit_cost_model, plan_group_size
from .logs import read_profile

RECOMMENDATION_FILE = "group_size_recommendation.json"


class GroupSizeAdvisor(TrainerCallback):
    """Re-estimate pass rates every ``every_n_steps`` steps and recommend a group size (see module doc).

    ``min_gain``: switch away from the current G only when the best candidate's objective is at least
    ``1 + min_gain`` times the current G's (no flip-flopping on noise). ``min_units``: fewer measured units
    than this gives no recommendation.
    """

    def __init__(
        self,
        cost: CostModel,
        *,
        memory_budget_gb: float,
        candidates: Sequence[int] = (2, 4, 8, 12, 16, 24, 32, 48, 64),
        every_n_steps: int = 50,
        window_steps: int | None = None,
        min_units: int = 32,
        min_gain: float = 0.05,
        objective: str = "signal_per_s",
        estimator: str = "auto",
        current_G: int | None = None,
    ) -> None:
        if every_n_steps < 1 or min_units < 1 or min_gain < 0:
            raise InputError("need every_n_steps >= 1, min_units >= 1, min_gain >= 0", field="adaptive")
        self.cost = cost
        self.memory_budget_gb = float(memory_budget_gb)
        self.candidates = sorted({int(g) for g in candidates})
        if not self.candidates or self.candidates[0] < 2:
            raise InputError(f"candidates must be integers >= 2, got {list(candidates)}", field="candidates")
        smallest = float(cost.memory(self.candidates[0]))
        if smallest > self.memory_budget_gb:  # fail now, not in the middle of training
            raise InputError(
                f"even G = {self.candidates[0]} needs {smallest:.1f} GB > the {self.memory_budget_gb:g} GB budget",
                field="memory_budget_gb",
            )
        self.every_n_steps = every_n_steps
        self.window_steps = 4 * every_n_steps if window_steps is None else window_steps
        self.min_units = min_units
        self.min_gain = min_gain
        self.objective = objective
        self.estimator = estimator
        self.current_G = current_G
        self.step = 0
        self.latest: dict | None = None
        self._units: dict[str, tuple[float, int, int]] = {}  # key -> (successes, samples, step)
        self._pending: dict[str, float] = {}
        self._dirty = False

    @classmethod
    def from_profile(cls, profile_path: str | Path, **kwargs) -> GroupSizeAdvisor:
        """Build the cost model from a "Cost profile" JSON (``bench/gpu_check.py``); kwargs as ``__init__``."""
        points = read_profile(profile_path)
        cost = fit_cost_model(
            [p["G"] for p in points], [p["peak_mem_gb"] for p in points], [p["step_s"] for p in points]
        )
        return cls(cost, **kwargs)

    # ---- feeding ----
    def update(
        self, request_ids: Sequence[str], pass_rates, n_samples=None, *, step: int | None = None
    ) -> None:
        """Record per-request pass rates (N,), optionally with the samples behind each (N,)."""
        p = np.asarray(pass_rates, dtype=float).ravel()
        if len(request_ids) != p.size:
            raise InputError(f"{len(request_ids)} request ids but {p.size} pass rates", field="pass_rates")
        if np.any((p < 0) | (p > 1)) or not np.all(np.isfinite(p)):
            raise InputError("pass rates must be in [0, 1]", field="pass_rates")
        n = np.zeros(p.size, dtype=int) if n_samples is None else np.asarray(n_samples, dtype=int).ravel()
        self._record([str(r) for r in request_ids], p * n if n_samples is not None else p, n, step)

    def update_from_rewards(self, request_ids: Sequence[str], rewards, *, step: int | None = None) -> None:
        """Record group rewards (B, G) or rank rewards (B, G, K), values in [0, 1], one group per id.

        ``rewards`` may be a numpy array or a torch tensor (any device).
        """
        if hasattr(rewards, "detach"):
            rewards = rewards.detach().float().cpu().numpy()
        r = np.asarray(rewards, dtype=float)
        if r.ndim not in (2, 3) or r.shape[0] != len(request_ids) or r.shape[1] < 2:
            raise InputError(
                f"rewards must be (B, G) or (B, G, K) with B = {len(request_ids)} ids and G >= 2, got {r.shape}",
                field="rewards",
            )
        if np.any((r < 0) | (r > 1)) or not np.all(np.isfinite(r)):
            raise InputError(
                "rewards must be in [0, 1] (divide graded rewards by their maximum)", field="rewards"
            )
        g = r.shape[1]
        succ = r.sum(axis=1)  # (B,) or (B, K)
        if r.ndim == 2:
            keys = [str(x) for x in request_ids]
        else:
            keys = [f"{x}#{k}" for x in request_ids for k in range(r.shape[2])]
            succ = succ.reshape(-1)
        self._record(keys, succ, np.full(len(keys), g), step)

    def _record(self, keys: list[str], succ: np.ndarray, n: np.ndarray, step: int | None) -> None:
        step = self.step if step is None else step
        fresh: dict[str, tuple[float, int, int]] = {}
        for key, s, m in zip(keys, succ.tolist(), n.tolist()):
            if key in fresh and m > 0 and fresh[key][1] > 0:
                s, m = s + fresh[key][0], m + fresh[key][1]
            fresh[key] = (float(s), int(m), step)
        self._units.update(fresh)
        self._dirty = True

    # ---- planning ----
    def recommend(self, step: int | None = None) -> dict | None:
        """Plan G from the units seen in the window; -> the recommendation dict (also ``self.latest``), or
        None with too few units."""
        step = self.step if step is None else step
        live = [v for v in self._units.values() if step - v[2] <= self.window_steps]
        self._dirty = False
        if len(live) < self.min_units:
            return None
        s, n = np.array([v[0] for v in live]), np.array([v[1] for v in live])
        known = bool(np.all(n > 0))  # n = 0 marks a pass rate given without its sample count
        rates = np.where(n > 0, s / np.maximum(n, 1), s)
        cands = sorted(
            set(self.candidates) | ({self.current_G} if self.current_G and self.current_G >= 2 else set())
        )
        plan = plan_group_size(
            self.cost,
            np.clip(rates, 0.0, 1.0),
            memory_budget_gb=self.memory_budget_gb,
            candidates=cands,
            n_samples=n if known else None,
            estimator=self.estimator if known else "plugin",
            objective=self.objective,
        )
        rows = {c.G: c for c in plan.candidates}
        best = plan.recommended
        cur = rows.get(self.current_G) if self.current_G else None
        if cur is not None and cur.fits_memory and rows[best].objective < (1 + self.min_gain) * cur.objective:
            best = cur.G
        self.latest = plan.to_dict() | {
            "recommended_G": best,
            "planner_best_G": plan.recommended,
            "current_G": self.current_G,
            "step": step,
            "signal_prob": rows[best].q,
            "signal_prob_current": cur.q if cur is not None else None,
            "n_units": len(live),
            "window_steps": self.window_steps,
            "min_gain": self.min_gain,
        }
        self._pending = {
            "plan/recommended_G": float(best),
            "plan/signal_prob": rows[best].q,
            "plan/n_units": float(len(live)),
        }
        if cur is not None:
            self._pending["plan/signal_prob_current"] = cur.q
        return self.latest

    def pop_metrics(self) -> dict[str, float]:
        """The plan/* metrics of the last recommendation not yet logged (then cleared)."""
        out, self._pending = self._pending, {}
        return out

    # ---- TrainerCallback hooks ----
    def on_train_begin(self, args, state, control, **kwargs):
        if self.current_G is None:
            self.current_G = getattr(args, "num_generations", None)
        self.step = state.global_step

    def on_step_end(self, args, state, control, **kwargs):
        self.step = state.global_step
        if state.global_step > 0 and state.global_step % self.every_n_steps == 0:
            self.recommend(state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        metrics = self.pop_metrics()
        if not metrics:
            return
        if logs is not None:
            logs.update(metrics)
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(metrics)

    def on_save(self, args, state, control, **kwargs):
        if self._dirty or self.latest is None:
            self.recommend(state.global_step)
        if self.latest is None or not getattr(state, "is_world_process_zero", True):
            return
        ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        write_recommendation(ckpt, self.latest)


def write_recommendation(checkpoint_dir: str | Path, rec: dict) -> Path:
    """Write ``rec`` as ``<checkpoint_dir>/group_size_recommendation.json`` (``catalog.io.outputs.atomic_write``)."""
    from catalog.io.outputs import atomic_write

    path = Path(checkpoint_dir) / RECOMMENDATION_FILE
    with atomic_write(path) as tmp:
        tmp.write_text(json.dumps(rec, indent=2, default=float) + "\n", encoding="utf-8")
    return path


def read_recommendation(checkpoint_dir: str | Path) -> dict | None:
    """The recommendation saved in a checkpoint, or None when it has none."""
    path = Path(checkpoint_dir) / RECOMMENDATION_FILE
    if not path.is_file():
        return None
    from catalog.io.files import read_json

    rec = read_json(
        path,
        schema={"recommended_G": int},
        optional={"step": (int, None), "signal_prob": (float, None), "current_G": (int, None)},
        what=RECOMMENDATION_FILE,
    )
    g = rec["recommended_G"]
    if g < 2:
        raise InputError(
            f"recommended_G must be an integer >= 2, got {g!r}", path=path, field="recommended_G"
        )
    return rec


def resolve_group_size(
    configured_G: int, checkpoint_dir: str | Path | None, *, adapt: bool = True
) -> tuple[int, str]:
    """The G to resume with: the checkpoint's recommendation when ``adapt`` and one exists, else the
    configured G. -> (G, a sentence saying which and why, for the training log)."""
    if checkpoint_dir is None:
        return configured_G, f"G = {configured_G} (configured; not resuming)"
    rec = read_recommendation(checkpoint_dir)
    if rec is None:
        return configured_G, f"G = {configured_G} (configured; no {RECOMMENDATION_FILE} in {checkpoint_dir})"
    g = rec["recommended_G"]
    if not adapt:
        return configured_G, f"G = {configured_G} (configured; adaptation off, checkpoint recommends {g})"
    q = rec.get("signal_prob")
    qs = f", signal probability {q:.3f}" if isinstance(q, int | float) else ""
    return g, f"G = {g} (recommended at step {rec.get('step')}{qs}; configured {configured_G})"
