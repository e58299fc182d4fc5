"""``remark sft``: SFT warm-up on target lists built from a pooled dataset (TRL SFTTrainer).

Example::

    remark sft --data data/reddit-v2 --model Qwen/Qwen2.5-0.5B-Instruct --out runs/sft --targets union
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from remark.cli.adapter import add_adapter_flags
from remark.config.ranges import flag_type


def add_parser(subparsers) -> None:
    from remark.run.sft import TARGETS

    p = subparsers.add_parser(
        "sft",
        help="SFT warm-up on lists built from pooled data",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--data", type=Path, required=True, help="pooled dataset dir (remark prep)")
    p.add_argument(
        "--model", required=True, help="base model dir (or hub id when online), or a LoRA adapter folder"
    )
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        help="where the warmed model is saved: new, empty, or an earlier `remark sft` output (replaced "
        "atomically once training is done)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace --out even if it is a folder remark sft did not write (never an input)",
    )
    p.add_argument("--targets", choices=TARGETS, default="union", help="how target lists are built")
    p.add_argument("--k", type=flag_type("--k"), default=20, help="items per target list (default 20)")
    p.add_argument(
        "--hit-prob",
        type=flag_type("--hit-prob"),
        default=None,
        help="--targets noisy: chance a slot is a true item (default 0.3)",
    )
    p.add_argument("--copies", type=flag_type("--copies"), default=1, help="target draws per request")
    p.add_argument("--split", default="train")
    p.add_argument(
        "--lr", type=flag_type("--lr"), default=5e-5, help="learning rate (Rank-GRPO: 5e-5, cosine)"
    )
    p.add_argument(
        "--epochs", type=flag_type("--epochs"), default=None, help="epochs (default 1; not with --max-steps)"
    )
    p.add_argument(
        "--max-steps",
        type=flag_type("--max-steps"),
        default=None,
        help="stop after this many optimizer steps (1 or more; default: train --epochs)",
    )
    p.add_argument("--batch-size", type=flag_type("--batch-size"), default=8)
    p.add_argument("--cpu", action="store_true", help="train on CPU (fp32)")
    p.add_argument("--bf16", action="store_true", help="bf16 mixed precision (GPU)")
    p.add_argument("--seed", type=flag_type("--seed"), default=0)
    lora = p.add_argument_group("LoRA (train an adapter instead of every weight; needs remark[lora])")
    lora.add_argument(
        "--lora-r", type=flag_type("--lora-r"), default=None, metavar="R", help="LoRA rank (turns LoRA on)"
    )
    lora.add_argument(
        "--lora-alpha", type=flag_type("--lora-alpha"), default=None, help="LoRA alpha (default 2 x rank)"
    )
    lora.add_argument(
        "--lora-dropout",
        type=flag_type("--lora-dropout"),
        default=None,
        help="LoRA dropout (default 0.05)",
    )
    lora.add_argument(
        "--lora-target-modules", nargs="+", default=None, metavar="NAME", help="default: all linear layers"
    )
    add_adapter_flags(p)
    p.set_defaults(func=run)


def refuse_ignored(args: argparse.Namespace) -> None:
    """A flag that acts only with another one is refused without it (``InputError`` naming both)."""
    from catalog.io.errors import InputError

    lora = "without --lora-r (which turns LoRA on)"
    refused = [
        ("--hit-prob", args.hit_prob is not None and args.targets != "noisy", "without --targets noisy"),
        (
            "--epochs",
            args.epochs is not None and args.max_steps is not None,
            "with --max-steps (it sets the length)",
        ),
        ("--lora-alpha", args.lora_alpha is not None and args.lora_r is None, lora),
        ("--lora-dropout", args.lora_dropout is not None and args.lora_r is None, lora),
        ("--lora-target-modules", args.lora_target_modules is not None and args.lora_r is None, lora),
    ]
    for flag, ignored, why in refused:
        if ignored:
            raise InputError(f"{flag} has no effect {why}", field=flag, hint=f"drop {flag}")


def lora_settings(args: argparse.Namespace) -> Any:
    """The LoRA flags as the config's fields, validated like ``remark train``'s (``remark.config.lora``)."""
    from types import SimpleNamespace

    from remark.config.lora import check_target_modules, validate_lora

    fields = SimpleNamespace(
        model_name_or_path=args.model,
        use_peft=args.lora_r is not None,
        lora_r=args.lora_r,
        lora_alpha=args.lora_alpha if args.lora_alpha is not None else 2 * (args.lora_r or 0),
        lora_dropout=0.05 if args.lora_dropout is None else args.lora_dropout,
        lora_target_modules=args.lora_target_modules,
        merge_adapter=args.merge_adapter,
        adapter_base_model=args.base_model,
    )
    validate_lora(fields)
    if fields.use_peft:
        from eval.adapters import adapter_base, is_adapter_dir

        base = adapter_base(args.model, args.base_model) if is_adapter_dir(args.model) else args.model
        check_target_modules(fields, base)
    return fields


def run(args: argparse.Namespace) -> int:
    from catalog.io.outputs import atomic_dir, check_output_dir
    from data_prep.dataset import load_dataset
    from eval.generate import AdapterLoad
    from remark.config import check_model_path
    from remark.config.lora import peft_config
    from remark.run.sft import SFT_KIND, SFTSettings, run_sft

    # --out never replaces an input, nor (without --force) a folder remark sft did not write
    inputs = [args.data, args.model if Path(args.model).exists() else None, args.base_model]
    refuse_ignored(args)
    check_output_dir(args.out, SFT_KIND, inputs=inputs, force=args.force, hold=True)  # before anything loads
    check_model_path(args.model, "--model")
    lora = lora_settings(args)
    ds = load_dataset(args.data)
    settings = SFTSettings(
        targets=args.targets,
        k=args.k,
        hit_prob=0.3 if args.hit_prob is None else args.hit_prob,
        copies=args.copies,
        seed=args.seed,
    )
    sft_args = {
        "learning_rate": args.lr,
        "num_train_epochs": 1.0 if args.epochs is None else args.epochs,
        "per_device_train_batch_size": args.batch_size,
        "use_cpu": args.cpu,
        "bf16": args.bf16,
    }
    if args.max_steps is not None:
        sft_args["max_steps"] = args.max_steps
    with atomic_dir(args.out, SFT_KIND, inputs=inputs, force=args.force) as tmp:
        run_sft(
            ds,
            args.model,
            tmp,
            settings,
            sft_args,
            split=args.split,
            peft_config=peft_config(lora),
            adapter=AdapterLoad(base=args.base_model, merge=args.merge_adapter),
            final_dir=args.out,
        )
    print(f"SFT model saved to {args.out}")
    return 0
