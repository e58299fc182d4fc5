"""Download public datasets for users with internet access (``remark data fetch``). Never run in tests.

Files are pinned to an upstream commit and checked against the sha256 recorded when the project's
shared copy was made (where known). ``--out`` is an owned folder output (``catalog.io.outputs.atomic_dir``,
kind ``fetch``): every file is downloaded and checked into a temporary folder beside it, which is swapped in
only once all are there, so a failed download (network, checksum, full disk) leaves the previous state
(nothing, or the earlier fetch) untouched. An existing ``--out`` is replaced only when it is empty or an
earlier fetch; a folder of the user's (files of the same names included) is refused before any download,
unless ``force``. ``opener`` is injectable (tests pass a fake one; nothing here touches the network at
import time).
"""

from __future__ import annotations

import hashlib
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from catalog.io.errors import InputError
from catalog.io.outputs import atomic_dir, check_output_dir

#: the ``catalog.io.outputs.atomic_dir`` kind of a ``remark data fetch --out`` folder.
FETCH_KIND = "fetch"


@dataclass(frozen=True)
class Remote:
    """One file: where it goes under ``--out``, its URL, and its sha256 (None when not recorded)."""

    dest: str
    url: str
    sha256: str | None


_PROTOQA = "https://raw.githubusercontent.com/iesl/protoqa-data/c6c5696cd0cc18d990499a431c2923cef8003104/"
#: dataset name -> its files (license: ProtoQA is CC-BY-4.0)
DATASETS: dict[str, list[Remote]] = {
    "protoqa": [
        Remote(
            "dev/dev.crowdsourced.jsonl",
            _PROTOQA + "data/dev/dev.crowdsourced.jsonl",
            "cd3bec04e9ec9294ebf5b75eda6eb0d5abcffec926407eaf852be9c744c67ce5",
        ),
        Remote(
            "dev/dev.scraped.jsonl",
            _PROTOQA + "data/dev/dev.scraped.jsonl",
            "ed2d094741de9e7eae0091eaeeca8a94104aa49792efdd75bed91d3ab6177576",
        ),
        Remote(
            "dev/dev.predictions.human.jsonl",
            _PROTOQA + "data/dev/dev.predictions.human.jsonl",
            "e2a50365931700e0fe718a73cbb82971e1d5957ea6b0d0d38db954e92bfa0b2b",
        ),
        Remote("train/train.jsonl", _PROTOQA + "data/train/train.jsonl", None),
        Remote(
            "test/test.questions.jsonl",
            _PROTOQA + "data/test/test.questions.jsonl",
            "e09f227f397a5a1bb35e31746aa81a6fe81d058d92f4065a0c66daedc81f249f",
        ),
        Remote(
            "LICENSE",
            _PROTOQA + "LICENSE",
            "f5b745ef98087f531e719ee8ca6a96809444573ecc7173c6fa68eaad39b3cc3f",
        ),
    ],
}


def fetch(name: str, out_dir: str | Path, **kwargs: Any) -> list[Path]:
    """:func:`_fetch` holding ``out_dir``'s writer lock throughout (``catalog.io.locks``: a second
    command writing it is refused, exit 2). The arguments are :func:`_fetch`'s."""
    from catalog.io.locks import output_lock

    if name not in DATASETS:  # refused before the lock makes a folder
        raise InputError(f"unknown dataset {name!r}", field="name", hint=f"use one of {', '.join(DATASETS)}")
    with output_lock(out_dir):
        return _fetch(name, out_dir, **kwargs)


def _fetch(
    name: str,
    out_dir: str | Path,
    *,
    opener: Callable[..., object] = urllib.request.urlopen,
    timeout: float = 60.0,
    progress: Callable[[str], None] | None = None,
    force: bool = False,
) -> list[Path]:
    """Download dataset ``name`` as the folder ``out_dir`` (whole, or not at all); return the written paths.

    ``out_dir`` must be new, empty or an earlier fetch (``force``: any folder). A failed download or a
    sha256 mismatch raises ``InputError`` and leaves ``out_dir`` as it was.
    """
    if name not in DATASETS:
        raise InputError(f"unknown dataset {name!r}", field="name", hint=f"use one of {', '.join(DATASETS)}")
    out = Path(out_dir)
    check_output_dir(out, FETCH_KIND, force=force)  # before any download
    with atomic_dir(out, FETCH_KIND, force=force) as tmp:
        for remote in DATASETS[name]:
            if progress:
                progress(f"{remote.url} -> {out / remote.dest}")
            try:
                with opener(remote.url, timeout=timeout) as response:  # type: ignore[attr-defined]
                    data = response.read()
            except OSError as err:
                raise InputError(
                    f"download failed: {err}; {out} was left as it was",
                    path=remote.url,
                    hint="check your connection",
                ) from err
            digest = hashlib.sha256(data).hexdigest()
            if remote.sha256 is not None and digest != remote.sha256:
                raise InputError(
                    f"sha256 {digest} differs from the recorded {remote.sha256}; {out} was left as it was",
                    path=remote.url,
                    hint="the upstream file changed or the download was corrupted; try again",
                )
            dest = tmp / remote.dest
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
    return [out / remote.dest for remote in DATASETS[name]]
