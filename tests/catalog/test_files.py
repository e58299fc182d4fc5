"""The one reading path (catalog.io.files): every reader gives the same result for a clean file, the
same file with a byte-order mark and with CRLF line ends, and names the file, line and byte of bytes that
are not UTF-8; read_json / check_fields name the field that is missing or of the wrong type."""

from __future__ import annotations

import pytest
from polars.testing import assert_frame_equal

from catalog.io.errors import InputError
from catalog.io.files import check_fields, iter_jsonl, read_json, read_table, read_text

BOM = b"\xef\xbb\xbf"

#: each reader on a file of the given suffix, with a clean content whose line 2 holds "@"
READERS = {
    "read_text": (".txt", b"Moon (2009)\nAm@lie (2001)\n", read_text),
    "iter_jsonl": (".jsonl", b'{"t": "Moon"}\n{"t": "Am@lie"}\n', lambda p: list(iter_jsonl(p))),
    "read_json": (".json", b'{"a": 1,\n "t": "Am@lie"}\n', read_json),
    "read_table csv": (".csv", b"title,year\nAm@lie,2001\nMoon,2009\n", lambda p: read_table(p, infer_schema=False)),
    "read_table tsv": (".tsv", b"title\tyear\nAm@lie\t2001\nMoon\t2009\n", read_table),
    "read_table json": (".json", b'[{"t": "x"},\n {"t": "Am@lie"}]\n', read_table),
    "read_table jsonl": (".jsonl", b'{"t": "x", "n": 1}\n{"t": "Am@lie", "n": 2}\n', read_table),
}  # fmt: skip


def _write(tmp_path, suffix, data: bytes):
    path = tmp_path / f"in{suffix}"
    path.write_bytes(data)
    return path


def _same(a, b) -> None:
    if hasattr(a, "columns"):
        assert_frame_equal(a, b)
    else:
        assert a == b


@pytest.mark.parametrize("name", list(READERS))
def test_bom_and_crlf_read_as_the_clean_file(tmp_path, name):
    suffix, clean, read = READERS[name]
    clean = clean.replace(b"@", b"e")
    want = read(_write(tmp_path, suffix, clean))
    for variant in (BOM + clean, clean.replace(b"\n", b"\r\n"), BOM + clean.replace(b"\n", b"\r\n")):
        _same(read(_write(tmp_path, suffix, variant)), want)


@pytest.mark.parametrize("name", list(READERS))
def test_invalid_utf8_names_the_file_line_and_byte(tmp_path, name):
    suffix, clean, read = READERS[name]
    path = _write(tmp_path, suffix, clean.replace(b"@", b"\xe9"))
    with pytest.raises(InputError) as err:
        read(path)
    column = clean.split(b"\n")[1].index(b"@") + 1
    message = f"{path}, row 2: not UTF-8 text: byte 0xe9 at column {column} is not valid UTF-8"
    assert str(err.value).startswith(message)
    # the same line and column with CRLF line ends and a BOM
    _write(tmp_path, suffix, BOM + clean.replace(b"@", b"\xe9").replace(b"\n", b"\r\n"))
    with pytest.raises(InputError) as again:
        read(path)
    assert str(again.value) == str(err.value)


def test_read_json_names_the_line_of_bad_json_and_the_field(tmp_path):
    path = _write(tmp_path, ".json", b'{"a": 1,\n "b": }\n')
    with pytest.raises(InputError) as err:
        read_json(path)
    assert str(err.value) == f"{path}, row 2: not valid JSON (Expecting value at column 7)"
    path = _write(tmp_path, ".json", b'{"step": "3", "sub": {"k": [1]}}')
    with pytest.raises(InputError) as err:
        read_json(path, schema={"step": int}, hint="remake it")
    assert str(err.value) == f"{path}, field 'step': expected an integer, got a string (\"3\") (remake it)"
    with pytest.raises(InputError, match=r"field 'sub.k': expected a string, got a list \(\[1\]\)"):
        read_json(path, schema={"sub": {"k": str}})
    with pytest.raises(InputError, match=r"field 'gone': missing"):
        read_json(path, schema={"gone": str})
    assert read_json(path, schema={"sub": dict}, optional={"gone": str, "step": str}) == {
        "step": "3",
        "sub": {"k": [1]},
    }
    with pytest.raises(InputError, match=r"expected a JSON object, got a list"):
        read_json(_write(tmp_path, ".json", b"[1, 2]"), schema={})
    with pytest.raises(InputError, match="file not found"):
        read_json(tmp_path / "absent.json")


@pytest.mark.parametrize(
    ("value", "types", "fits"),
    [
        (True, int, False),  # a bool is no integer
        (3, float, True),  # an integer is a number
        (3.0, int, False),
        (None, (str, None), True),
        (None, str, False),
        ("x", (int, str), True),
        ({}, {"a": int}, False),  # a nested schema: its keys are required
    ],
)
def test_check_fields_types(value, types, fits):
    obj = {"f": value}
    if fits:
        assert check_fields(obj, {"f": types}, path="p.json") is obj
    else:
        with pytest.raises(InputError, match=r"p.json, row 4, field 'f"):
            check_fields(obj, {"f": types}, path="p.json", row=4)


def test_iter_jsonl_checks_each_line_against_the_schema(tmp_path):
    path = _write(tmp_path, ".jsonl", b'{"step": 1}\n\n{"step": "two"}\n')
    with pytest.raises(InputError) as err:
        list(iter_jsonl(path, schema={"step": int}))
    assert str(err.value) == f"{path}, row 3, field 'step': expected an integer, got a string (\"two\")"


def _safetensors(header: dict, data: bytes) -> bytes:
    import json as _json

    raw = _json.dumps(header).encode()
    return len(raw).to_bytes(8, "little") + raw + data


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (_safetensors({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8), None),
        (b"\x01\x02", "w.safetensors is 2 bytes, shorter than a safetensors header"),
        (b"\xff" * 16, "the safetensors header of w.safetensors claims 18446744073709551615 bytes in a file of 16"),
        ((5).to_bytes(8, "little") + b"{oops", "the safetensors header of w.safetensors is not valid JSON"),
        (_safetensors({"w": {"dtype": "F99", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8),
         "the safetensors header of w.safetensors has a damaged entry 'w'"),
        (_safetensors({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8),
         "the safetensors header of w.safetensors gives tensor 'w' a byte range that does not fit its shape"),
        (_safetensors({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 12),
         "the safetensors header of w.safetensors describes 8 bytes of tensors, the file holds 12"),
    ],
    ids=["sound", "short", "header-too-large", "header-not-json", "unknown-dtype", "shape-vs-range", "uncovered"],
)  # fmt: skip
def test_safetensors_problem_reads_the_header_only(tmp_path, content, problem):
    from catalog.io.files import safetensors_problem

    path = tmp_path / "w.safetensors"
    path.write_bytes(content)
    assert safetensors_problem(path) == problem
