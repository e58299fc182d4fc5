"""``build_tiny`` (``configs/tiny_cpu.yaml``): a synthetic pooled dataset, a tokenizer and a tiny Qwen2
model trained on its text, SFT-warmed, under ``output_dir/assets``, so that a run needs nothing but this
package. Assets built with the same settings (``assets/build.json``) are reused.

Each of ``data/``, ``base_model/`` and ``sft_model/`` is written through ``catalog.io.outputs.atomic_dir`` (built
in a temporary sibling, renamed into place with its ownership marker), and ``build.json`` says
``{"incomplete": ...}`` from the start of a build until all three are in place, when it is replaced by
the settings: a run killed mid-build leaves complete folders or none, a stamp that matches nothing, and a
temporary folder the next build removes. A folder without the marker of its kind was not written by
``build_tiny`` and is refused before any work, whatever ``build.json`` says (the stamp vouches for
settings, not for who wrote a folder).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from catalog.io.errors import InputError
from catalog.io.outputs import atomic_dir, atomic_write, check_output_dir, output_kind
from remark.config.tiny import TinySpec, check_build_tiny

#: the ``catalog.io.outputs.atomic_dir`` kind of ``assets/base_model`` (``sft_model``: ``remark.run.sft.SFT_KIND``).
TINY_MODEL_KIND = "tiny-model"


def build_tiny_assets(cfg: Any) -> tuple[Path, Path]:
    """Synthetic dataset + tiny SFT-warmed model under ``output_dir/assets``; returns (data_dir, model_dir).

    Reuses assets already built with the same settings (``assets/build.json``), so a resumed run does
    not rebuild them.
    """
    from data_prep.dataset import DATASET_KIND
    from data_prep.synthetic import build_dataset
    from remark.run.sft import SFT_KIND, SFTSettings, run_sft
    from remark.run.tiny_model import build_tiny_model

    opts = check_build_tiny(cfg.build_tiny or {})
    root = Path(cfg.output_dir) / "assets"
    data_dir, base_dir, sft_dir = root / "data", root / "base_model", root / "sft_model"
    kinds = {data_dir: DATASET_KIND, base_dir: TINY_MODEL_KIND, sft_dir: SFT_KIND}
    stamp = root / "build.json"
    if _read_stamp(stamp) == opts and all(output_kind(d) == k for d, k in kinds.items()):
        return data_dir, sft_dir
    for folder, kind in kinds.items():  # before any work, so that a refusal costs nothing
        try:
            check_output_dir(folder, kind, field="build_tiny")
        except InputError as err:
            raise InputError(
                err.message,
                path=folder,
                field="build_tiny",
                hint="move it away (build_tiny rebuilds it), or set another output_dir",
            ) from None
    with atomic_write(stamp) as tmp:  # from here until the last line, the stamp vouches for nothing
        tmp.write_text(json.dumps({"incomplete": opts}, indent=2))
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
    with atomic_dir(base_dir, TINY_MODEL_KIND, field="build_tiny") as tmp:
        build_tiny_model(tmp, corpus, spec=TinySpec(**opts["spec"]), seed=opts["seed"])
    settings = SFTSettings(targets=opts["sft_targets"], k=cfg.num_ranks, seed=opts["seed"])
    with atomic_dir(sft_dir, SFT_KIND, field="build_tiny") as tmp:
        run_sft(
            ds,
            base_dir,
            tmp,
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
            final_dir=sft_dir,
        )
    with atomic_write(stamp) as tmp:
        tmp.write_text(json.dumps(opts, indent=2))
    return data_dir, sft_dir


def _read_stamp(stamp: Path) -> Any:
    """``build.json``'s content, or None when it is missing or not JSON."""
    from catalog.io.errors import InputError
    from catalog.io.files import read_json

    if not stamp.is_file():
        return None
    try:
        return read_json(stamp)
    except InputError:  # a damaged stamp: the assets are built again
        return None
