"""``build_tiny_assets`` writes each asset folder atomically: a build that fails mid-write leaves no half
folder and no stamp that vouches for one; complete assets are reused untouched; a rerun rebuilds."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import remark.run.sft
from catalog.io.errors import InputError
from catalog.io.outputs import output_kind
from remark.run.build_tiny import build_tiny_assets

pytestmark = pytest.mark.slow
SMALL = {
    "n_requests": 40,
    "sft_epochs": 1,
    "spec": {"vocab_size": 512, "hidden_size": 32, "intermediate_size": 64},
}


def config(out: Path, **build) -> SimpleNamespace:
    return SimpleNamespace(
        output_dir=str(out), build_tiny={**SMALL, **build}, num_ranks=5, use_cpu=True, disable_tqdm=True
    )


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under ``root``: (mtime_ns, bytes)."""
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


class Killed(RuntimeError):
    pass


def fail_after_config(ds, model, out_dir, *args, **kwargs):
    """A run_sft that dies while saving: one file of the model written, then an exception."""
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "config.json").write_text("{}")
    raise Killed("died mid-save")


def test_complete_assets_are_reused_untouched(tmp_path, monkeypatch):
    cfg = config(tmp_path / "run")
    data_dir, sft_dir = build_tiny_assets(cfg)
    root = tmp_path / "run" / "assets"
    assert (data_dir, sft_dir) == (root / "data", root / "sft_model")
    assert [output_kind(root / n) for n in ("data", "base_model", "sft_model")] == [
        "prep",
        "tiny-model",
        "sft",
    ]
    assert (sft_dir / "model.safetensors").is_file() and (root / "base_model" / "tiny_spec.json").is_file()
    assert json.loads((root / "build.json").read_text())["n_requests"] == 40
    assert sorted(p.name for p in root.iterdir()) == ["base_model", "build.json", "data", "sft_model"]
    before = snapshot(root)
    monkeypatch.setattr(remark.run.sft, "run_sft", fail_after_config)  # a rebuild would fail
    assert build_tiny_assets(cfg) == (data_dir, sft_dir)
    assert snapshot(root) == before


def test_a_failed_build_leaves_no_partial_model_and_the_rerun_rebuilds(tmp_path, monkeypatch):
    cfg = config(tmp_path / "run")
    root = tmp_path / "run" / "assets"
    with monkeypatch.context() as m:
        m.setattr(remark.run.sft, "run_sft", fail_after_config)
        with pytest.raises(Killed):
            build_tiny_assets(cfg)
    # no sft_model (not even its config.json), no temporary folder; the stamp matches no settings
    assert sorted(p.name for p in root.iterdir()) == ["base_model", "build.json", "data"]
    assert json.loads((root / "build.json").read_text()) == {"incomplete": build_tiny_cfg(cfg)}
    _, sft_dir = build_tiny_assets(cfg)
    assert output_kind(sft_dir) == "sft" and (sft_dir / "model.safetensors").is_file()
    assert json.loads((root / "build.json").read_text()) == build_tiny_cfg(cfg)
    assert sorted(p.name for p in root.iterdir()) == ["base_model", "build.json", "data", "sft_model"]


def test_a_failed_rebuild_with_new_settings_is_not_trusted_for_the_old_ones(tmp_path, monkeypatch):
    """Built with seed 0, rebuilt with seed 1 and failed mid-SFT (data and base model already seed 1's):
    asking for seed 0 again rebuilds everything instead of returning seed 1's data with seed 0's model."""
    first = config(tmp_path / "run")
    root = tmp_path / "run" / "assets"
    build_tiny_assets(first)
    seed0 = snapshot(root)
    with monkeypatch.context() as m:
        m.setattr(remark.run.sft, "run_sft", fail_after_config)
        with pytest.raises(Killed):
            build_tiny_assets(config(tmp_path / "run", seed=1))
    assert snapshot(root / "sft_model") == {
        k.removeprefix("sft_model/"): v for k, v in seed0.items() if k.startswith("sft_model/")
    }  # the complete seed-0 model was not overwritten in place
    assert (root / "data" / "requests.parquet").read_bytes() != seed0["data/requests.parquet"][1]
    build_tiny_assets(first)
    again = snapshot(root)
    assert set(again) == set(seed0)
    for name in ("data/requests.parquet", "data/catalog.parquet", "base_model/model.safetensors"):
        assert again[name][1] == seed0[name][1], name  # seed 0's assets again, byte for byte
    assert json.loads((root / "build.json").read_text()) == build_tiny_cfg(first)


def test_a_folder_without_its_marker_is_refused_even_under_a_matching_stamp(tmp_path):
    """build.json vouches for the settings, not for who wrote a folder: a model folder without the
    ownership marker is refused before any work, and nothing in assets/ changes."""
    root = tmp_path / "run" / "assets"
    (root / "sft_model").mkdir(parents=True)
    (root / "sft_model" / "config.json").write_text("{}")  # a model folder build_tiny did not write
    (root / "build.json").write_text(json.dumps(build_tiny_cfg(config(tmp_path / "run"))))
    before = snapshot(root)
    with pytest.raises(InputError, match="did not write") as err:
        build_tiny_assets(config(tmp_path / "run"))
    assert err.value.field == "build_tiny" and err.value.path == str(root / "sft_model")
    assert "move it away (build_tiny rebuilds it)" in str(err.value)
    assert snapshot(root) == before


def build_tiny_cfg(cfg: SimpleNamespace) -> dict:
    from remark.config.tiny import TINY_DEFAULTS

    return {**TINY_DEFAULTS, **cfg.build_tiny}
