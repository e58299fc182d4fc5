"""A GGUF file -> an ordinary transformers folder: safetensors, tokenizer, chat template, model card.

transformers loads a GGUF (``from_pretrained(folder, gguf_file=...)``: the tensors dequantized to fp32,
the model flagged as GGUF-quantized, which ``save_pretrained`` refuses). :func:`import_gguf` rebuilds the
same architecture from the config without ``quantization_config``, assigns the loaded tensors into it,
and saves it with the tokenizer (``tokenizer.json``, the chat template as ``chat_template.jinja``), a
generation config (the GGUF's bos / eos / pad ids) and a model card; then it reloads the folder and
checks that its logits on a chat prompt equal the GGUF-loaded model's (max |diff| 0 in float32) and that
the tokenizer gives the same ids. float32 is the default: the dequantized values are not bf16 numbers
(a bf16 folder differs by up to ~0.3 in the logits), and a folder loads in the dtype its config names.
Architectures: what transformers' GGUF loader supports (llama, qwen2, ...).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from catalog.io.errors import InputError

__all__ = ["DTYPES", "import_gguf", "model_card"]

DTYPES = ("float32", "bfloat16")
CHECK_MESSAGES = [{"role": "user", "content": "Name something people bring to a picnic."}]
#: keys that transformers' GGUF loader leaks into tokenizer_config.json (loader arguments, not settings)
_LOADER_KEYS = ("vocab_file", "gguf_file", "is_local", "local_files_only", "name_or_path")


#: GGUF tensors that hold no model parameter (precomputed rope factors that transformers recomputes)
NON_PARAMETER_TENSORS = ("rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight")
GGUF_HINT = "check the file (its sha256 against the source's), or convert the model again with llama.cpp"


def _gguf_problem(err: BaseException) -> str:
    """What a reading failure says about the file, in words (the library's first line kept)."""
    first = (str(err).strip().splitlines() or [""])[0][:200]
    if type(err).__name__ == "error" or isinstance(
        err, (EOFError, IndexError)
    ):  # struct.error: ran off the end
        return f"the file is truncated or damaged: a field runs past its end ({first})"
    if isinstance(err, KeyError):  # a metadata key the loader reads is absent (e.g. the tokenizer's)
        return f"its header lacks a field the loader needs: {first} (no tokenizer, or a partial conversion)"
    if "cannot reshape array" in first:  # numpy over a tensor whose bytes the file does not hold
        return f"the file is truncated or damaged: a tensor's data runs past its end ({first})"
    if isinstance(err, (UnicodeDecodeError, OverflowError, MemoryError)):
        return f"the file is damaged: its header holds impossible values ({type(err).__name__}: {first})"
    return f"cannot read it: {first or type(err).__name__}"


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """transformers' load report (its MISSING table) off: what it says is checked and said here."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def _load(gguf_path: Path) -> tuple[Any, Any]:
    """The GGUF's model and tokenizer as transformers loads them; ``InputError`` naming the file when it
    cannot be read, and when its tensors do not fit the architecture its header describes
    (:func:`_check_tensors`): transformers would fill a missing tensor with random values and drop an
    unexpected one without a word."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        with _quiet_transformers():
            tok = AutoTokenizer.from_pretrained(
                str(gguf_path.parent), gguf_file=gguf_path.name, trust_remote_code=False
            )
            model, info = AutoModelForCausalLM.from_pretrained(
                str(gguf_path.parent),
                gguf_file=gguf_path.name,
                dtype=torch.float32,
                trust_remote_code=False,
                output_loading_info=True,
            )
    except InputError:
        raise
    except Exception as err:
        raise InputError(_gguf_problem(err), path=gguf_path, hint=GGUF_HINT) from err
    _check_tensors(gguf_path, model, info)
    return model.eval(), tok


def _check_tensors(gguf_path: Path, model: Any, info: dict[str, Any]) -> None:
    """Refuse a GGUF that lacks a tensor the model needs (``missing_keys``: it would be random) or holds
    tensors the model does not take (``unexpected_keys``, or parameters of blocks past ``block_count``, or
    more elements than the model's parameters: transformers' GGUF loader drops those silently)."""
    import gguf

    missing = sorted(info.get("missing_keys") or ())
    unexpected = sorted(info.get("unexpected_keys") or ()) + sorted(info.get("mismatched_keys") or ())
    if missing:
        raise InputError(
            f"the GGUF lacks {len(missing)} tensor(s) its architecture needs ({', '.join(missing[:3])}"
            f"{', ...' if len(missing) > 3 else ''}): they would be random weights",
            path=gguf_path,
            hint=GGUF_HINT + "; a block_count larger than the blocks stored says the same",
        )
    tensors = [t for t in gguf.GGUFReader(str(gguf_path)).tensors if t.name not in NON_PARAMETER_TENSORS]
    layers = getattr(model.config, "num_hidden_layers", None)
    beyond = [
        t.name
        for t in tensors
        if layers is not None and t.name.startswith("blk.") and int(t.name.split(".")[1]) >= layers
    ]
    params = {id(p): p.numel() for p in model.parameters()}  # tied weights once
    stored = sum(int(t.n_elements) for t in tensors)
    if unexpected or beyond or stored != sum(params.values()):
        named = unexpected or beyond
        what = f" ({', '.join(named[:3])}{', ...' if len(named) > 3 else ''})" if named else ""
        raise InputError(
            f"the GGUF holds tensors its architecture does not use{what}: {stored:,} values stored, "
            f"{sum(params.values()):,} parameters in the model",
            path=gguf_path,
            hint=GGUF_HINT + "; a block_count smaller than the blocks stored says the same",
        )


def _plain(gguf_model: Any, dtype: str) -> Any:
    """The same architecture without the GGUF quantizer mark, holding the same tensors."""
    import torch
    from transformers import AutoModelForCausalLM

    config = gguf_model.config.__class__.from_dict(gguf_model.config.to_dict())
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config._name_or_path = ""
    config.dtype = dtype
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    missing, unexpected = model.load_state_dict(gguf_model.state_dict(), strict=False, assign=True)
    if model.config.tie_word_embeddings:
        model.tie_weights()
        missing = [k for k in missing if k != "lm_head.weight"]
    if missing or unexpected:  # _check_tensors refused such a file already: this is the copy's own check
        raise RuntimeError(
            f"the GGUF's tensors do not fit the model: missing {missing}, unexpected {unexpected}"
        )
    source = dict(gguf_model.named_buffers())  # non-persistent buffers (rotary inv_freq) are still on meta
    for name, buf in list(model.named_buffers()):
        if buf.is_meta:
            owner, _, attr = name.rpartition(".")
            (model.get_submodule(owner) if owner else model)._buffers[attr] = source[name].clone()
    return model.eval().to(getattr(torch, dtype))


def _save(model: Any, tok: Any, out: Path) -> None:
    from transformers import GenerationConfig

    model.generation_config = GenerationConfig(
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id
    )
    model.config.pad_token_id = tok.pad_token_id
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    tcfg_path = out / "tokenizer_config.json"
    tcfg = json.loads(tcfg_path.read_text())
    for key in _LOADER_KEYS:
        tcfg.pop(key, None)
    if getattr(model.config, "max_position_embeddings", None):  # not the loader's "unset" 1e30
        tcfg["model_max_length"] = int(model.config.max_position_embeddings)
    tcfg_path.write_text(json.dumps(tcfg, indent=2, ensure_ascii=False) + "\n")
    cfg_path = out / "config.json"
    cfg = json.loads(cfg_path.read_text())
    if cfg.pop("_model_name_or_path", None) is not None:  # the GGUF's general.name
        cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    umask = os.umask(0)
    os.umask(umask)
    for p in out.iterdir():  # safetensors writes its file readable by the owner only
        if p.is_file():
            os.chmod(p, 0o666 & ~umask)


def _verify(gguf_model: Any, gguf_tok: Any, folder: Path) -> dict[str, Any]:
    """Reload ``folder`` in float32: logits and token ids against the GGUF-loaded pair."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
    model = AutoModelForCausalLM.from_pretrained(
        str(folder), dtype=torch.float32, use_safetensors=True, trust_remote_code=False
    ).eval()
    text = gguf_tok.apply_chat_template(CHECK_MESSAGES, tokenize=False, add_generation_prompt=True)
    probe = text + "Sandwiches\nFruit (1995)\n 12345 naïve café"
    ids = gguf_tok(text, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        a, b = gguf_model(torch.tensor([ids])).logits, model(torch.tensor([ids])).logits
    return {
        "max_abs_logit_diff": float((a - b).abs().max()),
        "same_chat_text": tok.apply_chat_template(CHECK_MESSAGES, tokenize=False, add_generation_prompt=True)
        == text,
        "same_token_ids": tok(probe, add_special_tokens=False)["input_ids"]
        == gguf_tok(probe, add_special_tokens=False)["input_ids"],
    }


def _checked(verify: dict[str, Any], dtype: str, gguf_path: Path) -> dict[str, Any]:
    """``verify`` when the folder reproduces the GGUF (float32: the same logits exactly; any dtype: the same
    chat text and token ids), else ``InputError`` naming the GGUF and what differs."""
    wrong = [k for k in ("same_chat_text", "same_token_ids") if not verify[k]]
    if dtype == "float32" and verify["max_abs_logit_diff"] != 0.0:
        wrong.append(f"logits differ by up to {verify['max_abs_logit_diff']:.3g}")
    if wrong:
        raise InputError(
            f"the converted folder does not reproduce the GGUF ({', '.join(wrong)})",
            path=gguf_path,
            hint="report it with the file: transformers' GGUF loader may not support this variant",
        )
    return verify


def model_card(
    facts: dict[str, Any], *, license: str | None, base_model: str | None, source_text: str
) -> str:
    """README.md of an imported folder: a Hugging Face card header and what the folder is."""
    header = ["---", "library_name: transformers", "tags: [remark, gguf-dequantized]"]
    if license:
        header.append(f"license: {license}")
    if base_model:
        header.append(f"base_model: {base_model}")
    header.append("---")
    arch = facts["architecture"]
    tok = facts["tokenizer"]
    body = [
        f"# {facts['title']}",
        "",
        f"Converted by `{facts['command']}` (remark {facts['remark']}, transformers {facts['transformers']}).",
        "",
        f"- Source: {source_text}.",
        f"- Weights: {facts['dtype']} safetensors, dequantized from the GGUF file `{facts['gguf']}` "
        f"(sha256 {facts['gguf_sha256']}).",
        f"- Architecture: {arch['class']}, {arch['parameters']:,} parameters, {arch['layers']} layers, hidden "
        f"{arch['hidden']}, {arch['heads']} heads / {arch['kv_heads']} KV heads, head_dim {arch['head_dim']}, "
        f"vocab {arch['vocab']}, context {arch['context']}, tied embeddings: {arch['tied']}.",
        f"- Tokenizer: bos {tok['bos']!r}, eos {tok['eos']!r}, pad {tok['pad']!r}; chat template in "
        "`chat_template.jinja`.",
        f"- Check: the folder's float32 logits on a chat prompt differ from the GGUF-loaded model's by at most "
        f"{facts['verify']['max_abs_logit_diff']:.3g}; same chat text and token ids: "
        f"{facts['verify']['same_chat_text'] and facts['verify']['same_token_ids']}.",
        "",
    ]
    return "\n".join([*header, *body])


def import_gguf(
    gguf_path: Path,
    out: Path,
    *,
    dtype: str = "float32",
    command: str,
    title: str,
    license: str | None = None,
    base_model: str | None = None,
    source_text: str | None = None,
    gguf_sha256: str,
) -> dict[str, Any]:
    """Write the transformers folder of ``gguf_path`` into ``out`` (an empty temporary folder: the caller
    swaps it in); returns the facts the card states (``SOURCE.json``)."""
    import torch  # noqa: F401  (before transformers: its GGUF path needs torch)
    import transformers

    import remark

    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    gguf_model, tok = _load(gguf_path)
    model = _plain(gguf_model, dtype)
    _save(model, tok, out)
    cfg = model.config
    facts = {
        "title": title,
        "command": command,
        "remark": remark.__version__,
        "transformers": transformers.__version__,
        "dtype": dtype,
        "gguf": gguf_path.name,
        "gguf_sha256": gguf_sha256,
        "architecture": {
            "class": type(model).__name__,
            "parameters": sum(p.numel() for p in model.parameters()),
            "layers": cfg.num_hidden_layers,
            "hidden": cfg.hidden_size,
            "heads": cfg.num_attention_heads,
            "kv_heads": getattr(cfg, "num_key_value_heads", cfg.num_attention_heads),
            "head_dim": getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads,
            "vocab": cfg.vocab_size,
            "context": getattr(cfg, "max_position_embeddings", None),
            "tied": bool(cfg.tie_word_embeddings),
        },
        "tokenizer": {"bos": tok.bos_token, "eos": tok.eos_token, "pad": tok.pad_token},
        "verify": _checked(_verify(gguf_model, tok, out), dtype, gguf_path),
        "license": license,
        "base_model": base_model,
    }
    card = model_card(
        facts,
        license=license,
        base_model=base_model,
        source_text=source_text or f"the GGUF file {gguf_path.name}",
    )
    (out / "README.md").write_text(card)
    (out / "SOURCE.json").write_text(json.dumps(facts, indent=2) + "\n")
    return facts
