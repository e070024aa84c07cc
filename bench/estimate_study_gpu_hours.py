"""Estimate the GPU hours of a study file (default ``recipes/studies/paper.yaml``) from tokens and FLOPs.

How (docs/study.md, "GPU hours of the paper-scale study"; every assumption is printed with the table):

- tokens: notes are counted on ``--notes`` (a PMC-Patients CSV: ``title`` + ``patient`` columns; without it,
  the synthetic cohort's notes), QA on the synthetic cohort's QA rendered with the chat template exactly as
  training renders them. The tokenizer is SmolLM2's (``--tokenizer``), a stand-in for Llama-3's: Llama-3's
  128k vocabulary splits English text into somewhat fewer tokens than SmolLM2's 49k, so counts err high.
  Notes are truncated at the SFT ``max_length`` (TRL's default 1,024) like the fine-tune does;
- FLOPs: training 6·N per token (forward 2·N, backward 2× forward; with QLoRA only the adapters get weight
  gradients, but the input gradients still go through every frozen layer and the 4-bit weights are
  dequantised on the fly, so we keep the dense 6·N rather than ~4·N: an upper-side assumption), forward
  only (reference passes, teacher-forced scoring, generation) 2·N per token; N = ``--params``;
- steps and epochs from the study file: the fine-tune's ``notes_epochs`` / ``qa_epochs``; each method's
  resolved config (paper defaults + the file's fields): ``num_train_epochs`` (or ``max_steps``), batch ×
  accumulation, whether it pairs a retain example per forget example, whether it needs live reference
  outputs (one more forward on both parts, counted in full also for RMU, which stops at its layer);
- evaluation per stage: the forget patients' seen (6) and holdout (2) QA plus up to ``max_retain_patients`` of
  each retained population × 6 seen QA; one teacher-forced pass and one generation of ``max_new_tokens``;
- throughput: ``--mfu`` (default 40%) of ``--peak-tflops`` (default 989: an H100 SXM's dense bf16) for
  everything FLOP-bound; generation is memory-bound rather than FLOP-bound, so its time is also given as
  ``decode steps × --decode-step-ms`` (default 50 ms per batched decode step: an assumption for HF
  ``generate`` with 4-bit weights at batch 32, not a measurement), and the larger of the two is used.

    python bench/estimate_study_gpu_hours.py --notes PMC-Patients-sample-600.csv
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
from pathlib import Path

SEEN_PER_PATIENT, HOLDOUT_PER_PATIENT = 6, 2  # 4 factual + 4 reasoning, 1 + 1 held out [paper]


def note_token_counts(tokenizer, notes_csv: str | None, max_length: int) -> tuple[list[int], str]:
    if notes_csv:
        import pandas as pd

        frame = pd.read_csv(notes_csv, usecols=["title", "patient"])
        texts = [f"{t}\n{n}" for t, n in zip(frame["title"].fillna(""), frame["patient"].fillna(""))]
        source = f"{len(texts)} PMC-Patients notes from {Path(notes_csv).name}"
    else:
        from medunlearn.amnesia.sources.synthetic import generate_cohort

        notes, _ = generate_cohort(patients=200, seed=0)
        texts = [f"{t}\n{n}" for t, n in zip(notes["title"].to_pylist(), notes["note"].to_pylist())]
        source = "200 synthetic-cohort notes (no --notes given)"
    counts = [
        min(len(ids) + 1, max_length) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]
    ]
    return counts, source


def qa_token_counts(tokenizer) -> tuple[list[int], list[int]]:
    """(prompt tokens, prompt + answer tokens) per synthetic-cohort QA, rendered as training renders them."""
    from medunlearn.amnesia.sources.synthetic import generate_cohort
    from medunlearn.unlearn.data import tokenize_prompt_completion

    _, qa = generate_cohort(patients=200, seed=0)
    tokens = tokenize_prompt_completion(
        qa["question"].to_pylist(), qa["answer"].to_pylist(), tokenizer, 10**9
    )
    prompts = [sum(1 for label in labels if label == -100) for labels in tokens["labels"]]
    return prompts, [len(ids) for ids in tokens["input_ids"]]


def forget_patients(config: str, patients: int) -> int:
    return round(int(config.rsplit("_", 1)[1]) / 100 * patients)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", default="recipes/studies/paper.yaml")
    parser.add_argument("--notes", default=None, help="a PMC-Patients CSV (title, patient columns)")
    parser.add_argument("--tokenizer", default="smollm2-135m")
    parser.add_argument("--params", type=float, default=8.03e9, help="N (Llama-3-8B: 8.03e9)")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="H100 SXM dense bf16")
    parser.add_argument("--mfu", type=float, default=0.40)
    parser.add_argument("--decode-step-ms", type=float, default=50.0)
    parser.add_argument("--sft-max-length", type=int, default=1024, help="TRL SFTConfig default")
    args = parser.parse_args()

    from transformers import AutoTokenizer

    from medunlearn.models import smollm2_checkpoint
    from medunlearn.study.config import load_study
    from medunlearn.unlearn.methods import resolve_method
    from medunlearn.unlearn.run import make_method_config

    study = load_study(args.study)
    patients = (study.data.build or {}).get("patients", 8820)
    name = str(smollm2_checkpoint()) if args.tokenizer == "smollm2-135m" else args.tokenizer
    tokenizer = AutoTokenizer.from_pretrained(name)
    notes, notes_source = note_token_counts(tokenizer, args.notes, args.sft_max_length)
    prompt_tokens, qa_tokens = qa_token_counts(tokenizer)
    note_mean, qa_mean, prompt_mean = (statistics.mean(x) for x in (notes, qa_tokens, prompt_tokens))

    n = args.params
    flops_per_s = args.peak_tflops * 1e12 * args.mfu
    runner = study.evaluation.runner
    max_new = runner.get("max_new_tokens", 64)
    eval_batch = runner.get("batch_size", 16)
    retain_cap = study.evaluation.populations.get("max_retain_patients", 100)

    rows = []  # (stage, count, train tokens, forward tokens, decode steps)
    notes_train = patients * note_mean * study.finetune.notes_epochs
    qa_train = patients * SEEN_PER_PATIENT * qa_mean * study.finetune.qa_epochs
    rows.append(("fine-tune: notes", 1, notes_train, 0.0, 0))
    rows.append(("fine-tune: QA", 1, qa_train, 0.0, 0))

    def evaluation(forget_n: int) -> tuple[float, int]:
        examples = forget_n * (SEEN_PER_PATIENT + HOLDOUT_PER_PATIENT) + 2 * retain_cap * SEEN_PER_PATIENT
        forward = examples * (qa_mean + prompt_mean + max_new)  # teacher-forced + generation
        return forward, math.ceil(examples / eval_batch) * max_new

    base_forward = base_decode = 0.0
    for forget in study.forget:
        forward, decode = evaluation(forget_patients(forget, patients))
        base_forward, base_decode = base_forward + forward, base_decode + decode
    rows.append(("baselines (evaluate fine-tuned)", len(study.forget), 0.0, base_forward, base_decode))

    with tempfile.TemporaryDirectory() as tmp:
        for spec in study.methods:
            config = make_method_config(spec.method, Path(tmp) / spec.label, **spec.fields)
            _, trainer_class = resolve_method(spec.method).load()
            batch = config.per_device_train_batch_size * config.gradient_accumulation_steps
            parts = 2 if trainer_class.uses_retain else 1
            train = forward = decode = 0.0
            for forget in study.forget:
                examples = forget_patients(forget, patients) * SEEN_PER_PATIENT
                steps = (
                    config.max_steps
                    if config.max_steps > 0
                    else math.ceil(math.ceil(examples / batch) * config.num_train_epochs)
                )
                step_tokens = steps * batch * qa_mean * parts
                train += step_tokens
                if trainer_class.reference_usage == "model":
                    forward += step_tokens
                elif trainer_class.reference_usage == "sequence_logps":
                    forward += examples * qa_mean
                ev_forward, ev_decode = evaluation(forget_patients(forget, patients))
                forward, decode = forward + ev_forward, decode + ev_decode
            label = (
                f"{spec.label} cells (epochs {config.num_train_epochs:g}, batch {batch}, "
                f"{'forget+retain' if parts == 2 else 'forget only'}, ref {trainer_class.reference_usage})"
            )
            rows.append((label, len(study.forget) * len(study.seeds), train, forward, decode))
            rows[-1] = (*rows[-1][:2], *(x * len(study.seeds) for x in rows[-1][2:]))

    print(
        f"study: {args.study} ({patients} patients, {len(study.methods)} methods × {len(study.forget)} forget"
    )
    print(
        f"  configs × {len(study.seeds)} seeds = "
        f"{len(study.methods) * len(study.forget) * len(study.seeds)} cells)"
    )
    print(f"tokenizer: {args.tokenizer} (a stand-in for Llama-3's; counts err high)")
    print(
        f"notes: {notes_source}: mean {note_mean:.0f} tokens (truncated at {args.sft_max_length}), "
        f"max {max(notes)}"
    )
    print(
        f"QA: synthetic cohort, chat template: mean {qa_mean:.0f} tokens, of which prompt {prompt_mean:.0f}"
    )
    print(
        f"N = {n:.3g}; training 6N FLOPs/token, forward 2N; {args.mfu:.0%} MFU of "
        f"{args.peak_tflops:g} TFLOP/s "
        f"= {flops_per_s / 1e12:.0f} TFLOP/s; decode {args.decode_step_ms:g} ms per batched step "
        f"(batch {eval_batch}, {max_new} new tokens)"
    )
    header = f"{'stage':<72} {'runs':>5} {'train Mtok':>10} {'fwd Mtok':>9} {'PFLOP':>9} {'GPU-h':>7}"
    print(header)
    print("-" * len(header))
    total = 0.0
    for stage, count, train, forward, decode in rows:
        flops = 6 * n * train + 2 * n * forward
        # Generation's FLOPs are in `forward`; when decoding is memory-bound its time is the decode steps'.
        decode_hours = decode * args.decode_step_ms / 1000 / 3600
        generation_flop_hours = 2 * n * decode * eval_batch / flops_per_s / 3600
        hours = flops / flops_per_s / 3600 + max(0.0, decode_hours - generation_flop_hours)
        total += hours
        print(
            f"{stage:<72} {count:>5} {train / 1e6:>10.1f} {forward / 1e6:>9.1f} "
            f"{flops / 1e15:>9.0f} {hours:>7.1f}"
        )
    print("-" * len(header))
    print(f"{'total':<72} {'':>5} {'':>10} {'':>9} {'':>9} {total:>7.1f}")


if __name__ == "__main__":
    main()
