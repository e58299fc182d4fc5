"""Lazy package exports (PEP 562): a package's public names, imported from their modules on first use.

``catalog`` and ``remark.demo`` export names whose modules import polars, torch or transformers;
``remark --help`` must not pay for them (tests/test_cli_help_imports.py), so the packages resolve
those names only when something asks for one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: dict[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """(``__getattr__``, ``__dir__``) for ``package``: ``exports`` maps a public name to the module that
    defines it; a resolved name is stored in ``namespace`` (the package's globals), so later look-ups
    skip the hook."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
