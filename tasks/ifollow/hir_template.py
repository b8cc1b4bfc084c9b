"""HiR's six concatenation templates: a question and its criteria (constraint texts) as one prompt.

HIR-16K rows carry ``extra_info.question`` (the request), ``extra_info.criteria`` (one text per
constraint, in the order of the constraint list) and ``extra_info.q_type``, which names the
template that joined them into the prompt. HiR's trainer rebuilds prompts with the same template
over a subset of the criteria, and the paper's leave-one-out context P_\\k is that template over
all criteria but c_k (Appendix C). The templates, with Q the question and c_1..c_M the criteria:

- ``type1``: Q, a space, then the criteria as sentences (below).
- ``type2``: Q, a newline, then the criteria as sentences.
- ``type3``: Q, a blank line, ``The output must follow the following rules:`` and one line per
  criterion, numbered ``1. c_1``, ``2. c_2``, ... (numbers follow the criteria kept).
- ``type4``: Q, a blank line, one line ``- c_i`` per criterion.
- ``type5``: the criteria as sentences, a blank line, then Q.
- ``type6``: Q, a blank line, one line per criterion (the criterion alone).

"As sentences": each criterion followed by ``". "``, or by ``" "`` when it already ends with
``,``, ``.``, ``?`` or ``!``; the joined text is stripped of outer whitespace, as is every
block of lines. A criterion must not be empty. With no criterion left (leaving out the only
one), the prompt is Q alone: HiR never renders an empty list, and Q is the request without its
rubric.
"""

from __future__ import annotations

from collections.abc import Sequence

HIR_Q_TYPES = ("type1", "type2", "type3", "type4", "type5", "type6")
RULES_HEADER = "The output must follow the following rules:"
_SENTENCE_ENDS = (",", ".", "?", "!")


def as_sentences(criteria: Sequence[str]) -> str:
    """The criteria joined as sentences (type1, type2 and type5)."""
    return "".join(c + (" " if c.endswith(_SENTENCE_ENDS) else ". ") for c in criteria).strip()


def as_lines(items: Sequence[str]) -> str:
    """One item per line (type3, type4 and type6), the block stripped of outer whitespace."""
    return "".join(item + "\n" for item in items).strip()


def _block(question: str, criteria: Sequence[str], q_type: str) -> str:
    if q_type == "type1":
        return f"{question} {as_sentences(criteria)}"
    if q_type == "type2":
        return f"{question}\n{as_sentences(criteria)}"
    if q_type == "type3":
        numbered = [f"{i}. {c}" for i, c in enumerate(criteria, start=1)]
        return f"{question}\n\n{as_lines([RULES_HEADER, *numbered])}"
    if q_type == "type4":
        return f"{question}\n\n{as_lines([f'- {c}' for c in criteria])}"
    if q_type == "type5":
        return f"{as_sentences(criteria)}\n\n{question}"
    return f"{question}\n\n{as_lines(criteria)}"  # type6


def check_template_inputs(question: object, criteria: object, q_type: object) -> str | None:
    """Why (question, criteria, q_type) cannot be rendered, or None if they can."""
    if q_type not in HIR_Q_TYPES:
        return f"unknown q_type {q_type!r} (HiR's templates: {', '.join(HIR_Q_TYPES)})"
    if not isinstance(question, str):
        return f"question must be a string, got {type(question).__name__}"
    if not isinstance(criteria, (list, tuple)) or not all(isinstance(c, str) for c in criteria):
        return "criteria must be a list of strings"
    empty = [i for i, c in enumerate(criteria) if not c]
    if empty:
        return f"criteria {empty} are empty"
    return None


def render_hir(question: str, criteria: Sequence[str], q_type: str, skip: int | None = None) -> str:
    """The prompt HiR's template ``q_type`` builds from ``question`` and ``criteria`` (without ``skip``)."""
    problem = check_template_inputs(question, list(criteria), q_type)
    if problem:
        raise ValueError(problem)
    kept = [c for i, c in enumerate(criteria) if i != skip]
    if not kept:
        return question
    return _block(question, kept, q_type)
