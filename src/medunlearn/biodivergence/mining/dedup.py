"""Stage 2 of BioDivergence construction: normalise and de-duplicate, hierarchically
(docs: biodivergence-construction.md).

The paper [paper] cleans, normalises and de-duplicates its 202,180 abstracts "hierarchically" without saying
how; our levels [ours], each counted for the report:

1. **Exact duplicates.** The abstract text is normalised by :func:`normalise_text` (Unicode NFKC, case-fold,
   punctuation to spaces, whitespace collapsed) and hashed with BLAKE2b; a record whose hash, or whose
   ``pmid``, repeats an earlier record's is an exact duplicate (PubMed update files and Europe PMC re-issue
   the same article).
2. **Near duplicates.** MinHash over *character* 5-shingles of the normalised text (``unit="char"``,
   ``shingle=5``; ``unit="word"`` takes word shingles instead), indexed by ``datasketch.MinHashLSH`` at the
   Jaccard ``threshold``. Records are visited in input order: a record is a near duplicate when the index
   returns an earlier *kept* record whose estimated Jaccard similarity is at least ``threshold`` (the LSH
   candidates are checked, so a band collision alone never merges two texts); otherwise it is kept and
   indexed. Character shingles are chosen because a few changed words in a 150-word abstract change far
   fewer of its ~1,000 character shingles than of its ~150 word shingles, so the estimate stays well above
   the threshold for true near copies while distinct abstracts share few shingles.
3. **Duplicate claims** (after extraction): :func:`deduplicate_claims` drops a claim whose normalised text
   repeats an earlier claim's.

The first record of each group, in input order, is kept. MinHash signatures follow datasketch's
``affine32`` scheme (its permutations, drawn from ``seed``; the MurmurHash3 finalizer; ``a·h + b`` in
uint32), computed for a whole batch of documents at once in numpy instead of one Python call per shingle;
only the base hash of a shingle is ours (a polynomial hash of its code points, see :func:`shingle_hashes`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd

from medunlearn.errors import InputError

_PUNCTUATION = re.compile(r"[^\w\s]+|_+")
_FMIX32 = (np.uint32(16), np.uint32(0x85EBCA6B), np.uint32(13), np.uint32(0xC2B2AE35), np.uint32(16))
_POLY = np.uint64(0x100000001B3)  # FNV-1a 64-bit prime as the polynomial base
_MIX = np.uint64(0x9E3779B97F4A7C15)
_BATCH_SHINGLES = 1 << 16  # shingles per permutation block: 65,536 × 128 uint32 = 32 MiB


class DedupInputError(InputError):
    """Input that de-duplication cannot use: a missing text column or a bad parameter."""


def normalise_text(text: str) -> str:
    r"""The form two texts are compared in: NFKC, case-folded, punctuation to spaces, whitespace collapsed.

    >>> normalise_text("  Aspirin  REDUCED\tpain (p < 0.05).  ")
    'aspirin reduced pain p 0 05'
    >>> normalise_text("ﬁbrosis") == normalise_text("FIBROSIS")
    True
    """
    return _normalise_series(pd.Series([text], dtype=object)).iloc[0]


def _normalise_series(texts: pd.Series) -> pd.Series:
    texts = texts.fillna("").astype(str).str.normalize("NFKC").str.casefold()
    return texts.str.replace(_PUNCTUATION, " ", regex=True).str.split().str.join(" ")


def text_hashes(texts: pd.Series) -> pd.Series:
    """BLAKE2b (16-byte digest, hex) of each normalised text."""
    return _normalise_series(texts).map(
        lambda text: hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()
    )


def _fmix32(values: np.ndarray) -> np.ndarray:
    s1, m1, s2, m2, s3 = _FMIX32
    values = values ^ (values >> s1)
    values = values * m1
    values = values ^ (values >> s2)
    values = values * m2
    return values ^ (values >> s3)


def _token_codes(texts: Sequence[str], unit: str) -> tuple[np.ndarray, np.ndarray]:
    """uint64 token codes of all texts concatenated, and each text's token count (chars or words)."""
    if unit == "char":
        joined = "".join(texts)
        codes = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
        return codes, np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    words = [text.split() for text in texts]
    counts = np.fromiter((len(w) for w in words), dtype=np.int64, count=len(words))
    flat = [word for text_words in words for word in text_words]
    if not flat:
        return np.zeros(0, np.uint64), counts
    # A word's code: the polynomial hash of its code points, summed segment-wise with reduceat.
    lengths = np.fromiter((len(w) for w in flat), dtype=np.int64, count=len(flat))
    chars = np.frombuffer("".join(flat).encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    position = np.arange(chars.size) - np.repeat(starts, lengths)
    weights = _powers(int(lengths.max()))[position]
    with np.errstate(over="ignore"):
        return np.add.reduceat((chars + _MIX) * weights, starts), counts


def _powers(n: int) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.cumprod(np.concatenate(([np.uint64(1)], np.full(max(n - 1, 0), _POLY, np.uint64))))


def shingle_hashes(
    texts: Sequence[str], shingle: int = 5, unit: str = "char"
) -> tuple[np.ndarray, np.ndarray]:
    """32-bit hashes of every ``shingle``-token window of every text, and each text's shingle count.

    A text shorter than one shingle gives one shingle, itself. Windows never cross two texts.
    """
    codes, counts = _token_codes(texts, unit)
    offsets = np.concatenate(([0], np.cumsum(counts)))
    n_shingles = np.where(counts > 0, np.maximum(counts - shingle + 1, 1), 0)
    # Window start positions within the concatenation, and each window's length (short texts: all of it).
    starts = np.repeat(offsets[:-1], n_shingles) + (
        np.arange(n_shingles.sum()) - np.repeat(np.cumsum(n_shingles) - n_shingles, n_shingles)
    )
    lengths = np.repeat(np.minimum(counts, shingle), n_shingles)
    hashes = np.zeros(starts.size, dtype=np.uint64)
    short = np.flatnonzero(lengths < shingle)  # texts shorter than a shingle: rare, hashed apart
    last = max(codes.size - 1, 0)
    with np.errstate(over="ignore"):
        for j in range(shingle):
            hashes = hashes * _POLY + codes[np.minimum(starts + j, last)] + _MIX
        if short.size:
            hashes[short] = 0
            for j in range(shingle):
                inside = short[j < lengths[short]]
                hashes[inside] = hashes[inside] * _POLY + codes[starts[inside] + j] + _MIX
        hashes ^= hashes >> np.uint64(29)
        hashes *= _MIX
    return (hashes >> np.uint64(32)).astype(np.uint32), n_shingles


def minhash_signatures(
    texts: Sequence[str], num_perm: int = 128, shingle: int = 5, seed: int = 0, unit: str = "char"
) -> np.ndarray:
    """MinHash signatures, shape ``(len(texts), num_perm)`` uint32, in datasketch's ``affine32`` scheme."""
    from datasketch import MinHash

    a, b = (np.asarray(p, dtype=np.uint32) for p in MinHash(num_perm=num_perm, seed=seed).permutations)
    # Permutations along rows, shingles along columns: each document's shingles are one contiguous run of a
    # row, which makes the min-reduction ~20x faster than over a (shingles, permutations) block.
    signatures = np.full((num_perm, len(texts)), np.iinfo(np.uint32).max, dtype=np.uint32)
    hashes, n_shingles = shingle_hashes(texts, shingle, unit)
    if hashes.size == 0:
        return np.ascontiguousarray(signatures.T)
    owner = np.repeat(np.arange(len(texts)), n_shingles)
    mixed = _fmix32(hashes)
    for start in range(0, mixed.size, _BATCH_SHINGLES):
        block = slice(start, start + _BATCH_SHINGLES)
        permuted = a[:, None] * mixed[None, block] + b[:, None]  # uint32 wraparound is the modulus
        block_owner = owner[block]
        firsts = np.flatnonzero(np.r_[True, block_owner[1:] != block_owner[:-1]])
        docs = block_owner[firsts]
        signatures[:, docs] = np.minimum(signatures[:, docs], np.minimum.reduceat(permuted, firsts, axis=1))
    return np.ascontiguousarray(signatures.T)


def _text_column(abstracts: pd.DataFrame) -> pd.Series:
    if "abstract" in abstracts.columns:
        return abstracts["abstract"]
    if "text" in abstracts.columns:
        return abstracts["text"]
    raise DedupInputError(f"abstracts need an `abstract` (or `text`) column; got {list(abstracts.columns)}")


def deduplicate_abstracts(
    abstracts: pd.DataFrame,
    threshold: float = 0.8,
    num_perm: int = 128,
    shingle: int = 5,
    seed: int = 0,
    *,
    unit: Literal["char", "word"] = "char",
) -> tuple[pd.DataFrame, dict]:
    """Drop exact, then near duplicates, keeping the first of each group; return the rest and the counts.

    Parameters:
        abstracts: a frame with ``abstract`` (or ``text``) and, optionally, ``pmid``.
        threshold: Jaccard similarity of shingle sets from which two texts are near duplicates [ours].
        num_perm: MinHash permutations.
        shingle: tokens per shingle.
        seed: seed of the MinHash permutations.
        unit: what a shingle token is.

    Returns ``(kept, counts)``: ``kept`` in input order with its original index, and ``counts`` =
    ``{"abstracts", "exact_duplicates", "near_duplicates", "kept"}``.

    >>> frame = pd.DataFrame({"pmid": ["1", "2", "3"], "abstract": [
    ...     "Aspirin reduced pain in adults with migraine in a randomised trial of two hundred patients.",
    ...     "ASPIRIN reduced pain, in adults with migraine in a randomised trial of two hundred patients!",
    ...     "Statins lowered LDL cholesterol in older women."]})
    >>> kept, counts = deduplicate_abstracts(frame)
    >>> kept["pmid"].tolist(), counts
    (['1', '3'], {'abstracts': 3, 'exact_duplicates': 1, 'near_duplicates': 0, 'kept': 2})
    """
    if not 0.0 < threshold <= 1.0:
        raise DedupInputError(f"threshold must be in (0, 1], got {threshold}")
    if shingle < 1 or num_perm < 2:
        raise DedupInputError(f"shingle must be >= 1 and num_perm >= 2, got {shingle} and {num_perm}")
    if unit not in ("char", "word"):
        raise DedupInputError(f"unit must be 'char' or 'word', got {unit!r}")
    texts = _text_column(abstracts)
    n_in = len(abstracts)
    normalised = _normalise_series(texts)
    digests = normalised.map(lambda text: hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest())
    exact = digests.duplicated(keep="first").to_numpy().copy()
    if "pmid" in abstracts.columns:
        exact |= abstracts["pmid"].astype(str).duplicated(keep="first").to_numpy()
    candidates = np.flatnonzero(~exact)
    near = np.zeros(n_in, dtype=bool)
    if candidates.size > 1:
        near[candidates] = _near_duplicates(
            normalised.iloc[candidates].tolist(), threshold, num_perm, shingle, seed, unit
        )
    keep = ~exact & ~near
    counts = {
        "abstracts": int(n_in),
        "exact_duplicates": int(exact.sum()),
        "near_duplicates": int(near.sum()),
        "kept": int(keep.sum()),
    }
    return abstracts.loc[keep], counts


def _near_duplicates(
    texts: list[str], threshold: float, num_perm: int, shingle: int, seed: int, unit: str
) -> np.ndarray:
    """For texts in order: True where an earlier kept text is a near duplicate (LSH candidate, checked)."""
    from datasketch import LeanMinHash, MinHashLSH

    signatures = minhash_signatures(texts, num_perm=num_perm, shingle=shingle, seed=seed, unit=unit)
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    duplicate = np.zeros(len(texts), dtype=bool)
    for index, signature in enumerate(signatures):
        minhash = LeanMinHash(seed=seed, hashvalues=signature, scheme="affine32")
        found = lsh.query(minhash)
        if found:
            found = np.fromiter(found, dtype=np.int64, count=len(found))
            similarity = (signatures[found] == signature).mean(axis=1)
            if (similarity >= threshold).any():
                duplicate[index] = True
                continue
        lsh.insert(index, minhash, check_duplication=False)
    return duplicate


def deduplicate_claims(claims: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Drop claims whose normalised ``text`` repeats an earlier claim's; return the rest and how many went.

    >>> frame = pd.DataFrame({"text": ["Aspirin reduced pain.", "aspirin  reduced pain", "Statins work."]})
    >>> kept, dropped = deduplicate_claims(frame)
    >>> kept["text"].tolist(), dropped
    (['Aspirin reduced pain.', 'Statins work.'], 1)
    """
    if "text" not in claims.columns:
        raise DedupInputError(f"claims need a `text` column; got {list(claims.columns)}")
    repeated = text_hashes(claims["text"]).duplicated(keep="first").to_numpy()
    return claims.loc[~repeated], int(repeated.sum())
