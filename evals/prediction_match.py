"""Match predictions to an evaluator's cases, and refuse to score a file that matches none.

A prediction finds its case (:class:`evals.base.EvalCase`) by what its format keys it by
(:mod:`evals.prediction_formats`):

- an id: the case's id, else, for cases that know their row in the dataset file
  (``meta["row"]``), that row index (``{"id": 0}`` is Spider dev's first question);
- a prompt: the case whose ``meta["prompt"]`` is that text (if none is, the case whose prompt
  equals it up to surrounding whitespace);
- a position: the case at that row; a database named by the prediction must be the case's
  (``meta["db_id"]``), else the prediction matches nothing (the file is out of order).

A later prediction for the same case replaces the earlier one (and is counted). When nothing
matches, :func:`require_a_match` raises :class:`PredictionsDoNotMatch` with one expected and one
received key; otherwise :func:`match_warnings` says how many cases had no prediction and how many
predictions matched no case.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from evals.base import EvalCase
from evals.prediction_formats import Prediction, PredictionFile, clip_text


class PredictionsDoNotMatch(ValueError):
    """No prediction of a file matches any case: scoring it would report a plausible-looking zero."""


#: how many unmatched or repeated predictions are kept by name (the rest are counted only, so that
#: a huge file of the wrong benchmark needs no memory per row)
EXAMPLES_KEPT = 20


@dataclass
class MatchResult:
    responses: dict[str, str] = field(default_factory=dict)  # case id -> response
    unmatched: list[str] = field(default_factory=list)  # "id 'q3' (line 3)": the first EXAMPLES_KEPT
    missing: list[str] = field(default_factory=list)  # ids of cases (not skipped) with no prediction
    repeated: list[str] = field(default_factory=list)  # predictions for a case already predicted (first ones)
    read: int = 0  # predictions read from the file
    unmatched_count: int = 0
    repeated_count: int = 0
    first: Prediction | None = None  # the file's first prediction (for messages)


def _row(case: EvalCase) -> int | None:
    row = case.meta.get("row")
    return row if isinstance(row, int) and not isinstance(row, bool) and row >= 0 else None


class CaseIndex:
    """The cases by id, row and prompt text."""

    def __init__(self, cases: Sequence[EvalCase]) -> None:
        self.cases = list(cases)
        self.by_id = {c.id: c for c in cases}
        self.by_row = {row: c for c in cases if (row := _row(c)) is not None}
        prompts = [(c.meta["prompt"], c) for c in cases if isinstance(c.meta.get("prompt"), str)]
        self.by_prompt = dict(prompts)
        self.by_stripped_prompt = {p.strip(): c for p, c in prompts}

    def find(self, prediction: Prediction) -> tuple[EvalCase | None, str]:
        """(case, "") or (None, why it matches none)."""
        if prediction.id is not None:
            case = self.by_id.get(prediction.id)
            if case is None and prediction.id.isdigit() and prediction.id.isascii():
                case = self.by_row.get(int(prediction.id))
            return case, "" if case else prediction.key_text()
        if prediction.prompt is not None:
            case = self.by_prompt.get(prediction.prompt) or self.by_stripped_prompt.get(prediction.prompt.strip())
            return case, "" if case else prediction.key_text()
        if prediction.position is not None:
            case = self.by_row.get(prediction.position)
            if case is None:
                return None, prediction.key_text()
            expected_db = case.meta.get("db_id")
            if prediction.db_id and expected_db and prediction.db_id != expected_db:
                return None, (f"names database {prediction.db_id!r}, but question {prediction.position} "
                              f"is on {expected_db!r}")
            return case, ""
        return None, "no id, key or prompt"

    def expected_key(self, prediction: Prediction) -> str:
        """How a case is named, in the terms of ``prediction``'s key, for messages."""
        first = next((c for c in self.cases if not c.meta.get("skip_reason")), self.cases[0])
        row = _row(first)
        if prediction.prompt is not None and isinstance(first.meta.get("prompt"), str):
            return f"a prompt such as {clip_text(first.meta['prompt'])!r}"
        if prediction.position is not None:
            if not self.by_row:
                return "ids (this benchmark's cases have no question numbers)"
            return f"questions {min(self.by_row)} to {max(self.by_row)}"
        return f"an id such as {first.id!r}" + (f" (or its row index, {row})" if row is not None else "")


def match_predictions(file: PredictionFile, cases: Sequence[EvalCase]) -> MatchResult:
    """Match the file's predictions (read in one pass, so a streamed file is never held whole)."""
    index = CaseIndex(cases)
    result = MatchResult()
    for prediction in file.predictions:
        result.read += 1
        if result.first is None:
            result.first = prediction
        case, why = index.find(prediction)
        if case is None:
            result.unmatched_count += 1
            if len(result.unmatched) < EXAMPLES_KEPT:
                result.unmatched.append(f"{why} ({prediction.where})")
            continue
        if case.id in result.responses:
            result.repeated_count += 1
            if len(result.repeated) < EXAMPLES_KEPT:
                result.repeated.append(f"{prediction.key_text()} ({prediction.where})")
        result.responses[case.id] = prediction.response
    result.missing = [c.id for c in cases if c.id not in result.responses and not c.meta.get("skip_reason")]
    return result


def require_a_match(file: PredictionFile, result: MatchResult, cases: Sequence[EvalCase], benchmark: str,
                    formats: Sequence[str]) -> None:
    """Raise :class:`PredictionsDoNotMatch` when the file has no prediction or none matches a case."""
    how = f"detected as {file.format}" if file.detected else f"read as {file.format}, as --format says"
    if result.first is None:
        raise PredictionsDoNotMatch(f"{file.path} ({how}) holds no predictions")
    if result.responses or not cases:
        return
    first = result.first
    raise PredictionsDoNotMatch(
        f"none of the {result.read} predictions in {file.path} ({how}) matches a {benchmark} case: "
        f"expected {CaseIndex(cases).expected_key(first)}, got {result.unmatched[0]}. "
        f"{benchmark} reads predictions as {', '.join(formats)} (name one with --format)")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def match_warnings(result: MatchResult, n_cases: int) -> list[str]:
    """One line per kind of mismatch (empty when every case has exactly one prediction)."""
    out = []
    if result.missing:
        missing, cases = len(result.missing), "case" if n_cases == 1 else "cases"
        were = "was" if missing == 1 else "were"
        out.append(f"{len(result.responses):,} of {n_cases:,} {cases} predicted: the other {missing:,} had no "
                   f"prediction and {were} scored as wrong (first: {result.missing[0]!r}); --categories and --limit "
                   f"score only the cases a file predicts")
    if result.unmatched:
        out.append(f"{_count(result.unmatched_count, 'prediction')} matched no case (first: {result.unmatched[0]})")
    if result.repeated:
        out.append(f"{_count(result.repeated_count, 'prediction')} repeated a case already predicted; the later "
                   f"one is used (first: {result.repeated[0]})")
    return out
