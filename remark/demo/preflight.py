"""The demo's settings checked whole, before any work: what needs the runs' names, the base model or the
machine (each value alone and the settings' combinations are checked when they are read:
``remark.demo.settings_check``).

:func:`check_preflight` (``remark demo`` calls it right after ``remark.demo.settings.resolve_settings``,
before ``run_demo`` writes anything) checks, naming the settings file and field or the flag:

- **folders**: every job, run and test-model folder the settings name stays inside the output folder
  (:func:`check_paths`), and no two learning rates name one run folder (``lr1e-04`` for both 1e-4 and
  1.2e-4: ``remark.demo.runs.lr_tag``);
- **positions**: with ``use_vllm``, a completion cap and a prompt within the vLLM engine's model length;
- **the base model**: its ``config.json``'s sizes (``eval.model_sizes``);
- **memory**: :func:`memory_stages` gives, from the model's shape (the tiny model's settings, or a
  ``base_model``'s ``config.json``), the batch sizes and ``jobs``, a lower bound on what each stage holds at
  once: the warm-up (the data, the tokenizer trainer's tables, SFT of the model with its gradients and Adam
  states and the activations of a batch), the RL grid (``min(jobs, runs)`` processes, each a model in
  training, the activations and generation KV cache of a step, vLLM's engine and its KV cache) and the test
  evaluation (a model, its generation, the bootstrap). :func:`check_memory` compares the largest with the
  host's limit (``catalog.io.memory``: ``REMARK_MEMORY_LIMIT_GB``, else a share of the memory available) and
  refuses it naming the setting that makes that stage large: one the user set, where one did. The figures
  are lower bounds, so what is refused cannot fit; what passes may still need more.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from catalog.io.errors import InputError
from remark.demo.runs import job_name, lr_tag, run_dir, run_name, vllm_fields
from remark.demo.settings import METHODS, DemoSettings
from remark.demo.settings_check import PROMPT_TOKENS, Origin, base_config, blame, distinct, fail


def check_preflight(s: DemoSettings, origins: dict[str, Origin]) -> None:
    """The checks of the module docstring, in its order; nothing is written before they pass."""
    check_paths(s, origins)
    distinct("lr_grid", s.lr_grid, origins, key=lr_tag)
    if s.use_vllm:
        cap = vllm_fields(s)["vllm_max_model_length"]
        if s.max_completion_length + PROMPT_TOKENS > cap:
            raise fail(
                "max_completion_length",
                f"max_completion_length={s.max_completion_length} and a prompt do not fit the vLLM engine's "
                f"{cap} positions (vllm_max_model_length)",
                f"lower max_completion_length below {cap - PROMPT_TOKENS}",
                origins,
            )
    check_base_model_sizes(s)
    check_memory(s, origins)


def check_paths(s: DemoSettings, origins: dict[str, Origin]) -> None:
    """Every folder the settings name stays inside the output folder: a job's and a test model's name
    (``remark.demo.runs.job_name``, ``run_name``: ``logs/<job>/``, ``eval/<model>/``) is one plain folder
    name, a run's folder (``run_dir``) a relative path without ``..``; else ``InputError`` naming the setting."""
    names = []
    for m in METHODS:
        for seed in s.rl_seeds:
            names.append(("rl_seeds", run_name(m, seed), True))
            for lr in s.lr_grid:
                names += [
                    ("lr_grid", job_name(m, seed, lr), True),
                    ("lr_grid", str(run_dir(m, seed, lr)), False),
                ]
    for name, folder, single in names:
        p = PurePosixPath(folder)
        if (
            not folder
            or "\x00" in folder
            or "\\" in folder
            or p.is_absolute()
            or ".." in p.parts
            or (single and (len(p.parts) != 1 or folder in (".", "..")))
        ):
            raise fail(
                name,
                f"the settings name the folder {folder!r}, which would not stay inside the output folder",
                "seeds are integers and learning rates numbers",
                origins,
            )


def check_base_model_sizes(s: DemoSettings) -> None:
    """A ``base_model`` folder's ``config.json`` sizes are possible and describe its weights
    (``eval.model_sizes``; a folder without one is refused by ``remark.demo.pipeline.check_base_model``, still
    before any work)."""
    if s.base_model is not None and (Path(s.base_model) / "config.json").is_file():
        from eval.model_sizes import check_model_sizes

        check_model_sizes(s.base_model)


# -- memory ----------------------------------------------------------------------------------------------
#: the tiny model's fewest tokens: the byte alphabet and the special tokens (``remark.run.tiny_model``)
VOCAB_FLOOR = 260
#: bytes per parameter of a model being trained: float32 weights, their gradients, Adam's two moments
TRAIN_BYTES_PER_PARAMETER = 16
#: bytes the tokenizers library's BPE trainer reserves per entry of ``vocab_size`` before it trains
#: (``vocab_size: 1e9`` asked for 70.9 GB), whatever the corpus
TOKENIZER_BYTES_PER_ENTRY = 70
#: a stage process before any data: Python, torch and transformers imported
PROCESS_BYTES = 200_000_000


@dataclass(frozen=True)
class Stage:
    """A stage's lower bound on memory: ``bytes`` in all, what holds it, and the settings that make it large
    (first the one to name)."""

    name: str
    bytes: int
    what: str
    fields: tuple[str, ...]


def _model_config(s: DemoSettings) -> dict[str, Any]:
    """The config the runs train: the base model's, or the tiny model's with its fewest tokens."""
    if s.base_model is not None:
        return base_config(s.base_model)
    from remark.config.tiny import TinySpec

    spec = TinySpec()
    return {
        "vocab_size": min(s.vocab_size, VOCAB_FLOOR),
        "hidden_size": s.hidden_size,
        "intermediate_size": s.intermediate_size,
        "num_hidden_layers": s.num_hidden_layers,
        "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_key_value_heads,
        "tie_word_embeddings": spec.tie_word_embeddings,
    }


def _activations(config: dict[str, Any], sequences: int, tokens: int) -> int:
    """Float32 activations one training step keeps for the backward pass (a lower bound): per token and layer
    eight hidden-size vectors and three intermediate-size ones, and the logits with their gradient."""
    from eval.model_sizes import text_config

    text = text_config(config)
    hidden, inter = text.get("hidden_size") or 0, text.get("intermediate_size") or 0
    layers, vocab = text.get("num_hidden_layers") or 0, text.get("vocab_size") or 0
    return sequences * tokens * 4 * (layers * (8 * hidden + 3 * inter) + 2 * vocab)


def memory_stages(s: DemoSettings) -> list[Stage]:
    """Lower bounds on what each stage holds at once: the warm-up (data, tokenizer trainer, SFT), the RL grid
    (``min(jobs, runs)`` processes, each a model in training, its activations and generation KV cache, and vLLM's
    engine with its KV cache), the test evaluation (a model, its generation and the bootstrap)."""
    from data_prep.synthetic import synthetic_memory
    from eval.bootstrap import bootstrap_memory
    from eval.generate import GenerationConfig, completions_memory, kv_cache_bytes
    from eval.model_sizes import parameter_count
    from remark.config.validate import MIN_TOKENS_PER_LINE

    config = _model_config(s)
    params = parameter_count(config)
    shape = (
        ("base_model",)
        if s.base_model is not None
        else ("hidden_size", "num_hidden_layers", "intermediate_size")
    )
    model = params * TRAIN_BYTES_PER_PARAMETER
    stages = []

    data = synthetic_memory(s.n_requests, s.n_items) if s.data == "synthetic" else 0
    tokenizer = TOKENIZER_BYTES_PER_ENTRY * s.vocab_size if s.base_model is None else 0
    sft_tokens = PROMPT_TOKENS + s.k * MIN_TOKENS_PER_LINE
    sft_act = _activations(config, s.sft_batch, sft_tokens)
    parts = [
        (tokenizer, ("vocab_size",)),
        (model, shape),
        (sft_act, ("sft_batch", *shape)),
        (data, ("n_requests", "n_items")),
    ]
    stages.append(
        Stage(
            "the warm-up",
            PROCESS_BYTES + max(tokenizer, model + sft_act) + data,
            f"the warm-up (the tokenizer trainer's tables for vocab_size={s.vocab_size}, then SFT of a model of "
            f"{params:.3g} parameters with its gradients and Adam states, sft_batch={s.sft_batch} sequences)",
            max(parts, key=lambda p: p[0])[1],
        )
    )

    rows = s.prompts_per_step * s.num_generations
    tokens = PROMPT_TOKENS + s.max_completion_length
    rl_act = _activations(config, rows, tokens)
    kv = kv_cache_bytes(config, rows, tokens)
    vllm = params * 4 + int(s.vllm_kv_cache_gib * 2**30) if s.use_vllm else 0
    runs = 2 * len(s.lr_grid)
    at_once = min(s.jobs, runs)
    per_run = PROCESS_BYTES + model + rl_act + kv + vllm
    parts = [
        (model, shape),
        (rl_act + kv, ("prompts_per_step", "num_generations", "max_completion_length")),
        (vllm, ("vllm_kv_cache_gib",)),
    ]
    stages.append(
        Stage(
            "the RL grid",
            at_once * per_run,
            f"the RL grid ({runs} runs, {at_once} at once: jobs={s.jobs}; each a model of {params:.3g} parameters "
            f"in training and {rows} sequences of {tokens} tokens: prompts_per_step x num_generations)",
            _dominant(parts) + (("jobs",) if at_once > 1 else ()),
        )
    )

    n_test = max(1, int(s.n_requests * s.split_fractions[2])) if s.data == "synthetic" else 1
    gen = GenerationConfig(
        k=s.k, max_new_tokens=s.max_completion_length, batch_size=64, num_samples=s.eval_samples
    )
    gen_rows = min(gen.batch_size, n_test) * max(1, s.eval_samples)
    evaluation = kv_cache_bytes(config, gen_rows, tokens) + completions_memory(n_test, gen)
    ci = bootstrap_memory(1, s.ci_resamples)
    parts = [(params * 4, shape), (evaluation, ("eval_samples",)), (ci, ("ci_resamples",))]
    stages.append(
        Stage(
            "the test evaluation",
            PROCESS_BYTES + params * 4 + evaluation + ci,
            f"the test evaluation (a model of {params:.3g} parameters, eval_samples={s.eval_samples} sampled lists "
            f"per request, ci_resamples={s.ci_resamples} bootstrap resamples)",
            _dominant(parts),
        )
    )
    return stages


def _dominant(parts: list[tuple[int, tuple[str, ...]]]) -> tuple[str, ...]:
    return max(parts, key=lambda p: p[0])[1]


def check_memory(s: DemoSettings, origins: dict[str, Origin], limit: tuple[int, str] | None = None) -> None:
    """The largest stage of :func:`memory_stages` against the host's limit (``catalog.io.memory``); over it, an
    ``InputError`` naming the setting that makes that stage large (one the user set, where one did)."""
    from catalog.io.memory import check_fits

    stage = max(memory_stages(s), key=lambda st: st.bytes)
    name = blame(stage.fields, origins)
    try:
        check_fits(
            stage.bytes,
            what=stage.what,
            field=name,
            hint=f"lower {', '.join(dict.fromkeys((name, *stage.fields)))}",
            limit=limit,
        )
    except InputError as err:
        raise fail(name, err.message, err.hint, origins) from None
