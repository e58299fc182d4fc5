"""ProtoQA: read its prediction files, convert them to our predictions JSONL, and its official metric.

ProtoQA's public prediction files come in two shapes (iesl/protoqa-data, iesl/protoqa-evaluator's
``load_predictions_from_jsonl``): JSON lines of ``{question_id: [answers]}`` (or
``{"question_id", "ranked_answers"}``), or one JSON object ``{question_id: [answers], ...}``
(``dev.predictions.gpt2finetuned.json``). :func:`read_protoqa_predictions` reads both.

:func:`max_answers_at_k` re-implements the official evaluator's "Max Answers @ k" with exact matching, for
a sanity check of our per-responder recall (it is not used for our metrics): predictions are cut to k,
lower-cased, cut to 50 characters and stripped; a prediction scores a cluster when it equals one of the
cluster's strings; predictions and clusters are assigned one-to-one (Hungarian,
``scipy.optimize.linear_sum_assignment``) maximising the summed cluster counts; the score is divided by
the oracle's (the k largest cluster counts). ``normalize=False`` divides by all answers instead, i.e. the
fraction of respondents whose *cluster* was named, the cluster-level twin of our per-responder recall@k
(which counts a respondent only when their own answer string, as an item, was named).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from scipy.optimize import linear_sum_assignment

from catalog.io.errors import InputError
from catalog.io.files import iter_jsonl, read_text
from catalog.io.outputs import JSONL_FORMATS, atomic_file, check_output_file


def _check_list(answers: object, path: Path, row: int | None, qid: str) -> list[str]:
    if not isinstance(answers, list):
        raise InputError(f"answers of {qid!r} are not a list", path=path, row=row, field=qid)
    for i, a in enumerate(answers):
        if not isinstance(a, str):
            raise InputError(f"answer {a!r} is not a string", path=path, row=row, field=f"{qid}[{i}]")
    return answers


def read_protoqa_predictions(path: str | Path) -> dict[str, list[str]]:
    """ProtoQA prediction file (either shape) -> ``{question_id: ranked answers}`` in file order."""
    p = Path(path)
    text = read_text(p, what="predictions file")  # invalid bytes: InputError naming the line
    out: dict[str, list[str]] = {}
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and not {"question_id", "ranked_answers"} <= set(whole):
        for qid, answers in whole.items():
            out[qid] = _check_list(answers, p, None, qid)
        return out
    for line_no, obj in iter_jsonl(p):
        pairs = (
            [(obj["question_id"], obj.get("ranked_answers"))] if "question_id" in obj else list(obj.items())
        )
        for qid, answers in pairs:
            if qid in out:
                raise InputError(f"question {qid!r} given twice", path=p, row=line_no, field=str(qid))
            out[str(qid)] = _check_list(answers, p, line_no, str(qid))
    if not out:
        raise InputError("no predictions found", path=p)
    return out


#: the ``catalog.io.outputs.atomic_file`` kind of ``remark eval convert-protoqa --out``.
CONVERT_KIND = "protoqa-predictions"


def convert_protoqa_predictions(src: str | Path, dest: str | Path, *, force: bool = False) -> int:
    """Write ``src`` (ProtoQA format) as our predictions JSONL at ``dest``; returns the count.

    ``dest`` is an owned single file (``catalog.io.outputs.atomic_file``, kind ``protoqa-predictions``):
    a ``.jsonl`` path that is not ``src``; an existing file is replaced only when it is an earlier conversion
    (or with ``force``). A refusal (``InputError``) comes before anything is read."""
    check = dict(formats=JSONL_FORMATS, inputs=[src], force=force)
    check_output_file(dest, CONVERT_KIND, **check)
    preds = read_protoqa_predictions(src)
    with atomic_file(dest, CONVERT_KIND, **check) as tmp, tmp.open("w", encoding="utf-8") as fh:
        for qid, answers in preds.items():
            fh.write(json.dumps({"request_id": qid, "recommendations": answers}, ensure_ascii=False) + "\n")
    return len(preds)


def read_protoqa_clusters(path: str | Path) -> dict[str, list[tuple[int, list[str]]]]:
    """ProtoQA answer file -> ``{question_id: [(count, cluster strings), ...]}`` (``answers.clusters``)."""
    p = Path(path)
    out: dict[str, list[tuple[int, list[str]]]] = {}
    for line_no, obj in iter_jsonl(
        p, hint="expected ProtoQA's answer file (JSON lines with metadata.id, answers.clusters)"
    ):
        try:
            qid = obj["metadata"]["id"]
            clusters = obj["answers"]["clusters"]
            out[qid] = [(int(c["count"]), list(c["answers"])) for c in clusters.values()]
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise InputError(f"not a ProtoQA question line ({err})", path=p, row=line_no) from None
    return out


def _preprocess(answer: str) -> str:
    return answer.lower()[:50].strip()


def max_answers_at_k(
    predictions: Sequence[str],
    clusters: Sequence[tuple[int, Sequence[str]]],
    k: int,
    *,
    normalize: bool = True,
) -> float:
    """Official "Max Answers @ k" (exact match) for one question; see the module docstring.

    >>> max_answers_at_k(["umbrella", "hat", "sun glasses"], [(38, ["umbrella"]), (36, ["sunscreen"]), (14, ["sun hat"])], 3)
    0.4318181818181818
    """
    preds = [_preprocess(a) for a in predictions[:k]]
    counts = np.array([c for c, _ in clusters], dtype=np.float64)
    if not preds or counts.size == 0:
        return 0.0
    member = np.array([[p in set(strings) for _, strings in clusters] for p in preds], dtype=np.float64)
    weighted = member * counts[None, :]
    rows, cols = linear_sum_assignment(-weighted)
    score = float(weighted[rows, cols].sum())
    denom = np.sort(counts)[::-1][:k].sum() if normalize else counts.sum()
    return score / float(denom)


def evaluator_scores(
    predictions: Mapping[str, Sequence[str]],
    questions: Mapping[str, Sequence[tuple[int, Sequence[str]]]],
    ks: Sequence[int] = (1, 3, 5, 10),
    *,
    normalize: bool = True,
) -> dict[str, dict[str, float]]:
    """``{qid: {"max_answers@k": score}}`` for every question that has predictions (missing ones: 0)."""
    return {
        qid: {
            f"max_answers@{k}": max_answers_at_k(predictions.get(qid, []), clusters, k, normalize=normalize)
            for k in ks
        }
        for qid, clusters in questions.items()
    }
