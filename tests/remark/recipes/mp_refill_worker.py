"""Worker for test_refill_multiprocess.py: two DAPO steps with refills under ``torchrun --nproc_per_node 2``.

Each process dumps, per step, its final batch's request ids, loss-token counts and refill metrics.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.remark.conftest import write_hand_dataset
from tests.remark.recipes.conftest import REQUESTS, Capturing, run_fields, scripted_rollout


def main(model_dir: str, out: str) -> None:
    import torch
    from transformers import AutoTokenizer

    from remark.config import compose_config
    from remark.run.sampling import training_dataset

    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(model_dir)
    ds = write_hand_dataset(Path(out) / f"data_{os.environ['RANK']}", requests=REQUESTS)
    args = compose_config("dapo", None, run_fields(Path(out), per_device_train_batch_size=8)).config
    trainer = Capturing(
        model=model_dir,
        args=args,
        train_dataset=training_dataset(ds, split="train", sampling=args.sampling, k=args.num_ranks),
        catalog=ds.catalog,
        processing_class=tok,
        rollout_func=scripted_rollout(tok),
    )
    trainer.captured = []
    trainer.train()
    rank = trainer.accelerator.process_index
    steps = [
        {"request_id": cols["request_id"], "tokens": out_["completion_mask"].sum(1).tolist()}
        for cols, out_ in trainer.captured
    ]
    logs = {
        k: [h[k] for h in trainer.state.log_history if k in h]
        for k in ("train/refill_rounds", "train/refill_prompts")
    }
    Path(out, f"refill_{rank}.json").write_text(json.dumps({"steps": steps, "logs": logs}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
