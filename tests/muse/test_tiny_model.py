"""End to end on a tiny Llama: this test plays the runner (greedy generation, teacher-forced log-probs and
argmax matches on the rows :func:`muse_examples` gives), then checks :func:`score_muse` against values
recomputed here with ``rouge_score`` directly and by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from medunlearn.muse.build import build_muse_folder
from medunlearn.muse.conventions import MUSE_PRESETS
from medunlearn.muse.scoring import MuseOutputs, muse_examples, score_muse


def _generate(model, tokenizer, prompts, max_new_tokens):
    texts = []
    for prompt in prompts:
        ids = tokenizer(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=0)
        texts.append(tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True))
    return texts


def _teacher_forced(model, ids):
    with torch.no_grad():
        logprobs = torch.log_softmax(model(torch.tensor([ids])).logits[0, :-1].double(), dim=-1)
    targets = torch.tensor(ids[1:])
    return logprobs.gather(1, targets[:, None])[:, 0].numpy(), (logprobs.argmax(-1) == targets).numpy()


@pytest.mark.slow
def test_score_muse_on_a_tiny_model_equals_recomputation(tmp_path, tiny_model, tiny_tokenizer):
    from rouge_score import rouge_scorer

    tiny_model.eval()
    examples = muse_examples(build_muse_folder(tmp_path / "muse", articles=5, seed=0))
    forget_qa, retain_qa, verb = (examples[k][:2] for k in ("knowmem_forget", "knowmem_retain", "verbmem"))
    matches = []
    for row in verb:
        prompt_ids = tiny_tokenizer(row["prompt"]).input_ids
        full = tiny_tokenizer(row["prompt"] + " " + row["reference"]).input_ids
        _, is_argmax = _teacher_forced(tiny_model, full)
        matches.append(list(is_argmax[len(prompt_ids) - 1 :]))
    forget_lp = [
        list(_teacher_forced(tiny_model, tiny_tokenizer(r["text"]).input_ids)[0])
        for r in examples["privleak_forget"]
    ]
    holdout_lp = [
        list(_teacher_forced(tiny_model, tiny_tokenizer(r["text"]).input_ids)[0])
        for r in examples["privleak_holdout"]
    ]
    outputs = MuseOutputs(
        knowmem_forget_generations=_generate(tiny_model, tiny_tokenizer, [r["prompt"] for r in forget_qa], 4),
        knowmem_forget_references=[r["reference"] for r in forget_qa],
        knowmem_retain_generations=_generate(tiny_model, tiny_tokenizer, [r["prompt"] for r in retain_qa], 4),
        knowmem_retain_references=[r["reference"] for r in retain_qa],
        verbmem_generations=_generate(tiny_model, tiny_tokenizer, [r["prompt"] for r in verb], 4),
        verbmem_references=[r["reference"] for r in verb],
        verbmem_argmax_match=matches,
        privleak_forget_logprobs=forget_lp,
        privleak_holdout_logprobs=holdout_lp,
    )
    summary = score_muse(outputs, MUSE_PRESETS["open-unlearning"])

    scorer = rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=True)

    def cut(text):
        for word in ["\n\n", "\nQuestion", "Question:"]:
            text = text.split(word)[0] if word in text else text
        return text.strip()

    knowmem_f = np.mean(
        [
            scorer.score(r, cut(g))["rougeL"].fmeasure
            for g, r in zip(outputs.knowmem_forget_generations, outputs.knowmem_forget_references)
        ]
    )
    assert summary["metrics"]["knowmem_f"] == pytest.approx(knowmem_f, abs=1e-12)

    def min_k(row):  # the reference: last token dropped, max(1, floor(0.4 T)) lowest
        row = sorted(row[:-1])
        return -np.mean(row[: max(1, int(len(row) * 0.4))])

    forget_scores, holdout_scores = [min_k(r) for r in forget_lp], [min_k(r) for r in holdout_lp]
    pairs = [(h > f) + 0.5 * (h == f) for f in forget_scores for h in holdout_scores]
    auc = sum(pairs) / len(pairs)
    assert summary["metrics"]["mia_min_k_auc"] == pytest.approx(auc, abs=1e-12)
    assert summary["metrics"]["privleak"] == pytest.approx(((1 - auc) - 0.5) / (0.5 + 1e-10) * 100, rel=1e-9)
    assert all(0.0 < value <= 1.0 for value in summary["per_example"]["extraction_strength"])  # >= 1/|y|
