"""``remark demo``'s settings checked whole before any work (``remark.demo.settings_check``), and a model
folder's ``config.json`` sizes before any weight loads (``eval.model_sizes``).

Every bad settings file of the table runs the CLI in-process and must give exit 2, one line naming the
file and the field (``rl_seeds[1]``, ``world[bogus_arg]``) and the problem, no traceback, and nothing
written: neither ``--out`` nor anything else beside the settings file. No training starts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from catalog.io.errors import InputError
from remark.cli.main import main

#: a memory limit of the test's own, so that what fits does not depend on the machine (catalog.io.memory)
LIMIT_GB = "8"

#: (id, settings file text, the field as the error names it, a fragment of the problem)
BAD_SETTINGS = [
    # the reviewer's cases
    ("lr-quoted-number", 'lr_grid: ["1e-3"]\n', "field 'lr_grid[0]'", "must be a number, got '1e-3'"),
    ("threads-0", "threads: 0\n", "field 'threads'", "threads=0 must be >= 1"),
    ("k-0", "k: 0\n", "field 'k'", "k=0 must be >= 1"),
    ("seed-negative", "seed: -1\n", "field 'seed'", "seed=-1 must be >= 0"),
    ("sft-lr-nan", "sft_lr: .nan\n", "field 'sft_lr'", "sft_lr=nan must be > 0"),
    ("ci-resamples-0", "ci_resamples: 0\n", "field 'ci_resamples'", "ci_resamples=0 must be >= 1"),
    ("hidden-size-0", "hidden_size: 0\n", "field 'hidden_size'", "hidden_size=0 must be >= 1"),
    (
        "world-unknown-key",
        "world: {bogus_arg: 1}\n",
        "field 'world[bogus_arg]'",
        "unknown world key 'bogus_arg'",
    ),
    (
        "seed-path",
        'rl_seeds: [0, "/../../../x"]\n',
        "field 'rl_seeds[1]'",
        "must be an integer, got '/../../../x'",
    ),
    ("vocab-huge", "vocab_size: 1e9\n", "field 'vocab_size'", "over the limit"),
    # negative, not finite, a boolean for an integer, a wrong element type
    ("steps-negative", "steps: -3\n", "field 'steps'", "steps=-3 must be >= 1"),
    ("sft-epochs-inf", "sft_epochs: .inf\n", "field 'sft_epochs'", "sft_epochs=inf must be > 0"),
    ("threads-bool", "threads: true\n", "field 'threads'", "booleans, not numbers"),
    ("seed-float", "seed: 1.5\n", "field 'seed'", "seed must be an integer, got 1.5"),
    ("lr-element-word", "lr_grid: [1.0e-4, fast]\n", "field 'lr_grid[1]'", "must be a number, got 'fast'"),
    ("seeds-element-bool", "rl_seeds: [true]\n", "field 'rl_seeds[0]'", "must be an integer, got True"),
    ("base-model-number", "base_model: 3\n", "field 'base_model'", "must be a folder's path"),
    ("base-model-nul", 'base_model: "m\\0x"\n', "field 'base_model'", "holds a NUL character"),
    (
        "num-generations-1",
        "num_generations: 1\n",
        "field 'num_generations'",
        "num_generations=1 must be >= 2",
    ),
    # lists: empty, repeated, two rates in one folder name, wrong length
    ("seeds-empty", "rl_seeds: []\n", "field 'rl_seeds'", "must be a non-empty list of integers"),
    ("seeds-repeated", "rl_seeds: [0, 1, 0]\n", "field 'rl_seeds[2]'", "rl_seeds[2]=0 repeats rl_seeds[0]"),
    (
        "lr-same-folder",
        "lr_grid: [1.0e-4, 1.2e-4]\n",
        "field 'lr_grid[1]'",
        "share the run folder name lr1e-04",
    ),
    ("split-two", "split_fractions: [0.5, 0.5]\n", "field 'split_fractions'", "must be a list of 3 numbers"),
    ("split-sum", "split_fractions: [0.5, 0.5, 0.5]\n", "field 'split_fractions'", "sums to 1.5, not 1"),
    # the world's keys
    (
        "world-typo",
        "world: {ofbeat_prob: 0.5}\n",
        "field 'world[ofbeat_prob]'",
        "did you mean 'offbeat_prob'?",
    ),
    ("world-own-setting", "world: {seed: 3}\n", "field 'world[seed]'", "the demo's own setting seed"),
    ("world-range", "world: {offbeat_prob: 1.5}\n", "field 'world[offbeat_prob]'", "must be >= 0 and < 1"),
    (
        "world-size-order",
        "world: {relevant_size: [5, 2]}\n",
        "field 'world[relevant_size]'",
        "1 <= min <= max",
    ),
    ("world-not-mapping", "world: 3\n", "field 'world'", "world must be a mapping"),
    # names and choices
    ("unknown-setting", "stepz: 4\n", "field 'stepz'", "did you mean 'steps'?"),
    ("scheduler-typo", "sft_scheduler: cosin\n", "field 'sft_scheduler'", "did you mean 'cosine'?"),
    ("targets-unknown", "sft_targets: all\n", "field 'sft_targets'", "unknown sft_targets 'all'"),
    # combinations: no effect, contradictions
    ("protoqa-only", "n_questions: 30\n", "field 'n_questions'", "read with --data protoqa only"),
    (
        "hit-prob-without-noisy",
        "sft_hit_prob: 0.5\n",
        "field 'sft_hit_prob'",
        "has no effect with sft_targets",
    ),
    ("kv-cache-without-vllm", "vllm_kv_cache_gib: 2.0\n", "field 'vllm_kv_cache_gib'", "only with use_vllm"),
    (
        "cap-below-k-lines",
        "max_completion_length: 8\n",
        "field 'max_completion_length'",
        "cannot hold k=5 lines",
    ),
    (
        "cap-past-positions",
        "max_completion_length: 5000\n",
        "field 'max_completion_length'",
        "1024 positions",
    ),
    ("validation-past-steps", "validation_every: 5\n", "field 'validation_every'", "only step 0"),
    ("empty-split", "n_requests: 5\n", "field 'n_requests'", "leaves a split empty"),
    ("head-size-odd", "hidden_size: 36\n", "field 'hidden_size'", "not a multiple of 8"),
    # sizes: memory, naming the setting that makes it large
    ("hidden-huge", "hidden_size: 100000\n", "field 'hidden_size'", "the RL grid"),
    ("eval-samples-huge", "eval_samples: 100000000\n", "field 'eval_samples'", "the test evaluation"),
    ("ci-resamples-huge", "ci_resamples: 1.0e12\n", "field 'ci_resamples'", "over the limit"),
]


def _demo(argv: list[str], capsys) -> tuple[int, str]:
    code = main(["demo", *argv])
    return code, capsys.readouterr().err


def _assert_refused(code: int, err: str, *fragments: str) -> None:
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("remark demo: error: "), err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


@pytest.mark.parametrize(
    ("text", "field", "problem"), [c[1:] for c in BAD_SETTINGS], ids=[c[0] for c in BAD_SETTINGS]
)
def test_bad_settings_file_is_one_line_and_writes_nothing(
    tmp_path, capsys, monkeypatch, text, field, problem
):
    monkeypatch.setenv("REMARK_MEMORY_LIMIT_GB", LIMIT_GB)
    monkeypatch.chdir(tmp_path)  # anything a run would write beside --out lands here
    f = tmp_path / "s.yaml"
    f.write_text(text)
    out = tmp_path / "out"
    code, err = _demo(["--fast", "--data", "synthetic", "--settings", str(f), "--out", str(out)], capsys)
    _assert_refused(code, err, f"{f}, row 1, {field}", problem)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


PROTOQA_CASES = [
    (
        "world-under-protoqa",
        "world: {offbeat_prob: 0.5}\n",
        "field 'world'",
        "read with --data synthetic only",
    ),
    ("too-few-questions", "n_questions: 2\n", "field 'n_questions'", "n_questions=2 must be >= 3"),
    ("question-split-zero", "question_split: [0.8, 0.2, 0.0]\n", "field 'question_split[2]'", "must be > 0"),
    ("question-split-empty", "n_questions: 4\n", "field 'n_questions'", "leaves a split empty"),
]


@pytest.mark.parametrize(
    ("text", "field", "problem"), [c[1:] for c in PROTOQA_CASES], ids=[c[0] for c in PROTOQA_CASES]
)
def test_bad_protoqa_settings(tmp_path, capsys, monkeypatch, text, field, problem):
    monkeypatch.chdir(tmp_path)
    f = tmp_path / "s.yaml"
    f.write_text(text)
    code, err = _demo(["--data", "protoqa", "--settings", str(f), "--out", str(tmp_path / "out")], capsys)
    _assert_refused(code, err, f"{f}, row 1, {field}", problem)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


FLAG_CASES = [
    ("seeds-repeated", ["--seeds", "1", "1"], "field '--seeds[1]'", "--seeds[1]=1 repeats --seeds[0]"),
    ("lr-same-folder", ["--lr-grid", "1e-4", "1.2e-4"], "field '--lr-grid[1]'", "share the run folder name"),
    (
        "threads-past-cap",
        ["--threads", "5000"],
        "field '--threads'",
        "--threads=5000 must be >= 1 and <= 1024",
    ),
    ("warmup-threads-past-cap", ["--warmup-threads", "2000"], "field '--warmup-threads'", "<= 1024"),
]


@pytest.mark.parametrize(
    ("flags", "field", "problem"), [c[1:] for c in FLAG_CASES], ids=[c[0] for c in FLAG_CASES]
)
def test_flags_go_through_the_same_checks(tmp_path, capsys, monkeypatch, flags, field, problem):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    code, err = _demo(["--fast", "--data", "synthetic", "--out", str(out), *flags], capsys)
    _assert_refused(code, err, field, problem)
    assert list(tmp_path.iterdir()) == []


def test_a_flag_and_a_file_setting_contradicting_each_other_name_the_one_set(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    f = tmp_path / "s.yaml"
    f.write_text("# a comment first\nk: 20\n")  # 20 lines need 80 tokens; the fast default cap is 64
    code, err = _demo(["--fast", "--data", "synthetic", "--settings", str(f), "--out", "o"], capsys)
    _assert_refused(code, err, f"{f}, row 2, field 'k'", "cannot hold k=20 lines")
    f.write_text("k: 3\n")  # fine alone; the protoqa-only setting is refused under --data synthetic only
    from remark.demo import default_settings

    assert default_settings("synthetic", fast=True, settings_file=f).k == 3


def test_good_settings_read_plain_numbers_and_keep_the_defaults(tmp_path):
    from remark.demo import default_settings
    from remark.demo.preflight import memory_stages

    f = tmp_path / "s.yaml"
    # YAML 1.1 reads a plain 1e-3 as text: it is the number it reads as; an integral float is an integer
    f.write_text(
        "lr_grid: [1e-3, 3.0e-4]\nsteps: 3\nvocab_size: 1.0e3\nworld: {offbeat_prob: 0.5, relevant_size: [2, 4]}\n"
    )
    s = default_settings("synthetic", settings_file=f)
    assert s.lr_grid == (1e-3, 3e-4) and s.vocab_size == 1000 and isinstance(s.vocab_size, int)
    assert s.world == {"offbeat_prob": 0.5, "relevant_size": (2, 4)}
    assert (s.steps, s.validation_every) == (3, 3)  # as --steps does: a shorter run validates at its end
    for data in ("synthetic", "protoqa"):
        for fast in (False, True):
            s = default_settings(data, fast=fast)
            assert max(st.bytes for st in memory_stages(s)) < 2e9  # the defaults fit any machine
    repo = Path(__file__).resolve().parents[3]
    for name in ("protoqa_cpu", "protoqa_smollm2"):
        default_settings("protoqa", settings_file=repo / "experiments" / name / "heldout.yaml")


def test_every_folder_a_run_names_stays_inside(tmp_path):
    import dataclasses

    from remark.demo import default_settings
    from remark.demo.preflight import check_paths

    s = default_settings("synthetic", fast=True)
    check_paths(s, {})
    with pytest.raises(InputError, match="would not stay inside the output folder"):
        check_paths(dataclasses.replace(s, rl_seeds=(0, "/../../x")), {})


def _model(tiny_model_dir: Path, folder: Path, **config) -> Path:
    """A copy of the tiny model (real weights and tokenizer) whose config.json has ``config`` on top."""
    import shutil

    shutil.copytree(tiny_model_dir, folder)
    (folder / "config.json").write_text(json.dumps(json.loads((folder / "config.json").read_text()) | config))
    return folder


MODEL_CASES = [
    # the reviewer's: the config asks for layers its weights do not hold (transformers would allocate them)
    ("layers-million", {"num_hidden_layers": 1_000_000}, "num_hidden_layers", "but the weights beside it"),
    ("layer-types", {"num_hidden_layers": 3}, "num_hidden_layers", "but layer_types lists 2 layer(s)"),
    ("vocab-billion", {"vocab_size": 1_000_000_000}, "vocab_size", "asks for a model of at least"),
    ("hidden-0", {"hidden_size": 0}, "hidden_size", "hidden_size=0 must be >= 1"),
    ("heads-bool", {"num_attention_heads": True}, "num_attention_heads", "is a boolean, not an integer"),
    ("layers-text", {"num_hidden_layers": "2"}, "num_hidden_layers", "is str, not an integer"),
    ("vocab-past-ids", {"vocab_size": 2**40}, "vocab_size", "past 32-bit token ids"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("config", "key", "problem"), [c[1:] for c in MODEL_CASES], ids=[c[0] for c in MODEL_CASES]
)
def test_eval_run_refuses_impossible_model_sizes_before_loading(
    tiny_model_dir, tmp_path, capsys, config, key, problem
):
    model = _model(tiny_model_dir, tmp_path / "m", **config)
    out = tmp_path / "out"
    code = main(
        ["eval", "run", "--model", str(model), "--data", str(tmp_path / "no_data"), "--out", str(out)]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{model / 'config.json'}, field '{key}'" in err and problem in err, err
    assert not out.exists()
    # remark sft and remark train check the model folder the same way (remark.config.paths)
    from remark.config.paths import check_model_path

    with pytest.raises(InputError, match=key):
        check_model_path(model, "--model")


def test_model_sizes_of_a_real_model_pass(tiny_model_dir, tmp_path):
    from eval.model_sizes import check_model_sizes, parameter_count, weights_bytes

    params = check_model_sizes(tiny_model_dir)
    assert params == parameter_count(json.loads((tiny_model_dir / "config.json").read_text())) > 0
    assert params * 4 <= weights_bytes(tiny_model_dir)  # a lower bound of the float32 weights saved
    assert check_model_sizes(tmp_path / "nowhere") is None  # a hub id: nothing on disk to read


def test_demo_base_model_config_sizes_are_checked(tiny_model_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("REMARK_MEMORY_LIMIT_GB", LIMIT_GB)
    model = _model(tiny_model_dir, tmp_path / "m", num_hidden_layers=1_000_000)
    f = tmp_path / "s.yaml"
    f.write_text(f"base_model: {model}\n")
    code, err = _demo(
        ["--fast", "--data", "synthetic", "--settings", str(f), "--out", str(tmp_path / "o")], capsys
    )
    _assert_refused(code, err, f"{model / 'config.json'}, field 'num_hidden_layers'")
    assert not (tmp_path / "o").exists()
