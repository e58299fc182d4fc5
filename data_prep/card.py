"""Dataset cards: the ``README.md`` that ``remark prep`` writes into a dataset directory.

Hugging Face's dataset-card format: a YAML header (``pretty_name``, ``license``, ``task_categories``,
``tags``, ``size_categories``, ``source_datasets``) between ``---`` lines, then markdown. The body holds
the pooled statistics of ``stats.json`` (``data_prep.stats.dataset_stats``), the grounding recorded in
``meta.json["grounding"]``, the splits, and the command that wrote it. Everything comes from what the
directory already holds; nothing here reads other files.

License: ``meta["license"]`` when the source recorded one, else the known license of a built-in source
(ProtoQA: CC-BY-4.0; the synthetic world: the package's Apache-2.0), else ``unknown``: the card says to
check the source's terms.
"""

from __future__ import annotations

from typing import Any

import yaml

#: source name -> Hugging Face license id, for the sources whose license is known
SOURCE_LICENSES = {"protoqa": "cc-by-4.0", "synthetic": "apache-2.0"}
#: Hugging Face's size_categories buckets (upper bounds, exclusive)
_SIZES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"))


def card_header(fields: dict[str, Any]) -> str:
    """``---\\n<YAML>---\\n`` (keys in the given order, None values left out)."""
    body = yaml.safe_dump(
        {k: v for k, v in fields.items() if v is not None}, sort_keys=False, allow_unicode=True
    )
    return f"---\n{body}---\n"


def read_card_header(text: str) -> dict[str, Any]:
    """The YAML header of a card written by :func:`card_header` (``{}`` when there is none)."""
    if not text.startswith("---\n"):
        return {}
    end = text.index("\n---\n", 3)
    from catalog.io.yaml_files import load_yaml

    return load_yaml(text[4 : end + 1], what="card header") or {}


def size_category(n: int) -> str:
    return next((label for bound, label in _SIZES if n < bound), "n>1M")


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def dataset_card(
    meta: dict[str, Any], stats: dict[str, Any], *, name: str, command: str | None = None
) -> str:
    """The card text of a dataset directory named ``name`` from its ``meta.json`` and ``stats.json``."""
    source = str(meta.get("source", "unknown"))
    license_id = meta.get("license") or SOURCE_LICENSES.get(source, "unknown")
    n = int(stats.get("requests", 0))
    header = card_header(
        {
            "pretty_name": name,
            "license": license_id,
            "task_categories": ["text-generation"],
            "tags": ["recommendation", "conversational-recommendation", "multi-responder", "remark", source],
            "size_categories": [size_category(n)],
            "source_datasets": [source],
        }
    )
    lines = [
        f"# {name}",
        "",
        f"A pooled recommendation dataset written by `remark prep` from the `{source}` source "
        f"(domain: {meta.get('domain', 'n/a')}): one row per request, every responder's grounded items pooled "
        "into the union with per-item counts (`requests.parquet`), one row per (request, responder) "
        "(`responder_rows.parquet`), the catalog (`catalog.parquet`), `meta.json` and `stats.json`.",
        "",
    ]
    if license_id == "unknown":
        lines += ["License: not recorded by the source reader; check the source's terms before sharing.", ""]
    if n:
        nr, us = stats["n_responders"], stats["union_size"]
        splits = ", ".join(f"{k} {v['requests']}" for k, v in stats.get("by_split", {}).items())
        lines += [
            "## Pooled statistics (`stats.json`)",
            "",
            "| statistic | value |",
            "|---|---|",
            f"| requests | {n} ({splits}) |",
            f"| responders per request | mean {nr['mean']:.2f}, median {nr['median']:g}, max {nr['max']} "
            f"(total {nr['total']}) |",
            f"| union size per request | mean {us['mean']:.2f}, median {us['median']:g}, max {us['max']} |",
            f"| single-responder requests | {_pct(stats.get('single_responder_request_share'))} |",
            f"| union items named by one responder | {_pct(stats.get('single_mention_item_share'))} |",
            f"| ungrounded share of mentions | {_pct(stats.get('ungrounded_share'))} |",
            f"| seen items per request | mean {stats['seen_per_request']['mean']:.2f} |",
            "",
        ]
        if stats.get("by_split"):
            lines += ["| split | requests | responders (mean) | union size (mean) |", "|---|---|---|---|"]
            for split, s in stats["by_split"].items():
                lines.append(
                    f"| {split} | {s['requests']} | {s['n_responders.mean']:.2f} | {s['union_size.mean']:.2f} |"
                )
            lines.append("")
    grounding = meta.get("grounding")
    if grounding:
        rule = ", ".join(f"{k} {v}" for k, v in grounding.items())
        lines += [
            "## Grounding",
            "",
            f'Mentions were grounded to the catalog with {rule} (`meta.json["grounding"]`); training rewards, '
            "validation and `remark eval` ground generated lists the same way unless told otherwise.",
            "",
        ]
    if meta.get("split_by_time"):
        lines += [f"Splits by time: `{meta['split_by_time']}` (UTC).", ""]
    elif meta.get("split_fractions"):
        fractions = ", ".join(f"{k} {v:g}" for k, v in meta["split_fractions"].items())
        lines += [
            f"Requests without a split were hashed into {fractions} (seed {meta.get('split_seed')}).",
            "",
        ]
    if command:
        lines += ["## How it was made", "", "```bash", command, "```", ""]
    return header + "\n" + "\n".join(lines)
