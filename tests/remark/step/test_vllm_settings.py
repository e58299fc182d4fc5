"""The colocated engine's settings and the vLLM config checks, without vLLM (the base suite).

The engine gets the dtype the policy computes in, the run's seed per process, remark's KV cache and eager
fields; the sync takes vLLM's layer-wise reload only where ``reload_weights`` accepts a weights iterator
(older vLLM's reloads the checkpoint from disk); tied layers are found by their shared Parameter. On a
machine without CUDA, server mode, sleep mode and tensor parallelism are refused before anything loads,
saying why; remark's engine fields are refused where no colocated engine runs.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

from catalog.io.errors import InputError
from remark.step.colocated_engine import (
    EngineSettings,
    engine_dtype,
    has_layerwise_reload,
    shared_weight_modules,
    single_process_rendezvous,
)

REPO = Path(__file__).resolve().parents[3]


def test_the_engine_computes_in_the_policys_dtype():
    fp32 = torch.nn.Linear(2, 2)
    assert engine_dtype(fp32) == "float32"  # vLLM's "auto" would make it bfloat16
    assert engine_dtype(fp32, bf16=True) == "bfloat16"  # float32 weights under bf16 autocast
    assert engine_dtype(fp32, fp16=True) == "float16"
    assert engine_dtype(torch.nn.Linear(2, 2).to(torch.bfloat16), fp16=True) == "bfloat16"


def test_engine_kwargs_carry_the_run_seed_per_process_and_the_kv_cache():
    model = torch.nn.Linear(2, 2)
    settings = EngineSettings(seed=7, kv_cache_gib=0.25, enforce_eager=True)
    assert settings.llm_kwargs(model, process_index=0, tensor_parallel_size=1) == {
        "dtype": "float32",
        "seed": 7,
        "enforce_eager": True,
        "kv_cache_memory_bytes": 1 << 28,
    }
    assert settings.llm_kwargs(model, process_index=3, tensor_parallel_size=1)["seed"] == 10
    assert (
        settings.llm_kwargs(model, process_index=3, tensor_parallel_size=2)["seed"] == 8
    )  # one per TP group
    assert "kv_cache_memory_bytes" not in EngineSettings().llm_kwargs(model, 0, 1)


def test_a_single_process_engine_takes_a_port_no_one_holds(monkeypatch):
    import socket

    from trl.trainer.utils import ensure_master_addr_port

    held = []
    for port in (29500, 23456, 12355, 12345):  # TRL's list: a run holding its first free one
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("", port))
        except OSError:
            s.close()
            continue
        s.listen()
        held.append(s)
        break
    try:
        for key in ("MASTER_ADDR", "MASTER_PORT"):
            monkeypatch.delenv(key, raising=False)
        single_process_rendezvous()
        ours = int(os.environ["MASTER_PORT"])
        assert ours not in (29500, 23456, 12355, 12345)  # TRL would take the next port of its list
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as check:
            check.bind(("", ours))  # free now: the probe released it
        assert os.environ["MASTER_ADDR"] == "localhost"
        ensure_master_addr_port()  # TRL keeps what is set
        assert int(os.environ["MASTER_PORT"]) == ours
        monkeypatch.setenv("MASTER_PORT", "41234")  # a launcher's port is kept
        single_process_rendezvous()
        assert os.environ["MASTER_PORT"] == "41234"
        monkeypatch.setenv("MASTER_PORT", "auto")  # TRL's "choose one"
        single_process_rendezvous()
        assert os.environ["MASTER_PORT"].isdigit()
    finally:
        for s in held:
            s.close()


def test_the_layerwise_reload_is_used_only_where_it_takes_an_iterator():
    class New:
        def reload_weights(self, weights_iterator=None, weights_path=None, is_checkpoint_format=True): ...

    class Old:
        def reload_weights(self): ...

    assert has_layerwise_reload(New())
    assert not has_layerwise_reload(Old())
    assert not has_layerwise_reload(object())


def test_tied_layers_are_the_modules_sharing_a_weight():
    class Layer(torch.nn.Module):
        def __init__(self, weight=None):
            super().__init__()
            self.weight = weight if weight is not None else torch.nn.Parameter(torch.zeros(2, 2))
            self.quant_method = object()

    embed = Layer()
    tied = torch.nn.Module()
    tied.embed_tokens, tied.lm_head, tied.mlp = embed, Layer(embed.weight), Layer()
    assert shared_weight_modules(tied) == ["embed_tokens", "lm_head"]
    untied = torch.nn.Module()
    untied.embed_tokens, untied.lm_head = Layer(), Layer()
    assert shared_weight_modules(untied) == []


def cpu_cfg(**fields):
    """The fields ``_validate_vllm`` reads, for a CPU run."""
    base = dict(
        use_vllm=True,
        vllm_mode="colocate",
        use_cpu=True,
        vllm_enable_sleep_mode=False,
        vllm_tensor_parallel_size=1,
        vllm_kv_cache_gib=None,
        vllm_enforce_eager=False,
        validation_engine="auto",
        build_tiny=None,
    )
    return SimpleNamespace(**{**base, **fields})


@pytest.fixture
def vllm_found(monkeypatch):
    """``find_spec("vllm")`` answers as where vLLM is installed (the checks before any engine starts)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: object() if name == "vllm" else real(name, *a)
    )


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"vllm_mode": "server"}, "vllm_mode", "vLLM's NCCL weight-transfer engine, which is CUDA only"),
        ({"vllm_enable_sleep_mode": True}, "vllm_enable_sleep_mode", "Sleep mode is not supported"),
        ({"vllm_tensor_parallel_size": 2}, "vllm_tensor_parallel_size", "one copy per training process"),
        ({"use_vllm": False, "validation_engine": "vllm"}, "validation_engine", "colocated vLLM engine"),
        ({"validation_engine": "vlm"}, "validation_engine", "did you mean 'vllm'"),
    ],
)
def test_vllm_settings_that_cannot_run_on_cpu_are_refused(vllm_found, fields, field, words):
    from remark.config.validate import _validate_vllm

    with pytest.raises(InputError) as err:
        _validate_vllm(cpu_cfg(**fields))
    assert err.value.field == field
    assert words in str(err.value)


def test_server_mode_is_refused_on_cpu_with_what_to_use(vllm_found):
    from remark.config.validate import _validate_vllm

    with pytest.raises(InputError) as err:
        _validate_vllm(cpu_cfg(vllm_mode="server"))
    assert "use vllm_mode: colocate on CPU" in str(err.value)
    _validate_vllm(cpu_cfg())  # colocate on CPU is fine


def test_tiny_cpu_vllm_is_the_published_recipe_on_the_tiny_model():
    """configs/tiny_cpu_vllm.yaml keeps configs/remark.yaml's method and generation settings (its scale
    is configs/tiny_cpu.yaml's)."""
    ours = yaml.safe_load((REPO / "configs" / "tiny_cpu_vllm.yaml").read_text())
    published = yaml.safe_load((REPO / "configs" / "remark.yaml").read_text())
    tiny = yaml.safe_load((REPO / "configs" / "tiny_cpu.yaml").read_text())
    method = [
        "reward_scheme", "sampling", "advantage_scaling", "scale_rewards", "advantage_eps", "rank_level_ratio",
        "loss_type", "num_generations", "adam_beta1", "adam_beta2", "lr_scheduler_type", "warmup_steps",
        "temperature", "beta", "use_bias_correction_kl", "epsilon", "epsilon_high", "gradient_checkpointing",
        "use_vllm", "vllm_mode", "divergence_kl", "logging_steps",
    ]  # fmt: skip
    assert {k: ours[k] for k in method} == {k: published[k] for k in method}
    scale = [
        "num_ranks",
        "per_device_train_batch_size",
        "learning_rate",
        "max_completion_length",
        "max_steps",
    ]
    assert {k: ours[k] for k in scale} == {k: tiny[k] for k in scale}
    # TRL's importance-sampling defaults, which remark.yaml leaves implicit, written out
    assert ours["vllm_importance_sampling_correction"] is True
    assert ours["vllm_importance_sampling_mode"] == "sequence_mask"
    spec = ours["build_tiny"]["spec"]
    assert spec["hidden_size"] // spec["num_attention_heads"] >= 32  # vLLM's CPU attention
