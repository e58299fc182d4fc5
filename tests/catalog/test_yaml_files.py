"""Every YAML remark reads goes through ``catalog.io.yaml_files``: an alias bomb or a deeply nested
document is refused within a second and a few megabytes, naming the file and the line; ordinary aliases
and documents load as ``yaml.safe_load`` loads them."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest
import yaml

from catalog.io.errors import InputError
from catalog.io.yaml_files import MAX_ALIAS_NODES, compose_yaml, load_yaml

REPO = Path(__file__).resolve().parents[2]


def bomb(levels: int = 9, width: int = 9, key: str = "lora_target_modules") -> str:
    """``levels`` anchors, each a list of ``width`` aliases of the one before: width**levels strings."""
    lines = [f"a0: &a0 [{', '.join(['x'] * width)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels + 1)]
    return "output_dir: runs/x\nloss_type: bnpo\n" + "\n".join(lines) + f"\n{key}: *a{levels}\n"


def test_an_alias_bomb_is_refused_fast_and_small(tmp_path):
    from remark.config.files import load_config  # imported before the clock starts (it loads TRL)

    path = tmp_path / "run.yaml"
    path.write_text(bomb())
    assert len(path.read_bytes()) < 600
    tracemalloc.start()
    start = time.perf_counter()
    with pytest.raises(InputError) as err:
        load_config(path)  # the whole config check, which walked every leaf
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 1.0 and peak < 5_000_000, (elapsed, peak)
    text = str(err.value)
    assert text.startswith(f"{path}, row ") and "config file refused: its aliases" in text
    assert f"expand to more than {MAX_ALIAS_NODES} nodes" in text


def test_recipes_and_card_headers_are_read_the_same_way(tmp_path):
    from data_prep.card import read_card_header
    from remark.recipes import load_recipe

    recipe = tmp_path / "mine.yaml"
    recipe.write_text("description: d\nsource: arXiv x\nfields:\n" + "".join(
        f"  x{i}: &r{i} [{', '.join([f'*r{i - 1}' if i else 'y'] * 9)}]\n" for i in range(9)))  # fmt: skip
    with pytest.raises(InputError, match="recipe file refused: its aliases"):
        load_recipe(recipe)
    with pytest.raises(InputError, match="card header refused"):
        read_card_header("---\n" + bomb() + "---\nbody\n")


def test_deep_nesting_is_refused_not_a_recursion_error():
    with pytest.raises(InputError, match="nests deeper than 100 levels"):
        load_yaml("x: " + "[" * 5000 + "]" * 5000)


def test_ordinary_documents_and_a_few_aliases_load_as_safe_load_does():
    text = "base: &b {lr: 1.0e-4, names: [q_proj, v_proj]}\nrun: *b\nother: [*b, *b]\nn: 3\n"
    assert load_yaml(text) == yaml.safe_load(text)
    assert compose_yaml(text).value[0][0].start_mark.line == 0
    for path in sorted((REPO / "configs").rglob("*.yaml")):
        assert load_yaml(path.read_text(), path=path) == yaml.safe_load(path.read_text()), path


def test_syntax_errors_name_the_line():
    with pytest.raises(InputError, match=r"f.yaml, row 2: not valid YAML: .* at column"):
        load_yaml("a: 1\n\tb: 2\n", path="f.yaml")


def test_no_module_calls_yaml_load_directly():
    """Every YAML read in the package goes through load_yaml (yaml.safe_dump is fine)."""
    offenders = []
    for folder in ("catalog", "data_prep", "eval", "remark", "bench", "experiments"):
        for path in (REPO / folder).rglob("*.py"):
            if path.name == "yaml_files.py":
                continue
            text = path.read_text()
            for call in (
                "yaml.safe_load(",
                "yaml.load(",
                "yaml.compose(",
                "yaml.full_load(",
                "yaml.unsafe_load(",
            ):
                if call in text:
                    offenders.append(f"{path.relative_to(REPO)}: {call}")
    assert offenders == []
