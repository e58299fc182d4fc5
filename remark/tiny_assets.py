"""``build_tiny`` (``configs/tiny_cpu.yaml``): a synthetic pooled dataset, a tokenizer and a tiny Qwen2
model trained on its text, SFT-warmed, under ``output_dir/assets``, so that a run needs nothing but this
package. Assets built with the same settings (``assets/build.json``) are reused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from catalog.errors import InputError
from catalog.io import atomic_write

TINY_DEFAULTS: dict[str, Any] = {
    "n_requests": 300,
    "n_items": 48,
    "relevant_size": [6, 10],
    "seed": 0,
    "sft_epochs": 8,
    "sft_lr": 3e-3,
    "sft_targets": "union",
    "spec": {"vocab_size": 1024, "hidden_size": 96, "intermediate_size": 384},
}


def build_tiny_assets(cfg: Any) -> tuple[Path, Path]:
    """Synthetic dataset + tiny SFT-warmed model under ``output_dir/assets``; returns (data_dir, model_dir).

    Reuses assets already built with the same settings (``assets/build.json``), so a resumed run does
    not rebuild them.
    """
    from data_prep.synthetic import build_dataset
    from remark.sft import SFTSettings, run_sft
    from remark.tiny import TinySpec, build_tiny_model

    opts = {**TINY_DEFAULTS, **(cfg.build_tiny or {})}
    unknown = set(opts) - set(TINY_DEFAULTS)
    if unknown:
        raise InputError(
            f"unknown build_tiny keys {sorted(unknown)}",
            field="build_tiny",
            hint=f"valid: {sorted(TINY_DEFAULTS)}",
        )
    for key, default in TINY_DEFAULTS.items():  # each value has its default's type (checked before building)
        value = opts[key]
        if type(value) is not type(default) and not (type(default) is float and type(value) is int):
            raise InputError(
                f"build_tiny.{key} = {value!r} is not {type(default).__name__} like its default {default!r}",
                field="build_tiny",
            )
    root = Path(cfg.output_dir) / "assets"
    data_dir, base_dir, sft_dir = root / "data", root / "base_model", root / "sft_model"
    stamp = root / "build.json"
    if stamp.is_file() and json.loads(stamp.read_text()) == opts and (sft_dir / "config.json").is_file():
        return data_dir, sft_dir
    ds = build_dataset(
        data_dir,
        n_requests=opts["n_requests"],
        n_items=opts["n_items"],
        relevant_size=tuple(opts["relevant_size"]),
        seed=opts["seed"],
    )
    corpus = [
        "\n".join(ds.catalog.df["item_id"].to_list()[i : i + 20]) for i in range(0, len(ds.catalog), 20)
    ]
    corpus += [m["content"] for p in ds.requests["prompt"].to_list() for m in p]
    build_tiny_model(base_dir, corpus, spec=TinySpec(**opts["spec"]), seed=opts["seed"])
    settings = SFTSettings(targets=opts["sft_targets"], k=cfg.num_ranks, seed=opts["seed"])
    run_sft(
        ds,
        base_dir,
        sft_dir,
        settings,
        {
            "use_cpu": cfg.use_cpu,
            "bf16": False,
            "learning_rate": opts["sft_lr"],
            "lr_scheduler_type": "cosine",
            "num_train_epochs": opts["sft_epochs"],
            "per_device_train_batch_size": 16,
            "logging_steps": 50,
            "disable_tqdm": cfg.disable_tqdm,
        },
    )
    with atomic_write(stamp) as tmp:
        tmp.write_text(json.dumps(opts, indent=2))
    return data_dir, sft_dir
