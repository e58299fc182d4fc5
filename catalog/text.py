"""UTF-8 text input whose decoding errors name the file, the line and the byte.

Python's own ``UnicodeDecodeError`` says "position 12" of an anonymous buffer; a user needs the file and
the line to find the byte. Every reader of user text (``remark ground`` input, predictions, configs,
eval logs, profiles) goes through :func:`read_text` or :func:`decode_utf8`.
"""

from __future__ import annotations

import os
from pathlib import Path

from catalog.shared.errors import InputError

UTF8_HINT = "save it as UTF-8, e.g. with iconv -f latin1 -t utf-8"


def decode_utf8(data: bytes, path: str | os.PathLike[str] | None, *, line_offset: int = 0) -> str:
    """``data`` decoded as UTF-8 (a leading byte-order mark is dropped), or ``InputError`` naming the
    1-based line (``line_offset`` + line within ``data``) and column of the first invalid byte.
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise utf8_error(data, err, path, line_offset=line_offset) from None


def utf8_error(
    data: bytes, err: UnicodeDecodeError, path: str | os.PathLike[str] | None, *, line_offset: int = 0
) -> InputError:
    """The ``InputError`` for ``err`` raised while decoding ``data`` (line and column of the bad byte)."""
    line = data.count(b"\n", 0, err.start) + 1 + line_offset
    column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
    return InputError(
        f"not UTF-8 text: byte 0x{data[err.start]:02x} at column {column} is not valid UTF-8 ({err.reason})",
        path=path,
        row=line,
        hint=UTF8_HINT,
    )


def read_text(path: str | os.PathLike[str], *, what: str = "file", hint: str | None = None) -> str:
    """The UTF-8 text of ``path``; a missing file, a directory or undecodable bytes raise ``InputError``."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{what} is a directory, not a file", path=p, hint=hint)
    if not p.is_file():
        raise InputError(f"{what} not found", path=p, hint=hint or "check the path")
    return decode_utf8(p.read_bytes(), p)
