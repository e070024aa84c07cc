"""AMNESIA sources beyond the fictitious cohort and the PMC-Patients reader: the LLM-built pipeline
(:mod:`.llm_built`: disease labels, QA generation, a judge panel), which needs only notes.

Its modules, by job: :mod:`.llm_built` (the pipeline, and every public name), :mod:`.construction_config`
(settings, prompts), :mod:`.construction_state` (a patient's slots and attempts), :mod:`.stage_chats` (the
LLM calls), :mod:`.note_labels` (stage 1), :mod:`.qa_generation` (stage 2), :mod:`.judge_stage` and
:mod:`.judge_panel` (stage 3), :mod:`.construction_report` (stage 4)."""
