"""SFT warm-up: teach the policy the list format and the catalog before RL (TRL's ``SFTTrainer``).

Rank-GRPO warms up with SFT on reference lists (lr 5e-5, cosine). Targets here are built from the
pooled training split, one conversational prompt-completion example per request (the same prompt the
RL trainer and the evaluation use), in one of three ways:

- ``union``: the request's union items, most-named first, padded to K with popular catalog items;
- ``responder``: one example per (request, responder): that responder's items, padded the same way
  (Rank-GRPO's per-responder view);
- ``noisy`` (for small runs): each of the K slots is, with probability
  ``hit_prob``, an item of a random responder of the request, else a random catalog item. A warm-up
  that knows the format and the catalog but not yet the answers leaves room for RL to show a difference.

Padding and noise never use seen items and never repeat an item within a list. Lines are the catalog's
display strings ("Title (Year)", or "Title" for year-less catalogs), one per line.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from catalog.io.errors import InputError

if TYPE_CHECKING:  # the rest is imported where it is used: remark sft --help reads TARGETS from here
    import numpy as np

    from data_prep.dataset import PooledDataset

Targets = Literal["union", "responder", "noisy"]
TARGETS: tuple[str, ...] = ("union", "responder", "noisy")
#: the ``catalog.io.outputs.atomic_dir`` kind of a ``remark sft --out`` folder.
SFT_KIND = "sft"


@dataclass(frozen=True)
class SFTSettings:
    """What ``remark sft`` trains (the rest are TRL ``SFTConfig`` fields)."""

    targets: Targets = "union"
    k: int = 20
    hit_prob: float = 0.3
    copies: int = 1
    seed: int = 0


def _pad_list(
    items: list[str], pool: np.ndarray, weights: np.ndarray, k: int, banned: set[str], rng
) -> list[str]:
    import numpy as np

    out = [x for x in dict.fromkeys(items) if x not in banned][:k]
    taken = set(out) | banned
    if len(out) < k:
        # Weighted sampling without replacement by Gumbel-top-k: order by log w + Gumbel noise. Items of
        # weight 0 come last instead of making the draw fail (numpy's choice refuses too few non-zero p).
        with np.errstate(divide="ignore"):
            keys = np.log(weights) + rng.gumbel(size=len(pool))
        order = np.argsort(-keys, kind="stable")
        out += [x for x in pool[order] if x not in taken][: k - len(out)]
    return out


def sft_examples(ds: PooledDataset, settings: SFTSettings, *, split: str = "train") -> list[dict[str, Any]]:
    """Conversational prompt-completion examples for ``SFTTrainer`` (``copies`` draws per request)."""
    import numpy as np

    from remark.run.sampling import prompt_messages

    if settings.targets not in TARGETS:
        raise InputError(f"unknown targets {settings.targets!r}", field="targets", hint=f"one of {TARGETS}")
    if not 0.0 <= settings.hit_prob <= 1.0:
        raise InputError(f"hit_prob={settings.hit_prob}", field="hit_prob", hint="a probability in [0, 1]")
    rng = np.random.default_rng(settings.seed)
    cat = ds.catalog
    pool = cat.df["item_id"].to_numpy()
    pop = cat.df["popularity"].fill_null(1.0).to_numpy().astype(np.float64)
    weights = pop / pop.sum() if pop.sum() > 0 else np.full(len(pool), 1.0 / len(pool))
    rows = ds.requests.filter(ds.requests["split"] == split)
    if rows.height == 0:
        raise InputError(f"no request in split {split!r}", field="split")
    out = []
    for row in rows.iter_rows(named=True):
        messages = prompt_messages(row["prompt"], ds.meta, settings.k)
        banned = set(row["seen"])
        for _ in range(settings.copies):
            if settings.targets == "union":
                order = np.argsort(-np.asarray(row["counts"]), kind="stable")
                lists = [[row["union"][i] for i in order]]
            elif settings.targets == "responder":
                lists = [list(items) for items in row["responders"]]
            else:
                named = [x for items in row["responders"] for x in items]
                hits = rng.random(settings.k) < settings.hit_prob
                slots = [named[rng.integers(len(named))] if h and named else None for h in hits]
                lists = [[x for x in slots if x is not None]]
            for items in lists:
                chosen = _pad_list(items, pool, weights, settings.k, banned, rng)
                if settings.targets == "noisy":
                    rng.shuffle(chosen)
                text = "\n".join(cat.display(x) for x in chosen)
                out.append({"prompt": messages, "completion": [{"role": "assistant", "content": text}]})
    return out


def run_sft(
    ds: PooledDataset,
    model: str | Path,
    out_dir: str | Path,
    settings: SFTSettings,
    sft_args: dict[str, Any] | None = None,
    *,
    split: str = "train",
    callbacks: Sequence[Any] = (),
    print_logs: bool = True,
    peft_config: Any = None,
    adapter: Any = None,
    final_dir: str | Path | None = None,
) -> Path:
    """Fine-tune ``model`` on :func:`sft_examples` with TRL's ``SFTTrainer``; save model + tokenizer to ``out_dir``.

    ``callbacks`` are extra ``transformers.TrainerCallback``s (e.g. a progress bar). The saved directory
    holds no pickle (``SafeCheckpointMixin``: no ``training_args.bin``). ``print_logs=False`` keeps the
    per-step log dicts off stdout (transformers prints them when its progress bar is disabled).

    LoRA: ``peft_config`` (a ``peft.LoraConfig``, ``remark.config.lora.peft_config``) trains an adapter and
    saves only it. ``model`` may be an adapter folder (``eval.adapters``; ``adapter`` an
    ``eval.generate.AdapterLoad``: its base, and whether to merge it first); unmerged, that adapter is
    trained further. ``final_dir``: where ``out_dir`` is moved once complete (``remark sft`` writes into a
    temporary ``catalog.io.outputs.atomic_dir`` folder); a merged base (``out_dir/merged_base``) is then recorded
    in the new adapter's ``adapter_config.json`` at its final path.
    """
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from eval.adapters import is_adapter_dir, load_causal_lm, load_tokenizer, merge_adapter
    from remark.step.checkpoint import SafeCheckpointMixin

    class RemarkSFTTrainer(SafeCheckpointMixin, SFTTrainer):
        pass

    examples = sft_examples(ds, settings, split=split)
    defaults = {
        "output_dir": str(out_dir),
        "learning_rate": 5e-5,
        "lr_scheduler_type": "cosine",
        "num_train_epochs": 1,
        "per_device_train_batch_size": 8,
        "logging_steps": 10,
        "save_strategy": "no",
        "report_to": "none",
        "completion_only_loss": True,
        "seed": settings.seed,
    }
    cfg = SFTConfig(**{**defaults, **(sft_args or {})})
    base = getattr(adapter, "base", None)
    # a local model by its absolute path: what a new adapter's adapter_config.json records as its base
    policy: Any = os.path.abspath(model) if Path(model).is_dir() else str(model)
    if is_adapter_dir(model) and getattr(adapter, "merge", False):
        # merged and saved, so that a new adapter's adapter_config.json names a base that holds this one
        model, base = merge_adapter(model, Path(out_dir) / "merged_base", base=base), None
        policy = os.path.abspath(model)
    elif is_adapter_dir(model):
        if peft_config is not None:
            raise InputError(
                "the model is an adapter and a new LoRA adapter was asked for on top of it",
                path=model,
                field="--lora-r",
                hint="add --merge-adapter (the new adapter goes on the merged model), or drop the LoRA flags",
            )
        from transformers.trainer_utils import set_seed

        set_seed(settings.seed)
        policy = load_causal_lm(model, base=base, trainable=True)
    tokenizer = load_tokenizer(model, base)
    if isinstance(policy, str):  # TRL loads it: safetensors only, no code from the folder
        cfg.model_init_kwargs = {
            **(cfg.model_init_kwargs or {}),
            "use_safetensors": True,
            "trust_remote_code": False,
        }
    trainer = RemarkSFTTrainer(
        model=policy,
        args=cfg,
        train_dataset=Dataset.from_list(examples),
        processing_class=tokenizer,
        callbacks=list(callbacks),
        peft_config=peft_config,
    )
    if not print_logs:
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)
    trainer.train()
    trainer.save_model(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    if final_dir is not None:
        _record_final_base(Path(out_dir), Path(final_dir))
    return Path(out_dir)


def _record_final_base(out_dir: Path, final_dir: Path) -> None:
    """Point ``adapter_config.json``'s base at ``final_dir/merged_base`` when it names ``out_dir/merged_base``."""
    import json

    config = out_dir / "adapter_config.json"
    if not config.is_file():
        return
    from catalog.io.files import read_json

    data = read_json(config, schema={}, what="adapter config")
    recorded = data.get("base_model_name_or_path")
    if recorded and Path(recorded).resolve() == (out_dir / "merged_base").resolve():
        data["base_model_name_or_path"] = os.path.abspath(final_dir / "merged_base")
        config.write_text(json.dumps(data, indent=2) + "\n")
