"""Training and evaluation render a QA example the same way and agree on which tokens are the answer."""

from __future__ import annotations

import pytest

from medunlearn.chat import render_conversations, render_prompts, require_chat_template

QUESTIONS = ["What was the creatinine at admission?", "Which drug was started?", "Why was the scan repeated?"]
ANSWERS = [
    "It was 2.1 mg/dL, above the reference range.",
    "Metformin.",
    "The first scan showed a new opacity.",
]


def test_a_prompt_is_the_prefix_of_its_conversation(tiny_tokenizer):
    prompts = render_prompts(tiny_tokenizer, QUESTIONS)
    conversations = render_conversations(tiny_tokenizer, QUESTIONS, ANSWERS)
    for question, answer, prompt, conversation in zip(QUESTIONS, ANSWERS, prompts, conversations):
        assert question in prompt and answer not in prompt
        assert conversation.startswith(prompt) and answer in conversation[len(prompt) :]


def test_training_labels_and_evaluation_spans_are_the_same_answer_tokens(tiny_tokenizer):
    from medunlearn.evaluation.runner import encode_examples
    from medunlearn.unlearn.data import tokenize_prompt_completion
    from medunlearn.unlearn.ops import IGNORE_INDEX

    trained = tokenize_prompt_completion(QUESTIONS, ANSWERS, tiny_tokenizer, max_length=512)
    scored = encode_examples(tiny_tokenizer, QUESTIONS, ANSWERS)
    eos = tiny_tokenizer.eos_token_id
    for row in range(len(QUESTIONS)):
        assert trained["input_ids"][row] == scored.full_ids[row]
        labelled = [token for token in trained["labels"][row] if token != IGNORE_INDEX]
        # Evaluation scores the answer up to and including the end-of-turn token; training also labels what
        # the template writes after it.
        through_eos = labelled[: labelled.index(eos) + 1]
        start, end = scored.answer_start[row], scored.answer_end[row]
        assert scored.full_ids[row][start:end] == through_eos
        assert ANSWERS[row] in tiny_tokenizer.decode(through_eos)


def test_a_tokenizer_without_a_template_is_refused_by_name(tiny_tokenizer):
    import copy

    from medunlearn.unlearn.errors import MissingChatTemplateError

    untemplated = copy.deepcopy(tiny_tokenizer)
    untemplated.chat_template = None
    with pytest.raises(MissingChatTemplateError, match="has no chat template"):
        require_chat_template(untemplated)
    require_chat_template(tiny_tokenizer)
