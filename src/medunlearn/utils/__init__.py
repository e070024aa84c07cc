"""Helpers every layer may use: atomic writes, fingerprints, distributed helpers (one place for each)."""
