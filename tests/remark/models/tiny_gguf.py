"""A tiny llama-architecture GGUF, written with the `gguf` package, for tests that cannot download.

    hf_state = write_tiny_gguf("tiny.gguf")            # 2 layers, hidden 64, 2 heads (1 KV), head_dim 32
    AutoModelForCausalLM.from_pretrained(dir, gguf_file="tiny.gguf")  # loads; weights == hf_state

Shaped like SmolLM2's file (what ``remark model import-gguf`` must handle):

- ``general.architecture = llama``; ``llama.rope.dimension_count`` is what transformers reads as head_dim;
  ``llama.vocab_size`` is written (without it transformers falls back to len(tokens));
- no ``output.weight`` tensor = tied embeddings (``tied=False`` writes one);
- Q and K are stored *permuted* the way llama.cpp's convert_hf_to_gguf.py does (transformers'
  LlamaTensorProcessor undoes it), so the returned HF state dict is what transformers must load;
- tokenizer ``tokenizer.ggml.model = "gpt2"`` (byte-level BPE, the type SmolLM2 uses; transformers' GGUF
  loader accepts gpt2, llama (sentencepiece BPE), t5 (unigram), gemma4): ``<|endoftext|>`` (0, unk),
  ``<|im_start|>`` (1, bos), ``<|im_end|>`` (2, eos and pad), marked CONTROL (token type 3) so they stay
  whole; then the 256 byte-level symbols, then a few merges; ``add_bos_token = False``; ChatML template.
- tensors F32 (exact) or F16 (``dtype="f16"``: the returned state dict is then the f16-rounded values).

"""

from __future__ import annotations

from pathlib import Path

import numpy as np

CHATML = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a tiny test model.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Byte-level spelling: "Ġ" is a space, "Ċ" a newline.
MERGES = [
    "Ġ t",
    "h e",
    "Ġt he",
    "u s",
    "e r",
    "us er",
    "a s",
    "i s",
    "t a",
    "n t",
    "as s",
    "ass i",
    "assi s",
    "assis ta",
    "assista nt",
    "s y",
    "s t",
    "e m",
    "sy st",
    "syst em",
    "Ġ a",
    "Ġ (",
    "1 9",
    "Ġ m",
    "o v",
    "i e",
    "ov ie",
    "Ġm ovie",
    "Ċ Ċ",
]


def byte_alphabet() -> list[str]:
    """GPT-2's bytes_to_unicode, in byte order (the 256 base symbols of a byte-level BPE)."""
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs))
    return [chr(table[b]) for b in range(256)]


def tiny_vocab() -> tuple[list[str], list[int], list[str]]:
    """(tokens, token_types, merges): specials, the 256 byte symbols, one token per merge."""
    tokens = SPECIALS + byte_alphabet()
    known = set(tokens)
    for m in MERGES:
        a, b = m.split(" ")
        assert a in known and b in known, f"merge {m!r} uses an unknown piece"
        if a + b not in known:
            tokens.append(a + b)
            known.add(a + b)
    types = [3] * len(SPECIALS) + [1] * (len(tokens) - len(SPECIALS))  # 3 CONTROL, 1 NORMAL
    return tokens, types, list(MERGES)


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp convert_hf_to_gguf.py LlamaModel.permute (HF rotate-half -> interleaved rope order)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_tiny_gguf(
    path: str | Path,
    *,
    n_layers: int = 2,
    hidden: int = 64,
    n_heads: int = 2,
    n_kv_heads: int = 1,
    head_dim: int = 32,
    intermediate: int = 128,
    context: int = 256,
    rope_theta: float = 10000.0,
    rms_eps: float = 1e-5,
    tied: bool = True,
    dtype: str = "f32",
    seed: int = 0,
    std: float = 0.2,
    name: str = "tiny-llama-test",
) -> dict[str, np.ndarray]:
    """Write a random tiny llama GGUF at ``path``; return the HF-named fp32 state dict it encodes."""
    import gguf

    if dtype not in ("f32", "f16"):
        raise ValueError("dtype must be f32 or f16")
    np_dtype = np.float32 if dtype == "f32" else np.float16
    tokens, types, merges = tiny_vocab()
    vocab = len(tokens)
    rng = np.random.default_rng(seed)

    def rand(*shape, scale=std):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def norm():
        return (1.0 + rng.standard_normal(hidden) * 0.1).astype(np.float32)

    hf: dict[str, np.ndarray] = {"model.embed_tokens.weight": rand(vocab, hidden, scale=1.0)}
    for i in range(n_layers):
        p = f"model.layers.{i}."
        hf[p + "input_layernorm.weight"] = norm()
        hf[p + "self_attn.q_proj.weight"] = rand(n_heads * head_dim, hidden)
        hf[p + "self_attn.k_proj.weight"] = rand(n_kv_heads * head_dim, hidden)
        hf[p + "self_attn.v_proj.weight"] = rand(n_kv_heads * head_dim, hidden)
        hf[p + "self_attn.o_proj.weight"] = rand(hidden, n_heads * head_dim)
        hf[p + "post_attention_layernorm.weight"] = norm()
        hf[p + "mlp.gate_proj.weight"] = rand(intermediate, hidden)
        hf[p + "mlp.up_proj.weight"] = rand(intermediate, hidden)
        hf[p + "mlp.down_proj.weight"] = rand(hidden, intermediate)
    hf["model.norm.weight"] = norm()
    if not tied:
        hf["lm_head.weight"] = rand(vocab, hidden)
    # What the file holds (f16-rounded when dtype="f16"); norms stay F32 as llama.cpp writes them.
    stored = {k: (v if v.ndim == 1 else v.astype(np_dtype)) for k, v in hf.items()}
    hf = {k: v.astype(np.float32) for k, v in stored.items()}

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(name)
    w.add_context_length(context)
    w.add_embedding_length(hidden)
    w.add_block_count(n_layers)
    w.add_feed_forward_length(intermediate)
    w.add_head_count(n_heads)
    w.add_head_count_kv(n_kv_heads)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(rope_theta)
    w.add_layer_norm_rms_eps(rms_eps)
    w.add_vocab_size(vocab)
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if dtype == "f32" else gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_pad_token_id(2)
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML)

    w.add_tensor("token_embd.weight", stored["model.embed_tokens.weight"])
    for i in range(n_layers):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", stored[p + "input_layernorm.weight"])
        w.add_tensor(b + "attn_q.weight", _permute(stored[p + "self_attn.q_proj.weight"], n_heads))
        w.add_tensor(b + "attn_k.weight", _permute(stored[p + "self_attn.k_proj.weight"], n_kv_heads))
        w.add_tensor(b + "attn_v.weight", stored[p + "self_attn.v_proj.weight"])
        w.add_tensor(b + "attn_output.weight", stored[p + "self_attn.o_proj.weight"])
        w.add_tensor(b + "ffn_norm.weight", stored[p + "post_attention_layernorm.weight"])
        w.add_tensor(b + "ffn_gate.weight", stored[p + "mlp.gate_proj.weight"])
        w.add_tensor(b + "ffn_up.weight", stored[p + "mlp.up_proj.weight"])
        w.add_tensor(b + "ffn_down.weight", stored[p + "mlp.down_proj.weight"])
    w.add_tensor("output_norm.weight", stored["model.norm.weight"])
    if not tied:
        w.add_tensor("output.weight", stored["lm_head.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if tied:
        hf["lm_head.weight"] = hf["model.embed_tokens.weight"]
    return hf
