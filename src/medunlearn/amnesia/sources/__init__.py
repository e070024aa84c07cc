"""The three AMNESIA sources, one module (or package) each: the fictitious cohort (:mod:`.synthetic`, the
embedded default), real notes with their QA (:mod:`.pmc_patients`) and the LLM-built QA (:mod:`.llm_built`:
disease labels, QA generation, a judge panel), which needs only notes. :mod:`medunlearn.amnesia.pipeline`
turns any of them into the folder.

The LLM-built package's modules, by job: :mod:`.llm_built` (the pipeline, and every public name),
:mod:`.llm_built.construction_config` (settings, prompts), :mod:`.llm_built.construction_state` (a patient's
slots and attempts), :mod:`.llm_built.stage_chats` (the LLM calls), :mod:`.llm_built.note_labels` (stage 1),
:mod:`.llm_built.qa_generation` (stage 2), :mod:`.llm_built.judge_stage` and :mod:`.llm_built.judge_panel`
(stage 3), :mod:`.llm_built.construction_report` (stage 4); its prompts are ``llm_built/prompts/*.yaml``."""
