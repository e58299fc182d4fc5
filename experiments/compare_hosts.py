"""Compare two demo runs stage by stage: the first training step whose logged numbers differ, and the weights.

Two hosts (or two builds) ran ``remark demo`` with the same settings; where do their runs part? For every stage
folder both runs hold (``logs/<stage>/`` of a demo's output, or ``stages/<stage>/`` of a kept reference run),
the trainer's per-step log lines (``worker.log``'s ``{'loss': ...}`` lines, or a saved ``step_logs.txt``) are
compared field by field (``step_time`` left out), and the first differing step is printed with the fields
that differ; then the weight hashes (``summary.json``'s ``weights``, or a ``weights.sha256`` file in
``sha256sum`` format) are compared path by path.

    python experiments/compare_hosts.py runs/demo ../shared/reference-runs/demo-32cc79e-amd-epyc-avx512
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

STAGE_DIRS = ("logs", "stages")


def step_records(folder: Path) -> list[dict] | None:
    """The trainer's per-step log records of one stage folder, ``step_time`` dropped; None without a log."""
    for name in ("step_logs.txt", "worker.log"):
        path = folder / name
        if path.is_file():
            lines = [x.strip() for x in path.read_text(errors="replace").splitlines()]
            records = [ast.literal_eval(x) for x in lines if x.startswith("{'loss'")]
            for r in records:
                r.pop("step_time", None)
            return records
    return None


def stages(run: Path) -> dict[str, Path]:
    """Stage name -> its folder in a demo output or a reference run."""
    for sub in STAGE_DIRS:
        if (run / sub).is_dir():
            return {p.name: p for p in sorted((run / sub).iterdir()) if p.is_dir()}
    return {}


def weights(run: Path) -> dict[str, str]:
    """Weight file -> sha256, from ``summary.json``'s ``weights`` or a ``weights.sha256`` file."""
    summary = run / "summary.json"
    if summary.is_file():
        found = json.loads(summary.read_text()).get("weights")
        if found:
            return found
    listing = run / "weights.sha256"
    if listing.is_file():
        pairs = (line.split(maxsplit=1) for line in listing.read_text().splitlines() if line.strip())
        return {path.strip(): digest for digest, path in pairs}
    return {}


def first_difference(a: list[dict], b: list[dict]) -> tuple[int, dict] | None:
    """``(step, {field: (a, b)})`` of the first step whose records differ (1-based), None if the common steps
    are equal."""
    for i, (ra, rb) in enumerate(zip(a, b)):
        diff = {k: (ra.get(k), rb.get(k)) for k in sorted(set(ra) | set(rb)) if ra.get(k) != rb.get(k)}
        if diff:
            return i + 1, diff
    return None


def compare(run_a: Path, run_b: Path) -> list[str]:
    """The report's lines: one per stage both runs hold, then one per weight file both list."""
    lines = []
    sa, sb = stages(run_a), stages(run_b)
    for name in sorted(set(sa) & set(sb)):
        a, b = step_records(sa[name]), step_records(sb[name])
        if not a or not b:
            continue
        found = first_difference(a, b)
        n = min(len(a), len(b))
        if found is None:
            lines.append(f"{name}: the {n} common steps are identical ({len(a)} and {len(b)} logged)")
        else:
            step, diff = found
            shown = ", ".join(f"{k} {x} vs {y}" for k, (x, y) in list(diff.items())[:6])
            lines.append(f"{name}: first differing step {step} of {n}: {shown}")
    wa, wb = weights(run_a), weights(run_b)
    for path in sorted(set(wa) & set(wb)):
        lines.append(f"{path}: {'same weights' if wa[path] == wb[path] else 'different weights'}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_a", type=Path)
    parser.add_argument("run_b", type=Path)
    args = parser.parse_args()
    print("\n".join(compare(args.run_a, args.run_b)) or "nothing in common to compare")


if __name__ == "__main__":
    main()
