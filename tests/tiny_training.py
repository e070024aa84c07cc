"""Helpers shared by the unlearning method tests: tokenise QA rows, memorise them, probe answers and parameters.

Importable from any test (``tests`` is on pytest's ``pythonpath``): ``from tiny_training import answer_nll``.
"""

from __future__ import annotations

import torch

from medunlearn.models import build_tiny_llama
from medunlearn.unlearn.base import collate_examples, nll_loss, tokenize_prompt_completion


def qa_batch(tokenizer, rows):
    tokens = tokenize_prompt_completion(rows["question"], rows["answer"], tokenizer, 128)
    return collate_examples([dict(zip(tokens, values)) for values in zip(*tokens.values())], tokenizer.pad_token_id)


def memorised_tiny_model(tokenizer, rows, steps=60):
    """A tiny Llama that has learnt the QA answers: unlearning starts from a model that knows them."""
    torch.manual_seed(0)
    model = build_tiny_llama(tokenizer)
    batch = qa_batch(tokenizer, rows)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(steps):
        loss = nll_loss(model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits, batch["labels"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model


@torch.no_grad()
def logits_and_labels(model, tokenizer, rows):
    batch = qa_batch(tokenizer, rows)
    return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits, batch["labels"]


def answer_nll(model, tokenizer, rows) -> float:
    return nll_loss(*logits_and_labels(model, tokenizer, rows)).item()


def parameters_of(model):
    return {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}


def changed_parameters(before, model):
    return [name for name, p in model.named_parameters() if name in before and not torch.equal(before[name], p.detach())]
