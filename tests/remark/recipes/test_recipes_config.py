"""Recipe files, composition under a run config (with the overrides reported), the `remark recipes` and
`remark train --recipe` commands, and contradicting options failing before any model loads."""

from __future__ import annotations

import json

import pytest
import yaml

from catalog.io.errors import InputError
from remark.cli.main import main
from remark.config import compose_config
from remark.recipes import LOSS_FAMILY_FIELDS, RECIPE_DIR, list_recipes, load_recipe, recipe_names

RUN = {
    "use_cpu": True,
    "report_to": "none",
    "num_generations": 4,
    "per_device_train_batch_size": 8,
    "max_completion_length": 64,
    "num_ranks": 5,
    "model_name_or_path": "/nonexistent/model",
    "data_dir": "/nonexistent/data",
}


@pytest.fixture
def run_yaml(tmp_path):
    def write(**extra):
        path = tmp_path / "run.yaml"
        path.write_text(yaml.safe_dump({**RUN, "output_dir": str(tmp_path / "out"), **extra}))
        return path

    return write


def test_recipe_files_set_loss_family_fields_only_and_describe_themselves():
    recipes = list_recipes()
    assert [r.name for r in recipes] == recipe_names() and len(recipes) == 16
    for r in recipes:
        assert set(r.fields) <= LOSS_FAMILY_FIELDS
        assert "loss_type" in r.fields and r.fields["scale_rewards"] == r.fields["advantage_scaling"]
        assert r.description and "\n" not in r.description
        assert "arXiv" in r.source  # every recipe names its paper


def scheme_for(name: str) -> dict:
    """The run fields a recipe needs beyond ``RUN``: Rank-GRPO's published reward slots define the
    ``responder`` scheme only (the default ``union`` is refused with them)."""
    from remark.algos import spec

    segmentation = load_recipe(name).fields.get("segmentation", "lines")
    if spec("segmentation", segmentation).meta["reward_slots"] == "rank_grpo":
        return {"reward_scheme": "responder", "sampling": "per_responder"}
    return {}


@pytest.mark.parametrize("name", recipe_names())
def test_every_recipe_composes_with_a_run_config(name, run_yaml):
    composed = compose_config(name, run_yaml(**scheme_for(name)))
    cfg = composed.config
    assert cfg.recipe == name
    for key, value in load_recipe(name).fields.items():
        assert getattr(cfg, key) == value
    assert composed.overridden == []
    assert composed.report()[0].startswith(f"recipe {name!r}: ")


def test_overrides_of_recipe_fields_are_reported(run_yaml):
    composed = compose_config("dapo", run_yaml(loss_type="bnpo", epsilon=0.2), {"epsilon_high": 0.3})
    assert [str(o) for o in composed.overridden] == [
        "loss_type: 'dapo' -> 'bnpo' (by config)",
        "epsilon_high: 0.28 -> 0.3 (by --set)",
    ]  # epsilon equals the recipe's: not an override
    assert composed.config.loss_type == "bnpo" and composed.config.epsilon_high == 0.3
    assert "2 field(s) overridden" in "\n".join(composed.report())


def test_the_config_may_name_the_recipe_but_not_a_different_one(run_yaml):
    assert compose_config(None, run_yaml(recipe="cispo")).config.loss_type == "cispo"
    assert compose_config("cispo", run_yaml(recipe="cispo")).config.recipe == "cispo"
    with pytest.raises(InputError, match="contradicts recipe: 'dapo'"):
        compose_config("cispo", run_yaml(recipe="dapo"))


def test_unknown_recipe_lists_the_valid_ones():
    with pytest.raises(
        InputError, match=r"unknown recipe 'dapoo'.*did you mean 'dapo'.*valid recipes: cispo, dapo"
    ):
        load_recipe("dapoo")


def test_a_recipe_file_by_path_and_bad_recipe_files(tmp_path, run_yaml):
    path = tmp_path / "mine.yaml"
    path.write_text(
        yaml.safe_dump(
            {"description": "mine", "source": "me", "fields": {"loss_type": "dapo", "scale_rewards": "group"}}
        )
    )
    composed = compose_config(str(path), run_yaml())
    assert composed.config.loss_type == "dapo" and composed.config.recipe == str(path)
    path.write_text(yaml.safe_dump({"description": "x", "source": "y", "fields": {"learning_rate": 1.0}}))
    with pytest.raises(InputError, match="'learning_rate' belongs in the run config"):
        load_recipe(str(path))
    path.write_text(yaml.safe_dump({"description": "x", "source": "y", "fields": {"loss_typ": "dapo"}}))
    with pytest.raises(InputError, match="did you mean 'loss_type'"):
        load_recipe(str(path))
    path.write_text(yaml.safe_dump({"description": "x", "fields": {"loss_type": "dapo"}, "notes": 1}))
    with pytest.raises(InputError, match="unknown recipe keys"):
        load_recipe(str(path))


CONTRADICTIONS = [
    ("gspo_rank", {"importance_sampling_level": "sequence"}, "rank_level_ratio", "contradicts"),
    ("rank_grpo", {"loss_type": "luspo"}, "importance_sampling_level", "needs importance_sampling_level"),
    ("rank_grpo", {"loss_type": "vespo"}, "rank_level_ratio", "no effect with loss_type 'vespo'"),
    ("gmpo", {"loss_type": "cispo", "epsilon_high": 5.0}, "gmpo_level", "has its own importance weight"),
    ("gmpo", {"loss_type": "sapo"}, "gmpo_level", "has its own importance weight"),
    (
        "gmpo",
        {"importance_sampling_level": "sequence"},
        "gmpo_level",
        "contradicts importance_sampling_level",
    ),
    ("gmpo_rank", {"rank_level_ratio": True}, "rank_level_ratio", "both replace the token ratio"),
    ("gmpo", {"delta": 2.0}, "delta", "switches off"),
    ("gmpo", {"off_policy_mask_threshold": 0.5}, "off_policy_mask_threshold", "clipped log-ratios"),
    ("gmpo", {"gmpo_level": "token"}, "gmpo_level", "unknown gmpo_level"),
    ("cispo", {"epsilon_high": 0.28}, "epsilon_high", "must be > 1"),
    ("scalerl", {"loss_type": "bnpo", "epsilon_high": 0.28}, "loss_aggregation", "normalises differently"),
    ("scalerl", {"mask_truncated_completions": True}, "truncation", "pick one"),
    ("dapo", {"zero_signal_filter": False}, "refill_batch", "needs zero_signal_filter: true"),
    ("olmo3", {"zero_signal_filter": False}, "refill_batch", "needs zero_signal_filter: true"),
    ("dapo", {"refill_max_rounds": 0}, "refill_max_rounds", ">= 1"),
    ("reinforce_pp", {"reward_scheme": "responder_rb"}, "advantage_baseline", "padded responders"),
    ("rloo", {"advantage_baseline": "loo"}, "advantage_baseline", "did you mean 'rloo'"),
    ("deepseek_v32", {"off_policy_mask_threshold": 0.0}, "off_policy_mask_threshold", "> 0"),
]


@pytest.mark.parametrize(("recipe", "sets", "field", "words"), CONTRADICTIONS)
def test_contradicting_options_fail_before_any_model_loads(
    recipe, sets, field, words, run_yaml, monkeypatch, capsys
):
    with pytest.raises(InputError) as err:
        compose_config(recipe, run_yaml(), sets)
    assert f"field {field!r}" in str(err.value) and words in str(err.value)

    def no_training(*a, **kw):  # the CLI must stop before loading data or a model
        raise AssertionError("training started")

    monkeypatch.setattr("remark.run.training.run_training", no_training)
    argv = ["train", "--recipe", recipe, "--config", str(run_yaml()), "--set"]
    argv += [f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in sets.items()]
    assert main(argv) == 2
    assert words in capsys.readouterr().err


def test_remark_recipes_lists_shows_and_dumps(capsys):
    assert main(["recipes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in lines] == recipe_names()
    assert any(ln.startswith("dapo") and "dynamic sampling" in ln for ln in lines)
    assert main(["recipes", "olmo3"]) == 0
    shown = capsys.readouterr().out
    assert "source: Olmo Team 2025" in shown and "epsilon_high" in shown and "0.272" in shown
    assert main(["recipes", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["name"] for d in data] == recipe_names() and data[0]["fields"]["loss_type"] == "cispo"
    assert main(["recipes", "nosuch"]) == 2
    assert "valid recipes: cispo, dapo" in capsys.readouterr().err


def test_remark_train_needs_a_config_or_a_recipe(capsys):
    assert main(["train"]) == 2
    assert "give --config FILE, --recipe NAME, or both" in capsys.readouterr().err


def test_remark_train_runs_a_recipe_and_reports_overrides(
    tmp_path, recipe_data_dir, recipe_model_dir, capsys
):
    run = tmp_path / "run.yaml"
    run.write_text(
        yaml.safe_dump(
            {
                **RUN,
                "model_name_or_path": str(recipe_model_dir),
                "data_dir": str(recipe_data_dir),
                "output_dir": str(tmp_path / "out"),
                "num_ranks": 3,
                "max_completion_length": 16,
                "max_steps": 1,
                "save_strategy": "no",
                "bf16": False,
                "match_mode": "exact",
                "logging_steps": 1,
            }
        )
    )
    code = main(["train", "--recipe", "dr_grpo", "--config", str(run), "--set", "epsilon_high=0.3", "--json"])
    assert code == 0
    captured = capsys.readouterr()
    assert "recipe 'dr_grpo': Dr. GRPO" in captured.err
    assert "epsilon_high: 0.2 -> 0.3 (by --set)" in captured.err
    summary = captured.out[captured.out.index('{\n  "output_dir"') :]  # after TRL's own log lines
    assert json.loads(summary)["global_step"] == 1
    saved = json.loads((tmp_path / "out" / "remark_config.json").read_text())
    assert (
        saved["recipe"] == "dr_grpo"
        and saved["loss_type"] == "dr_grpo"
        and saved["advantage_scaling"] == "none"
    )


SHIPPED = sorted(p.name for p in RECIPE_DIR.parent.glob("*.yaml"))  # configs/ is remark/configs/


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_config_validates_as_written(name, monkeypatch):
    """The shipped configs set no field where it has no effect (remark.config.effects): as written, with
    vLLM present as on the GPU machines they are for (bf16 and use_cpu are this CPU's)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: real("json") if n == "vllm" else real(n, *a)
    )
    # the head-size check asks vLLM's platform, which is not CPU on those machines
    monkeypatch.setattr("eval.generate.cpu_attention_head_sizes", lambda: None)
    composed = compose_config(None, RECIPE_DIR.parent / name, {"bf16": False, "use_cpu": True})
    expected = {"rank_grpo_published.yaml": ["filler_penalty"]}.get(name, [])  # Rank-GRPO's 0, under newlines
    assert [n.split(" (")[0].removeprefix("note: ") for n in composed.notes] == expected


@pytest.mark.parametrize("name", recipe_names())
def test_every_recipe_validates_on_the_shipped_run_config(name):
    """The documented recipe runs (docs/recipes.md) compose without an error; what a recipe sets that this
    on-policy CPU run cannot use is a note naming the recipe."""
    composed = compose_config(name, RECIPE_DIR / "runs" / "tiny_cpu.yaml", scheme_for(name))
    assert all(n.startswith("note: ") and f"(recipe {name!r})" in n for n in composed.notes)
