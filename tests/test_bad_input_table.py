"""Every user error is one clear line with exit code 2, naming the place, and never a traceback.

A table of real bad inputs a user can produce, across ``prep``, ``ground``, ``eval score|run|compare|
steps|curves``, ``diagnose``, ``curve``, ``plan-group-size``, ``sft``, ``stats``, ``train`` config files
and ``--set`` (a setting where it has no effect, a number out of its range, a YAML alias bomb). Each case runs the CLI in-process (``remark.cli.main.main(argv)``, stdout and stderr
captured) and asserts: exit status 2, no traceback, the ``remark CMD: error:`` line, and every fragment
that names the place (file, row, field) and the problem. A handful run again through real subprocesses
(``python -m remark.cli.main``) to prove the console boundary itself; the last tests pin what the boundary
does with a bug (exit 1, the traceback, an "internal error" line) and with Ctrl-C.

Placeholders in a case's argv: ``{w}`` is the shared world (a catalog, a threads file, a prepared
dataset, predictions, two scored eval dirs, a training run's eval log, a cost profile, pass rates, a
model directory, a valid train config), ``{t}`` the case's own folder holding its ``files``.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from remark.cli.main import main

REPO = Path(__file__).resolve().parents[1]

CATALOG = "title,year\nMoon,2009\nArrival,2016\nPrimer,2004\nContact,1997\nSolaris,1972\nGattaca,1997\n"
TITLES = [("Moon", 2009), ("Arrival", 2016), ("Primer", 2004), ("Contact", 1997), ("Solaris", 1972)]


def thread(rid, responder, title, year, split, **extra):
    row = {"request_id": rid, "prompt": f"films like {rid}?", "responder_id": responder}
    return row | {"title": title, "year": year, "split": split} | extra


THREADS = [
    thread(f"q{i}", r, *TITLES[(i + j) % len(TITLES)], split)
    for i, split in enumerate(["train", "train", "valid", "valid", "test", "test"])
    for j, r in enumerate(["a", "b"])
]
#: a valid train config; each config case changes one thing
BASE_CONFIG = {
    "output_dir": "{w}/run_out",
    "data_dir": "{w}/ds",
    "model_name_or_path": "{w}/model",
    "reward_scheme": "union",
    "advantage_scaling": "group",
    "scale_rewards": "group",
    "num_ranks": 3,
    "loss_type": "bnpo",
    "num_generations": 4,
    "per_device_train_batch_size": 8,
    "learning_rate": 1.0e-4,
    "max_completion_length": 32,
    "max_steps": 1,
    "use_cpu": True,
    "report_to": "none",
}


#: a safetensors file holding no tensor (an 8-byte header length, then the header ``{}``)
NO_TENSORS = (2).to_bytes(8, "little") + b"{}"


def jsonl(rows) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


def config_text(w: Path, **changes) -> str:
    """The base config as YAML lines (one key per line, in order), with ``changes`` (None deletes)."""
    values = {**BASE_CONFIG, **changes}
    lines = []
    for key, value in values.items():
        if value is None:
            continue
        text = value.replace("{w}", str(w)) if isinstance(value, str) else json.dumps(value)
        lines.append(f"{key}: {text}")
    return "\n".join(lines) + "\n"


def run_cli(argv: list[str], stdin: bytes | None = None, monkeypatch=None) -> tuple[int, str, str]:
    """``main(argv)`` in-process with stdout/stderr (and optionally stdin bytes) captured."""
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdout, sys.stderr, sys.stdin
    sys.stdout, sys.stderr = out, err
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        code = main(argv)
    finally:
        sys.stdout, sys.stderr, sys.stdin = old
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    w = tmp_path_factory.mktemp("world")
    (w / "cat.csv").write_text(CATALOG)
    (w / "threads.jsonl").write_text(jsonl(THREADS))
    code, _, err = run_cli(["prep", "threads", "--input", str(w / "threads.jsonl"), "--catalog", str(w / "cat.csv"),
                            "--out", str(w / "ds")])  # fmt: skip
    assert code == 0, err
    preds = [{"request_id": r, "recommendations": ["Moon (2009)", "Primer (2004)"]} for r in ("q4", "q5")]
    (w / "preds.jsonl").write_text(jsonl(preds))
    for name, flag in (("scored", "--compact"), ("scored_nocompact", "--no-compact")):
        argv = ["eval", "score", "--data", str(w / "ds"), "--predictions", str(w / "preds.jsonl"),
                "--resamples", "200", flag, "--out", str(w / name)]  # fmt: skip
        code, _, err = run_cli(argv)
        assert code == 0, err
    # a training run's eval log (3 validations) for eval steps/curves and curve fit
    (w / "run").mkdir()
    log = [{"step": s, "samples": 8 * s, "eval/recall@20/union": v, "eval/recall@20/per_responder": v / 2}
           for s, v in ((0, 0.1), (10, 0.2), (20, 0.3))]  # fmt: skip
    (w / "run" / "eval_log.jsonl").write_text(jsonl(log))
    # a model directory as save_pretrained leaves it (the config cases fail before anything loads it)
    (w / "model").mkdir()
    (w / "model" / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    (w / "model" / "tokenizer.json").write_text("{}")
    (w / "model" / "model.safetensors").write_bytes(NO_TENSORS)
    (w / "notmodel").mkdir()
    (w / "notmodel" / "weights.txt").write_text("not a model")
    (w / "base.yaml").write_text(config_text(w))
    points = [{"G": g, "peak_mem_gb": 10.0 + 2 * g, "step_s": 1.0 + g} for g in (4, 8)]
    (w / "profile.json").write_text(json.dumps({"points": points}))
    (w / "rates.jsonl").write_text(jsonl([{"request_id": f"q{i}", "pass_rate": 0.2 * i} for i in range(5)]))
    return w


@dataclass(frozen=True)
class Case:
    """``argv`` (a shell-quoted string with ``{w}`` / ``{t}``), the files written to ``{t}`` first, and
    the fragments the error line must contain (the place and the problem)."""

    id: str
    argv: str
    expect: tuple[str, ...]
    files: dict[str, str | bytes] = field(default_factory=dict)
    stdin: bytes | None = None


#: the first question of the shipped ProtoQA scraped dev file: too few for the demo
ONE_PROTOQA_QUESTION = (REPO / "data_prep/shipped/protoqa/dev.scraped.jsonl").read_text().splitlines()[
    0
] + "\n"
#: a model folder whose weights are a pickle only, and an adapter likewise (never read: refused)
PICKLE_MODEL = {
    "m/config.json": '{"model_type": "qwen2"}',
    "m/tokenizer.json": "{}",
    "m/pytorch_model.bin": "pickle",
}
PICKLE_ADAPTER = {
    "a/adapter_config.json": '{"peft_type": "LORA", "base_model_name_or_path": "../m"}',
    "a/adapter_model.bin": "pickle",
    "m/config.json": '{"model_type": "qwen2"}',
    "m/model.safetensors": NO_TENSORS,
}
#: a LoRA adapter whose base was recorded relative to the folder it was trained from
ADAPTER = {
    "a/adapter_config.json": '{"peft_type": "LORA", "base_model_name_or_path": "demo_fast/base_model"}',
    "a/adapter_model.safetensors": NO_TENSORS,
}


def C(id, argv, *expect, files=None, stdin=None) -> Case:
    return Case(id, argv, tuple(expect), files or {}, stdin)


PREP = "prep threads --catalog {w}/cat.csv --out {t}/out --input"
PREP_OK = "prep threads --input {w}/threads.jsonl --catalog {w}/cat.csv --out {t}/out"
GOOD = thread("q1", "a", "Moon", 2009, "train")
PQ = {"metadata": {"id": "q1"}, "question": {"normalized": "name a fruit"}}
SCORE = "eval score --data {w}/ds --predictions"
TRAIN = "train --config {w}/base.yaml --set"
#: nine levels of nine aliases: a few hundred bytes standing for 9**9 strings
BOMB = (
    "a0: &a0 [x, x, x, x, x, x, x, x, x]\n"
    + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10))
    + "lora_target_modules: *a9\n"
)
BOMB_SET = "&a [x, x, x, x, x, x, x, x, x, x], " + ", ".join(
    ["&b [" + ", ".join(["*a"] * 10) + "]"] + ["*b"] * 2000
)

CASES = [
    # --- prep: silent cases are errors ---------------------------------------------------------
    C("prep-empty-file", f"{PREP} {{t}}/in.jsonl", "in.jsonl: no rows", files={"in.jsonl": ""}),
    C("prep-csv-header-only", f"{PREP} {{t}}/in.csv", "in.csv: no rows",
      files={"in.csv": "request_id,prompt,responder_id,title,year\n"}),
    C("prep-every-row-skipped", f"{PREP} {{t}}/in.jsonl --skip-bad-rows", "in.jsonl: every row was bad",
      "2 row(s) skipped (bad_year 2)", "row 1, field 'year'",
      files={"in.jsonl": jsonl([GOOD | {"year": "n/a"}, GOOD | {"responder_id": "b", "year": "soon"}])}),
    C("prep-title-is-a-list", f"{PREP} {{t}}/in.jsonl", "in.jsonl, row 2, field 'title'", "is a JSON list",
      files={"in.jsonl": jsonl([GOOD, GOOD | {"responder_id": "b", "title": ["Moon"]}])}),
    C("prep-seen-is-a-number", f"{PREP} {{t}}/in.jsonl", "in.jsonl, row 1, field 'seen'", "is a JSON number",
      files={"in.jsonl": jsonl([GOOD | {"seen": 5}])}),
    C("prep-split-is-a-list", f"{PREP} {{t}}/in.jsonl", "in.jsonl, row 1, field 'split'", "is a JSON list",
      files={"in.jsonl": jsonl([GOOD | {"split": ["train"]}])}),
    C("prep-garbage-year", f"{PREP} {{t}}/in.jsonl", "in.jsonl, row 2, field 'year'", "'19x9' is not a year",
      files={"in.jsonl": jsonl([GOOD, GOOD | {"responder_id": "b", "year": "19x9"}])}),
    C("prep-malformed-json", f"{PREP} {{t}}/in.jsonl", "in.jsonl, row 2", "not valid JSON",
      files={"in.jsonl": jsonl([GOOD, '{"request_id": "q2",'])}),
    C("prep-jsonl-not-utf8", f"{PREP} {{t}}/in.jsonl", "in.jsonl, row 1", "not UTF-8", "0xe9",
      files={"in.jsonl": b'{"request_id": "q1", "prompt": "p", "responder_id": "a", "title": "Am\xe9lie"}\n'}),
    C("prep-csv-not-utf8", f"{PREP} {{t}}/in.csv", "in.csv, row 3", "not UTF-8",
      files={"in.csv": b"request_id,prompt,responder_id,title,year\nq1,p,a,Moon,2009\nq2,p,a,Am\xe9lie,2001\n"}),
    C("prep-missing-column", f"{PREP} {{t}}/in.csv", "in.csv, field 'title'", "missing column",
      files={"in.csv": "request_id,prompt,responder_id,name\nq1,p,a,Moon\n"}),
    C("prep-unknown-split", f"{PREP} {{t}}/in.jsonl", "in.jsonl, row 1, field 'split'", "unknown split 'holdout'",
      files={"in.jsonl": jsonl([GOOD | {"split": "holdout"}])}),
    C("prep-duplicate-rows", f"{PREP} {{t}}/in.jsonl", "in.jsonl, row 2, field 'responder_id'", "duplicate row",
      files={"in.jsonl": jsonl([GOOD, GOOD])}),
    C("prep-bad-prompt", f"{PREP} {{t}}/in.jsonl", "in.jsonl, row 1, field 'prompt'", "message 1 needs a role",
      files={"in.jsonl": jsonl([GOOD | {"prompt": [{"role": "robot", "content": "hi"}]}])}),
    C("prep-unknown-extension", f"{PREP} {{t}}/in.txt", "in.txt", "cannot tell the table format", files={"in.txt": "x"}),
    C("prep-input-not-found", f"{PREP} {{t}}/absent.jsonl", "absent.jsonl: file not found"),
    C("prep-no-catalog", "prep threads --input {w}/threads.jsonl --out {t}/out", "field '--catalog'", "defines no catalog"),
    C("prep-catalog-not-found", "prep threads --input {w}/threads.jsonl --catalog {t}/absent.csv --out {t}/out",
      "absent.csv", "not found"),
    C("prep-catalog-not-utf8", "prep threads --input {w}/threads.jsonl --catalog {t}/cat.csv --out {t}/out",
      "cat.csv, row 2", "not UTF-8", files={"cat.csv": b"title,year\nAm\xe9lie,2001\n"}),
    C("prep-split-fractions", "prep threads --input {w}/threads.jsonl --catalog {w}/cat.csv --out {t}/out "
      "--split-fractions train=0.9,test=0.3", "field '--split-fractions'", "sum to 1"),
    C("prep-n-requests-0", "prep synthetic --out {t}/out --n-requests 0", "argument --n-requests", "'0'"),
    C("prep-n-items-5", "prep synthetic --out {t}/out --n-items 5", "argument --n-items", "must be >= 20"),
    C("prep-seed-negative", "prep synthetic --out {t}/out --seed -1", "argument --seed", "'-1' is out of range"),
    C("prep-split-fractions-nan", f"{PREP_OK} --split-fractions train=nan,valid=0.5,test=0.5",
      "field '--split-fractions'", "--split-fractions=nan must be >= 0 and <= 1"),
    C("prep-split-fractions-above-1", f"{PREP_OK} --split-fractions train=1.5,test=-0.5",
      "field '--split-fractions'", "--split-fractions=1.5 must be >= 0 and <= 1"),
    C("prep-split-fractions-unknown-split", f"{PREP_OK} --split-fractions train=0.5,holdout=0.5",
      "field '--split-fractions'", "unknown split 'holdout'"),
    C("prep-split-fractions-twice", f"{PREP_OK} --split-fractions train=0.5,training=0.5",
      "field '--split-fractions'", "split 'train' is given twice"),
    C("prep-synthetic-split-fractions-sum", "prep synthetic --out {t}/out --split-fractions train=0.5",
      "field '--split-fractions'", "add up to 0.5: they must sum to 1"),
    C("prep-split-seed-on-synthetic", "prep synthetic --out {t}/out --split-seed 3", "field '--split-seed'",
      "has no effect on the synthetic source"),
    C("prep-n-items-on-threads", f"{PREP_OK} --n-items 50", "field '--n-items'", "has no effect on source 'threads'"),
    C("prep-items-on-threads", f"{PREP_OK} --items clusters", "field '--items'", "picks ProtoQA's answer items"),
    C("prep-split-fractions-with-split-by-time", f"{PREP_OK} --split-by-time reddit-v2 --split-fractions train=1",
      "field '--split-fractions'", "with --split-by-time"),
    C("prep-split-fractions-every-input-split", "prep threads --input train={w}/threads.jsonl --catalog {w}/cat.csv "
      "--out {t}/out --split-seed 4", "field '--split-seed'", "every --input names its split"),
    C("prep-protoqa-raw-is-a-list", "prep protoqa --out {t}/out --input {t}/pq.jsonl",
      "pq.jsonl, row 1, field 'answers.raw'", "found a list",
      files={"pq.jsonl": jsonl([PQ | {"answers": {"raw": ["apple", "pear"]}}])}),
    C("prep-protoqa-bad-count", "prep protoqa --out {t}/out --input {t}/pq.jsonl",
      "pq.jsonl, row 2, field 'answers.raw'", "count of answer 'pear' is 'lots'",
      files={"pq.jsonl": jsonl([PQ | {"answers": {"raw": {"apple": 3}}},
                               {**PQ, "metadata": {"id": "q2"}, "answers": {"raw": {"pear": "lots"}}}])}),
    C("prep-protoqa-question-is-text", "prep protoqa --out {t}/out --input {t}/pq.jsonl",
      "pq.jsonl, row 1, field 'question'", "found a string",
      files={"pq.jsonl": jsonl([PQ | {"question": "name a fruit", "answers": {"raw": {"apple": 3}}}])}),
    C("prep-protoqa-test-file", "prep protoqa --out {t}/out --input {t}/pq.jsonl",
      "pq.jsonl, row 1, field 'answers'", "no answers", files={"pq.jsonl": jsonl([PQ])}),
    C("prep-reddit-groundtruth-not-pairs", "prep reddit --catalog {w}/cat.csv --out {t}/out --input {t}/r.jsonl",
      "r.jsonl, row 1, field 'groundtruth_with_release_year'", "is not a [title, year] pair",
      files={"r.jsonl": jsonl([{"prompt": [{"role": "user", "content": "hi"}],
                                "groundtruth_with_release_year": [["Moon"]]}])}),
    C("prep-reddit-groundtruth-is-text", "prep reddit --catalog {w}/cat.csv --out {t}/out --input {t}/r.jsonl",
      "r.jsonl, row 1, field 'groundtruth_with_release_year'", "is a JSON string, expected a list",
      files={"r.jsonl": jsonl([{"prompt": "hi", "groundtruth_with_release_year": "Moon (2009)"}])}),
    C("prep-redial-no-id", "prep redial --out {t}/out --input {t}/c.jsonl", "c.jsonl, row 1, field 'conversationId'",
      "missing field", files={"c.jsonl": jsonl([{"messages": []}])}),
    # --- ground ----------------------------------------------------------------------------------
    C("ground-file-not-utf8", "ground --catalog {w}/cat.csv {t}/titles.txt", "titles.txt, row 2", "not UTF-8",
      "byte 0xff", files={"titles.txt": b"Moon (2009)\n\xff\xfeArrival\n"}),
    C("ground-stdin-not-utf8", "ground --catalog {w}/cat.csv", "<stdin>, row 1", "not UTF-8", stdin=b"Am\xe9lie\n"),
    C("ground-lists-not-json", "ground --catalog {w}/cat.csv --lists {t}/c.jsonl", "c.jsonl, row 2", "not JSON",
      files={"c.jsonl": '"1. Moon (2009)"\n{oops\n'}),
    C("ground-lists-not-text", "ground --catalog {w}/cat.csv --lists {t}/c.jsonl", "c.jsonl, row 1, field 'completion'",
      files={"c.jsonl": jsonl([{"completion": ["Moon"]}])}),
    C("ground-empty-catalog", "ground --catalog {t}/cat.csv {w}/threads.jsonl", "cat.csv", "the catalog has no items",
      files={"cat.csv": "title,year\n"}),
    C("ground-input-is-a-folder", "ground --catalog {w}/cat.csv {w}", "is a directory"),
    C("ground-catalog-not-found", "ground --catalog {t}/absent.csv {w}/threads.jsonl", "absent.csv", "not found"),
    C("ground-year-tolerance", "ground --catalog {w}/cat.csv --year-tolerance -1 {w}/threads.jsonl",
      "tolerance", "-1"),
    C("ground-scorer", "ground --catalog {w}/cat.csv --match-scorer nope {w}/threads.jsonl", "scorer", "'nope'"),
    # --- eval score / run / compare ----------------------------------------------------------------
    C("score-not-utf8", f"{SCORE} {{t}}/p.jsonl", "p.jsonl, row 2", "not UTF-8",
      files={"p.jsonl": b'{"request_id": "q4", "recommendations": ["Moon"]}\n{"request_id": "q5\xff"}\n'}),
    C("score-k-0", f"{SCORE} {{w}}/preds.jsonl --k 0", "argument --k", "'0' is out of range: must be >= 1 and <= 50"),
    C("score-k-above-50", f"{SCORE} {{w}}/preds.jsonl --k 5 100", "argument --k", "'100' is out of range"),
    C("score-k-not-a-number", f"{SCORE} {{w}}/preds.jsonl --k ten", "argument --k", "'ten' is not an integer"),
    C("score-seed-negative", f"{SCORE} {{w}}/preds.jsonl --seed -1", "argument --seed",
      "'-1' is out of range: must be >= 0 and <= 4294967295"),
    C("score-confidence-1", f"{SCORE} {{w}}/preds.jsonl --confidence 1", "argument --confidence",
      "'1' is out of range: must be > 0 and < 1"),
    C("score-recommendations-not-a-list", f"{SCORE} {{t}}/p.jsonl", "p.jsonl, row 1, field 'recommendations'",
      files={"p.jsonl": jsonl([{"request_id": "q4", "recommendations": "Moon (2009)"}])}),
    C("score-item-not-text", f"{SCORE} {{t}}/p.jsonl", "p.jsonl, row 1, field 'recommendations[1]'", "not a string",
      files={"p.jsonl": jsonl([{"request_id": "q4", "recommendations": ["Moon", 2009]}])}),
    C("score-request-twice", f"{SCORE} {{t}}/p.jsonl", "p.jsonl, row 2, field 'request_id'", "already has predictions",
      files={"p.jsonl": jsonl([{"request_id": "q4", "recommendations": []}] * 2)}),
    C("score-empty-predictions", f"{SCORE} {{t}}/p.jsonl", "p.jsonl", "no predictions", files={"p.jsonl": "\n"}),
    C("score-not-a-dataset", "eval score --data {w}/model --predictions {w}/preds.jsonl", "model",
      "requests.parquet is missing"),
    C("score-resamples-0", f"{SCORE} {{w}}/preds.jsonl --resamples 0", "resamples", "must be >= 1"),
    C("score-unknown-split", f"{SCORE} {{w}}/preds.jsonl --split holdout", "field 'split'", "'holdout'"),
    C("run-not-a-model", "eval run --model {w}/notmodel --data {w}/ds --out {t}/out", "notmodel",
      "not a model directory"),
    C("run-temperature-0", "eval run --model {w}/model --data {w}/ds --out {t}/out --num-samples 2 --temperature 0",
      "argument --temperature", "'0'"),
    C("run-top-p", "eval run --model {w}/model --data {w}/ds --out {t}/out --top-p 1.5", "argument --top-p", "'1.5'"),
    C("run-temperature-without-samples", "eval run --model {w}/model --data {w}/ds --out {t}/out --temperature 0.7",
      "field '--temperature'", "has no effect without --num-samples"),
    C("run-gen-seed-negative", "eval run --model {w}/model --data {w}/ds --out {t}/out --gen-seed -2",
      "argument --gen-seed", "'-2' is out of range"),
    C("run-no-tokenizer-files", "eval run --model {t}/m --data {w}/ds --out {t}/out",
      "m: the model folder has no tokenizer files", "tokenizer.save_pretrained",
      files={"m/config.json": '{"model_type": "qwen2"}', "m/model.safetensors": NO_TENSORS}),
    C("run-pickle-weights-only", "eval run --model {t}/m --data {w}/ds --out {t}/out",
      "m: no *.safetensors weights (only pytorch_model.bin: pickle, which remark never reads)", files=PICKLE_MODEL),
    C("run-adapter-pickle-only", "eval run --model {t}/a --data {w}/ds --out {t}/out",
      "a: no adapter_model.safetensors (only adapter_model.bin", files=PICKLE_ADAPTER),
    C("run-adapter-base-relative-elsewhere", "eval run --model {t}/a --data {w}/ds --out {t}/out",
      "a/adapter_config.json, field 'base_model_name_or_path'",
      "'demo_fast/base_model' is not a model folder relative to", "nor a model in the local hub cache", "--base-model",
      files={**ADAPTER, "demo_fast/base_model/config.json": '{"model_type": "qwen2"}'}),
    C("compare-not-scored", "eval compare {w}/ds {w}/scored", "ds: no per_request.parquet"),
    C("compare-needs-data", "eval compare {w}/preds.jsonl {w}/scored", "preds.jsonl, field '--data'"),
    C("compare-k-0", "eval compare {w}/scored {w}/scored --k 0", "argument --k", "'0'"),
    C("compare-scored-differently", "eval compare {w}/scored {w}/scored_nocompact", "field 'compact'",
      "different compact"),
    C("compare-three-runs-without-vs", "eval compare {w}/scored {w}/scored {w}/scored", "field 'A B'",
      "3 runs given without --vs"),
    C("compare-seed-counts", "eval compare {w}/scored {w}/scored_nocompact {w}/ds --vs {w}/scored {w}/ds",
      "field '--vs'", "3 runs of A and 2 of B"),
    C("compare-run-twice", "eval compare {w}/scored {w}/scored --vs {w}/ds", "scored: listed twice"),
    C("compare-seeds-scored-differently", "eval compare {w}/scored {w}/scored_nocompact --vs {w}/scored",
      "field 'compact'", "A1 and A2 were scored with different compact"),
    C("baselines-unknown-split", "eval baselines --data {w}/ds --split holdout", "field '--split'", "'holdout'"),
    C("baselines-not-a-dataset", "eval baselines --data {w}/model", "model", "requests.parquet is missing"),
    # --- eval steps / curves / ProtoQA helpers ------------------------------------------------------
    C("steps-no-eval-log", "eval steps --run {w}/ds --baseline {w}/run", "ds/eval_log.jsonl",
      "is this a training run folder?"),
    C("steps-log-line-without-step", "eval steps --run {t}/r --baseline {w}/run", "eval_log.jsonl, row 2, field 'step'",
      files={"r/eval_log.jsonl": jsonl([{"step": 0}, {"eval/recall@20/per_responder": 0.1}])}),
    C("steps-log-not-json", "eval steps --run {t}/r --baseline {w}/run", "eval_log.jsonl, row 1", "not valid JSON",
      files={"r/eval_log.jsonl": "step: 0\n"}),
    C("steps-unknown-metric", "eval steps --run {w}/run --baseline {w}/run --metric eval/recall@99/union",
      "run, field '--metric'", "'eval/recall@99/union' is not logged", "logged: eval/recall@20/per_responder"),
    C("steps-not-a-validation-step", "eval steps --run {w}/run --baseline {w}/run --step 7", "eval_log.jsonl",
      "no validation at step 7"),
    C("curves-unknown-metric", "eval curves {w}/run --metric eval/mrr@5/union --out {t}/c.png",
      "run, field '--metric'", "'eval/mrr@5/union' is not logged", "logged: eval/recall@20/per_responder"),
    C("convert-protoqa-answers-not-a-list", "eval convert-protoqa {t}/p.jsonl --out {t}/out.jsonl",
      "p.jsonl, row 2, field 'q2'", "not a list", files={"p.jsonl": jsonl([{"q1": ["pear"]}, {"q2": "apple"}])}),
    C("protoqa-evaluator-not-protoqa", "eval protoqa-evaluator --targets {w}/threads.jsonl --predictions {w}/preds.jsonl",
      "threads.jsonl, row 1", "not a ProtoQA question line"),
    # --- diagnose --------------------------------------------------------------------------------------
    C("diagnose-batch-size-0", "diagnose {w}/ds --policy popularity --batch-size 0", "argument --batch-size", "'0'"),
    C("diagnose-group-size-1", "diagnose {w}/ds --policy popularity --group-size 1", "argument --group-size",
      "'1' is out of range: must be >= 2"),
    C("diagnose-seed-negative", "diagnose {w}/ds --policy popularity --seed -1", "argument --seed", "'-1'"),
    C("diagnose-seed-with-lists", "diagnose {w}/ds --group-size 2 --lists {t}/l.jsonl --seed 3", "field '--seed'",
      "--seed has no effect with --lists", files={"l.jsonl": jsonl([{"request_id": "q0", "lists": [[], []]}])}),
    C("diagnose-unknown-request", "diagnose {w}/ds --group-size 2 --lists {t}/l.jsonl",
      "l.jsonl, row 1, field 'request_id'", "unknown request_id 'q9'",
      files={"l.jsonl": jsonl([{"request_id": "q9", "lists": [["Moon (2009)"], []]}])}),
    C("diagnose-wrong-group-size", "diagnose {w}/ds --group-size 4 --lists {t}/l.jsonl",
      "l.jsonl, row 1, field 'lists'", "G = 4", files={"l.jsonl": jsonl([{"request_id": "q0", "lists": [[], []]}])}),
    C("diagnose-unknown-split", "diagnose {w}/ds --policy popularity --split holdout", "ds", "'holdout'"),
    C("diagnose-not-a-dataset", "diagnose {t} --policy popularity", "requests.parquet is missing"),
    # --- curve -------------------------------------------------------------------------------------------
    C("curve-fit-score-out-of-range", "curve fit {t}/log.jsonl", "log.jsonl, row 3, field 'eval/recall@20/union'",
      "outside [0, 1]", files={"log.jsonl": jsonl([{"step": s, "eval/recall@20/union": v}
                                                 for s, v in ((0, 0.1), (10, 0.2), (20, 35.0))])}),
    C("curve-fit-too-few-points", "curve fit {t}/log.jsonl", "log.jsonl", "at least 3 validations",
      files={"log.jsonl": jsonl([{"step": 0, "eval/recall@20/union": 0.1}])}),
    C("curve-fit-compute-not-increasing", "curve fit {t}/log.jsonl", "log.jsonl, row 3, field 'step'", "not increasing",
      files={"log.jsonl": jsonl([{"step": s, "eval/recall@20/union": 0.1} for s in (0, 10, 10)])}),
    C("curve-fit-missing-metric", "curve fit {w}/run --metric eval/ndcg@5/union", "eval_log.jsonl, row 1",
      "field 'eval/ndcg@5/union'", "metrics in this log"),
    C("curve-crossover-bad-curve", "curve crossover --curve 1,2,3 --curve 0,1,1,1", "field '--curve'",
      "'1,2,3' is not four numbers"),
    C("curve-predict-b-0", "curve predict --r0 0 --a 1 --b 0 --c-mid 1 --at 10", "argument --b",
      "'0' is out of range: must be > 0"),
    C("curve-fit-level-above-1", "curve fit {w}/run --level 1.5", "argument --level",
      "'1.5' is out of range: must be > 0 and < 1"),
    C("curve-crossover-b-0", "curve crossover --curve 0,1,0,1 --curve 0,1,1,1", "field '--curve'",
      "--b=0.0 must be > 0"),
    # --- plan-group-size ------------------------------------------------------------------------------
    C("plan-profile-not-json", "plan-group-size --profile {t}/p.json --pass-rates {w}/rates.jsonl --memory-budget 40",
      "p.json, row 2", "not valid JSON", files={"p.json": '{"points":\n [1, 2,]}'}),
    C("plan-profile-one-point", "plan-group-size --profile {t}/p.json --pass-rates {w}/rates.jsonl --memory-budget 40",
      "p.json", "at least 2 profile points",
      files={"p.json": json.dumps({"points": [{"G": 4, "peak_mem_gb": 18.0, "step_s": 7.0}]})}),
    C("plan-pass-rate-above-1", "plan-group-size --profile {w}/profile.json --pass-rates {t}/r.jsonl --memory-budget 40",
      "r.jsonl, row 2, field 'pass_rate'", "outside [0, 1]",
      files={"r.jsonl": jsonl([{"request_id": "a", "pass_rate": 0.5}, {"request_id": "b", "pass_rate": 50}])}),
    C("plan-candidates", "plan-group-size --profile {w}/profile.json --pass-rates {w}/rates.jsonl --memory-budget 40 "
      "--candidates 0,4", "field '--candidates'", "G >= 2"),
    C("plan-memory-budget", "plan-group-size --profile {w}/profile.json --pass-rates {w}/rates.jsonl --memory-budget -1",
      "argument --memory-budget", "'-1'"),
    # --- sft, stats, recipes -----------------------------------------------------------------------------
    C("sft-not-a-model", "sft --data {w}/ds --model {w}/notmodel --out {t}/out", "notmodel, field '--model'",
      "no config.json"),
    C("sft-pickle-weights-only", "sft --data {w}/ds --model {t}/m --out {t}/out", "m, field '--model'",
      "no *.safetensors weights (only pytorch_model.bin", files=PICKLE_MODEL),
    C("sft-lr", "sft --data {w}/ds --model {w}/model --out {t}/out --lr -1", "argument --lr", "'-1'"),
    C("sft-seed-negative", "sft --data {w}/ds --model {w}/model --out {t}/out --seed -1", "argument --seed", "'-1'"),
    C("sft-hit-prob-without-noisy", "sft --data {w}/ds --model {w}/model --out {t}/out --hit-prob 0.5",
      "field '--hit-prob'", "has no effect without --targets noisy"),
    C("sft-lora-alpha-without-lora-r", "sft --data {w}/ds --model {w}/model --out {t}/out --lora-alpha 8",
      "field '--lora-alpha'", "without --lora-r"),
    C("sft-epochs-with-max-steps", "sft --data {w}/ds --model {w}/model --out {t}/out --epochs 2 --max-steps 5",
      "field '--epochs'", "with --max-steps"),
    C("demo-seeds-negative", "demo --out {t}/out --seeds 0 -1", "argument --seeds", "'-1' is out of range"),
    # bad content found by a stage process: its InputError comes back as the same line, exit 2
    C("demo-data-dir-one-question", "demo --data protoqa --data-dir {t}/one.jsonl --out {t}/out", "one.jsonl",
      "only 1 questions with >= 5 answer clusters", files={"one.jsonl": ONE_PROTOQA_QUESTION}),
    C("steps-seed-negative", "eval steps --run {w}/run --baseline {w}/run --seed -1", "argument --seed", "'-1'"),
    C("ground-threshold-with-exact", "ground --catalog {w}/cat.csv --match-mode exact --match-threshold 80 {w}/titles",
      "field '--match-threshold'", "has no effect with --match-mode 'exact'"),
    C("stats-not-a-dataset", "stats {w}/model", "model", "requests.parquet is missing"),
    C("recipes-unknown", "recipes dapoo", "field 'recipe'", "did you mean 'dapo'?"),
]  # fmt: skip


def config_case(id, expect_row_field, *expect, drop=None, **changes) -> Case:
    """A train config file: the base config with ``changes`` (or without ``drop``)."""
    text = "{config:" + json.dumps({**changes, **({drop: None} if drop else {})}) + "}"
    return C(id, "train --config {t}/run.yaml", expect_row_field, *expect, files={"run.yaml": text})


CONFIG_CASES = [
    config_case("config-learning-rate-word", "run.yaml, row 11, field 'learning_rate'", "'fast' is not a number",
                learning_rate="fast"),
    config_case("config-temperature-0", "field 'temperature'", "temperature=0 must be > 0", temperature=0),
    config_case("config-advantage-eps-0", "run.yaml, row 16, field 'advantage_eps'", "NaN", advantage_eps=0),
    config_case("config-max-steps-0", "run.yaml, row 13, field 'max_steps'", "must be >= 1, or -1", max_steps=0),
    config_case("config-seed-negative", "field 'seed'", "seed=-1 must be >= 0", seed=-1),
    config_case("config-bool-word", "run.yaml, row 14, field 'use_cpu'", "'maybe' is not true or false",
                use_cpu="maybe"),
    config_case("config-int-fraction", "run.yaml, row 7, field 'num_ranks'", "2.5 is not an integer", num_ranks=2.5),
    config_case("config-beta-negative", "field 'beta'", "must be >= 0", beta=-0.1),
    config_case("config-cpu-threads-0", "field 'cpu_threads'", "must be >= 1", cpu_threads=0),
    config_case("config-num-generations-1", "run.yaml, row 9, field 'num_generations'", ">= 2", num_generations=1),
    config_case("config-batch-size-0", "field 'per_device_train_batch_size'", "must be >= 1",
                per_device_train_batch_size=0),
    config_case("config-unknown-scheduler", "field 'lr_scheduler_type'", "'nope' is not one of", lr_scheduler_type="nope"),
    config_case("config-unknown-report-to", "field 'report_to'", "unknown report_to integration 'tensorbord'",
                report_to="tensorbord"),
    config_case("config-typo-field", "run.yaml, field 'learning_rte'", "did you mean 'learning_rate'?",
                learning_rte=1e-4),
    config_case("config-no-loss-type", "run.yaml, field 'loss_type'", "must be set explicitly", drop="loss_type"),
    config_case("config-model-missing", "run.yaml, row 3, field 'model_name_or_path'", "model directory not found",
                model_name_or_path="{w}/models/absent/"),
    config_case("config-model-not-a-model", "run.yaml, row 3, field 'model_name_or_path'", "no config.json",
                model_name_or_path="{w}/notmodel"),
    config_case("config-model-hub-offline", "field 'model_name_or_path'", "HF_HUB_OFFLINE=1",
                model_name_or_path="nobody/no-such-model-xyz"),
    config_case("config-data-not-a-dataset", "run.yaml, row 2, field 'data_dir'", "no requests.parquet",
                data_dir="{w}/model"),
    config_case("config-train-split-missing", "field 'train_split'", "no requests in split 'training'",
                train_split="training"),
    config_case("config-trust-remote-code", "run.yaml, row 16, field 'trust_remote_code'",
                "trust_remote_code=True is refused", "never runs code from a model folder", trust_remote_code=True),
    config_case("config-init-kwargs-trust-remote-code", "run.yaml, row 16, field 'model_init_kwargs'",
                "'trust_remote_code' refused", "never runs code from a model folder",
                model_init_kwargs={"dtype": "float32", "trust_remote_code": True}),
    config_case("config-init-kwargs-foreign-key", "field 'model_init_kwargs'", "'code_revision' refused",
                "may hold only dtype, attn_implementation, device_map", model_init_kwargs={"code_revision": "main"}),
    C("set-trust-remote-code", f"{TRAIN} trust_remote_code=true", "--set, field 'trust_remote_code'", "is refused"),
    C("set-model-pickle-only", f"{TRAIN} model_name_or_path={{t}}/m", "--set, field 'model_name_or_path'",
      "no *.safetensors weights (only pytorch_model.bin", files=PICKLE_MODEL),
    C("config-not-yaml", "train --config {t}/run.yaml", "run.yaml, row 2", "not valid YAML",
      files={"run.yaml": "output_dir: x\n\tlearning_rate: 1.0e-4\n"}),
    C("config-not-a-mapping", "train --config {t}/run.yaml", "run.yaml", "expected a mapping",
      files={"run.yaml": "- learning_rate: 1\n"}),
    C("config-not-utf8", "train --config {t}/run.yaml", "run.yaml, row 1", "not UTF-8",
      files={"run.yaml": b"output_dir: caf\xe9\n"}),
    C("config-not-found", "train --config {t}/absent.yaml", "absent.yaml", "config file not found"),
    # --- --set (the same checks, naming --set as the value's origin) ------------------------------------
    C("set-learning-rate-word", f"{TRAIN} learning_rate=fast", "--set, field 'learning_rate'", "'fast' is not a number"),
    C("set-temperature-0", f"{TRAIN} temperature=0", "--set, field 'temperature'", "must be > 0"),
    C("set-advantage-eps-0", f"{TRAIN} advantage_eps=0", "--set, field 'advantage_eps'", "NaN"),
    C("set-top-p", f"{TRAIN} top_p=0", "--set, field 'top_p'", "must be > 0 and <= 1"),
    C("set-num-iterations-0", f"{TRAIN} num_iterations=0", "--set, field 'num_iterations'", "must be >= 1"),
    C("set-int-word", f"{TRAIN} num_ranks=five", "--set, field 'num_ranks'", "'five' is not an integer"),
    C("set-list-for-number", f"{TRAIN} learning_rate=[1]", "--set, field 'learning_rate'", "[1] is not a number"),
    C("set-match-threshold", f"{TRAIN} match_threshold=500", "--set, field 'match_threshold'", "[0, 100]"),
    C("set-match-mode-typo", f"{TRAIN} match_mode=fuzy", "--set, field 'match_mode'", "did you mean 'fuzzy'?"),
    C("set-published-slots-union", f"{TRAIN} segmentation=newlines", "field 'reward_scheme'",
      "reward_scheme 'union' is not defined on segmentation 'newlines'", "reward_scheme: responder"),
    C("set-no-equals", f"{TRAIN} max_steps", "field '--set'", "cannot read override 'max_steps'"),
    C("set-unknown-field", f"{TRAIN} learning_rte=1", "--set, field 'learning_rte'", "unknown config field"),
    C("set-model-missing", f"{TRAIN} model_name_or_path={{t}}/absent", "--set, field 'model_name_or_path'",
      "absent: model directory not found"),
    C("set-data-missing", f"{TRAIN} data_dir={{t}}/absent", "--set, field 'data_dir'", "directory not found"),
    C(
        "set-validation-metric-never-logged",
        f"{TRAIN} validation_steps=1 validation_metric=eval/mrr@3/union",
        "--set, field 'validation_metric'",
        "would never be logged",
    ),
    C(
        "set-valid-split-missing",
        f"{TRAIN} validation_steps=1 validation_metric=eval/recall@3/union valid_split=dev", "--set, field 'valid_split'",
      "no requests in split 'dev'"),
    C("set-trl-divisibility", f"{TRAIN} num_generations=3", "divisible by num_generations",
      "num_generations from --set"),
    C("set-build-tiny-not-a-mapping", f"{TRAIN} build_tiny=5", "--set, field 'build_tiny'", "5 is not a mapping"),
    C("set-model-with-build-tiny", "train --config {r}/configs/tiny_cpu.yaml --set model_name_or_path=/nonexistent/model "
      "output_dir={t}/x", "--set, field 'model_name_or_path'", "has no effect with build_tiny set",
      "(build_tiny: ", "configs/tiny_cpu.yaml line 16)"),
    C("set-lora-without-peft", f"{TRAIN} lora_r=64", "--set, field 'lora_r'", "lora_r=64 has no effect without use_peft"),
    C("set-vllm-without-use-vllm", f"{TRAIN} vllm_mode=server", "--set, field 'vllm_mode'", "without use_vllm"),
    C("set-refill-rounds-without-refill", f"{TRAIN} refill_max_rounds=3", "--set, field 'refill_max_rounds'",
      "without refill_batch"),
    C("set-divergence-kl-without-kl", f"{TRAIN} divergence_kl=1.0", "--set, field 'divergence_kl'", "with beta=0.0"),
    C("set-resume-from-checkpoint", f"{TRAIN} resume_from_checkpoint=x", "field 'resume_from_checkpoint'",
      "use remark train --resume"),
    C("set-build-tiny-negative-size", f"{TRAIN} 'build_tiny={{n_requests: -5}}'", "--set, field 'build_tiny'",
      "build_tiny.n_requests=-5 must be >= 1"),
    C("set-alias-bomb", f"{TRAIN} 'lora_target_modules=[{BOMB_SET}]'", "--set", "aliases", "expand to more than"),
    C("config-alias-bomb", "train --config {t}/run.yaml", "run.yaml, row ", "config file refused: its aliases",
      files={"run.yaml": BOMB}),
    C("train-unknown-recipe", "train --recipe dapoo --config {w}/base.yaml", "field 'recipe'", "did you mean 'dapo'?"),
    C("train-recipe-contradiction", "train --recipe dapo --config {t}/run.yaml", "run.yaml, field 'recipe'",
      "contradicts", files={"run.yaml": '{config:{"recipe": "cispo", "loss_type": null, "scale_rewards": null}}'}),
    C("train-nothing-to-train", "train", "field '--config'", "give --config FILE"),
]  # fmt: skip

ALL = CASES + CONFIG_CASES


def materialise(case: Case, world: Path, tmp: Path) -> list[str]:
    for name, content in case.files.items():
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str) and content.startswith("{config:"):
            content = config_text(world, **json.loads(content[len("{config:") : -1]))
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    parts = shlex.split(case.argv)
    return [a.replace("{w}", str(world)).replace("{t}", str(tmp)).replace("{r}", str(REPO)) for a in parts]


def check(case: Case, code: int, out: str, err: str) -> None:
    assert "Traceback" not in err and "Traceback" not in out, err
    assert code == 2, f"exit {code}\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}"
    lines = err.strip().splitlines()
    last = lines[-1]
    assert last.startswith("remark ") and ": error: " in last, err
    assert not any(line.startswith("usage:") for line in lines), (
        err
    )  # bad flags too: one line, no usage block
    for fragment in case.expect:
        assert fragment in last, f"{fragment!r} not in {last!r}"


@pytest.mark.parametrize(
    ("change", "says"),
    [({"model_type": "nosuchmodel"}, "model type `nosuchmodel` but Transformers does not recognize this architecture"),
     ({"num_attention_heads": 7}, "cannot load the model: ")],
    ids=["unknown-model-type", "config-does-not-fit-weights"],
)  # fmt: skip
def test_eval_run_on_a_model_folder_transformers_cannot_load_is_one_line(
    change, says, world, tiny_model_dir, tmp_path
):
    import shutil

    model = tmp_path / "m"
    shutil.copytree(tiny_model_dir, model)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, **change}))
    code, out, err = run_cli(
        ["eval", "run", "--model", str(model), "--data", str(world / "ds"), "--out", str(tmp_path / "o")]
    )
    check(Case("load", "", (f"{model / 'config.json'}: cannot load the model: ", says)), code, out, err)


def test_the_table_is_large_and_its_ids_unique():
    assert len(ALL) >= 60
    assert len({c.id for c in ALL}) == len(ALL)


@pytest.mark.parametrize("case", ALL, ids=[c.id for c in ALL])
def test_bad_input_is_one_line_exit_2_naming_the_place(case, world, tmp_path):
    argv = materialise(case, world, tmp_path)
    check(case, *run_cli(argv, stdin=case.stdin))
    assert not (tmp_path / "out").exists()  # nothing written for a refused input


def test_the_base_config_is_valid(world):
    """The config cases fail on the one change each makes, not on the base."""
    from remark.config import compose_config

    cfg = compose_config(None, world / "base.yaml", check_paths=True).config
    assert (cfg.learning_rate, cfg.num_generations, cfg.data_dir) == (1e-4, 4, str(world / "ds"))


def test_yaml_number_without_a_dot_is_a_number(world, tmp_path):
    """PyYAML reads ``1e-4`` as a string; a number field takes it as the number it means."""
    from remark.config import load_config

    (tmp_path / "run.yaml").write_text(config_text(world, learning_rate="1e-4", max_steps='"5"'))
    cfg = load_config(tmp_path / "run.yaml")
    assert cfg.learning_rate == 1e-4 and isinstance(cfg.learning_rate, float)
    assert cfg.max_steps == 5 and isinstance(cfg.max_steps, int)


def test_some_rows_skipped_is_a_warning_on_stdout(world, tmp_path):
    rows = [*THREADS, thread("q9", "z", "Moon", "n/a", "train")]
    (tmp_path / "in.jsonl").write_text(jsonl(rows))
    argv = ["prep", "threads", "--input", str(tmp_path / "in.jsonl"), "--catalog", str(world / "cat.csv"),
            "--out", str(tmp_path / "out"), "--skip-bad-rows"]  # fmt: skip
    code, out, err = run_cli(argv)
    assert code == 0, err
    assert f"warning: 1 bad row(s) skipped; the first: {tmp_path / 'in.jsonl'}, row 13, field 'year'" in out


# --- the boundary itself, through real processes ------------------------------------------------------

SUBPROCESS_CASES = [
    "ground-file-not-utf8",
    "score-k-0",
    "prep-empty-file",
    "set-learning-rate-word",
]
#: a bug: a command that raises something that is not an InputError
BUG = (
    "import sys, remark.cli.stats as s\n"
    "def run(args): raise RuntimeError('boom in remark')\n"
    "s.run = run\n"
    "from remark.cli.main import main\n"
    "sys.exit(main(['stats', 'anything']))\n"
)


@pytest.fixture(scope="module")
def processes(world, tmp_path_factory):
    """Start every subprocess case at once (they overlap on the cores) and collect their results."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    env.pop("REMARK_DEBUG", None)
    by_id = {c.id: c for c in ALL}
    started = {}
    for case_id in SUBPROCESS_CASES:
        case = by_id[case_id]
        argv = materialise(case, world, tmp_path_factory.mktemp(case_id))
        started[case_id] = subprocess.Popen([sys.executable, "-m", "remark.cli.main", *argv], env=env,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    started["bug"] = subprocess.Popen([sys.executable, "-c", BUG], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)  # fmt: skip
    return {k: (p.wait(timeout=300), *p.communicate()) for k, p in started.items()}


@pytest.mark.parametrize("case_id", SUBPROCESS_CASES)
def test_the_console_script_exits_2_without_a_traceback(case_id, processes):
    case = next(c for c in ALL if c.id == case_id)
    check(case, *processes[case_id])


def test_a_bug_shows_its_traceback_and_exits_1(processes):
    code, _, err = processes["bug"]
    assert code == 1
    assert "Traceback (most recent call last)" in err and "RuntimeError: boom in remark" in err
    assert (
        err.strip().splitlines()[-1].startswith("remark stats: internal error: the traceback above is a bug")
    )


def test_interrupt_and_debug(monkeypatch, world):
    import remark.cli.stats as stats

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(stats, "run", interrupted)
    code, _, err = run_cli(["stats", str(world / "ds")])
    assert (code, err.strip()) == (130, "remark stats: interrupted")
    monkeypatch.undo()
    monkeypatch.setenv("REMARK_DEBUG", "1")  # input errors show where they were raised
    code, _, err = run_cli(["stats", str(world / "model")])
    assert code == 2 and "Traceback" in err and "requests.parquet is missing" in err.splitlines()[-1]


def test_help_documents_the_exit_statuses():
    code, out, _ = run_cli(["--help"])
    assert code == 0 and "exit status: 0 done; 2 bad input" in out
