"""``remark merge-adapter``: fold a LoRA adapter folder into its base model and save a full model.

Example::

    remark merge-adapter runs/lora/best --out runs/lora/best-merged     # base read from adapter_config.json
    remark merge-adapter runs/lora/best --out merged --base-model /models/Qwen2.5-3B-Instruct

``remark eval run`` and ``remark sft`` take an adapter folder as ``--model`` directly (with
``--merge-adapter`` to merge it in memory first, and ``--base-model`` for a moved run); this command writes
the merged model once, for vLLM, the hub or tools that do not know PEFT.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_adapter_flags(p: argparse.ArgumentParser) -> None:
    """``--base-model`` and ``--merge-adapter``, for commands whose ``--model`` may be an adapter folder."""
    g = p.add_argument_group("LoRA adapters (when --model is an adapter folder: adapter_config.json)")
    g.add_argument(
        "--base-model",
        default=None,
        metavar="DIR",
        help="base model of the adapter (default: base_model_name_or_path of its adapter_config.json)",
    )
    g.add_argument("--merge-adapter", action="store_true", help="merge the adapter into its base before use")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "merge-adapter",
        help="merge a LoRA adapter folder into its base model and save the full model",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "adapter", type=Path, help="adapter folder (adapter_config.json + adapter_model.safetensors)"
    )
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        help="folder for the merged model and tokenizer (new, empty, or an earlier merge-adapter --out)",
    )
    p.add_argument(
        "--force", action="store_true", help="replace --out even if it is a folder remark did not write"
    )
    p.add_argument("--base-model", default=None, metavar="DIR", help="base model (default: the adapter's)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from eval.adapters import adapter_base, merge_adapter

    out = merge_adapter(args.adapter, args.out, base=args.base_model, force=args.force)
    print(f"merged {args.adapter} into {adapter_base(args.adapter, args.base_model)}: {out}")
    return 0
