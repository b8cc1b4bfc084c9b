"""Execution match: is a predicted result the same as the reference result?

Two semantics, each the one its benchmark's official evaluator uses:

``spider`` (Spider test-suite ``exec_eval``, execution only; used for training rewards and for
every Spider-family benchmark):

- both results empty -> match, whatever their column counts;
- otherwise the row counts and the column counts must be equal;
- columns may come in any order: the results match if *some* permutation of the predicted
  columns makes the rows equal -- as sequences when the reference orders its result
  (:func:`tasks.text2sql.sqltext.order_matters`), otherwise as multisets (duplicate rows count);
- duplicate columns are just columns: a permutation may map either copy to either copy;
- values compare with Python equality on what SQLite returns: ``1 == 1.0`` is a match, there is no
  float tolerance (``0.30000000000000004 != 0.3``), ``'5' != 5``, NULL (None) equals only NULL,
  and text is compared case-sensitively.

``bird`` (BIRD's official evaluation): ``set(predicted rows) == set(reference rows)`` -- row order
and duplicate rows are ignored, column order counts, values compare as above.

The permutation search assigns predicted columns to reference columns one at a time and prunes
any partial assignment whose projected rows already differ; identical predicted columns are
tried once. The official code enumerates permutations filtered by sampled rows; the answer is
the same (does a permutation exist), the search is cheaper.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

Row = tuple[Any, ...]


def _project(rows: Sequence[Row], cols: Sequence[int]) -> list[Row]:
    return [tuple(r[c] for c in cols) for r in rows]


def spider_results_match(reference: Sequence[Row], predicted: Sequence[Row], ordered: bool) -> bool:
    """Spider test-suite result equality (see the module docstring)."""
    if len(reference) == 0 and len(predicted) == 0:
        return True
    if len(reference) != len(predicted):
        return False
    ncols = len(reference[0])
    if len(predicted[0]) != ncols or any(len(r) != ncols for r in predicted) or any(
            len(r) != ncols for r in reference):
        return False
    ref_rows = [tuple(r) for r in reference]
    pred_rows = [tuple(r) for r in predicted]
    # fast path: the identity permutation
    if ordered:
        if ref_rows == pred_rows:
            return True
    elif Counter(ref_rows) == Counter(pred_rows):
        return True
    if ncols == 1:
        return False
    ref_cols = [tuple(r[j] for r in ref_rows) for j in range(ncols)]
    pred_cols = [tuple(r[j] for r in pred_rows) for j in range(ncols)]
    if ordered:
        # rows align position by position, so each column must equal its partner column exactly
        return Counter(ref_cols) == Counter(pred_cols)
    ref_sig = [Counter(c) for c in ref_cols]
    pred_sig = [Counter(c) for c in pred_cols]
    candidates = [[i for i in range(ncols) if pred_sig[i] == ref_sig[j]] for j in range(ncols)]
    if any(not c for c in candidates):
        return False
    return _search(ref_rows, pred_rows, pred_cols, candidates)


def _search(ref_rows: list[Row], pred_rows: list[Row], pred_cols: list[tuple[Any, ...]],
            candidates: list[list[int]], budget: int = 200_000) -> bool:
    """Backtracking over assignments gold column j -> predicted column, pruned on projections."""
    ncols = len(candidates)
    order = sorted(range(ncols), key=lambda j: len(candidates[j]))
    assigned: list[int] = []  # predicted column for order[k]
    used: set[int] = set()
    steps = 0

    def consistent() -> bool:
        gold_cols = order[: len(assigned)]
        return Counter(_project(ref_rows, gold_cols)) == Counter(_project(pred_rows, assigned))

    def go(k: int) -> bool:
        nonlocal steps
        if k == ncols:
            return True
        tried: set[tuple[Any, ...]] = set()
        for i in candidates[order[k]]:
            if i in used or pred_cols[i] in tried:
                continue
            tried.add(pred_cols[i])
            steps += 1
            if steps > budget:
                return False
            assigned.append(i)
            used.add(i)
            if consistent() and go(k + 1):
                return True
            assigned.pop()
            used.discard(i)
        return False

    return go(0)


def bird_results_match(reference: Sequence[Row], predicted: Sequence[Row]) -> bool:
    """BIRD's official rule: the sets of rows are equal (column order counts)."""
    return {tuple(r) for r in reference} == {tuple(r) for r in predicted}


def results_match(reference: Sequence[Row], predicted: Sequence[Row], *, ordered: bool,
                  semantics: str = "spider") -> bool:
    """Dispatch on ``semantics`` ("spider" or "bird")."""
    if semantics == "spider":
        return spider_results_match(reference, predicted, ordered)
    if semantics == "bird":
        return bird_results_match(reference, predicted)
    raise ValueError(f"unknown match semantics {semantics!r}; known: 'spider', 'bird'")
