"""Time the stages of a SmolLM2 CPU study a few steps at a time (how ``recipes/studies/smollm2-cpu.yaml`` was
sized; see docs/study.md, "Sizing the SmolLM2 CPU study").

Builds a synthetic AMNESIA folder, then times, with wall clock and CPU time (``time.process_time``, user+sys
of this process and its threads):

1. the fine-tune's notes stage and QA stage, ``--steps`` optimizer steps each (LoRA, the study's batch size);
2. ``--steps`` unlearning steps of each method on ``disease_cancer_forget_5``;
3. one cell's evaluation (forget, same-disease and out-of-disease retained, holdout) at the study's settings.

Every ``Trainer.train`` call is wrapped to record its time, so model loading is counted apart from the steps.

    python bench/time_smollm2_study_steps.py --patients 300 --steps 3 --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def clock():
    return time.perf_counter(), time.process_time()


def since(start):
    wall, cpu = clock()
    return {"wall_s": round(wall - start[0], 2), "cpu_s": round(cpu - start[1], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patients", type=int, default=300)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--max-retain-patients", type=int, default=10)
    parser.add_argument("--methods", default="grad_diff,kl_min,simnpo,rmu")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    import torch
    import transformers

    from medunlearn import build_amnesia
    from medunlearn.evaluation.pipeline import evaluate_unlearning
    from medunlearn.evaluation.populations import PopulationConfig
    from medunlearn.evaluation.runner import RunnerConfig
    from medunlearn.models import ModelArguments
    from medunlearn.unlearn.run import (
        FinetuneArguments,
        UnlearningDataArguments,
        default_sft_config,
        make_method_config,
        run_finetune,
        run_unlearning,
    )

    torch.set_num_threads(args.threads)
    trains: list[dict] = []
    original_train = transformers.Trainer.train

    def timed_train(self, *a, **k):
        start = clock()
        output = original_train(self, *a, **k)
        trains.append({"steps": self.state.global_step, **since(start)})
        print(json.dumps({"train": type(self).__name__, **trains[-1]}), flush=True)
        return output

    transformers.Trainer.train = timed_train
    out = Path(args.out or tempfile.mkdtemp(prefix="smollm2-bench-"))
    report: dict = {"load_average_start": os.getloadavg(), "threads": args.threads, "patients": args.patients}
    data = out / "data"
    if not data.is_dir():
        build_amnesia(data, source="synthetic", patients=args.patients, seed=0)
    model_args = ModelArguments("smollm2-135m", lora=True)

    start = clock()
    sft = default_sft_config(model_args, out / "ft")
    sft.disable_tqdm = True
    sft.per_device_train_batch_size = args.batch_size
    sft.max_steps = args.steps
    sft.learning_rate = 2e-4
    run_finetune(FinetuneArguments(str(data), str(out / "ft"), 1.0, 1.0), model_args, sft)
    report["finetune_total"] = since(start)
    report["finetune_notes"], report["finetune_qa"] = trains[-2], trains[-1]

    report["unlearn"] = {}
    for method in args.methods.split(","):
        start = clock()
        config = make_method_config(method, out / method, max_steps=args.steps, disable_tqdm=True)
        run_unlearning(
            config,
            ModelArguments(str(out / "ft"), lora=True),
            UnlearningDataArguments(str(data), "disease_cancer_forget_5"),
        )
        report["unlearn"][method] = {"total": since(start), "train": trains[-1]}

    start = clock()
    evaluate_unlearning(
        str(out / args.methods.split(",")[0]),
        str(data),
        "disease_cancer_forget_5",
        out / "eval",
        before=str(out / "ft"),
        runner_config=RunnerConfig(max_new_tokens=args.max_new_tokens, batch_size=16, progress=False),
        population_config=PopulationConfig(max_retain_patients=args.max_retain_patients, seed=0),
    )
    report["evaluate_cell_with_before"] = since(start)
    print(json.dumps({"evaluate_cell_with_before": report["evaluate_cell_with_before"]}), flush=True)
    report["load_average_end"] = os.getloadavg()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
