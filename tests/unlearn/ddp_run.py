"""Run by test_distributed.py, under ``accelerate launch --num_processes 2`` or as one process.

usage: python ddp_run.py OUT.json PER_DEVICE_BATCH [LOSS_AVERAGING [DATA_FORMAT]]
Trains GradDiff for 2 steps on the tiny model and writes the logged losses and a weight checksum (rank 0);
LOSS_AVERAGING is the config's ``loss_averaging`` (default ``sequence``), DATA_FORMAT its ``data_format``
(default ``qa``; ``text``: the answers as documents, cut into 8-token chunks).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(out: str, per_device_batch: int, loss_averaging: str = "sequence", data_format: str = "qa") -> None:
    from medunlearn.models import build_tiny_llama, train_bpe_tokenizer
    from medunlearn.unlearn import GradDiffConfig, GradDiffTrainer
    from medunlearn.utils.distributed import leave_process_group

    fixtures = _load(HERE / "conftest.py", "unlearn_fixtures")
    texts = _load(HERE.parent / "conftest.py", "root_fixtures").FIXTURE_TEXTS
    tokenizer = train_bpe_tokenizer(texts * 4, vocab_size=400)
    model = build_tiny_llama(tokenizer)
    args = GradDiffConfig(
        output_dir=str(Path(out).parent / "run"),
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=per_device_batch,
        max_steps=2,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
        dataloader_drop_last=True,
        loss_averaging=loss_averaging,
        data_format=data_format,
        max_length=8 if data_format == "text" else 512,
    )
    forget = fixtures.qa_dataset({"p1", "p2", "p3", "p4"})
    retain = fixtures.qa_dataset({"p5"})
    if data_format == "text":
        forget, retain = (rows.rename_column("answer", "text") for rows in (forget, retain))
    trainer = GradDiffTrainer(model, args, forget, retain, processing_class=tokenizer)
    trainer.train()
    if trainer.is_world_process_zero():
        losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
        checksum = float(sum(p.detach().double().sum() for p in model.parameters()))
        Path(out).write_text(
            json.dumps(
                {"losses": losses, "checksum": checksum, "processes": trainer.accelerator.num_processes}
            )
        )
    leave_process_group(trainer.accelerator)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), *sys.argv[3:5])
