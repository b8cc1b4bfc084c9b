"""Benchmark evaluators: each turns raw model outputs into per-case verdicts and a summary.

The protocol lives in :mod:`evals.base`; the runner (``mrbench eval``) in :mod:`evals.runner`.
"""
