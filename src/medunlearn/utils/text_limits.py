"""What makes one text value of a note, a question or an answer unusable [ours]: blank, too long for its
field, or holding a NUL character. One home for these rules: AMNESIA's source readers, the built-split check
of :mod:`medunlearn.data_loading` and TOFU-format folders all ask :func:`text_problem` after their own type
check.
"""

from __future__ import annotations

# The longest text field of a notes or QA row but the note itself (a question, an answer, a title, an
# id) [ours]: PMC-Patients' titles and the QA the papers generate are a few hundred characters, so 100,000
# (about 25,000 tokens, past the context of the models here) is a wrong column or a concatenated file, never a
# value; a 5 MB answer was read, tokenised and trained on. A note has its own limit (the reader's ``limit``).
MAX_TEXT_CHARACTERS = 100_000
# The longest note read: spaCy's own default `nlp.max_length`. A PMC-Patients note is a few thousand
# characters; a longer one is a wrong column or a concatenated file, and would cost minutes and gigabytes.
MAX_NOTE_CHARACTERS = 1_000_000


def text_problem(text: str, *, blank_ok: bool = True, limit: int = MAX_TEXT_CHARACTERS) -> str | None:
    r"""Why the string ``text`` is no usable value of a note, a question or an answer, or ``None``: blank
    (unless ``blank_ok``), longer than ``limit`` characters (before a tokenizer or parser spends minutes on
    it), or holding a NUL character (JSON's ``\u0000``: no text of a note or a QA, and the end of a string to
    C code a tokenizer or parquet reader may hand it to). The one home of these rules: every reader of such
    fields (AMNESIA's source files, a built split, a TOFU-format folder) asks it after its own type check.

    >>> text_problem("Yes."), text_problem("  ", blank_ok=False)
    (None, 'the text is empty or only spaces')
    >>> print(text_problem("a\x00b"))
    holds a NUL character (\u0000) at character 2: no text holds one
    """
    if not blank_ok and not text.strip():
        return "the text is empty or only spaces"
    if len(text) > limit:
        return f"is {len(text):,} characters long; the limit is {limit:,}"
    if "\x00" in text:
        return f"holds a NUL character (\\u0000) at character {text.index(chr(0)) + 1}: no text holds one"
    return None
