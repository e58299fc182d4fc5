"""``remark train``: GRPO with rank-level advantages from a YAML config (see ``configs/``).

Examples::

    remark train --config configs/tiny_cpu.yaml                 # builds its own data and model, CPU
    remark train --recipe dapo --config configs/recipes/runs/tiny_cpu.yaml   # a GRPO-family recipe
    remark train --config configs/remark.yaml --set max_steps=500 learning_rate=2e-6
    remark train --config configs/remark.yaml --resume            # newest complete checkpoint in output_dir
    remark train --config configs/remark.yaml --resume --set max_steps=4000   # train a finished run on
    remark train --config configs/remark.yaml --overwrite         # clear the previous run in output_dir first
    accelerate launch --config_file configs/accelerate/multi_gpu.yaml -m remark.cli.main train --config ...

The config is validated before any model loads; errors name the field and what to change. A setting
given where another one keeps it from acting is refused naming both, or noted (``remark.config.effects``).
``--resume`` of a run that already reached ``max_steps`` changes nothing and says so (exit 0).
With ``--recipe NAME`` (``remark recipes`` lists them) the recipe's loss-family fields come first, the
config file on top, ``--set`` last; the recipe fields they change are printed before training.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def parse_overrides(pairs: list[str]) -> dict:
    """``["max_steps=5", "use_cpu=true"]`` -> ``{"max_steps": 5, "use_cpu": True}`` (values read as YAML)."""
    from catalog.io.errors import InputError
    from catalog.io.yaml_files import load_yaml

    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InputError(f"cannot read override {pair!r}", field="--set", hint="write key=value")
        out[key.strip()] = load_yaml(value, path="--set", what=f"the value of {key.strip()}")
    return out


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "train",
        help="train with ReMaRk or Rank-GRPO rank rewards (TRL GRPOTrainer subclass)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--config", type=Path, help="YAML file of RemarkGRPOConfig fields (required without --recipe)"
    )
    p.add_argument(
        "--recipe",
        metavar="NAME",
        help="start from a GRPO-family recipe (`remark recipes`), or a recipe file; the config goes on top",
    )
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="override config fields")
    p.add_argument(
        "--resume",
        nargs="?",
        const="latest",
        default=None,
        metavar="CHECKPOINT",
        help="resume from a checkpoint dir (default: the newest complete one in output_dir; incomplete ones "
        "are skipped and listed)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="start afresh in an output_dir that holds a previous run: first remove exactly that run's files "
        "(logs, eval tables, best/, final/, checkpoints, summaries; assets/ and anything else stay)",
    )
    p.add_argument("--json", action="store_true", help="print the run summary as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import sys

    from catalog.io.errors import InputError
    from remark.config import compose_config
    from remark.config.files import read_config_values
    from remark.run.training import run_training

    if args.config is None and args.recipe is None:
        raise InputError("give --config FILE, --recipe NAME, or both", field="--config")
    overrides = parse_overrides(args.set)
    composed = compose_config(args.recipe, args.config, overrides, check_paths=True)
    if "output_dir" not in overrides and (
        args.config is None or "output_dir" not in read_config_values(args.config)
    ):  # an empty one is refused by load_config; an absent one would be transformers' "trainer_output"
        raise InputError(
            "output_dir is not set: the run would write into transformers' default folder trainer_output/",
            path=args.config,
            field="output_dir",
            hint="add output_dir: runs/NAME to the config, or pass --set output_dir=runs/NAME",
        )
    for line in composed.report():
        print(line, file=sys.stderr)
    cfg = composed.config
    resume = True if args.resume == "latest" else args.resume
    summary = run_training(
        cfg,
        resume=resume,
        overwrite=args.overwrite,
        command=getattr(args, "command_line", None),
        notes=composed.notes,
    )
    if args.json:
        print(json.dumps(summary, indent=2))
    elif summary.get("resumed") == "already finished":
        print(f"final model: {summary['final']} (unchanged, step {summary['global_step']})")
    else:
        best = summary["best"]
        print(f"trained {summary['global_step']} steps; final model: {summary['final']}")
        if best:
            print(f"best {best['metric']} = {best['value']:.4f} at step {best['step']}: {best['path']}")
        if summary["stopped"]:
            print(f"stopped early: {summary['stopped']}")
    return 0
