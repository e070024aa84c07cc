r"""Unlearning on raw text (``UnlearningConfig.data_format = "text"``): documents cut into token chunks.

MUSE forgets documents, not chat QA. A forget or retain set of documents (one per row, in ``text_column``) is
tokenised without a chat template and cut into chunks; each chunk is one example of the batches described in
``medunlearn.unlearn.data``, its ``labels`` every text token of the chunk, so each method's "answer" is the
whole chunk. With ``P`` the tokenizer's own special prefix (``tokenizer("")``: ``[BOS]`` for Llama, nothing
for GPT-2-style tokenizers):

* ``text_chunking="document"`` [ours]: each document's tokens (no special tokens) cut into consecutive
  pieces of ``max_length − |P|`` tokens; a chunk is ``P + piece`` with labels ``−100·|P| + piece``. No chunk
  mixes two documents, every chunk fits ``max_length``, and the labelled tokens of a document's chunks are
  exactly its tokens, each once.
* ``text_chunking="stream"`` [the reference's, OpenUnlearning d3d7cf9 ``src/data/pretraining.py:71-91`` and
  ``src/data/utils.py:166-176``]: all documents joined by ``"\n\n"``, tokenised as one stream, cut into
  pieces of ``max_length`` tokens; each piece is decoded and tokenised again with special tokens, kept to
  ``|P| + max_length`` tokens, labels ``−100`` on the first ``max(|P|, 1)`` tokens. The reference's piece
  count ``len // max_length + 1`` adds an empty last piece when the length is a multiple of ``max_length``
  (``pretraining.py:76``); it has no labelled token and is dropped here.

Methods that need more than the text (IdkDPO's refusals answer a question) refuse a text corpus with
:class:`TextCorpusUnsupportedError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from medunlearn.unlearn.errors import UnlearningInputError
from medunlearn.unlearn.ops import IGNORE_INDEX

if TYPE_CHECKING:
    from medunlearn.unlearn.config import UnlearningConfig

DOCUMENT_SEPARATOR = "\n\n"  # the reference's join (src/data/pretraining.py:72)


class TextCorpusUnsupportedError(UnlearningInputError):
    """The method needs question/answer rows (e.g. refusals to a question); a text corpus has none."""


def special_prefix(tokenizer) -> list[int]:
    """The tokens the tokenizer adds in front of any text (``[BOS]`` for Llama; ``[]`` for many others)."""
    return list(tokenizer("", add_special_tokens=True)["input_ids"])


def document_chunks(token_ids: list[int], prefix: list[int], max_length: int) -> list[tuple[list, list]]:
    """``(input_ids, labels)`` of each chunk of one document: ``prefix + piece`` with every piece token
    labelled, pieces of ``max_length − len(prefix)`` tokens in order (the last one shorter)."""
    size = max_length - len(prefix)
    if size < 1:
        raise UnlearningInputError(
            f"max_length {max_length} leaves no room for text after the tokenizer's {len(prefix)} special "
            "tokens"
        )
    pieces = [token_ids[start : start + size] for start in range(0, len(token_ids), size)]
    return [(prefix + piece, [IGNORE_INDEX] * len(prefix) + piece) for piece in pieces]


def stream_chunks(texts: list[str], tokenizer, max_length: int) -> list[tuple[list, list]]:
    """``(input_ids, labels)`` of each chunk of the joined corpus, as the reference's ``PretrainingDataset``
    builds them (module docstring), without its empty last piece."""
    stream = tokenizer(DOCUMENT_SEPARATOR.join(texts), add_special_tokens=False)["input_ids"]
    pieces = [stream[start : start + max_length] for start in range(0, len(stream), max_length)]
    prefix_length = len(special_prefix(tokenizer))
    unlabelled = max(prefix_length, 1)  # the reference never labels position 0 (src/data/utils.py:173-176)
    chunks = []
    for piece in pieces:
        ids = tokenizer(tokenizer.decode(piece), add_special_tokens=True)["input_ids"]
        ids = list(ids[: prefix_length + max_length])
        chunks.append((ids, [IGNORE_INDEX] * unlabelled + ids[unlabelled:]))
    return chunks


def _rows(chunks: list[tuple[list, list]]) -> dict[str, list]:
    return {
        "input_ids": [ids for ids, _ in chunks],
        "attention_mask": [[1] * len(ids) for ids, _ in chunks],
        "labels": [labels for _, labels in chunks],
    }


def tokenize_text_dataset(dataset, tokenizer, config: UnlearningConfig, name: str):
    """The chunks of a ``datasets.Dataset`` of documents (``config.text_column``) as training rows
    (``input_ids, attention_mask, labels``); ``document`` chunking keeps each chunk's disease, if any.

    Rows already tokenised (``input_ids`` and ``labels``, no text column: AMNESIA's ``--forget-on both``,
    whose note chunks and QA rows ``medunlearn.unlearn.sources.training_sets`` tokenises each by its own
    rule) are kept as they are."""
    column = config.text_column
    ready = {"input_ids", "labels"} <= set(dataset.column_names)
    if ready and column not in dataset.column_names:
        return dataset
    if column not in dataset.column_names:
        raise UnlearningInputError(
            f"{name} set has no text column {column!r} (columns: {dataset.column_names}); "
            "set --text_column, or data_format 'qa' for question/answer rows"
        )
    if config.text_chunking == "stream":
        rows = _rows(stream_chunks(list(dataset[column]), tokenizer, config.max_length))
        return type(dataset).from_dict(rows)
    keep = config.disease_column if config.disease_column in dataset.column_names else None
    prefix = special_prefix(tokenizer)

    def encode(batch):
        ids = tokenizer(batch[column], add_special_tokens=False)["input_ids"]
        per_document = [document_chunks(doc, prefix, config.max_length) for doc in ids]
        rows = _rows([chunk for chunks in per_document for chunk in chunks])
        if keep is not None:
            rows[keep] = [value for value, chunks in zip(batch[keep], per_document) for _ in chunks]
        return rows

    return dataset.map(
        encode, batched=True, remove_columns=dataset.column_names, desc=f"chunking {name} texts"
    )


def text_dataset(texts: list[str], column: str = "text"):
    """A ``datasets.Dataset`` of documents, one per row, for ``data_format="text"``."""
    import datasets

    return datasets.Dataset.from_dict({column: list(texts)})
