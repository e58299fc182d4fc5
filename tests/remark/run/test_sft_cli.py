"""``remark sft``: --max-steps must be 1 or more; --out is written atomically and owned like every --out."""

from __future__ import annotations

import json
import os

import pytest

from catalog.io.outputs import OUTPUT_MARKER, output_kind
from remark.cli.main import main


def _sft(data, model, out, *extra):
    return ["sft", "--data", str(data), "--model", str(model), "--out", str(out), "--k", "3", "--cpu", *extra]


@pytest.mark.parametrize("steps", ["0", "-1", "-5", "two"])
def test_max_steps_below_one_is_refused_before_anything_runs(tmp_path, capsys, steps):
    out = tmp_path / "sft"
    code = main(_sft(tmp_path / "no-data", tmp_path / "no-model", out, f"--max-steps={steps}"))
    err = capsys.readouterr().err
    assert code == 2
    assert "--max-steps" in err and "Traceback" not in err
    assert not out.exists()


def test_sft_out_is_owned_replaced_atomically_and_never_an_input(
    hand_dataset, hand_model_dir, tmp_path, capsys, monkeypatch
):
    data = hand_dataset.path
    steps = ["--max-steps", "2", "--batch-size", "2"]

    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "mine.txt").write_text("keep me")
    assert main(_sft(data, hand_model_dir, foreign, *steps)) == 2
    assert "a folder that remark did not write" in capsys.readouterr().err
    assert [p.name for p in foreign.iterdir()] == ["mine.txt"]  # refused before training, nothing touched

    for an_input in (data, hand_model_dir, data / "requests.parquet"):
        before = sorted(p.name for p in an_input.parent.iterdir())
        assert main(_sft(data, hand_model_dir, an_input, *steps, "--force")) == 2
        assert "destroy the input" in capsys.readouterr().err
        assert sorted(p.name for p in an_input.parent.iterdir()) == before

    out = tmp_path / "sft"
    assert main(_sft(data, hand_model_dir, out, *steps)) == 0
    assert output_kind(out) == "sft"
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".sft.")]  # no temporary left
    weights = (out / "model.safetensors").read_bytes()

    # a run that dies after the model is saved (the tokenizer's save raises) leaves the previous output
    from transformers import PreTrainedTokenizerBase

    def killed(self, *a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(PreTrainedTokenizerBase, "save_pretrained", killed)
    assert main(_sft(data, hand_model_dir, out, *steps, "--lr", "1e-1")) == 130  # interrupted
    monkeypatch.undo()
    assert (out / "model.safetensors").read_bytes() == weights
    assert json.loads((out / OUTPUT_MARKER).read_text())["kind"] == "sft"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".sft.")]

    # its own earlier output is replaced; a foreign folder only with --force
    assert main(_sft(data, hand_model_dir, out, *steps, "--lr", "1e-1")) == 0
    assert (out / "model.safetensors").read_bytes() != weights
    assert main(_sft(data, hand_model_dir, foreign, *steps, "--force")) == 0
    assert output_kind(foreign) == "sft" and not (foreign / "mine.txt").exists()


def test_sft_on_a_merged_adapter_records_the_final_base_path(hand_dataset, hand_model_dir, tmp_path):
    pytest.importorskip("peft")
    from eval.adapters import adapter_base, load_causal_lm

    steps = ["--max-steps", "1", "--batch-size", "2", "--lora-r", "2"]
    first = tmp_path / "first"
    assert main(_sft(hand_dataset.path, hand_model_dir, first, *steps)) == 0
    assert (first / "adapter_config.json").is_file()
    second = tmp_path / "second"
    # a base given as a relative path is recorded absolute: found from any folder, never taken for a hub id
    relative = os.path.relpath(hand_model_dir)
    assert main(_sft(hand_dataset.path, relative, tmp_path / "rel", *steps)) == 0
    recorded = json.loads((tmp_path / "rel" / "adapter_config.json").read_text())["base_model_name_or_path"]
    assert recorded == str(hand_model_dir) and os.path.isabs(recorded)
    assert main(_sft(hand_dataset.path, first, second, *steps, "--merge-adapter")) == 0
    recorded = json.loads((second / "adapter_config.json").read_text())["base_model_name_or_path"]
    assert recorded == str(second / "merged_base")  # not the temporary folder it was trained in
    assert adapter_base(second) == str(second / "merged_base")
    assert output_kind(second / "merged_base") == "merged-model"
    assert load_causal_lm(second) is not None  # base and adapter load from where they now are
