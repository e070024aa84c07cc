"""BioDivergence: contextual contradictions between claims of biomedical abstracts (SPEC §3)."""
