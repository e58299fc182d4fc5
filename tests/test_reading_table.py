"""Every command (and reader) that reads a text file, fed the same file four ways, and every sidecar file a
command reads back, damaged.

Part 1, the encodings: each case names a command (or a reader call) and the file it reads, written with
``~~`` where one character goes. The file is given clean (``~~`` -> ``e``), with a UTF-8 byte-order mark,
with CRLF line ends, and with the invalid byte 0xe9 in place of the character. The BOM and CRLF runs
must exit 0 with the clean run's output (stdout, with the run's folder written ``{t}``, and the output
files each case names); the invalid one must exit 2 with one line naming the file and the line of the
byte (``FILE, row N: not UTF-8 text``), and no traceback.

Part 2, the sidecars: ``stats.json``, ``meta.json``, ``metrics.json``, ``.remark-output.json``,
``eval_log.jsonl``, ``train_summary.json``, ``remark_config.json``, ``card.json``, ``best.json``, model
folders' JSON files, cost profiles, group-size advice: broken JSON, a missing key or a value of the wrong
type is exit 2 with one line naming the file and the field (or the line of bad JSON).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pytest

from catalog.io.errors import InputError
from tests import test_bad_input_table as bad_table
from tests.test_bad_input_table import CATALOG, PQ, THREADS, config_text, jsonl, run_cli

world = bad_table.world  # the shared world fixture: a catalog, threads, a dataset, scored dirs, a run log

BOM = b"\xef\xbb\xbf"
MARK = b"~~"
#: a safetensors file holding no tensor (an 8-byte header length, then the header ``{}``)
NO_TENSORS = "\x02" + "\x00" * 7 + "{}"


@dataclass(frozen=True)
class Enc:
    """``argv`` (``{w}`` the shared world, ``{t}`` the case's folder) or ``call(t, w)``; ``files`` written
    into ``{t}`` first (``copy``: world folders copied there first); ``target`` the one holding ``~~``;
    ``outputs`` the files under ``{t}`` whose content must agree too."""

    id: str
    target: str
    files: dict[str, str]
    argv: str | None = None
    call: Callable[[Path, Path], object] | None = None
    copy: dict[str, str] = field(default_factory=dict)
    outputs: tuple[str, ...] = ()


def _threads_with_mark() -> str:
    rows = [dict(r) for r in THREADS]
    rows[2]["prompt"] = rows[2]["prompt"].replace("like", "lik~~")
    return jsonl(rows)


THREADS_CSV = "request_id,prompt,responder_id,title,year,split\n" + "".join(
    f"{r['request_id']},{r['prompt'].replace('like', 'lik~~') if i == 3 else r['prompt']},{r['responder_id']},"
    f"{r['title']},{r['year']},{r['split']}\n"
    for i, r in enumerate(THREADS)
)
CATALOG_MARKED = CATALOG.replace("Primer", "Prim~~r")
ENTITY2ID = (
    '{\n "Moon (2009)": "1",\n "Arrival (2016)": "2",\n "Prim~~r (2004)": "3",\n "Contact (1997)": "4"\n}\n'
)
REDDIT = jsonl(
    [
        {"prompt": [{"role": "user", "content": "films like Moon?"}], "groundtruth_with_release_year": [["Moon", 2009]]},
        {"prompt": [{"role": "user", "content": "films lik~~ Primer?"}], "groundtruth_with_release_year": [["Primer", 2004]]},
    ]
)  # fmt: skip
PROTOQA = jsonl(
    [
        PQ | {"answers": {"raw": {"apple": 3, "pear": 1}}},
        {**PQ, "metadata": {"id": "q2"}, "question": {"normalized": "nam~~ a color"}, "answers": {"raw": {"red": 2}}},
    ]
)  # fmt: skip
REDIAL = jsonl(
    [
        {
            "conversationId": "1", "initiatorWorkerId": 1, "respondentWorkerId": 2,
            "movieMentions": {"10": "Moon (2009)", "20": "Primer (2004)"},
            "initiatorQuestions": {}, "respondentQuestions": {},
            "messages": [
                {"senderWorkerId": 1, "text": "I lik~~d @10", "messageId": 1},
                {"senderWorkerId": 2, "text": "Try @20", "messageId": 2},
            ],
        }
    ]
)  # fmt: skip
TARGETS = jsonl(
    [
        {"metadata": {"id": "q1"}, "answers": {"clusters": {"a": {"count": 3, "answers": ["appl~~"]}}}},
        {"metadata": {"id": "q2"}, "answers": {"clusters": {"b": {"count": 2, "answers": ["red"]}}}},
    ]
)
PROTOQA_PREDS = '{"q1": ["apple"]}\n{"q2": ["r~~d", "blue"]}\n'
EVAL_LOG = jsonl(
    [
        {"step": s, "samples": 8 * s, "eval/recall@20/union": v, "eval/recall@20/per_responder": v / 2, "note": n}
        for s, v, n in ((10, 0.1, "a"), (20, 0.2, "r~~sumed"), (30, 0.3, "b"))
    ]
)  # fmt: skip
PROFILE = '{\n "device": "h2~~0",\n "points": [\n  {"G": 4, "peak_mem_gb": 18.0, "step_s": 5.0},\n  {"G": 8, "peak_mem_gb": 26.0, "step_s": 9.0}\n ]\n}\n'
RATES = jsonl([{"request_id": f"q{i}" if i != 3 else "q~~3", "pass_rate": 0.2 * i} for i in range(5)])


def _compose(t: Path, w: Path) -> object:
    from remark.config import compose_config

    return compose_config(None, t / "run.yaml", check_paths=False).config.to_dict()


def _recipe(t: Path, w: Path) -> object:
    from remark.recipes import load_recipe

    return load_recipe(t / "r.yaml")


def _adapter_base(t: Path, w: Path) -> object:
    from eval.adapters import adapter_base

    return adapter_base(t / "a")


def _model_files(t: Path, w: Path) -> object:
    from eval.adapters import check_model_dir

    return check_model_dir(t / "m")


def _training_record(t: Path, w: Path) -> object:
    from eval.training_record import training_grounding

    return training_grounding(t / "run" / "best")


def _recommendation(t: Path, w: Path) -> object:
    from remark.planning.adaptive import read_recommendation

    return read_recommendation(t / "ck")


ENCODINGS = [
    Enc("prep-threads-jsonl", "in.jsonl", {"in.jsonl": _threads_with_mark()},
        argv="prep threads --catalog {w}/cat.csv --out {t}/out --input {t}/in.jsonl", outputs=("out/requests.parquet",)),
    Enc("prep-threads-csv", "in.csv", {"in.csv": THREADS_CSV},
        argv="prep threads --catalog {w}/cat.csv --out {t}/out --input {t}/in.csv", outputs=("out/requests.parquet",)),
    Enc("prep-catalog-csv", "cat.csv", {"cat.csv": CATALOG_MARKED},
        argv="prep threads --catalog {t}/cat.csv --out {t}/out --input {w}/threads.jsonl",
        outputs=("out/requests.parquet", "out/catalog.parquet")),
    Enc("prep-catalog-tsv", "cat.tsv", {"cat.tsv": CATALOG_MARKED.replace(",", "\t")},
        argv="prep threads --catalog {t}/cat.tsv --out {t}/out --input {w}/threads.jsonl",
        outputs=("out/requests.parquet", "out/catalog.parquet")),
    Enc("prep-catalog-entity2id", "cat.json", {"cat.json": ENTITY2ID},
        argv="prep threads --catalog {t}/cat.json --out {t}/out --input {w}/threads.jsonl",
        outputs=("out/requests.parquet", "out/catalog.parquet")),
    Enc("prep-reddit", "r.jsonl", {"r.jsonl": REDDIT},
        argv="prep reddit --catalog {w}/cat.csv --out {t}/out --input {t}/r.jsonl", outputs=("out/requests.parquet",)),
    Enc("prep-protoqa", "pq.jsonl", {"pq.jsonl": PROTOQA},
        argv="prep protoqa --out {t}/out --input {t}/pq.jsonl", outputs=("out/requests.parquet",)),
    Enc("prep-redial", "c.jsonl", {"c.jsonl": REDIAL},
        argv="prep redial --out {t}/out --input {t}/c.jsonl", outputs=("out/requests.parquet",)),
    Enc("ground-text", "titles.txt", {"titles.txt": "Moon (2009)\nPrim~~r (2004)\nArrival\n"},
        argv="ground --catalog {w}/cat.csv {t}/titles.txt"),
    Enc("ground-lists", "c.jsonl", {"c.jsonl": jsonl([{"completion": "1. Moon (2009)\n2. Arrival"}, {"completion": "1. Prim~~r (2004)"}])},
        argv="ground --catalog {w}/cat.csv --lists {t}/c.jsonl"),
    Enc("diagnose-lists", "l.jsonl",
        {"l.jsonl": jsonl([{"request_id": "q0", "completions": ["1. Moon (2009)", "1. Prim~~r (2004)"]},
                           {"request_id": "q1", "completions": ["1. Arrival (2016)", "1. Solaris"]}])},
        argv="diagnose {w}/ds --group-size 2 --lists {t}/l.jsonl"),
    Enc("eval-score", "p.jsonl",
        {"p.jsonl": jsonl([{"request_id": "q4", "recommendations": ["Moon (2009)"]},
                           {"request_id": "q5", "recommendations": ["Prim~~r (2004)", "Arrival"]}])},
        argv="eval score --data {w}/ds --resamples 50 --predictions {t}/p.jsonl"),
    Enc("convert-protoqa-jsonl", "p.jsonl", {"p.jsonl": PROTOQA_PREDS},
        argv="eval convert-protoqa {t}/p.jsonl --out {t}/o.jsonl", outputs=("o.jsonl",)),
    Enc("convert-protoqa-json", "p.json", {"p.json": '{\n "q1": ["pear"],\n "q2": ["appl~~", "kiwi"]\n}\n'},
        argv="eval convert-protoqa {t}/p.json --out {t}/o.jsonl", outputs=("o.jsonl",)),
    Enc("protoqa-evaluator-targets", "t.jsonl", {"t.jsonl": TARGETS, "p.jsonl": PROTOQA_PREDS.replace("~~", "e")},
        argv="eval protoqa-evaluator --targets {t}/t.jsonl --predictions {t}/p.jsonl"),
    Enc("protoqa-evaluator-predictions", "p.jsonl", {"t.jsonl": TARGETS.replace("~~", "e"), "p.jsonl": PROTOQA_PREDS},
        argv="eval protoqa-evaluator --targets {t}/t.jsonl --predictions {t}/p.jsonl"),
    Enc("eval-steps-log", "r/eval_log.jsonl", {"r/eval_log.jsonl": EVAL_LOG},
        argv="eval steps --run {t}/r --baseline {w}/run"),
    Enc("eval-curves-log", "r/eval_log.jsonl", {"r/eval_log.jsonl": EVAL_LOG},
        argv="eval curves {t}/r --metric eval/recall@20/union --out {t}/c.png"),
    Enc("curve-fit-log", "log.jsonl", {"log.jsonl": EVAL_LOG}, argv="curve fit {t}/log.jsonl"),
    Enc("plan-profile", "p.json", {"p.json": PROFILE},
        argv="plan-group-size --profile {t}/p.json --pass-rates {w}/rates.jsonl --memory-budget 40"),
    Enc("plan-pass-rates", "r.jsonl", {"r.jsonl": RATES},
        argv="plan-group-size --profile {w}/profile.json --pass-rates {t}/r.jsonl --memory-budget 40"),
    Enc("stats-meta-json", "ds/meta.json", {}, copy={"ds": "ds"}, argv="stats {t}/ds"),
    Enc("stats-stats-json", "ds/stats.json", {}, copy={"ds": "ds"}, argv="stats {t}/ds --json"),
    Enc("compare-metrics-json", "a/metrics.json", {}, copy={"a": "scored", "b": "scored"},
        argv="eval compare {t}/a {t}/b --resamples 50"),
    Enc("train-config-yaml", "run.yaml", {"run.yaml": "{config}"}, call=_compose),
    Enc("recipe-yaml", "r.yaml", {"r.yaml": "description: a t~~st\nsource: nowhere\nfields:\n  loss_type: dapo\n"},
        call=_recipe),
    Enc("adapter-config", "a/adapter_config.json", {"a/adapter_config.json": '{\n "peft_type": "LORA",\n "base_model_name_or_path": "../mod~~l"\n}\n',
                                                    "model/config.json": '{"model_type": "qwen2"}'},
        call=_adapter_base),
    Enc("model-config", "m/config.json", {"m/config.json": '{\n "model_type": "qw~~n2"\n}\n', "m/tokenizer.json": "{}",
                                        "m/model.safetensors": NO_TENSORS},
        call=_model_files),
    Enc("train-summary", "run/train_summary.json",
        {"run/train_summary.json": '{\n "global_step": 4,\n "grounding": {"used": {"match_mode": "exact", "year_tolerance": 2, '
                                   '"match_threshold": 90.0, "match_scorer": "ratio"}, "notes": ["s~~e"]}\n}\n',
         "run/best/config.json": "{}"},
        call=_training_record),
    Enc("group-size-advice", "ck/group_size_recommendation.json",
        {"ck/group_size_recommendation.json": '{\n "recommended_G": 8,\n "objective": "signal_p~~r_s"\n}\n'},
        call=_recommendation),
]  # fmt: skip

VARIANTS = {
    "bom": lambda data: BOM + data,
    "crlf": lambda data: data.replace(b"\n", b"\r\n"),
    "bom-crlf": lambda data: BOM + data.replace(b"\n", b"\r\n"),
}


def _setup(case: Enc, w: Path, t: Path, variant: str) -> tuple[Path, int]:
    """Write the case's files into ``t``; the target's ``~~`` is "e" (``bad``: byte 0xe9) and the
    target is then written as ``variant`` says. Returns the target and the line of the mark."""
    for dest, src in case.copy.items():
        shutil.copytree(w / src, t / dest)
    for name, text in case.files.items():
        path = t / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(config_text(w, output_dir=str(t / "run_~~ut")) if text == "{config}" else text)
    target = t / case.target
    data = target.read_bytes()
    if MARK not in data:  # a copied sidecar: the "e" that ends its first string becomes the mark
        pos = data.index(b'e"')
        data = data[:pos] + MARK + data[pos + 1 :]
    line = data[: data.index(MARK)].count(b"\n") + 1
    clean = data.replace(MARK, b"e")
    if variant == "bad":
        target.write_bytes(data.replace(MARK, b"\xe9"))
    else:
        target.write_bytes(clean if variant == "clean" else VARIANTS[variant](clean))
    return target, line


def _run(case: Enc, w: Path, t: Path) -> tuple[int, str, str]:
    """(exit status, stdout with ``t`` written ``{t}``, stderr); a call's InputError is exit 2."""
    if case.call is not None:
        try:
            return 0, repr(case.call(t, w)).replace(str(t), "{t}"), ""
        except InputError as err:
            return 2, "", f"remark call: error: {err}"
    argv = [a.replace("{w}", str(w)).replace("{t}", str(t)) for a in case.argv.split()]
    code, out, err = run_cli(argv)
    return code, out.replace(str(t), "{t}"), err


def _output(path: Path):
    if path.suffix == ".parquet":
        return pl.read_parquet(path).to_dicts()
    return path.read_text()


@pytest.mark.parametrize("case", ENCODINGS, ids=[c.id for c in ENCODINGS])
def test_a_bom_and_crlf_read_as_the_clean_file_and_bad_bytes_name_the_line(case, world, tmp_path):
    results = {}
    for variant in ("clean", *VARIANTS):
        t = tmp_path / variant
        t.mkdir()
        _setup(case, world, t, variant)
        code, out, err = _run(case, world, t)
        assert code == 0, f"{variant}: exit {code}\n{err[-3000:]}"
        results[variant] = (out, {name: _output(t / name) for name in case.outputs})
    for variant in VARIANTS:
        assert results[variant][0] == results["clean"][0], variant
        for name in case.outputs:
            assert results[variant][1][name] == results["clean"][1][name], (variant, name)
    t = tmp_path / "bad"
    t.mkdir()
    target, line = _setup(case, world, t, "bad")
    code, out, err = _run(case, world, t)
    assert "Traceback" not in err and code == 2, f"exit {code}\n{err[-3000:]}"
    assert len(err.strip().splitlines()) == 1, err
    assert f"{target}, row {line}" in err and "not UTF-8 text: byte 0xe9" in err, err


# --- Part 2: sidecars ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """``argv`` or ``call(t, w)`` after ``copy`` (world folders into ``{t}``) and ``files`` (written over
    them); the error line must hold every fragment of ``expect`` (``{t}`` is the case's folder)."""

    id: str
    expect: tuple[str, ...]
    files: dict[str, str]
    argv: str | None = None
    call: Callable[[Path, Path], object] | None = None
    copy: dict[str, str] = field(default_factory=dict)


def _best(t: Path, w: Path) -> object:
    from remark.run.callbacks import read_best

    return read_best(t / "best" / "best.json")


MODEL = {
    "m/config.json": '{"model_type": "qwen2"}',
    "m/tokenizer.json": "{}",
    "m/model.safetensors": NO_TENSORS,
}
RUN_MODEL = {
    "run/best/config.json": '{"model_type": "qwen2"}',
    "run/best/tokenizer.json": "{}",
    "run/best/model.safetensors": NO_TENSORS,
}
EVAL_RUN = "eval run --model {t}/run/best --data {w}/ds --out {t}/out"
CARD = '{"kind": "best", "step": 2, "total_steps": 4}'
POINTS = '[{"G": 4, "peak_mem_gb": 18.0, "step_s": 5.0}, {"G": 8, "peak_mem_gb": 26.0, "step_s": 9.0}]'
PLAN = "plan-group-size --profile {t}/p.json --pass-rates {w}/rates.jsonl --memory-budget 40"


def _meta(w: Path, **changes) -> str:
    meta = json.loads((w / "ds" / "meta.json").read_text())
    meta.update(changes)
    return json.dumps({k: v for k, v in meta.items() if v is not None}, indent=2)


SIDECARS = [
    Side("stats-json-not-json", ("{t}/ds/stats.json, row 2: not valid JSON",), {"ds/stats.json": '{"requests": 6,\n "prep": }'},
         argv="stats {t}/ds", copy={"ds": "ds"}),
    Side("stats-json-prep-a-list", ("{t}/ds/stats.json, field 'prep': expected an object or null, got a list",),
         {"ds/stats.json": '{"requests": 6, "prep": [1]}'}, argv="stats {t}/ds", copy={"ds": "ds"}),
    Side("stats-json-skipped-text", ("stats.json, field 'prep.skipped': expected an object or null, got a string",),
         {"ds/stats.json": '{"requests": 6, "prep": {"skipped": "none"}}'}, argv="stats {t}/ds", copy={"ds": "ds"}),
    Side("meta-json-no-domain", ("{t}/ds/meta.json, field 'domain': missing",), {"ds/meta.json": "{meta:domain=null}"},
         argv="stats {t}/ds", copy={"ds": "ds"}),
    Side("meta-json-has-years-text", ("meta.json, field 'has_years': expected true or false, got a string",),
         {"ds/meta.json": '{meta:has_years="yes"}'}, argv="stats {t}/ds", copy={"ds": "ds"}),
    Side("meta-json-unknown-domain", ("meta.json, field 'domain': unknown domain 'films'",),
         {"ds/meta.json": '{meta:domain="films"}'}, argv="diagnose {t}/ds --policy popularity", copy={"ds": "ds"}),
    Side("meta-json-grounding-text", ("meta.json, field 'grounding': expected an object, got a string",),
         {"ds/meta.json": '{meta:grounding="fuzzy"}'}, argv="eval score --data {t}/ds --predictions {w}/preds.jsonl",
         copy={"ds": "ds"}),
    Side("metrics-json-not-json", ("{t}/a/metrics.json, row 1: not valid JSON",), {"a/metrics.json": "{"},
         argv="eval compare {t}/a {w}/scored", copy={"a": "scored"}),
    Side("metrics-json-settings-a-list", ("a/metrics.json, field 'settings': expected an object, got a list",),
         {"a/metrics.json": '{"n_requests": 2, "settings": []}'}, argv="eval compare {t}/a {w}/scored", copy={"a": "scored"}),
    Side("metrics-json-no-n-requests", ("{t}/test/metrics.json, field 'n_requests': missing",),
         {"best/card.json": CARD, "test/metrics.json": '{"settings": {}}'}, argv="card {t}/best --test {t}/test"),
    Side("marker-not-json", ("{t}/a/.remark-output.json, row 1: not valid JSON",), {"a/.remark-output.json": "{"},
         argv="eval compare {t}/a {w}/scored", copy={"a": "scored"}),
    Side("marker-kind-a-number", (".remark-output.json, field 'kind': expected a string, got an integer (3)",),
         {"a/.remark-output.json": '{"kind": 3}'}, argv="eval compare {t}/a {w}/scored", copy={"a": "scored"}),
    Side("marker-damaged-under-out", ("{t}/o, field '--out': refusing to replace a folder that remark did not write: its "
                                      ".remark-output.json is damaged (row 1: not valid JSON",),
         {"o/.remark-output.json": "{", "o/metrics.json": "{}"},
         argv="eval score --data {w}/ds --predictions {w}/preds.jsonl --out {t}/o"),
    Side("eval-log-step-text", ("{t}/r/eval_log.jsonl, row 1, field 'step': expected an integer, got a string",),
         {"r/eval_log.jsonl": '{"step": "10"}\n'}, argv="eval steps --run {t}/r --baseline {w}/run"),
    Side("eval-log-metric-text", ("eval_log.jsonl, row 2, field 'eval/recall@20/union': expected a number, got 'high'",),
         {"r/eval_log.jsonl": '{"step": 0}\n{"step": 10, "eval/recall@20/union": "high"}\n'},
         argv="eval steps --run {t}/r --baseline {w}/run"),
    Side("eval-log-wall-text", ("eval_log.jsonl, row 1, field 'wall_s': expected a number or null, got a string",),
         {"r/eval_log.jsonl": '{"step": 0, "wall_s": "fast"}\n'}, argv="eval curves {t}/r --out {t}/c.png"),
    Side("profile-points-an-object", ("{t}/p.json, field 'points': expected a list, got an object",),
         {"p.json": '{"points": {}}'}, argv=PLAN),
    Side("profile-device-a-number", ("p.json, field 'device': expected a string or null, got an integer (5)",),
         {"p.json": '{"device": 5, "points": ' + POINTS + "}"}, argv=PLAN),
    Side("card-json-no-kind", ("{t}/best/card.json, field 'kind': missing",),
         {"best/card.json": '{"step": 2, "total_steps": 4}'}, argv="card {t}/best --test {w}/scored"),
    Side("card-json-not-json", ("{t}/best/card.json, row 1: not valid JSON",), {"best/card.json": "{"},
         argv="card {t}/best --test {w}/scored"),
    Side("train-summary-used-a-list", ("{t}/run/train_summary.json, field 'grounding.used': expected an object, got a list",),
         {**RUN_MODEL, "run/train_summary.json": '{"grounding": {"used": []}}'}, argv=EVAL_RUN),
    Side("remark-config-not-json", ("{t}/run/remark_config.json, row 1: not valid JSON",),
         {**RUN_MODEL, "run/remark_config.json": "{"}, argv=EVAL_RUN),
    Side("model-config-not-json", ("{t}/run/best/config.json, row 1: not valid JSON",),
         {**RUN_MODEL, "run/best/config.json": "{"}, argv=EVAL_RUN),
    Side("model-weights-header", ("{t}/run/best/model.safetensors: the safetensors header of model.safetensors claims",),
         {**RUN_MODEL, "run/best/model.safetensors": "\xff" * 12}, argv=EVAL_RUN),
    Side("train-model-config-not-json", ("run.yaml, row 3, field 'model_name_or_path': {t}/m/config.json", "not valid JSON"),
         {**MODEL, "m/config.json": '{"model_type": }', "run.yaml": "{config}"}, argv="train --config {t}/run.yaml"),
    Side("group-size-advice-text", ("group_size_recommendation.json, field 'recommended_G': expected an integer, got a string",),
         {"ck/group_size_recommendation.json": '{"recommended_G": "8"}'}, call=_recommendation),
    Side("best-json-no-value", ("{t}/best/best.json, field 'value': missing",),
         {"best/best.json": '{"step": 2, "metric": "eval/recall@20/union"}'}, call=_best),
    Side("adapter-config-base-a-number", ("adapter_config.json, field 'base_model_name_or_path': expected a string or null",),
         {"a/adapter_config.json": '{"base_model_name_or_path": 5}'}, call=_adapter_base),
]  # fmt: skip


@pytest.mark.parametrize("case", SIDECARS, ids=[c.id for c in SIDECARS])
def test_a_damaged_sidecar_is_one_line_naming_the_file_and_field(case, world, tmp_path):
    t = tmp_path
    for dest, src in case.copy.items():
        shutil.copytree(world / src, t / dest)
    for name, text in case.files.items():
        path = t / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if text == "{config}":
            text = config_text(world, model_name_or_path=str(t / "m"), output_dir=str(t / "run_out"))
        elif text.startswith("{meta:"):
            key, value = text[len("{meta:") : -1].split("=", 1)
            text = _meta(world, **{key: json.loads(value)})
        path.write_bytes(text.encode("latin-1") if "\xff" in text else text.encode())
    code, _, err = _run(case, world, t)
    assert "Traceback" not in err and code == 2, f"exit {code}\n{err[-3000:]}"
    line = err.strip().splitlines()
    assert len(line) == 1, err
    for fragment in case.expect:
        assert fragment.replace("{t}", str(t)) in line[0], line[0]


def test_ground_reads_stdin_like_a_file(world):
    """``remark ground`` without a file reads stdin through the same path: BOM and CRLF as clean text."""
    argv = ["ground", "--catalog", str(world / "cat.csv")]
    clean = b"Moon (2009)\nPrimer (2004)\n"
    code, want, err = run_cli(argv, stdin=clean)
    assert code == 0, err
    for variant in VARIANTS.values():
        assert run_cli(argv, stdin=variant(clean))[:2] == (0, want)
    code, _, err = run_cli(argv, stdin=clean.replace(b"Primer", b"Prim\xe9r"))
    assert code == 2 and err.strip().endswith("<stdin>, row 2: not UTF-8 text: byte 0xe9 at column 5 is not valid UTF-8 "
                                              "(invalid continuation byte) (save it as UTF-8, e.g. with iconv -f latin1 -t utf-8)")  # fmt: skip
