"""The demo's settings checked as they are read: each value, then the settings together.

``remark demo`` takes its settings from the data source's defaults, a ``--settings`` YAML file and flags
(``remark.demo.settings.resolve_settings``). A value that is wrong used to fail late: in a stage process
after the warm-up (``threads: 0``, ``k: 0``, ``seed: -1``, ``world: {bogus_arg: 1}``), as a comparison
between a number and a string (``lr_grid: ["1e-3"]``), by naming a trainer's field instead of the
setting, or by writing outside ``--out`` (an ``rl_seeds`` entry ``"/../../x"`` became part of a job's
folder). Here every value is checked before anything is written, and the first problem is one
``InputError`` naming the settings file, its line and the field (``rl_seeds[1]``, ``world[offbeat_prob]``),
or the flag that set it (``--seeds[1]``):

- **types** from ``DemoSettings``' annotations (``remark.config.fieldtypes``): a boolean is not an integer,
  text is not a number (a *quoted* YAML value is text; a plain ``1e-3``, which YAML 1.1 reads as text, is
  the number it reads as in YAML 1.2), an integral number is an integer (``vocab_size: 1.0e3``); a list
  setting is a non-empty list of its element type, of fixed length where the annotation says so; text that
  names a file holds no NUL;
- **ranges** from ``remark.config.ranges`` (the rows of the train config's fields and the flags that
  mean the same thing, :data:`BOUNDS`): finite, > 0 or >= 1 where they must be, each list element alike;
- **lists**: no repeated RL seed or learning rate;
- **the world** (``world``, ``data_prep.synthetic.generate_world``'s other arguments): unknown keys refused
  with the nearest valid one, a key that is a setting of its own refused, each value's type and range;
- **combinations** (:func:`check_combinations`): a setting that has no effect under the others is refused
  (:data:`SYNTHETIC_ONLY` under ``--data protoqa`` and the reverse, the tiny model's shape with a
  ``base_model``, ``vllm_kv_cache_gib`` without ``use_vllm``, ``sft_hit_prob`` without ``sft_targets:
  noisy``), and so are settings that contradict each other (a completion cap too short for ``k`` lines or
  past the model's positions, a split with no request, validation past the last step, a tiny model's head
  size).

What needs the runs' folder names, the base model's sizes or the machine's memory is checked next, still
before any work (``remark.demo.preflight``). A setting nobody set (a default) is never blamed while one that
was set can be (:func:`blame`): the error names what the user can change.
"""

from __future__ import annotations

import difflib
import functools
import math
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from catalog.io.errors import InputError
from remark.config.fieldtypes import conform, describe
from remark.config.ranges import RANGES, Bound


@dataclass(frozen=True)
class Origin:
    """Where a setting's value came from: a settings file (``path``, ``row``: its line) or a flag."""

    path: str | None = None
    row: int | None = None
    flag: str | None = None


#: a split's share of the requests (or questions): the demo trains, validates and tests, so none is empty
SHARE = Bound(0, 1, low_open=True, why="train / valid / test shares, each > 0, summing to 1")
#: thread counts: past this a process only oversubscribes the machine (and each thread has its own stack)
THREADS = Bound(1, 1024, why="threads per process, part of what sets the numbers", kind=int)

#: setting -> its bound (list settings: each element's); the rows of ``remark.config.ranges`` where one means
#: the same thing
BOUNDS: dict[str, Bound] = {
    "seed": RANGES["seed"],
    "rl_seeds": RANGES["--seeds"],
    "n_requests": RANGES["--n-requests"],
    "n_items": RANGES["--n-items"],
    "split_fractions": SHARE,
    "n_questions": Bound(3, why="a question each for train, valid and test at least", kind=int),
    "min_clusters": Bound(1, why="answer clusters a question needs to be used", kind=int),
    "question_split": SHARE,
    "vllm_kv_cache_gib": RANGES["vllm_kv_cache_gib"],
    "vocab_size": RANGES["build_tiny.spec.vocab_size"],
    "hidden_size": RANGES["build_tiny.spec.hidden_size"],
    "intermediate_size": RANGES["build_tiny.spec.intermediate_size"],
    "num_hidden_layers": RANGES["build_tiny.spec.num_hidden_layers"],
    "sft_epochs": RANGES["--epochs"],
    "sft_lr": RANGES["--lr"],
    "sft_batch": RANGES["--batch-size"],
    "sft_copies": RANGES["--copies"],
    "sft_hit_prob": RANGES["--hit-prob"],
    "k": RANGES["eval --k"],
    "steps": RANGES["--steps"],
    "prompts_per_step": Bound(1, why="requests per RL step", kind=int),
    "num_generations": RANGES["num_generations"],
    "lr_grid": RANGES["--lr-grid"],
    "max_completion_length": RANGES["max_completion_length"],
    "validation_every": Bound(1, why="RL steps between validations", kind=int),
    "validation_samples": RANGES["validation_num_samples"],
    "threads": THREADS,
    "warmup_threads": THREADS,
    "jobs": RANGES["--jobs"],
    "eval_samples": RANGES["--num-samples"],
    "ci_resamples": RANGES["--resamples"],
}

#: ``sft_scheduler`` values: transformers' schedulers that need no arguments beyond the warm-up's
#: (``cosine_with_min_lr``, ``reduce_lr_on_plateau``, ``warmup_stable_decay`` need their own)
SCHEDULERS = (
    "linear",
    "cosine",
    "cosine_with_restarts",
    "polynomial",
    "constant",
    "constant_with_warmup",
    "inverse_sqrt",
)

#: settings read with ``--data synthetic`` only, and with ``--data protoqa`` only
SYNTHETIC_ONLY = ("n_requests", "n_items", "split_fractions", "world")
PROTOQA_ONLY = ("n_questions", "min_clusters", "question_split", "crowdsourced")

#: ``generate_world`` arguments that are demo settings of their own (``world`` may not set them)
WORLD_OWN = ("n_requests", "n_items", "seed", "split_fractions")
#: ``world`` key -> its bound (``relevant_size``: each of its two ends)
WORLD_BOUNDS: dict[str, Bound] = {
    "relevant_size": Bound(1, why="[min, max] relevant items per request", kind=int),
    "mean_responders": Bound(1, why="responders per request, the first included"),
    "max_responders": Bound(1, why="responders per request at most", kind=int),
    "mean_items_per_responder": Bound(1, why="items a responder names, the first included"),
    "offbeat_prob": Bound(0, 1, high_open=True, why="a probability; 1 would leave no relevant pick"),
    "popularity_power": Bound(-10, 10, why="relevant picks weighted by popularity ** power; 0 is uniform"),
}

#: the fewest prompt tokens a sequence has (the chat template's markers alone): memory bounds are lower bounds
PROMPT_TOKENS = 16


# -- one error line ----------------------------------------------------------------------------------------
def _label(name: str, origins: dict[str, Origin], sub: str = "") -> str:
    origin = origins.get(name)
    return (origin.flag if origin is not None and origin.flag else name) + sub


def fail(name: str, message: str, hint: str | None, origins: dict[str, Origin], sub: str = "") -> InputError:
    """The ``InputError`` for setting ``name`` (``sub``: ``[1]`` or ``[key]`` inside it), placed where its value
    came from: the settings file and line, the flag, or (a default) the setting's name alone."""
    origin = origins.get(name) or Origin()
    return InputError(message, path=origin.path, row=origin.row, field=_label(name, origins, sub), hint=hint)


# -- reading a settings file -------------------------------------------------------------------------------
def read_settings_file(
    path: str | Path, names: list[str], flag_only: tuple[str, ...]
) -> tuple[dict[str, Any], dict[str, int]]:
    """A ``--settings`` YAML file: (its mapping, the 1-based line of each key). Keys must be among ``names``
    (the nearest one is suggested; ``flag_only`` ones are set by their flags); a plain (unquoted) scalar
    that YAML 1.1 reads as text but is a number (``1e-3``) is that number, a quoted one stays text."""
    from catalog.io.files import read_text
    from catalog.io.yaml_files import compose_yaml, load_yaml

    path = Path(path)
    text = read_text(path, what="demo settings")
    doc = load_yaml(text, path=path, what="demo settings")
    if not isinstance(doc, dict):
        raise InputError(
            "a demo settings file is a mapping of setting: value", path=path, hint="e.g. steps: 40"
        )
    node = compose_yaml(text, path=path, what="demo settings")
    doc = _plain_numbers(node, doc)
    rows = {k.value: k.start_mark.line + 1 for k, _ in node.value if isinstance(k.value, str)}
    for key in doc:
        if key in flag_only:
            raise InputError(
                f"{key!r} is not a setting a file may set",
                path=path,
                row=rows.get(key),
                field=str(key),
                hint=f"use its flag --{key.replace('_', '-')}",
            )
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            raise InputError(
                f"{key!r} is not a setting a file may set",
                path=path,
                row=rows.get(key) if isinstance(key, str) else None,
                field=str(key),
                hint=f"did you mean {close[0]!r}?" if close else f"one of {', '.join(sorted(names))}",
            )
    return doc, rows


def _plain_numbers(node: Any, value: Any) -> Any:
    """``value`` with each plain scalar string that reads as a number (``1e-3``) turned into that number."""
    import yaml

    if isinstance(node, yaml.ScalarNode):
        if node.style is None and isinstance(value, str):
            ok, number = conform(value, float)
            if ok and isinstance(number, float):
                return number
        return value
    if isinstance(node, yaml.SequenceNode) and isinstance(value, list):
        return [_plain_numbers(n, v) for n, v in zip(node.value, value, strict=False)]
    if isinstance(node, yaml.MappingNode) and isinstance(value, dict):
        out = dict(value)
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value in out:
                out[k.value] = _plain_numbers(v, out[k.value])
        return out
    return value


# -- each value: type, range, list elements, the world ----------------------------------------------------
def _number(value: Any, tp: Any) -> tuple[bool, Any]:
    """``value`` against a scalar annotation ``tp`` without reading text as a number; an integral float is an
    integer (``1.0e3``)."""
    if (
        isinstance(value, float)
        and math.isfinite(value)
        and value.is_integer()
        and conform(0, tp, coerce=False)[0]
        and not conform(0.5, tp, coerce=False)[0]
    ):
        value = int(value)
    return conform(value, tp, coerce=False)


def _elements(tp: Any) -> tuple[Any, int | None] | None:
    """(element type, fixed length or None) of a ``tuple[...]`` annotation, else None."""
    if typing.get_origin(tp) is not tuple:
        return None
    args = typing.get_args(tp)
    if len(args) == 2 and args[1] is Ellipsis:
        return args[0], None
    return args[0], len(args)


def _plural(tp: Any) -> str:
    return describe(tp).removeprefix("an ").removeprefix("a ") + "s"


def _type_hint(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true and false are booleans, not numbers"
    if isinstance(value, str) and conform(value, float)[0]:
        return "a quoted value is text: write the number without quotes"
    return None


def check_value(name: str, value: Any, tp: Any, origins: dict[str, Origin]) -> Any:
    """``value`` of setting ``name`` checked against its annotation ``tp`` and its bound (list settings: each
    element); returns it normalised (lists as tuples, integral floats as integers), or raises ``InputError``."""
    label = _label(name, origins)
    listed = _elements(tp)
    if listed is not None:
        elem, length = listed
        what = f"a list of {length} {_plural(elem)}" if length else f"a non-empty list of {_plural(elem)}"
        if not isinstance(value, list | tuple) or not value or (length and len(value) != length):
            raise fail(name, f"{label} must be {what}, got {value!r}", None, origins)
        out = []
        for i, item in enumerate(value):
            ok, item = _number(item, elem) if elem is not str else conform(item, elem, coerce=False)
            if not ok:
                raise fail(
                    name,
                    f"{label}[{i}] must be {describe(elem)}, got {value[i]!r}",
                    _type_hint(value[i]),
                    origins,
                    f"[{i}]",
                )
            _in_bound(name, item, origins, f"[{i}]")
            out.append(item)
        return tuple(out)
    if typing.get_origin(tp) is dict:
        if not isinstance(value, dict):
            raise fail(
                name, f"{label} must be a mapping, got {value!r}", "e.g. world: {offbeat_prob: 0.5}", origins
            )
        return check_world(value, origins) if name == "world" else dict(value)
    ok, out = _number(value, tp)
    if not ok:
        what = "a folder's path" if name in ("base_model", "data_dir") else describe(tp)
        raise fail(name, f"{label} must be {what}, got {value!r}", _type_hint(value), origins)
    if isinstance(out, str) and name in ("base_model", "data_dir") and not out.strip():
        raise fail(name, f"{label} is empty", "name a folder, or drop the setting", origins)
    if isinstance(out, str) and "\x00" in out:
        raise fail(name, f"{label} holds a NUL character", "no file name can hold one", origins)
    if out is not None and not isinstance(out, bool | str):
        _in_bound(name, out, origins)
    choices = _choices(name)
    if choices is not None and out not in choices:
        close = difflib.get_close_matches(str(out), list(choices), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"one of {', '.join(choices)}"
        raise fail(name, f"unknown {label} {out!r}", hint, origins)
    return out


def _choices(name: str) -> tuple[str, ...] | None:
    """The values a text setting may take, or None for any text."""
    if name == "sft_targets":
        from remark.run.sft import TARGETS

        return TARGETS
    return {"sft_scheduler": SCHEDULERS}.get(name)


def _in_bound(name: str, value: Any, origins: dict[str, Origin], sub: str = "") -> None:
    bound = BOUNDS.get(name)
    if bound is not None and not bound.holds(value):
        label = _label(name, origins, sub)
        raise fail(name, f"{label}={value!r} must be {bound.text()}", bound.why, origins, sub)


@functools.lru_cache(maxsize=1)
def world_types() -> dict[str, Any]:
    """``generate_world``'s arguments -> their annotations, less the demo's own settings."""
    from data_prep.synthetic import generate_world

    hints = typing.get_type_hints(generate_world)
    hints.pop("return", None)
    return {k: v for k, v in hints.items() if k not in WORLD_OWN}


def check_world(world: dict[str, Any], origins: dict[str, Origin]) -> dict[str, Any]:
    """``world``'s keys (``generate_world``'s other arguments) and each value's type and range."""
    out = {}
    for key, value in world.items():
        valid = world_types()
        sub = f"[{key}]"
        if key in WORLD_OWN:
            raise fail(
                "world",
                f"world[{key}] is the demo's own setting {key}",
                f"set {key} at the top level" + (" or pass --seed" if key == "seed" else ""),
                origins,
                sub,
            )
        if key not in valid:
            close = difflib.get_close_matches(str(key), sorted(valid), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"valid: {', '.join(sorted(valid))}"
            raise fail("world", f"unknown world key {key!r}", hint, origins, sub)
        bound = WORLD_BOUNDS.get(key)
        if key == "relevant_size":
            if value is None:
                out[key] = None
                continue
            ok = isinstance(value, list | tuple) and len(value) == 2
            items = [_number(v, int) for v in value] if ok else []
            if not ok or not all(good for good, _ in items):
                raise fail(
                    "world",
                    f"world[{key}] must be [min, max] (two integers), got {value!r}",
                    None,
                    origins,
                    sub,
                )
            lo, hi = (v for _, v in items)
            if not (bound.holds(lo) and bound.holds(hi)) or lo > hi:
                raise fail(
                    "world",
                    f"world[{key}]={[lo, hi]} must be [min, max] with 1 <= min <= max",
                    bound.why,
                    origins,
                    sub,
                )
            out[key] = (lo, hi)
            continue
        ok, number = _number(value, valid[key])
        if not ok:
            raise fail(
                "world",
                f"world[{key}] must be {describe(valid[key])}, got {value!r}",
                _type_hint(value),
                origins,
                sub,
            )
        if bound is not None and not bound.holds(number):
            raise fail("world", f"world[{key}]={number!r} must be {bound.text()}", bound.why, origins, sub)
        out[key] = number
    return out


def check_values(values: dict[str, Any], types: dict[str, Any], origins: dict[str, Origin]) -> dict[str, Any]:
    """Every value of ``values`` (setting -> value) checked alone against its annotation in ``types``
    (:func:`check_value`), then no list repeats an element; returns them normalised."""
    out = {name: check_value(name, value, types[name], origins) for name, value in values.items()}
    for name in ("rl_seeds", "lr_grid"):
        if name in out:
            distinct(name, out[name], origins)
    return out


def distinct(name: str, values: tuple[Any, ...], origins: dict[str, Origin], key: Any = None) -> None:
    """No repeated element of the list setting ``name``; with ``key`` (a function), no two elements with one key
    (``remark.demo.preflight``: two learning rates that name one run folder)."""
    label = _label(name, origins)
    seen: dict[Any, int] = {}
    for i, value in enumerate(values):
        key_ = key(value) if key is not None else value
        if key_ in seen:
            j = seen[key_]
            same = values[j] == value
            raise fail(
                name,
                f"{label}[{i}]={value!r} repeats {label}[{j}]"
                if same
                else f"{label}[{i}]={value!r} and {label}[{j}]={values[j]!r} share the run folder name lr{key_}",
                "each once"
                if same
                else "rates that differ in their first significant digit, e.g. 1e-4 and 2e-4",
                origins,
                f"[{i}]",
            )
        seen[key_] = i


# -- the settings together -------------------------------------------------------------------------------
def _set(name: str, origins: dict[str, Origin]) -> bool:
    return name in origins


def blame(names: tuple[str, ...] | list[str], origins: dict[str, Origin]) -> str:
    """The first of ``names`` a user set (a file or a flag), else the first."""
    return next((n for n in names if _set(n, origins)), names[0])


def check_combinations(s: Any, origins: dict[str, Origin]) -> None:
    """Settings that have no effect under the others, or that contradict each other (see the module
    docstring); each error names the setting the user set."""
    from remark.config.tiny import TinySpec
    from remark.config.validate import MIN_TOKENS_PER_LINE

    other = "protoqa" if s.data == "synthetic" else "synthetic"
    for name in PROTOQA_ONLY if s.data == "synthetic" else SYNTHETIC_ONLY:
        if _set(name, origins):
            raise fail(
                name,
                f"{name} is read with --data {other} only; this run reads --data {s.data}",
                f"drop it, or pass --data {other}",
                origins,
            )
    if s.base_model is not None:
        for name in s.spec_dict():
            if _set(name, origins):
                raise fail(
                    name,
                    f"{name} shapes the tiny model, which a base_model replaces",
                    "drop it, or drop base_model",
                    origins,
                )
    if _set("vllm_kv_cache_gib", origins) and not s.use_vllm:
        raise fail(
            "vllm_kv_cache_gib",
            "vllm_kv_cache_gib sizes vLLM's engines, which run only with use_vllm: true",
            "drop it, or set use_vllm: true",
            origins,
        )
    if _set("sft_hit_prob", origins) and s.sft_targets != "noisy":
        raise fail(
            "sft_hit_prob",
            f"sft_hit_prob has no effect with sft_targets {s.sft_targets!r} (it is the noisy targets' hit rate)",
            "drop it, or set sft_targets: noisy",
            origins,
        )
    shares = ("split_fractions", "n_requests") if s.data == "synthetic" else ("question_split", "n_questions")
    fractions = getattr(s, shares[0])
    if abs(sum(fractions) - 1.0) > 1e-9:
        raise fail(
            shares[0], f"{shares[0]}={list(fractions)} sums to {sum(fractions):g}, not 1", SHARE.why, origins
        )
    count = getattr(s, shares[1])
    if count is not None and count * min(fractions) < 1:
        name = blame(shares[::-1], origins)
        raise fail(
            name,
            f"{shares[1]}={count} x the smallest share of {shares[0]} ({min(fractions):g}) leaves a split empty",
            f"raise {shares[1]} or the smallest share",
            origins,
        )
    need = s.k * MIN_TOKENS_PER_LINE
    if s.max_completion_length < need:
        name = blame(("max_completion_length", "k"), origins)
        raise fail(
            name,
            f"max_completion_length={s.max_completion_length} cannot hold k={s.k} lines (needs >= {need} tokens at "
            f">= {MIN_TOKENS_PER_LINE} tokens per line)",
            "raise max_completion_length or lower k",
            origins,
        )
    positions = _positions(s)
    if s.max_completion_length + PROMPT_TOKENS > positions[0]:
        raise fail(
            "max_completion_length",
            f"max_completion_length={s.max_completion_length} and a prompt do not fit the {positions[0]} positions of "
            f"{positions[1]}",
            f"lower max_completion_length below {positions[0] - PROMPT_TOKENS}",
            origins,
        )
    if s.validation_every > s.steps:
        name = blame(("validation_every", "steps"), origins)
        raise fail(
            name,
            f"validation_every={s.validation_every} > steps={s.steps}: only step 0 (the warm-up's model) would be "
            "validated, so no RL step could be chosen",
            f"set validation_every to at most {s.steps}",
            origins,
        )
    if s.base_model is None:
        heads = TinySpec().num_attention_heads
        if s.hidden_size % (2 * heads):
            raise fail(
                "hidden_size",
                f"hidden_size={s.hidden_size} is not a multiple of {2 * heads}: the tiny model's {heads} attention heads "
                "need an even head size (rotary embeddings)",
                f"e.g. {max(2 * heads, s.hidden_size - s.hidden_size % (2 * heads))}",
                origins,
            )
        from eval.generate import cpu_head_size_problem, vllm_available

        if s.use_vllm and vllm_available():  # vLLM missing: run_demo says how to install it
            problem = cpu_head_size_problem(s.hidden_size, heads)
            if problem is not None:
                raise fail("hidden_size", f"use_vllm: {problem}", "e.g. hidden_size: 128", origins)


def _positions(s: Any) -> tuple[int, str]:
    """(the positions a sequence may take, whose): the tiny model's or the base model's (vLLM's engine cap:
    ``remark.demo.preflight``)."""
    from remark.config.tiny import TinySpec

    found = (TinySpec().max_position_embeddings, "the tiny model")
    if s.base_model is not None:
        config = base_config(s.base_model)
        from eval.model_sizes import text_config
        from remark.run.limits import POSITION_KEYS

        text = text_config(config)
        for key in POSITION_KEYS:
            if isinstance(text.get(key), int) and not isinstance(text.get(key), bool) and text[key] > 0:
                found = (text[key], f"the base model ({key})")
                break
    return found


def base_config(folder: str) -> dict[str, Any]:
    """A base model folder's ``config.json`` (empty when there is none: ``remark.demo.pipeline`` refuses the
    folder before any work)."""
    from catalog.io.files import read_json

    path = Path(folder) / "config.json"
    return read_json(path, schema={}, what="model config") if path.is_file() else {}
