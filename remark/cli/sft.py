"""``remark sft``: SFT warm-up on target lists built from a pooled dataset (TRL SFTTrainer).

Example::

    remark sft --data data/reddit-v2 --model Qwen/Qwen2.5-0.5B-Instruct --out runs/sft --targets union
"""

from __future__ import annotations

import argparse
from pathlib import Path

from remark.cli.args import positive_float, positive_int, probability


def add_parser(subparsers) -> None:
    from remark.sft import TARGETS

    p = subparsers.add_parser(
        "sft",
        help="SFT warm-up on lists built from pooled data",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--data", type=Path, required=True, help="pooled dataset dir (remark prep)")
    p.add_argument("--model", required=True, help="base model dir (or hub id when online)")
    p.add_argument("--out", type=Path, required=True, help="where the warmed model is saved")
    p.add_argument("--targets", choices=TARGETS, default="union", help="how target lists are built")
    p.add_argument("--k", type=positive_int, default=20, help="items per target list (default 20)")
    p.add_argument(
        "--hit-prob", type=probability, default=0.3, help="noisy targets: chance a slot is a true item"
    )
    p.add_argument("--copies", type=positive_int, default=1, help="target draws per request")
    p.add_argument("--split", default="train")
    p.add_argument("--lr", type=positive_float, default=5e-5, help="learning rate (Rank-GRPO: 5e-5, cosine)")
    p.add_argument("--epochs", type=positive_float, default=1.0)
    p.add_argument("--max-steps", type=int, default=-1)
    p.add_argument("--batch-size", type=positive_int, default=8)
    p.add_argument("--cpu", action="store_true", help="train on CPU (fp32)")
    p.add_argument("--bf16", action="store_true", help="bf16 mixed precision (GPU)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from data_prep.dataset import load_dataset
    from remark.config import check_model_path
    from remark.sft import SFTSettings, run_sft

    check_model_path(args.model, "--model")
    ds = load_dataset(args.data)
    settings = SFTSettings(
        targets=args.targets, k=args.k, hit_prob=args.hit_prob, copies=args.copies, seed=args.seed
    )
    out = run_sft(
        ds,
        args.model,
        args.out,
        settings,
        {
            "learning_rate": args.lr,
            "num_train_epochs": args.epochs,
            "max_steps": args.max_steps,
            "per_device_train_batch_size": args.batch_size,
            "use_cpu": args.cpu,
            "bf16": args.bf16,
        },
        split=args.split,
    )
    print(f"SFT model saved to {out}")
    return 0
