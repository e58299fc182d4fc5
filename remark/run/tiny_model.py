"""Tiny offline models: a byte-level BPE tokenizer trained on local text and a small Qwen2 model.

Used by the tests, the demo and ``configs/tiny_cpu.yaml`` so that everything runs with no hub access
(``HF_HUB_OFFLINE=1``). The result is an ordinary ``save_pretrained`` directory, loaded through the same
``AutoModelForCausalLM`` / ``AutoTokenizer`` code path as a real checkpoint. ``realistic_config`` gives a
Qwen2-0.5B-shaped config for GPU benchmarks (random weights, same tokenizer recipe).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path

from remark.config.tiny import TinySpec

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<pad>", "<unk>", "<|im_start|>", "<|im_end|>"]


def train_tokenizer(corpus: Iterable[str], vocab_size: int = 4096):
    """Train a byte-level BPE tokenizer with a ChatML template; ``"\\n"`` stays its own token.

    Returns a ``transformers.PreTrainedTokenizerFast`` with pad ``<pad>``, eos ``<|im_end|>``.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    # Split newlines off first so that "\n" is always one token and never merges with text: the
    # token-to-rank map relies on line boundaries falling between tokens.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"\n"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        unk_token="<unk>",
        eos_token="<|im_end|>",
        bos_token=None,
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = CHATML_TEMPLATE
    fast.padding_side = "left"
    return fast


def build_tiny_model(
    out_dir: str | Path,
    corpus: Iterable[str],
    *,
    spec: TinySpec | None = None,
    seed: int = 0,
) -> Path:
    """Train a tokenizer on ``corpus``, build a random-init Qwen2 model of shape ``spec``, save both.

    Returns ``out_dir``; load it with ``AutoModelForCausalLM.from_pretrained(out_dir)``. Deterministic
    for a given corpus, spec and seed.
    """
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    spec = spec or TinySpec()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(corpus, vocab_size=spec.vocab_size)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=spec.tie_word_embeddings,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "tiny_spec.json").write_text(json.dumps({**asdict(spec), "seed": seed}, indent=2))
    return out


def realistic_spec() -> TinySpec:
    """A Qwen2-0.5B-shaped spec (hidden 896, 24 layers, 14 heads / 2 KV, FFN 4864) for GPU benchmarks."""
    return TinySpec(
        vocab_size=32000,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
    )
