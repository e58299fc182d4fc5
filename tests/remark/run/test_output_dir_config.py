"""An empty or absent ``output_dir`` is an error naming the field (exit 2), not transformers' default folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog.io.errors import InputError
from remark.cli.main import main
from remark.config import load_config

REPO = Path(__file__).resolve().parents[3]
TINY = REPO / "configs" / "tiny_cpu.yaml"


@pytest.mark.parametrize("value", ["", "   ", None])
def test_empty_output_dir_from_set_is_an_input_error(value):
    with pytest.raises(InputError) as err:
        load_config(TINY, {"output_dir": value})
    assert err.value.field == "output_dir"
    assert err.value.path == "--set"
    assert "output_dir is empty" in err.value.message


def test_empty_output_dir_in_the_file_names_file_and_line(tmp_path):
    text = TINY.read_text().replace("output_dir: runs/tiny_cpu", 'output_dir: ""')
    assert 'output_dir: ""' in text
    cfg = tmp_path / "run.yaml"
    cfg.write_text(text)
    line = text.splitlines().index('output_dir: ""') + 1
    with pytest.raises(InputError) as err:
        load_config(cfg)
    assert (err.value.field, Path(err.value.path), err.value.row) == ("output_dir", cfg, line)


@pytest.mark.parametrize("how", ["--set output_dir=", "--set output_dir=''", "file without output_dir"])
def test_remark_train_refuses_before_anything_is_written(tmp_path, monkeypatch, capsys, how):
    monkeypatch.chdir(tmp_path)  # transformers' default would be ./trainer_output
    config = TINY
    sets = []
    if how == "file without output_dir":
        config = tmp_path / "run.yaml"
        config.write_text(TINY.read_text().replace("output_dir: runs/tiny_cpu\n", ""))
    else:
        sets = ["--set", how.split(" ", 1)[1]]
    code = main(["train", "--config", str(config), *sets])
    err = capsys.readouterr().err
    assert code == 2
    assert "output_dir" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == ([config] if config != TINY else [])
