"""Which metrics-row keys are a reward's mean (``reward/<r>``) and which are its diagnostics
(``reward/<r>/<suffix>``, :mod:`algorithms.diagnostics`); readers of records (report, leaderboard,
run summary) take the means only. docs/logging.md lists every name."""

from __future__ import annotations

#: what follows ``reward/<r>/`` in a diagnostic entry (``reward/<r>`` alone is the reward's mean)
REWARD_SUFFIXES = ("std", "frac_groups_varying", "frac_groups_no_signal", "weight")


def reward_mean_name(key: str) -> str | None:
    """``reward/<r>`` -> ``r`` (a reward's mean in a metrics row); None for anything else, the
    ``reward/<r>/<suffix>`` diagnostics included."""
    if not key.startswith("reward/") or key.endswith(tuple("/" + s for s in REWARD_SUFFIXES)):
        return None
    return key[len("reward/"):]
