"""Shared fixtures: the real public data (skipped when absent) and a tiny local model (no hub access)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Tiny models run fastest on one thread per test worker (`make test` runs two workers on two cores);
# several OpenMP threads per worker oversubscribe the cores and can be ~10x slower.
os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_configure(config):
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path | None:
    """``$REMARK_DATA_DIR`` or ``../shared/data`` next to the repository; None when neither exists."""
    env = os.environ.get("REMARK_DATA_DIR")
    for candidate in ([Path(env)] if env else []) + [REPO.parent / "shared" / "data"]:
        if candidate.is_dir():
            return candidate
    return None


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The public data folder; tests that need it skip with the reason when it is absent."""
    found = shared_data_dir()
    if found is None:
        pytest.skip("public data not found: set REMARK_DATA_DIR or place it at ../shared/data")
    return found


#: Where ``make fetch-model`` (``remark model fetch smollm2-135m-instruct``) writes the real model.
SMOLLM2_DEFAULT = REPO / ".cache" / "models" / "smollm2-135m-instruct"


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """The real SmolLM2-135M-Instruct folder (``$REMARK_SMOLLM2_DIR`` or ``.cache/models/``); tests that
    need it skip with the reason when it is absent (no test downloads it)."""
    env = os.environ.get("REMARK_SMOLLM2_DIR")
    path = Path(env) if env else SMOLLM2_DEFAULT
    if not (path / "model.safetensors").is_file():
        pytest.skip(
            f"real model not found at {path}: run `make fetch-model` (remark model fetch smollm2-135m-instruct "
            "--out .cache/models/smollm2-135m-instruct) or set REMARK_SMOLLM2_DIR"
        )
    return path


TINY_TITLES = [
    "The Matrix (1999)",
    "Arrival (2016)",
    "Interstellar (2014)",
    "Blade Runner (1982)",
    "Inception (2010)",
    "Annihilation (2018)",
    "Contact (1997)",
    "Moon (2009)",
    "Solaris (1972)",
    "Primer (2004)",
    "Gattaca (1997)",
    "Ex Machina (2014)",
]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A ~1M-parameter Qwen2 model and a byte-level BPE tokenizer trained on a few titles, saved locally."""
    from remark.config.tiny import TinySpec
    from remark.run.tiny_model import build_tiny_model

    corpus = ["\n".join(TINY_TITLES[i:] + TINY_TITLES[:i]) for i in range(len(TINY_TITLES))]
    corpus += ["Recommend movies like Arrival, one per line as Title (Year)."] * 4
    spec = TinySpec(vocab_size=512, hidden_size=64, intermediate_size=128)
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), corpus, spec=spec, seed=0)


#: the torchrun variables TRL's colocate mode sets in the training process for its engine
DIST_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture
def clean_dist_env(monkeypatch):
    """No torchrun variables during the test (restored after): a colocated engine started by an earlier
    test in this process left them set, and a new trainer (accelerate) or a child process would read them as
    a distributed launch at a port that process already holds."""
    for key in DIST_ENV:
        monkeypatch.delenv(key, raising=False)


@pytest.fixture(scope="session")
def vllm_world(tmp_path_factory) -> tuple[Path, Path]:
    """(data_dir, model_dir): ``build_tiny``'s synthetic data (40 requests, 20 items) and SFT-warmed tiny
    Qwen2 at head size 32 (what vLLM's CPU attention needs; hidden 64 / 2 heads), K = 3. At temperature
    0.7 its lists ground about 0.7 of 3 titles. Built once per run: pytest-xdist workers share it (a lock)."""
    from types import SimpleNamespace

    from filelock import FileLock

    from remark.run.build_tiny import build_tiny_assets
    from tests.vllm_helpers import WORLD

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's folder, shared by its workers
    cfg = SimpleNamespace(
        output_dir=str(root / "vllm_world"), build_tiny=WORLD, num_ranks=3, use_cpu=True, disable_tqdm=True
    )
    with FileLock(str(root / "vllm_world.lock")):
        return build_tiny_assets(cfg)
