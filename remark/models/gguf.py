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

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["DTYPES", "import_gguf", "model_card"]

DTYPES = ("float32", "bfloat16")
CHECK_MESSAGES = [{"role": "user", "content": "Name something people bring to a picnic."}]
#: keys that transformers' GGUF loader leaks into tokenizer_config.json (loader arguments, not settings)
_LOADER_KEYS = ("vocab_file", "gguf_file", "is_local", "local_files_only", "name_or_path")


def _load(gguf_path: Path) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(
        str(gguf_path.parent), gguf_file=gguf_path.name, trust_remote_code=False
    )
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32, trust_remote_code=False
    )
    return model.eval(), tok


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
    if missing or unexpected:
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
        "verify": _verify(gguf_model, tok, out),
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
