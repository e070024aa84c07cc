"""AMNESIA sources beyond the fictitious cohort and the PMC-Patients reader: the LLM-built pipeline
(:mod:`.llm_built`: disease labels, QA generation, a judge panel), which needs only notes."""
