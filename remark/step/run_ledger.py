"""What a training run owns in its ``output_dir``: the run's ledger ``.remark-run.json``.

``output_dir`` is shared: a run writes its files (logs, eval tables, ``best/``, ``final/``, checkpoints, ...)
beside whatever else the user keeps there, and a folder of the user's may carry a name a run also writes
(a dataset called ``eval/``, a model called ``final/``). So what a run deletes (``remark train
--overwrite``, checkpoint rotation) is proven by the ledger, never by a name: before it writes anything, a
run claims in the ledger each name it is about to create (one that did not exist then), and the trainer
claims ``checkpoint-N`` just before it saves into it. A path the ledger does not claim is not the run's: it
is never deleted, and a new run that would write there is refused (``remark.run.run_files``).

The file: ``{"format": 1, "run_id": hex, "claims": [name, ...]}``, replaced atomically; ``run_id`` is new
for each new run in the folder and kept by a resume. A missing or unreadable ledger claims nothing, so
nothing is deleted. A ledger whose claims name nothing that exists means nothing: the writer lock
(``catalog.io.locks.note_companion``) removes it on release when the run wrote none of them (a run refused
after its checks leaves no ledger).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from pathlib import Path

from catalog.io.outputs import atomic_write

#: the ledger's file name inside ``output_dir``
LEDGER = ".remark-run.json"
LEDGER_FORMAT = 1


def read_ledger(folder: str | Path) -> dict | None:
    """The ledger of ``folder`` (``{"format", "run_id", "claims"}``), or None when it is missing or not one."""
    path = Path(folder) / LEDGER
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (
        not isinstance(value, dict)
        or value.get("format") != LEDGER_FORMAT
        or not isinstance(value.get("run_id"), str)
        or not isinstance(value.get("claims"), list)
        or not all(isinstance(n, str) for n in value["claims"])
    ):
        return None
    return value


def claims(folder: str | Path) -> set[str]:
    """The names the ledger of ``folder`` claims (empty without a readable ledger)."""
    ledger = read_ledger(folder)
    return set(ledger["claims"]) if ledger is not None else set()


def owns(path: str | Path) -> bool:
    """Whether ``path`` is a run's own: its name is claimed by the ledger of its folder."""
    p = Path(path)
    return p.name in claims(p.parent)


def claim(folder: str | Path, names: Iterable[str], *, new_run: bool = False) -> str:
    """Add ``names`` to the ledger of ``folder`` (created, with the folder, when missing); returns the run id.

    ``new_run``: a new run starts in the folder: a new ``run_id``; of the earlier claims only those whose
    path still exists are kept (the folder's own files of an earlier run, e.g. a config written before a
    crash, stay the folder's runs' to replace or remove)."""
    root = Path(folder)
    ledger = read_ledger(root)
    held = set(ledger["claims"]) if ledger is not None else set()
    if new_run:
        held = {n for n in held if (root / n).exists() or (root / n).is_symlink()}
    run_id = ledger["run_id"] if ledger is not None and not new_run else uuid.uuid4().hex
    wanted = held | set(names)
    if ledger is not None and ledger["run_id"] == run_id and set(ledger["claims"]) == wanted:
        return run_id
    root.mkdir(parents=True, exist_ok=True)
    record = {"format": LEDGER_FORMAT, "run_id": run_id, "claims": sorted(wanted)}
    with atomic_write(root / LEDGER) as tmp:
        tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    from catalog.io.locks import note_companion

    note_companion(root, LEDGER, idle=lambda: not any((root / n).exists() for n in claims(root)))
    return run_id
