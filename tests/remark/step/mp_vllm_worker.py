"""Worker for test_vllm_multiprocess.py: one training step on the tiny world, per-row results dumped.

    torchrun --nproc_per_node 2 --standalone mp_vllm_worker.py DATA MODEL OUT vllm 6
    python mp_vllm_worker.py DATA MODEL OUT replay 12 DUMPED

``vllm``: each process generates its rows with its own colocated engine and writes, per row, the
request, its global position, the completion's token ids and the per-token advantages
(``rows_<rank>.json``), and the step's logged sampling log-prob difference (``log_<rank>.json``).
``replay``: one process, no vLLM, the same rows with the completions read back from DUMPED (a rollout
function), and the advantages it computes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


def main(data: str, model: str, out: str, mode: str, per_device: int, dumped: str | None = None) -> None:
    from transformers import AutoTokenizer

    from data_prep.dataset import load_dataset
    from remark.config import RemarkGRPOConfig
    from remark.run.sampling import training_dataset
    from remark.step.trainer import RemarkGRPOTrainer
    from tests.vllm_helpers import VLLM_FIELDS

    tok = AutoTokenizer.from_pretrained(model)
    ds = load_dataset(data)
    replayed = None
    if dumped is not None:
        replayed = [r for f in sorted(Path(dumped).glob("rows_*.json")) for r in json.loads(f.read_text())]
        replayed.sort(key=lambda r: r["row"])

    def rollout(prompts, trainer):  # replay: the completions the two vLLM processes sampled, in global order
        prompt_ids, completion_ids = [], []
        for i, messages in enumerate(prompts):
            text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            prompt_ids.append(tok(text, add_special_tokens=False)["input_ids"])
            completion_ids.append(replayed[i]["completion_ids"])
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None}

    class Dumping(RemarkGRPOTrainer):
        def _generate_and_score_completions(self, inputs):
            batch = super()._generate_and_score_completions(inputs)
            rank, n = self.accelerator.process_index, len(inputs)
            rows = []
            for i, x in enumerate(inputs):
                mask = batch["completion_mask"][i].bool()
                rows.append(
                    {
                        "row": rank * n + i,
                        "request_id": x["request_id"],
                        "completion_ids": batch["completion_ids"][i][mask].tolist(),
                        "adv": batch["advantages"][i][mask].tolist(),
                    }
                )
            Path(out, f"rows_{rank}.json").write_text(json.dumps(rows))
            return batch

    fields = dict(VLLM_FIELDS) if mode == "vllm" else {}
    args = RemarkGRPOConfig(
        output_dir=str(Path(out) / "run"),
        use_cpu=True,
        bf16=False,
        report_to="none",
        per_device_train_batch_size=per_device,
        num_generations=4,
        max_completion_length=24,
        max_steps=1,
        loss_type="bnpo",
        scale_rewards="group",
        beta=0.0,
        temperature=0.7,
        save_strategy="no",
        num_ranks=3,
        match_mode="fuzzy",
        seed=0,
        logging_steps=1,
        disable_tqdm=True,
        **fields,
    )
    train = training_dataset(ds, split="train", sampling="uniform", k=3)
    trainer = Dumping(
        model=model,
        args=args,
        train_dataset=train,
        catalog=ds.catalog,
        processing_class=tok,
        rollout_func=rollout if mode == "replay" else None,
    )
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    Path(out, f"log_{trainer.accelerator.process_index}.json").write_text(json.dumps(logs))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), *sys.argv[6:7])
