"""LoRA from the config: validation before loading, adapter-only checkpoints, resume, eval and SFT on adapters.

All on the hand-built tiny model (CPU, a few steps): the adapter's weights change, the base's do not (the
merged model is the base plus (alpha / r) B A on the targeted layers, by hand), a run resumed from an
adapter checkpoint logs the same losses as the uninterrupted one, and ``remark eval run`` / ``remark sft``
take the adapter folder.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

from catalog.io.errors import InputError
from data_prep.card import read_card_header
from remark.config import RemarkGRPOConfig
from remark.run.training import run_training
from tests.remark.run.run_fields import tiny_run_fields

pytest.importorskip("peft")


def lora_config(tmp_path, data_dir, model_dir, name="lora", **overrides):
    fields = dict(
        data_dir=str(data_dir),
        model_name_or_path=str(model_dir),
        learning_rate=5e-2,
        beta=0.04,
        save_strategy="steps",
        save_steps=2,
        use_peft=True,
        lora_r=4,
        lora_alpha=8,
        lora_dropout=0.0,
        lora_target_modules=["q_proj", "v_proj"],
    )
    return RemarkGRPOConfig(**tiny_run_fields(tmp_path / name, **(fields | overrides)))


def _losses(checkpoint):
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    return {h["step"]: h["loss"] for h in state["log_history"] if "loss" in h}


# -- validation before any model loads ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [("lora_r", 0), ("lora_r", 2.5), ("lora_alpha", 0), ("lora_dropout", 1.0), ("lora_target_modules", [""])],
)
def test_bad_lora_fields_name_the_field(tmp_path, field, value):
    with pytest.raises(InputError) as err:
        lora_config(tmp_path, tmp_path, tmp_path, **{field: value})
    assert err.value.field == field


def test_missing_peft_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr("eval.adapters.peft_installed", lambda: False)
    with pytest.raises(InputError) as err:
        lora_config(tmp_path, tmp_path, tmp_path)
    assert err.value.field == "use_peft"
    assert "remark[lora]" in err.value.hint


def test_unknown_target_module_lists_the_models_linear_layers(hand_model_dir, tmp_path):
    from remark.config.lora import check_target_modules

    cfg = lora_config(tmp_path, tmp_path, hand_model_dir, lora_target_modules=["q_proj", "qproj"])
    with pytest.raises(InputError) as err:
        check_target_modules(cfg, hand_model_dir)
    assert err.value.field == "lora_target_modules"
    assert "['qproj']" in str(err.value)
    assert "q_proj" in err.value.hint and "down_proj" in err.value.hint


def test_an_adapter_model_with_a_new_adapter_must_be_merged(hand_model_dir, tmp_path):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(hand_model_dir)}))
    with pytest.raises(InputError) as err:
        lora_config(tmp_path, tmp_path, adapter)
    assert err.value.field == "use_peft"
    lora_config(tmp_path, tmp_path, adapter, merge_adapter=True)  # accepted
    with pytest.raises(InputError) as err:
        lora_config(tmp_path, tmp_path, hand_model_dir, merge_adapter=True)
    assert err.value.field == "merge_adapter"


# -- training, resume, evaluation ---------------------------------------------------------------------


@pytest.mark.slow
def test_an_adapters_base_is_resolved_from_the_adapter_folder_never_the_current_one(tmp_path, monkeypatch):
    """A base recorded relative (as PEFT records the path it was given) is read relative to the adapter
    folder: from another folder holding a different model at that relative path it is refused, not used,
    and never taken for a hub id unless the local hub cache holds it; an absolute one is used as is."""
    from eval.adapters import adapter_base

    adapter = tmp_path / "runs" / "sft_lora"
    adapter.mkdir(parents=True)
    (adapter / "adapter_config.json").write_text(
        json.dumps({"base_model_name_or_path": "demo_fast/base_model"})
    )
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "demo_fast" / "base_model").mkdir(parents=True)
    (elsewhere / "demo_fast" / "base_model" / "config.json").write_text('{"model_type": "qwen2"}')
    monkeypatch.chdir(elsewhere)
    with pytest.raises(InputError, match=r"'demo_fast/base_model' is not a model folder relative to .*sft_lora, "
                       r"nor a model in the local hub cache \(pass the base model's folder"):  # fmt: skip
        adapter_base(adapter)
    assert adapter_base(adapter, "demo_fast/base_model") == "demo_fast/base_model"  # asked for: as given
    (adapter / "demo_fast" / "base_model").mkdir(parents=True)  # relative to the adapter folder: found
    (adapter / "demo_fast" / "base_model" / "config.json").write_text('{"model_type": "qwen2"}')
    assert adapter_base(adapter) == str(adapter / "demo_fast" / "base_model")
    (adapter / "adapter_config.json").write_text(
        json.dumps({"base_model_name_or_path": str(elsewhere / "x")})
    )
    with pytest.raises(InputError, match=r"/elsewhere/x' is not a model folder \("):
        adapter_base(adapter)


def test_lora_trains_the_adapter_only_resumes_and_evaluates(hand_dataset, hand_model_dir, tmp_path):
    from eval.adapters import adapter_base, load_causal_lm
    from remark.cli.main import main

    data = tmp_path / "hand"
    summary = run_training(lora_config(tmp_path, data, hand_model_dir))
    out = tmp_path / "lora"
    assert summary["global_step"] == 4
    for folder in (out / "checkpoint-2", out / "checkpoint-4", out / "final"):
        names = {p.name for p in folder.iterdir()}
        assert {"adapter_config.json", "adapter_model.safetensors"} <= names, folder
        assert "model.safetensors" not in names, folder  # adapter-only: no copy of the base weights
    assert adapter_base(out / "final") == str(hand_model_dir)
    card = read_card_header((out / "final" / "README.md").read_text())  # ours, not PEFT's template
    assert card["library_name"] == "peft" and card["base_model"] == str(hand_model_dir)
    assert "lora" in card["tags"]
    assert (
        "| LoRA | r 4, alpha 8, dropout 0.0, targets ['q_proj', 'v_proj'] |"
        in (out / "final" / "README.md").read_text()
    )

    # the adapter changed (B starts at 0), the base did not: merged = base + (alpha / r) B A on q/v only
    weights = load_file(str(out / "final" / "adapter_model.safetensors"))
    assert weights and all(".lora_A." in k or ".lora_B." in k for k in weights)
    assert any(k.endswith("lora_B.weight") and v.abs().max() > 0 for k, v in weights.items())
    base = load_file(str(hand_model_dir / "model.safetensors"))
    merged = load_causal_lm(out / "final", merge=True).state_dict()
    scale = 8 / 4
    for name, w in base.items():
        layer = name.removeprefix("model.").removesuffix(".weight")
        a = next((v for k, v in weights.items() if k.endswith(f"{layer}.lora_A.weight")), None)
        if a is None:
            assert torch.equal(merged[name], w), name
        else:
            b = next(v for k, v in weights.items() if k.endswith(f"{layer}.lora_B.weight"))
            assert name.endswith(("q_proj.weight", "v_proj.weight"))
            torch.testing.assert_close(merged[name], w + scale * b @ a, rtol=1e-5, atol=1e-6)

    # resume from the adapter checkpoint at step 2: the same losses as the uninterrupted run at 3 and 4
    shutil.copytree(out / "checkpoint-2", tmp_path / "resumed" / "checkpoint-2")
    run_training(
        lora_config(tmp_path, data, hand_model_dir, name="resumed"),
        resume=str(tmp_path / "resumed" / "checkpoint-2"),
    )
    full, resumed = _losses(out / "checkpoint-4"), _losses(tmp_path / "resumed" / "checkpoint-4")
    assert sorted(resumed) == [1, 2, 3, 4]
    for step in (3, 4):
        assert resumed[step] == pytest.approx(full[step], rel=1e-5, abs=1e-7)

    # remark eval run takes the adapter folder (base from adapter_config.json), merged or not
    common = ["--data", str(data), "--split", "train", "--k", "3", "--max-new-tokens", "24"]
    common += ["--engine", "transformers", "--device", "cpu", "--resamples", "99"]
    assert main(["eval", "run", "--model", str(out / "final"), "--out", str(tmp_path / "ev"), *common]) == 0
    merged_args = ["--model", str(out / "final"), "--out", str(tmp_path / "ev_m"), "--merge-adapter"]
    assert main(["eval", "run", *merged_args, *common]) == 0
    metrics = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert metrics["settings"]["adapter"] == {"base": str(hand_model_dir), "merged": False}
    assert json.loads((tmp_path / "ev_m" / "metrics.json").read_text())["settings"]["adapter"]["merged"]
    preds = [(tmp_path / d / "predictions.jsonl").read_text() for d in ("ev", "ev_m")]
    assert preds[0] == preds[1]  # merging changes the weights' rounding, not the greedy lists here

    # merge-adapter writes a full model that loads without peft and generates the same lists
    assert main(["merge-adapter", str(out / "final"), "--out", str(tmp_path / "merged")]) == 0
    assert (tmp_path / "merged" / "model.safetensors").is_file()
    assert (
        main(["eval", "run", "--model", str(tmp_path / "merged"), "--out", str(tmp_path / "ev_f"), *common])
        == 0
    )
    assert (tmp_path / "ev_f" / "predictions.jsonl").read_text() == preds[0]

    # remark sft continues the adapter (saved adapter-only, weights moved)
    sft_out = tmp_path / "sft"
    sft = ["sft", "--model", str(out / "final"), "--data", str(data), "--out", str(sft_out)]
    sft += ["--k", "3", "--max-steps", "2", "--lr", "1e-2", "--cpu", "--batch-size", "2"]
    assert main(sft) == 0
    assert (sft_out / "adapter_model.safetensors").is_file() and not (sft_out / "model.safetensors").exists()
    after = load_file(str(sft_out / "adapter_model.safetensors"))
    assert after.keys() == weights.keys()
    assert any(not torch.equal(after[k], weights[k]) for k in weights)
