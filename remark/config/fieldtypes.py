"""Types of config fields: every value is checked against its field's annotation before anything uses it.

A YAML file or ``--set`` can give any value to any field; the dataclass does not check, and TRL or the
optimizer fail much later (``learning_rate: fast`` passed the config and broke the first optimizer step
after a minute of SFT). So each value must conform to the annotation of its field (``float``,
``int | None``, ``list[int]``, an enum of TRL's, ...), or raise ``InputError`` naming the field.

Coercions, on purpose and only where the intent is unambiguous:

- a string that reads as a number, for a number field: PyYAML reads ``1e-4`` (no dot) as the *string*
  ``"1e-4"``, a classic trap, so ``learning_rate: 1e-4`` must mean 1e-4;
- an integral float for an int field (``max_steps: 1.0e3``), and an integer for a plain string field
  (``train_split: 2020``).

Booleans are never numbers here (``num_ranks: true`` is an error, although Python's ``bool`` is an ``int``).
Annotations this module does not know (a class of TRL's, such as ``ParallelismConfig``) accept anything,
and so do values that are not YAML's kinds (objects built by code: ``__post_init__`` runs again on a
config copied with ``dataclasses.replace`` after transformers turned ``accelerator_config`` into its class).
"""

from __future__ import annotations

import enum
import functools
import math
import re
import types
import typing
from typing import Any

from catalog.io.errors import InputError

#: what a YAML file or ``--set`` can produce; anything else was built by code and is not checked here
JSON_TYPES = (str, int, float, bool, list, tuple, dict, type(None))
_NUMBER = re.compile(r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$")
_INTEGER = re.compile(r"^\s*[+-]?\d+\s*$")


@functools.lru_cache(maxsize=8)
def field_hints(cls: type) -> dict[str, Any]:
    """The resolved annotations of a dataclass (TRL's and remark's fields), computed once per class."""
    return typing.get_type_hints(cls)


def _members(tp: Any) -> tuple[Any, ...] | None:
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        return typing.get_args(tp)
    return None


def conform(value: Any, tp: Any, *, coerce: bool = True) -> tuple[bool, Any]:
    """``(True, value)`` when ``value`` fits the annotation ``tp`` (possibly coerced), else ``(False, None)``.

    Union members are tried without coercion first, so ``int | str`` keeps the string ``"5"``.
    """
    if not isinstance(value, JSON_TYPES):
        return True, value  # an object built by code (transformers turns dicts into its config classes)
    members = _members(tp)
    if members is not None:
        enums = [m for m in members if isinstance(m, type) and issubclass(m, enum.Enum)]
        if enums and isinstance(value, str):  # `SchedulerType | str`: the string must name a member
            return any(conform(value, e)[0] for e in enums), value
        for strict in (True, False) if coerce else (True,):
            for member in members:
                ok, out = conform(value, member, coerce=not strict)
                if ok:
                    return True, out
        return False, None
    if tp is Any or tp is object:
        return True, value
    if tp is type(None):
        return value is None, None
    if tp is bool:
        return isinstance(value, bool), value
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return True, value
        if coerce and isinstance(value, float) and value.is_integer():
            return True, int(value)
        if coerce and isinstance(value, str) and _INTEGER.match(value):
            return True, int(value)
        return False, None
    if tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return True, value
        if coerce and isinstance(value, str) and _NUMBER.match(value):
            return True, float(value)
        return False, None
    if tp is str:
        if isinstance(value, str):
            return True, value
        if coerce and isinstance(value, int) and not isinstance(value, bool):
            return True, str(value)
        return False, None
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        if isinstance(value, tp):
            return True, value
        return (True, value) if value in {m.value for m in tp} else (False, None)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return value in args, value
    if tp is list or origin is list:
        if not isinstance(value, list | tuple):
            return False, None
        if not args:
            return True, list(value)
        out = []
        for item in value:
            ok, conv = conform(item, args[0], coerce=coerce)
            if not ok:
                return False, None
            out.append(conv)
        return True, out
    if tp is dict or origin is dict:
        return isinstance(value, dict), value
    return True, value  # a class of TRL's or transformers': not ours to check


def describe(tp: Any) -> str:
    """``float | None`` -> "a number or null": what a user must write."""
    members = _members(tp)
    if members is not None:
        names = list(dict.fromkeys(describe(m) for m in members))
        # an enum and its plain-string alternative: the enum's values say it all
        if any(isinstance(m, type) and issubclass(m, enum.Enum) for m in members):
            names = [n for n in names if n != "a string"]
        return " or ".join(names)
    if tp is type(None):
        return "null"
    if tp is bool:
        return "true or false"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is str:
        return "a string"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "one of " + ", ".join(repr(m.value) for m in tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return "one of " + ", ".join(map(repr, args))
    if tp is list or origin is list:
        inner = describe(args[0]) if args else "values"
        return "a list of " + re.sub(r"^an? ", "", inner) + ("s" if args and inner.startswith("a") else "")
    if tp is dict or origin is dict:
        return "a mapping"
    return getattr(tp, "__name__", str(tp))


def check_field_types(cfg: Any, names: typing.Iterable[str] | None = None) -> None:
    """Check (and coerce, in place) every field of the dataclass instance ``cfg`` against its annotation.

    Raises ``InputError(field=name)`` for the first value that does not fit. ``names`` limits the check.
    """
    hints = field_hints(type(cfg))
    for name in names if names is not None else hints:
        if name not in hints or not hasattr(cfg, name):
            continue
        value = getattr(cfg, name)
        ok, out = conform(value, hints[name])
        if not ok:
            raise InputError(f"{value!r} is not {describe(hints[name])}", field=name, hint=_type_hint(value))
        if out is not value and not (isinstance(out, float) and math.isnan(out)):
            setattr(cfg, name, out)


def _type_hint(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true and false are booleans, not numbers"
    return None
