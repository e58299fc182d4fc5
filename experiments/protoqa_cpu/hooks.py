"""Small trainer callbacks of the ProtoQA CPU experiment; validation itself is the library's.

- ``Side``: runs one ``remark.run.callbacks.ValidationCallback`` (greedy + sampled lists, eval-log contract)
  and times it; with ``subdir`` its outputs go to ``<output_dir>/<subdir>/`` instead of the run root, so
  one run can be validated on the validation half of the held-out respondents (run root, as
  ``validation_data_dir`` would) and scored on the test half (``<run>/test/``) at the same steps.
  Both sides use the same sampling seed and the same question order, so they score the same lists.
- ``Progress``: ``{"step", "max_steps", "wall_s"}`` after every step, for the launcher's progress bar.
- ``LogHistory``: the trainer's ``log_history`` to ``<output_dir>/train_log.jsonl`` at the end of
  training (``remark.run.training.run_training`` writes a summary, not the history).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from catalog.io.outputs import atomic_write

# ValidationCallback keeps a best checkpoint by ``metric``; a key it never logs keeps none (the best step
# is chosen afterwards from the logs, on the validation side, and read on the test side).
NO_CHECKPOINT = "none"


class _Under:
    """``args`` with another ``output_dir`` (everything else read through)."""

    def __init__(self, args: Any, output_dir: Path) -> None:
        self._args, self.output_dir = args, str(output_dir)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._args, name)


class Side(TrainerCallback):
    """A ``ValidationCallback`` writing under ``<output_dir>/<subdir>`` (or the root), timed."""

    def __init__(self, inner: TrainerCallback, subdir: str | None = None) -> None:
        self.inner, self.subdir, self.seconds = inner, subdir, 0.0

    def _args(self, args: Any) -> Any:
        return args if self.subdir is None else _Under(args, Path(args.output_dir) / self.subdir)

    def on_train_begin(self, args, state, control, **kwargs):
        t = time.monotonic()
        self.inner.on_train_begin(self._args(args), state, control, **kwargs)
        self.seconds += time.monotonic() - t

    def on_step_end(self, args, state, control, **kwargs):
        t = time.monotonic()
        self.inner.on_step_end(self._args(args), state, control, **kwargs)
        self.seconds += time.monotonic() - t


class Progress(TrainerCallback):
    """Writes ``{"step", "max_steps", "wall_s"}`` after every step (the launcher's progress bar reads it)."""

    def __init__(self, path: Path) -> None:
        self.path, self._t0 = path, time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        record = {
            "step": state.global_step,
            "max_steps": state.max_steps,
            "wall_s": time.monotonic() - self._t0,
        }
        with atomic_write(self.path) as tmp:
            tmp.write_text(json.dumps(record))


class LogHistory(TrainerCallback):
    """``state.log_history`` to ``<output_dir>/train_log.jsonl``, without the validation records (the eval
    logs hold them; the validation and test sides would otherwise log the same keys)."""

    def on_train_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            recs = [r for r in state.log_history if not any(k.startswith("eval/") for k in r)]
            with atomic_write(Path(args.output_dir) / "train_log.jsonl") as tmp:
                tmp.write_text("".join(json.dumps(r) + "\n" for r in recs))
