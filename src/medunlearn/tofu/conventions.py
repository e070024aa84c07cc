"""How questions are rendered, answers generated and answer tokens scored: our defaults and the reference's.

OpenUnlearning [ref] and the medunlearn runner agree on the metric definitions but differ in a few
conventions. Each is a field of :class:`TofuConventions`; ``PRESETS["open-unlearning"]`` selects the
reference's:

================================  ===========================  =====================================
convention                        medunlearn                   open-unlearning [ref]
================================  ===========================  =====================================
prompt rendering                  tokenizer's chat template,   chat template with the system prompt
                                  no system prompt             "You are a helpful assistant."
max new tokens (greedy)           64                           200 (configs/generation/default.yaml)
stop strings (text cut after)     none (EOS token only)        none in the TOFU config (EOS only)
EOS in Prob / truth ratio labels  yes                          yes (appended when missing)
EOS in ES / EM / min-k tokens     yes                          no (the last label token is dropped)
min-k% token count                ceil(k·n)                    max(1, floor(k·n))
min-k%++ variance floor           1e-24                        1e-6
extraction strength, no suffix    0 (k = n)                    1/n (the loop stops at k = n − 1)
  of the greedy answer matches
ratio denominators                exact                        + 1e-10
loss averaging (unlearning)       per answer, then answers     per method (``reference``): one token
                                                               mean over the batch, RMU per answer
================================  ===========================  =====================================

The reference's generation length was read from OpenUnlearning's ``configs/generation/default.yaml`` at
commit d3d7cf9 (``max_new_tokens: 200``), which every ``configs/eval/tofu_metrics/*_ROUGE.yaml`` includes as
its ``generation_args``. The conventions live in :mod:`medunlearn.chat`, so that ``finetune`` and ``unlearn``
render training examples by the same preset that evaluation uses.

``PRESETS["open-unlearning-llama3"]`` renders without a chat template, with the literal Llama-3 tags of
OpenUnlearning's ``configs/model/Llama-3.2-*-Instruct.yaml`` (system prompt included), as the reference does
for its TOFU Llama models. With a chat template, the runner scores the answer tokens up to and including the
end-of-turn token; the reference also scores what the template writes after it (a newline for ChatML) plus an
appended EOS. With the tag rendering (or Llama-3's template) nothing follows and both score the same tokens.

:class:`ConventionTokenizer` applies the rendering conventions to the unchanged evaluation runner: the runner
renders every example through ``tokenizer.apply_chat_template``, and this wrapper answers that call the way
the chosen convention renders (adding the system prompt, or the literal tags). The scoring conventions are
applied when the stored per-token outputs are turned into metrics (:mod:`medunlearn.tofu.scoring`).
"""

from __future__ import annotations

from medunlearn.chat import PRESETS, Conventions, ConventionTokenizer, preset

TofuConventions = Conventions
"""The conventions of a run (they live in :mod:`medunlearn.chat`, where training and evaluation both read
them); the name TOFU mode has always used."""

__all__ = ["PRESETS", "ConventionTokenizer", "TofuConventions", "preset"]
