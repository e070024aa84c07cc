"""Helpers shared by the unlearning method tests: tokenise QA rows, memorise them, probe answers and
parameters.

Importable from any test (``tests`` is on pytest's ``pythonpath``): ``from tiny_training import answer_nll``.
"""

from __future__ import annotations

import socket

import torch
from hypothesis import strategies as st

from medunlearn.models import build_tiny_llama
from medunlearn.unlearn.data import collate_examples, tokenize_prompt_completion
from medunlearn.unlearn.ops import nll_loss


def qa_batch(tokenizer, rows):
    tokens = tokenize_prompt_completion(rows["question"], rows["answer"], tokenizer, 128)
    return collate_examples(
        [dict(zip(tokens, values)) for values in zip(*tokens.values())], tokenizer.pad_token_id
    )


def memorised_tiny_model(tokenizer, rows, steps=60):
    """A tiny Llama that has learnt the QA answers: unlearning starts from a model that knows them."""
    torch.manual_seed(0)
    model = build_tiny_llama(tokenizer)
    batch = qa_batch(tokenizer, rows)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(steps):
        loss = nll_loss(
            model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits,
            batch["labels"],
        )
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
    return [
        name
        for name, p in model.named_parameters()
        if name in before and not torch.equal(before[name], p.detach())
    ]


@st.composite
def random_batches(draw):
    """Random logits/labels: each row a prompt (-100), an answer of >= 1 token, then right padding (-100);
    and a row index to split the batch at."""
    batch_size = draw(st.integers(2, 5))
    length = draw(st.integers(4, 9))
    vocab = draw(st.integers(2, 7))
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    logits = torch.randn(batch_size, length, vocab, generator=generator) * 3
    labels = torch.randint(0, vocab, (batch_size, length), generator=generator)
    positions = torch.arange(length)
    for row in range(batch_size):
        start = draw(st.integers(1, length - 2))
        end = draw(st.integers(start + 1, length - 1))
        labels[row, (positions < start) | (positions > end)] = -100
    return logits, labels, draw(st.integers(1, batch_size - 1))


def assert_loss_splits_like_one_batch(loss, batch) -> None:
    """Per-answer reduction: a batch's loss is the row-weighted mean of its shards' losses (DDP invariance),
    and extra padding columns change nothing."""
    logits, labels, split = batch
    whole = loss(logits, labels)
    rows = len(labels)
    shards = (
        split * loss(logits[:split], labels[:split]) + (rows - split) * loss(logits[split:], labels[split:])
    ) / rows
    torch.testing.assert_close(whole, shards, atol=1e-5, rtol=1e-5)
    garbage = torch.linspace(-50.0, 50.0, logits.shape[-1]).expand(rows, 2, -1)
    padded_logits = torch.cat([logits, garbage], dim=1)
    padded_labels = torch.cat([labels, torch.full((rows, 2), -100)], dim=1)
    torch.testing.assert_close(loss(padded_logits, padded_labels), whole, atol=1e-5, rtol=1e-5)


GARBAGE = [40.0, -30.0, 7.0]  # logits at positions that must not count; huge so any leak shows


def fixed_batch():
    """B=2, T=4, V=3, for hand computations. Row 0: prompt, 2 answer tokens, padding; row 1: 2 prompt tokens,
    2 answer tokens. Next-token distributions at the answer positions: (.5,.25,.25)->label 1, (.2,.3,.5)->2 |
    (.6,.2,.2)->0, (.1,.8,.1)->1, so the answer-token probabilities are row 0: 0.25, 0.5; row 1: 0.6, 0.8."""
    logits = torch.tensor(
        [
            [[0.5, 0.25, 0.25], [0.2, 0.3, 0.5], GARBAGE, GARBAGE],
            [GARBAGE, [0.6, 0.2, 0.2], [0.1, 0.8, 0.1], GARBAGE],
        ]
    )
    is_log_prob = torch.tensor([[1, 1, 0, 0], [0, 1, 1, 0]], dtype=torch.bool)
    logits = torch.where(is_log_prob.unsqueeze(-1), logits.log(), logits)
    labels = torch.tensor([[-100, 1, 2, -100], [-100, -100, 0, 1]])
    return logits, labels


def free_port() -> int:
    """A port nobody listens on now, so concurrent launched runs on one machine do not share a rendezvous."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
