"""Worker for test_multiprocess.py: one training step on scripted lists, per-token advantages dumped.

Run under ``torchrun --nproc_per_node 2`` (gloo, CPU) and as a single process; the advantages of
every (request, list) must agree, although a group of G lists straddles the two processes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.remark.conftest import HAND_REQUESTS, write_hand_dataset
from tests.remark.step.test_trainer_scripted import SCRIPT


def main(model_dir: str, out: str, per_device: int, scoring_workers: int = 0) -> None:
    from transformers import AutoTokenizer

    from remark.config import RemarkGRPOConfig
    from remark.run.sampling import training_dataset
    from remark.step.trainer import RemarkGRPOTrainer

    tok = AutoTokenizer.from_pretrained(model_dir)
    requests = {
        **HAND_REQUESTS,
        "r3": ("More movies like Alpha please", *HAND_REQUESTS["r1"][1:]),
        "r4": ("Anything else like Delta", *HAND_REQUESTS["r2"][1:]),
    }
    ds = write_hand_dataset(Path(out) / "data", requests=requests)

    def rollout(prompts, trainer):
        rank, n = trainer.accelerator.process_index, len(prompts)
        prompt_ids, completion_ids = [], []
        for i, messages in enumerate(prompts):
            rid = "r1" if "Alpha please" in messages[-1]["content"] else "r2"
            g = (rank * n + i) % 4  # position in the group, from the global row index
            text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            prompt_ids.append(tok(text, add_special_tokens=False)["input_ids"])
            completion_ids.append(
                [*tok(SCRIPT[rid][g], add_special_tokens=False)["input_ids"], tok.eos_token_id]
            )
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None}

    class Dumping(RemarkGRPOTrainer):
        def _generate_and_score_completions(self, inputs):
            out_ = super()._generate_and_score_completions(inputs)
            rank, n = self.accelerator.process_index, len(inputs)
            rows = []
            for i, x in enumerate(inputs):
                length = int(out_["completion_mask"][i].sum())
                adv = out_["advantages"][i, :length].tolist()
                rows.append({"request_id": x["request_id"], "g": (rank * n + i) % 4, "adv": adv})
            Path(out, f"adv_{rank}.json").write_text(json.dumps(rows))
            Path(out, f"prefetched_{rank}.txt").write_text(str(self.rank_reward.prefetched))
            return out_

    args = RemarkGRPOConfig(
        output_dir=str(Path(out) / "run"),
        use_cpu=True,
        bf16=False,
        report_to="none",
        per_device_train_batch_size=per_device,
        num_generations=4,
        max_completion_length=32,
        max_steps=1,
        loss_type="bnpo",
        scale_rewards="group",
        beta=0.0,
        save_strategy="no",
        num_ranks=3,
        match_mode="exact",
        seed=0,
        disable_tqdm=True,
        scoring_workers=scoring_workers,
    )
    train = training_dataset(ds, split="train", sampling="uniform", k=3)
    trainer = Dumping(
        model=model_dir,
        args=args,
        train_dataset=train,
        catalog=ds.catalog,
        processing_class=tok,
        rollout_func=rollout,
    )
    trainer.train()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), *(int(a) for a in sys.argv[4:5]))
