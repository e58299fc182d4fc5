"""The one error type for bad user input, shared by every package (catalog is the bottom layer).

Messages name the file, the row or line (1-based, as an editor shows it), the field, and what to do, e.g.
``data/catalog.csv, row 12, field 'year': 'abc' is not an integer year; fix the value or leave it empty.``
The CLI prints these without a traceback and exits with status 2.
"""

from __future__ import annotations

from os import PathLike


class InputError(ValueError):
    """Bad input from the user (a file, a config, a CLI flag).

    ``message`` is what is wrong, without the place; ``str(err)`` is the whole line a user sees.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | PathLike[str] | None = None,
        row: int | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.message = message
        self.path = None if path is None else str(path)
        self.row = row
        self.field = field
        self.hint = hint
        where = []
        if self.path is not None:
            where.append(self.path)
        if row is not None:
            where.append(f"row {row}")
        if field is not None:
            where.append(f"field {field!r}")
        text = (", ".join(where) + ": " if where else "") + message
        if hint:
            text += f" ({hint})"
        super().__init__(text)
