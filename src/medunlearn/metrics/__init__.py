"""Pure, vectorised metric functions (numpy). No model, no I/O.

Each function here is wrapped as an ``evaluate`` module in the repository's ``metrics/<name>/`` folder.
"""
