"""LoRA / PEFT adapter folders: recognise one, find its base model, load it (merged or not), merge it.

An adapter folder is what ``peft.PeftModel.save_pretrained`` writes (a LoRA run's ``checkpoint-N/``,
``best/`` and ``final/``): ``adapter_config.json`` and ``adapter_model.safetensors``, no full weights.
Its base model is read from ``adapter_config.json["base_model_name_or_path"]`` (PEFT records the path or
hub id the base was loaded from; remark loads a local base by its absolute path, so that is what it
records), resolved by :func:`adapter_base`; ``base=`` overrides it, for a run folder moved to another machine.

peft is an optional dependency (``pip install 'remark[lora]'``), imported only when an adapter is
actually loaded; asking for one without it is an ``InputError`` saying how to install it.

Merging (``merge=True`` or :func:`merge_adapter`) folds ``W + (alpha / r) B A`` into the base weights
(``peft``'s ``merge_and_unload``): the merged model generates the same lists up to float rounding and
needs no peft to load; vLLM needs it merged.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Any

from catalog.io.errors import InputError

ADAPTER_CONFIG = "adapter_config.json"
PEFT_HINT = "pip install 'remark[lora]' (or pip install peft)"


def is_adapter_dir(path: str | Path) -> bool:
    """True when ``path`` is a folder with an ``adapter_config.json`` (a PEFT adapter)."""
    return (Path(path) / ADAPTER_CONFIG).is_file()


def peft_installed() -> bool:
    return importlib.util.find_spec("peft") is not None


def require_peft(field: str | None = None) -> None:
    """Raise ``InputError`` naming ``field`` when peft is not installed."""
    if not peft_installed():
        raise InputError(
            "LoRA / PEFT needs the peft library, which is not installed", field=field, hint=PEFT_HINT
        )


#: what a hub id looks like (``org/name`` or ``name``)
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def _in_hub_cache(repo_id: str) -> bool:
    """Whether the hub id ``repo_id`` has a ``config.json`` in the local hub cache (no network)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except Exception:  # an id the hub library refuses is not in its cache
        return False


def adapter_base(path: str | Path, base: str | Path | None = None) -> str:
    """The base model of the adapter at ``path``: ``base`` when given (a folder or a hub id: the user
    asked for it), else its ``adapter_config.json``'s ``base_model_name_or_path``, resolved the one way
    remark records it (absolute) or PEFT may (relative):

    - an absolute path (``~`` expanded) must be a model folder;
    - a relative path is read relative to the adapter folder, never the current folder (a folder
      elsewhere with a model at that relative path must not be picked up silently); the result is
      absolute;
    - otherwise a value that reads as a hub id is taken as one only when the local hub cache holds it
      (the base was downloaded when the adapter was trained), so no hub request is made for a path that
      merely looks like an id.

    Anything else is an ``InputError`` naming the adapter config, saying to pass the base explicitly.
    """
    path = Path(path)
    if base is not None:
        return str(base)
    from catalog.io.files import read_json

    cfg_path = path / ADAPTER_CONFIG
    cfg = read_json(cfg_path, optional={"base_model_name_or_path": (str, None)}, what="adapter config")
    recorded = cfg.get("base_model_name_or_path")
    if not recorded:
        raise InputError(
            "the adapter config names no base model",
            path=cfg_path,
            field="base_model_name_or_path",
            hint="pass the base model explicitly (--base-model)",
        )
    given = Path(recorded).expanduser()
    local = given if given.is_absolute() else path / given
    if (local / "config.json").is_file():
        return os.path.abspath(local)
    if not given.is_absolute() and HUB_ID.match(recorded) and _in_hub_cache(recorded):
        return recorded
    where = "is not a model folder" if given.is_absolute() else f"is not a model folder relative to {path}"
    raise InputError(
        f"the adapter's base model {recorded!r} {where}"
        + ("" if given.is_absolute() else ", nor a model in the local hub cache"),
        path=cfg_path,
        field="base_model_name_or_path",
        hint="pass the base model's folder (or a hub id to download) explicitly: --base-model",
    )


#: the JSON files of a model or adapter folder that ``from_pretrained`` reads
MODEL_JSON_FILES = (
    "config.json",
    ADAPTER_CONFIG,
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "model.safetensors.index.json",
)


def check_model_files(path: str | Path, *, field: str | None = None) -> None:
    """A trial read of what ``from_pretrained`` will read in the folder ``path``: each of
    :data:`MODEL_JSON_FILES` present must be UTF-8 JSON holding an object, and each safetensors file a
    sound header (``catalog.io.files.safetensors_problem``); else ``InputError`` naming the file
    (transformers' own errors are a ``JSONDecodeError`` or "header too large" several frames deep)."""
    from catalog.io.files import read_json, safetensors_problem

    path = Path(path)
    hint = "the model folder is damaged: save it again (save_pretrained), or copy it again"
    for name in MODEL_JSON_FILES:
        if (path / name).is_file():
            try:
                read_json(path / name, schema={}, hint=hint)
            except InputError as err:
                raise InputError(
                    err.message, path=err.path, row=err.row, field=err.field or field, hint=hint
                ) from None
    for weights in sorted(path.glob("*.safetensors")):
        problem = safetensors_problem(weights)
        if problem is not None:
            raise InputError(problem, path=weights, field=field, hint=hint)


#: weight files that are Python pickles (``torch.load``): never read, only named when they are all a folder has.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


def check_safetensors(path: str | Path, *, field: str | None = None) -> None:
    """Refuse (``InputError`` naming the folder) a model folder without ``*.safetensors`` weights, or an
    adapter folder without ``adapter_model.safetensors``: remark reads safetensors only, never a pickle
    (``pytorch_model.bin``, ``adapter_model.bin``), which can run code while it loads. A sharded model's
    ``model.safetensors.index.json`` must name shards that are there."""
    path = Path(path)
    adapter = is_adapter_dir(path) and not (path / "config.json").is_file()
    index = path / "model.safetensors.index.json"
    if adapter:
        found = (path / "adapter_model.safetensors").is_file()
    elif index.is_file():
        from catalog.io.files import read_json

        shards = read_json(index, optional={"weight_map": dict}, what="safetensors index")
        missing = sorted(
            {str(f) for f in shards.get("weight_map", {}).values()} - {p.name for p in path.iterdir()}
        )
        if missing:
            raise InputError(
                f"the safetensors index names shard(s) that are missing: {', '.join(missing[:3])}",
                path=index,
                field=field,
                hint="copy the whole model folder again",
            )
        found = any(path.glob("*.safetensors"))
    else:
        found = any(path.glob("*.safetensors"))
    if found:
        return
    pickles = sorted(p.name for p in path.iterdir() if p.suffix in PICKLE_SUFFIXES)
    what = "adapter_model.safetensors" if adapter else "*.safetensors weights"
    only = f" (only {', '.join(pickles[:3])}: pickle, which remark never reads)" if pickles else ""
    raise InputError(
        f"no {what}{only}; remark loads safetensors only",
        path=path,
        field=field,
        hint="save the model with save_pretrained (safetensors is its default), or convert the pickle once "
        "in a Python session you trust",
    )


def check_model_dir(path: str | Path) -> None:
    """A full model folder (``config.json``) or an adapter folder whose files read back
    (:func:`check_model_files`) and whose weights are safetensors (:func:`check_safetensors`); else an
    ``InputError``."""
    path = Path(path)
    if not (path / "config.json").is_file() and not is_adapter_dir(path):
        raise InputError(
            "not a model directory (no config.json) nor an adapter (no adapter_config.json)",
            path=path,
            hint="pass a save_pretrained dir, or a LoRA run's best/ or final/",
        )
    check_model_files(path)
    check_safetensors(path)


#: one of these makes a folder loadable by ``AutoTokenizer``
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model", "spiece.model")


def load_tokenizer(path: str | Path, base: str | Path | None = None) -> Any:
    """The tokenizer saved beside the model or adapter, else the adapter's base model's; a local folder
    without tokenizer files is an ``InputError`` naming it."""
    from transformers import AutoTokenizer

    path = Path(path)
    has_own = any((path / n).is_file() for n in ("tokenizer.json", "tokenizer_config.json"))
    source = path if has_own or not is_adapter_dir(path) else Path(adapter_base(path, base))
    if source.is_dir() and not any((source / n).is_file() for n in TOKENIZER_FILES):
        raise InputError(
            f"the model folder has no tokenizer files ({', '.join(TOKENIZER_FILES[:2])}, ...)",
            path=source,
            hint="save the tokenizer there too (tokenizer.save_pretrained(folder))",
        )
    return AutoTokenizer.from_pretrained(source if source.is_dir() else str(source), trust_remote_code=False)


def _from_pretrained(path: str | Path, **kwargs: Any) -> Any:
    """``AutoModelForCausalLM.from_pretrained``; a folder whose config names an architecture transformers
    does not know, or whose config does not fit its weights, is an ``InputError`` naming the folder."""
    from transformers import AutoModelForCausalLM

    try:
        return AutoModelForCausalLM.from_pretrained(path, **kwargs)
    except (ValueError, KeyError, RuntimeError) as err:
        if not Path(path).is_dir():
            raise
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
        raise InputError(
            f"cannot load the model: {first}",
            path=Path(path) / "config.json",
            hint="the folder's config.json must name an architecture this transformers knows and match "
            "its weights: save the model again with save_pretrained",
        ) from err


def load_causal_lm(
    path: str | Path,
    *,
    merge: bool = False,
    base: str | Path | None = None,
    trainable: bool = False,
    **kwargs: Any,
) -> Any:
    """``AutoModelForCausalLM`` from a model folder, or base + adapter from an adapter folder.

    ``merge``: fold the adapter into the base weights and return a plain model (no peft wrapper).
    ``trainable``: the adapter's weights require grad (to continue training it); ``kwargs`` go to
    ``from_pretrained`` (dtype, device_map). Every load reads safetensors only and runs no code from the
    folder (``use_safetensors=True``, ``trust_remote_code=False``).
    """
    check_model_dir(path)
    kwargs = {**kwargs, "use_safetensors": True, "trust_remote_code": False}
    if not is_adapter_dir(path):
        return _from_pretrained(path, **kwargs)
    require_peft(field="model")
    from peft import PeftModel

    base_path = adapter_base(path, base)
    if Path(base_path).is_dir():
        check_model_dir(base_path)
    model = _from_pretrained(base_path, **kwargs)
    model = PeftModel.from_pretrained(model, str(path), is_trainable=trainable and not merge)
    return model.merge_and_unload() if merge else model


def merge_adapter(
    path: str | Path, out: str | Path, *, base: str | Path | None = None, force: bool = False
) -> Path:
    """Write the merged model (safetensors) and the tokenizer to ``out``, atomically; returns ``out``.

    ``out`` is an owned folder (``catalog.io.outputs.atomic_dir``, kind ``merged-model``): new, empty or
    an earlier merge (``force``: any folder but the adapter or the base), refused before anything loads."""
    from catalog.io.outputs import atomic_dir, check_output_dir

    if not is_adapter_dir(path):
        raise InputError("not an adapter folder (no adapter_config.json)", path=path, field="--adapter")
    inputs = [path, base if base is not None and Path(base).exists() else None]
    check_output_dir(out, "merged-model", inputs=inputs, force=force)
    model = load_causal_lm(path, merge=True, base=base)
    tokenizer = load_tokenizer(path, base)
    with atomic_dir(out, kind="merged-model", inputs=inputs, force=force) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "merged_from.json").write_text(
            json.dumps({"adapter": str(path), "base": adapter_base(path, base)}, indent=2) + "\n"
        )
    return Path(out)
