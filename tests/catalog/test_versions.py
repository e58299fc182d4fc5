from __future__ import annotations

import platform
from importlib import metadata

from catalog.io.versions import package_versions, versions_line


def test_the_versions_are_the_installed_distributions():
    v = package_versions()
    assert v["torch"] == metadata.version("torch") and v["trl"] == metadata.version("trl")
    assert v["transformers"] == metadata.version("transformers") and v["python"] == platform.python_version()
    line = versions_line(v)
    assert line.startswith(f"remark {v['remark']}, torch {v['torch']}, transformers {v['transformers']}")
    assert line.endswith(f"python {v['python']}") and ("vllm" in line) == (v["vllm"] is not None)


def test_a_missing_package_is_none_and_left_out_of_the_line():
    v = {
        "python": "3.11.7",
        "remark": "0.1.0",
        "torch": "2.13.0",
        "transformers": "5.19.0",
        "trl": "1.16.0",
        "vllm": None,
    }
    assert versions_line(v) == "remark 0.1.0, torch 2.13.0, transformers 5.19.0, trl 1.16.0, python 3.11.7"
