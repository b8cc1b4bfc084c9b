"""What each ``(n=K)`` the report prints counts: one note per kind, printed where a table (HTML)
or the page (Markdown) shows one."""

from __future__ import annotations

CELL_N_NOTE = ("(n=K) after a value: only K of the row's seeds have a value in this column (a reward family none "
               "of a seed's training prompts asked for, or a benchmark a run did not evaluate); the mean, std and "
               "interval are over those K. The seeds column counts all of the row's seeds.")
DIFF_N_NOTE = ("(n=K) in a difference: the number of seeds that both this row and the baseline row ran and that "
               "have this column; the paired comparison uses those K pairs.")


def n_notes(texts: list[str], note: str) -> list[str]:
    """``[note]`` when one of ``texts`` prints an ``(n=K)``, else nothing."""
    return [note] if any("(n=" in t for t in texts) else []


def md_n_notes(lines: list[str]) -> list[str]:
    """The Markdown paragraphs (each after a blank line) that explain the ``(n=K)`` in ``lines``."""
    if not any("(n=" in line for line in lines):
        return []
    return ["", f"{CELL_N_NOTE} {DIFF_N_NOTE}"]
