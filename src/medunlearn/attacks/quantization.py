"""Quantization attack: load the unlearned model in 8-bit or 4-bit NF4 and ask the forgotten questions again.

Zhang et al. (ICLR 2025, "Catastrophic failure of LLM unlearning via quantization") find that unlearning with
a small learning rate moves weights so little that rounding them to 4 bits lands back on the original model:
the share of forgotten knowledge retained rises from about 21% to 83%. The attack needs no data and no
training, only the published weights (docs/attacks.md, "Quantization").

Both schemes go through bitsandbytes (0.50 runs both on the CPU): ``8bit`` is LLM.int8() (``load_in_8bit``),
``nf4`` the 4-bit NormalFloat of :func:`medunlearn.models.four_bit_quantization_config` (QLoRA's). A LoRA
adapter is merged into its base in full precision first and the merged weights are quantized, as a user who
publishes the merged model would; quantizing only the base would keep the adapter's update in full precision.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from medunlearn.errors import InputError
from medunlearn.evaluation.runner import RunnerConfig

if TYPE_CHECKING:
    import pandas as pd

QUANTIZATIONS = {
    "8bit": "LLM.int8() 8-bit weights (bitsandbytes load_in_8bit)",
    "nf4": "4-bit NormalFloat weights (bitsandbytes, QLoRA's NF4)",
}
# bitsandbytes logs this once per int8 matmul on float32 inputs: thousands of identical lines per evaluation.
_INT8_CAST_MESSAGE = "MatMul8bitLt: inputs will be cast"


def quantization_config(scheme: str):
    """The ``BitsAndBytesConfig`` of ``scheme`` (``8bit`` or ``nf4``)."""
    from medunlearn.models import four_bit_quantization_config

    if scheme not in QUANTIZATIONS:
        raise InputError(f"unknown quantization {scheme!r}; choose from {', '.join(QUANTIZATIONS)}")
    if scheme == "nf4":
        return four_bit_quantization_config()
    four_bit_quantization_config()  # the same check that bitsandbytes is installed, with the same message
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_8bit=True)


def full_precision_folder(model_path: str | Path, work_dir: str | Path) -> Path:
    """``model_path`` itself, or for a LoRA adapter its merge with the base, saved under ``work_dir``."""
    model_path = Path(model_path)
    if not (model_path / "adapter_config.json").is_file():
        return model_path
    from medunlearn.models import load_model
    from medunlearn.utils.files import file_fingerprint
    from medunlearn.utils.user_files import read_json

    merged = Path(work_dir) / "merged-full-precision"
    # The merge is reused only for the adapter it was made from: another adapter (or a retrained one) given
    # the same work_dir, e.g. two adapters of one parent folder, must not be quantized as this one.
    source = {
        path.name: file_fingerprint(path)
        for path in sorted(model_path.iterdir())
        if path.is_file() and path.name.startswith("adapter_")
    }
    marker = merged / "merged_from.json"
    # Read by the shared reader: a damaged marker (a cut write, an edit) is named, not a JSONDecodeError.
    if (merged / "config.json").is_file() and marker.is_file() and read_json(marker) == source:
        return merged
    if merged.exists():
        shutil.rmtree(merged)
    model, tokenizer = load_model(str(model_path), merge_adapter=True)
    model.save_pretrained(merged)
    tokenizer.save_pretrained(merged)
    marker.write_text(json.dumps(source, sort_keys=True))
    return merged


def load_quantized(model_path: str | Path, scheme: str, work_dir: str | Path | None = None):
    """``(model, tokenizer)``: the model of ``model_path`` (a LoRA adapter merged first, into ``work_dir``)
    with its linear layers quantized by ``scheme``."""
    from medunlearn.models import load_model_and_tokenizer

    folder = full_precision_folder(model_path, work_dir or Path(model_path).parent)
    return load_model_and_tokenizer(str(folder), quantization_config=quantization_config(scheme))


class _DropInt8CastMessage(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_INT8_CAST_MESSAGE)


@contextmanager
def quiet_int8_casts() -> Iterator[None]:
    """Hold back bitsandbytes' per-matmul float32 → float16 cast message while an 8-bit model runs."""
    logger = logging.getLogger("bitsandbytes.autograd._functions")
    drop = _DropInt8CastMessage()
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


def quantization_attack(
    model_path: str | Path,
    examples: pd.DataFrame,
    out_dir: str | Path,
    schemes: Sequence[str] = tuple(QUANTIZATIONS),
    *,
    runner_config: RunnerConfig | None = None,
    name: str = "model",
) -> list[dict]:
    """Evaluate ``model_path`` quantized by each scheme on ``examples`` into ``out_dir/quantize-{scheme}``
    (evaluation folders, docs/evaluation.md); returns one ``{"scheme", "eval_dir", "summary"}`` per scheme."""
    # Here, not at the top: `medunlearn attack --help` reads QUANTIZATIONS and must not import pandas.
    from medunlearn.evaluation.pipeline import evaluate_on_examples

    out_dir = Path(out_dir)
    results = []
    for scheme in schemes:
        model, tokenizer = load_quantized(model_path, scheme, out_dir)
        eval_dir = out_dir / f"quantize-{scheme}"
        with quiet_int8_casts():
            summary = evaluate_on_examples(
                (model, tokenizer),
                examples,
                eval_dir,
                name=f"{name} {scheme}",
                runner_config=runner_config,
                overwrite=True,
            )
        results.append({"scheme": scheme, "eval_dir": str(eval_dir), "summary": summary})
        del model
    return results


__all__ = [
    "QUANTIZATIONS",
    "full_precision_folder",
    "load_quantized",
    "quantization_attack",
    "quantization_config",
    "quiet_int8_casts",
]
