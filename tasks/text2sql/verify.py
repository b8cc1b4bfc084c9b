"""The three verifiers of the text-to-SQL task and the reference-result cache.

Rewards, all in {0, 1} (paper Section 5.1, SQL-R1's checks on a 0/1 scale):

- ``format``: :func:`tasks.text2sql.extract.check_format`.
- ``executable``: the first statement of the sql block inside ``<answer>`` runs in the sandbox
  without error and within the limits. No sql block: 0.
- ``execution``: after Spider's text normalisation of both queries (DISTINCT removed, ``> =``
  repaired; :func:`tasks.text2sql.sqltext.normalize_for_match`) the predicted result equals the
  reference result under :mod:`tasks.text2sql.match` (``spider`` semantics for Spider-family
  data, ``bird`` for BIRD). NaN (does not apply) only when the *reference* itself cannot run, which
  training preparation rules out.

Without a database (``meta["db_path"]`` unset: an evaluation split's question on an absent
database), a response holding SQL gets NaN (no block) for ``executable`` and ``execution``;
``format`` is still judged, and a response with no SQL still gets 0 for both.

Blocks (Appendix C) come from :mod:`tasks.text2sql.templates`. Spans: format reads the four tags;
executability reads the executed statement; execution reads the statement's select lists and
conditions (the whole statement when none are found).

Reference results are computed once per question and kept (:mod:`tasks.text2sql.refcache`).
"""

from __future__ import annotations

import math
from typing import Any

from mrbench_core.errors import response_text
from tasks.base import Verdict
from tasks.text2sql import templates
from tasks.text2sql.extract import FoundSQL, check_format, extract_answer_sql
from tasks.text2sql.match import results_match
from tasks.text2sql.refcache import ReferenceCache
from tasks.text2sql.sandbox import QueryResult, Sandbox
from tasks.text2sql.sqltext import clause_spans, normalize_for_match, order_matters

REWARD_NAMES = ["format", "executable", "execution"]

__all__ = ["REWARD_NAMES", "ReferenceCache", "execution_spans", "score_response"]


def _shift(spans: list[tuple[int, int]], offset: int) -> list[tuple[int, int]]:
    return [(s + offset, e + offset) for s, e in spans]


def execution_spans(found: FoundSQL) -> list[tuple[int, int]]:
    """Select lists and conditions of the executed statement, as response offsets."""
    parts = clause_spans(found.statement)
    spans = sorted(parts["select"] + parts["conditions"])
    if not spans:
        return [found.statement_span]
    return _shift(spans, found.statement_span[0])


def score_response(meta: dict[str, Any], response: str, sandbox: Sandbox,
                   cache: ReferenceCache) -> list[Verdict]:
    """The three verdicts for one response. Never raises on ``response``."""
    text = response_text(response)
    fmt = check_format(text)
    format_v = Verdict("format", 1.0 if fmt.ok else 0.0, fmt.reason, block=templates.FORMAT_BLOCK,
                       spans=fmt.tag_spans, detail={"ok": fmt.ok})
    reference = str(meta.get("query", ""))
    exec_block = templates.EXECUTION_BLOCK.format(query=reference.strip().rstrip(";").rstrip())
    found = extract_answer_sql(text)
    db_path = meta.get("db_path")
    if found is None:
        reason = "no SQL code block inside <answer>"
        return [format_v,
                Verdict("executable", 0.0, reason, block=templates.NO_SQL_BLOCK, detail={"sql": None}),
                Verdict("execution", 0.0, reason, block=exec_block, detail={"sql": None, "reference": reference})]
    if not db_path:  # cannot judge: the question's database is absent (evaluation splits keep such rows)
        why = f"not applicable: {meta.get('skip_reason') or 'no database for this question'}"
        return [format_v, Verdict("executable", math.nan, why, detail={"sql": found.statement}),
                Verdict("execution", math.nan, why, detail={"sql": found.statement, "reference": reference})]
    run = sandbox.run(db_path, found.statement)
    detail: dict[str, Any] = {"sql": found.statement, "extra_statements": found.extra_statements,
                              **{k: v for k, v in run.summary().items() if k != "ok"}}
    if run.ok:
        executable = Verdict("executable", 1.0, "the query ran without error",
                             block=templates.EXECUTABLE_OK_BLOCK, spans=[found.statement_span], detail=detail)
    else:
        tmpl = templates.EXECUTABLE_ERROR_BLOCK if run.error_kind in ("sqlite", "denied", "empty") \
            else templates.EXECUTABLE_LIMIT_BLOCK
        executable = Verdict("executable", 0.0, f"the query failed ({run.error_kind}): {run.error}",
                             block=tmpl.format(error=run.error.rstrip(".")), spans=[found.statement_span],
                             detail=detail)
    execution = _execution_verdict(meta, found, run, sandbox, cache, exec_block)
    return [format_v, executable, execution]


def _execution_verdict(meta: dict[str, Any], found: FoundSQL, run: QueryResult, sandbox: Sandbox,
                       cache: ReferenceCache, block: str) -> Verdict:
    reference = str(meta.get("query", ""))
    semantics = str(meta.get("match", "spider"))
    spans = execution_spans(found)
    detail: dict[str, Any] = {"sql": found.statement, "reference": reference, "semantics": semantics}
    if not run.ok:
        return Verdict("execution", 0.0, "the query did not run", block=block, spans=spans, detail=detail)
    db_path = str(meta["db_path"])
    ref_result = cache.get(db_path, normalize_for_match(reference))
    if not ref_result.ok:
        detail["reference_error"] = ref_result.error
        return Verdict("execution", math.nan, f"the reference query failed: {ref_result.error}", block=block,
                       spans=spans, detail=detail)
    pred_sql = normalize_for_match(found.statement)
    pred = run if pred_sql == found.statement else sandbox.run(db_path, pred_sql)
    if not pred.ok:
        detail["normalized_error"] = pred.error
        return Verdict("execution", 0.0, f"the normalised query failed: {pred.error}", block=block,
                       spans=spans, detail=detail)
    ordered = order_matters(reference)
    same = results_match(ref_result.rows, pred.rows, ordered=ordered, semantics=semantics)
    detail.update({"ordered": ordered, "rows": len(pred.rows), "reference_rows": len(ref_result.rows),
                   "columns": len(pred.columns), "reference_columns": len(ref_result.columns),
                   "elapsed_s": round(pred.elapsed_s, 6)})
    reason = "the result equals the reference result" if same else "the result differs from the reference result"
    return Verdict("execution", 1.0 if same else 0.0, reason, block=block, spans=spans, detail=detail)
