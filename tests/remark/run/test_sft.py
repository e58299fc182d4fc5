"""SFT targets built from pooled data (remark.run.sft)."""

from __future__ import annotations

import numpy as np

from remark.run.sft import _pad_list


def test_pad_list_keeps_items_skips_banned_and_survives_zero_weights():
    pool = np.array(["a", "b", "c", "d", "e"], dtype=object)
    weights = np.array([0.0, 0.0, 0.5, 0.5, 0.0])  # three zero-popularity items
    rng = np.random.default_rng(0)
    out = _pad_list(["x", "x", "c"], pool, weights, 5, banned={"d"}, rng=rng)
    assert out[:2] == ["x", "c"]  # given items first, deduplicated
    assert len(out) == 5
    assert len(set(out)) == 5
    assert "d" not in out
    assert set(out[2:]) == {"a", "b", "e"}  # only zero-weight items are left to pad with
    weights = np.array([0.0, 1.0, 0.0, 0.0, 0.0])
    assert _pad_list([], pool, weights, 3, banned=set(), rng=rng)[0] == "b"  # positive weight comes first


def test_run_sft_trains_saves_without_pickle_and_can_stay_quiet(
    hand_dataset, hand_model_dir, tmp_path, capsys
):
    from remark.run.sft import SFTSettings, run_sft, sft_examples

    settings = SFTSettings(targets="union", k=3, seed=0)
    examples = sft_examples(hand_dataset, settings)
    assert len(examples) == 2  # one per request of the train split
    first = next(e for e in examples if "Alpha please" in e["prompt"][0]["content"])
    assert first["completion"][0]["content"].splitlines()[0] == "Beta (2002)"  # most-named union item first
    assert "Zeta (2006)" not in first["completion"][0]["content"]  # seen items are never targets
    out = run_sft(
        hand_dataset,
        hand_model_dir,
        tmp_path / "sft",
        settings,
        {
            "use_cpu": True,
            "num_train_epochs": 2,
            "logging_steps": 1,
            "disable_tqdm": True,
            "report_to": "none",
        },
        print_logs=False,
    )
    names = {p.name for p in out.iterdir()}
    assert "model.safetensors" in names
    assert "training_args.bin" not in names
    assert "'loss'" not in capsys.readouterr().out
