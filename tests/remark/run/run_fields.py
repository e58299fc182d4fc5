"""The training fields the CPU run tests share: a 4-step run of the hand-built tiny model, K = 3."""

from __future__ import annotations

from typing import Any

#: Fields of a 4-step CPU run (G = 4, 2 prompts per step, exact matching, seed 7); tests override the rest.
TINY_RUN: dict[str, Any] = dict(
    use_cpu=True,
    bf16=False,
    report_to="none",
    per_device_train_batch_size=8,
    num_generations=4,
    max_completion_length=24,
    max_steps=4,
    learning_rate=5e-3,
    loss_type="bnpo",
    scale_rewards="group",
    beta=0.0,
    num_ranks=3,
    match_mode="exact",
    seed=7,
    data_seed=7,
    logging_steps=1,
    save_strategy="no",
    disable_tqdm=True,
)


def tiny_run_fields(output_dir: Any, **overrides: Any) -> dict[str, Any]:
    """:data:`TINY_RUN` with ``output_dir`` and ``overrides`` (which win)."""
    return {"output_dir": str(output_dir), **TINY_RUN, **overrides}
