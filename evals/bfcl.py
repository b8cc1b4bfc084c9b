"""BFCL-v4 single-turn AST evaluator (``bfcl-v4``), in the tool-calling task's RLLA format.

Data: ``BFCL_v4_<category>.json`` question files (one JSON object per line) and
``possible_answer/BFCL_v4_<category>.json`` under a directory (or its ``bfcl/`` subfolder); with
no directory, the data shipped inside the ``bfcl-eval`` package (found with importlib.resources).

Scoring (:meth:`BFCLv4Evaluator.score`): decode the response's tool-call block
(:mod:`tasks.toolcall.bfcl_prompts`), then

- AST categories: a decoding failure is wrong (``ast_decoder:decoder_failed``); otherwise the
  project's checker with the official semantics (:mod:`tasks.toolcall.bfcl_checker`);
- irrelevance categories: right exactly when no call is decoded (no block, an unparsable block
  or an empty block), else ``irrelevance_error:decoder_success``;
- a case without a response is wrong (``missing_response``).

Predictions may also be BFCL's own result files (``--format bfcl-result``, rows ``{id, result}``):
the result is then decoded in BFCL's answer syntax (:mod:`tasks.toolcall.bfcl_syntax`), not the
RLLA block, and checked by the same checker; ``format_ok`` is then null (the RLLA format does not
apply) and the format rate is reported as n/a.

Each row also says whether the response has the RLLA format the training reward asks for
(``format_ok``: the ``tool_call`` layout for AST cases, the ``response`` layout for irrelevance
cases), and the summary reports this format rate (paper Figure 4d) overall and per category.

Summary figures (fractions in [0, 1]; ``protocols`` states each one):

- per category: micro accuracy (correct / cases);
- ``non_live_macro``: unweighted mean of simple (itself the unweighted mean of simple_python,
  simple_java, simple_javascript), multiple, parallel, parallel_multiple — the official BFCL
  non-live summary; ``non_live_micro``: pooled over those six categories;
- ``live_micro``: pooled over live_simple, live_multiple, live_parallel, live_parallel_multiple —
  the official BFCL live summary; ``live_macro``: unweighted mean of those four;
- ``irrelevance`` / ``live_irrelevance``: reported on their own, as BFCL does;
- ``format_rate``: fraction of all cases whose response has the required RLLA format.

Aggregates use the categories present; ``*_complete`` says whether all of them were.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import os
from collections.abc import Sequence
from typing import Any

from evals.base import TIMEOUT_REASON, EvalCase, EvalReport, Evaluator
from evals.registry import EVALUATORS
from tasks.base import DataError
from tasks.toolcall.bfcl_checker import check, language_of
from tasks.toolcall.bfcl_prompts import case_messages, decode_calls
from tasks.toolcall.bfcl_syntax import decode_result
from tasks.toolcall.data import read_jsonl
from tasks.toolcall.rewards import format_reward

NON_LIVE = ["simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple"]
LIVE = ["live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"]
IRRELEVANCE = ["irrelevance", "live_irrelevance"]
CATEGORIES = NON_LIVE + LIVE + IRRELEVANCE
GROUPS = {
    "all": CATEGORIES,
    "non_live": NON_LIVE + ["irrelevance"],
    "live": LIVE + ["live_irrelevance"],
    "simple": NON_LIVE[:3],
    "ast": NON_LIVE + LIVE,
}
PROTOCOLS = {
    "non_live_macro": "official BFCL non-live: unweighted mean of simple (unweighted mean of "
                      "python/java/javascript), multiple, parallel, parallel_multiple",
    "non_live_micro": "correct / cases pooled over the six non-live AST categories",
    "live_micro": "official BFCL live: correct / cases pooled over the four live AST categories",
    "live_macro": "unweighted mean of the four live AST category accuracies",
    "irrelevance": "fraction of irrelevance cases with no call decoded",
    "live_irrelevance": "fraction of live_irrelevance cases with no call decoded",
    "format_rate": "fraction of all cases whose response has the RLLA format the training reward requires",
}


def expand_categories(categories: Sequence[str] | None) -> list[str]:
    """Category names and group names (all, non_live, live, simple, ast) -> categories, in order."""
    if not categories:
        return list(CATEGORIES)
    wanted: list[str] = []
    for name in categories:
        for part in str(name).split(","):
            part = part.strip()
            if not part:
                continue
            if part in GROUPS:
                wanted.extend(GROUPS[part])
            elif part in CATEGORIES:
                wanted.append(part)
            else:
                raise ValueError(f"unknown BFCL category {part!r}; known categories: {', '.join(CATEGORIES)}; "
                                 f"groups: {', '.join(GROUPS)}")
    return [c for c in CATEGORIES if c in set(wanted)]


def package_data_dir() -> str | None:
    """The data folder of the installed ``bfcl-eval`` package, or None."""
    if importlib.util.find_spec("bfcl_eval") is None:
        return None
    path = importlib.resources.files("bfcl_eval") / "data"
    return str(path) if path.is_dir() else None


def resolve_data_dir(data_dir: str | None) -> str:
    if data_dir is None:
        found = package_data_dir()
        if found is None:
            raise DataError("no BFCL data: pass --data-dir DIR holding BFCL_v4_<category>.json and "
                            "possible_answer/, or install the bfcl-eval package (pip install --no-deps bfcl-eval)")
        return found
    for root in (data_dir, os.path.join(data_dir, "bfcl")):
        if os.path.isfile(os.path.join(root, "BFCL_v4_simple_python.json")) or os.path.isdir(
                os.path.join(root, "possible_answer")):
            return root
    return data_dir


def _read_jsonl(path: str) -> list[dict[str, Any]]:
    if not os.path.isfile(path):
        raise DataError("BFCL file not found (expected BFCL_v4_<category>.json and possible_answer/ in the "
                        "data directory)", path=path)
    return read_jsonl(path)


def _load_category(root: str, category: str) -> list[EvalCase]:
    q_path = os.path.join(root, f"BFCL_v4_{category}.json")
    questions = _read_jsonl(q_path)
    answers: dict[str, Any] = {}
    if category not in IRRELEVANCE:
        a_path = os.path.join(root, "possible_answer", f"BFCL_v4_{category}.json")
        for i, row in enumerate(_read_jsonl(a_path)):
            if "id" not in row or "ground_truth" not in row:
                raise DataError("possible answer needs 'id' and 'ground_truth'", path=a_path, row=i)
            answers[row["id"]] = row["ground_truth"]
    language = language_of(category)
    cases = []
    for i, q in enumerate(questions):
        if not all(k in q for k in ("id", "question", "function")):
            raise DataError("question needs 'id', 'question' and 'function'", path=q_path, row=i)
        if category not in IRRELEVANCE and q["id"] not in answers:
            raise DataError(f"no possible answer for {q['id']!r}", path=q_path, row=i)
        cases.append(EvalCase(
            id=q["id"], category=category, messages=case_messages(q["question"], q["function"], language),
            meta={"functions": q["function"], "answers": answers.get(q["id"]), "language": language}))
    return cases


def score_case(case: EvalCase, response: str | None, syntax: str = "rlla") -> dict[str, Any]:
    """One per-case row ``{id, category, valid, error_type, error, format_ok}``. Never raises on ``response``.
    ``syntax``: ``rlla`` (the task's tool-call block) or ``bfcl`` (a BFCL result, module docstring)."""
    row: dict[str, Any] = {"id": case.id, "category": case.category, "valid": False, "error_type": "",
                           "error": "", "format_ok": False if syntax == "rlla" else None}
    if response is None:
        row.update(error_type="missing_response", error="no response for this case")
        return row
    if syntax == "bfcl":
        calls, why = decode_result(response, case.meta["language"])
    else:
        kind = "response" if case.category in IRRELEVANCE else "tool_call"
        row["format_ok"] = format_reward(response if isinstance(response, str) else "", kind).value == 1.0
        calls, why = decode_calls(response)
    if case.category in IRRELEVANCE:
        if calls:
            row.update(error_type="irrelevance_error:decoder_success",
                       error=f"{len(calls)} call(s) decoded where none should be made")
        else:
            row["valid"] = True
        return row
    if calls is None:
        row.update(error_type="ast_decoder:decoder_failed", error=why)
        return row
    verdict = check(case.meta["functions"], calls, case.meta["answers"], case.category, case.meta["language"])
    row["valid"] = bool(verdict["valid"])
    if not verdict["valid"]:
        row.update(error_type=verdict.get("error_type", ""), error="; ".join(str(e) for e in verdict["error"]))
    return row


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-category accuracy plus the macro and micro aggregates of the module docstring."""
    per: dict[str, dict[str, Any]] = {}
    for r in rows:
        s = per.setdefault(r["category"], {"correct": 0, "total": 0, "format_ok": 0, "format_checked": 0})
        s["correct"] += int(bool(r["valid"]))
        s["total"] += 1
        s["format_ok"] += int(bool(r.get("format_ok")))
        s["format_checked"] += int(r.get("format_ok") is not None)
    for s in per.values():
        s["accuracy"] = s["correct"] / s["total"] if s["total"] else None
        checked = s.pop("format_checked")
        s["format_rate"] = s["format_ok"] / checked if checked else None
    checked_rows = [r for r in rows if r.get("format_ok") is not None]
    acc = {c: per[c]["accuracy"] for c in per}

    def pooled(cats: list[str]) -> float | None:
        total = sum(per[c]["total"] for c in cats if c in per)
        return sum(per[c]["correct"] for c in cats if c in per) / total if total else None

    simple = _mean([acc[c] for c in NON_LIVE[:3] if c in acc])
    non_live_parts = ([simple] if simple is not None else []) + [acc[c] for c in NON_LIVE[3:] if c in acc]
    summary: dict[str, Any] = {
        "categories": {c: per[c] for c in CATEGORIES if c in per},
        "simple_macro": simple,
        "non_live_macro": _mean(non_live_parts),
        "non_live_micro": pooled(NON_LIVE),
        "live_micro": pooled(LIVE),
        "live_macro": _mean([acc[c] for c in LIVE if c in acc]),
        "irrelevance": acc.get("irrelevance"),
        "live_irrelevance": acc.get("live_irrelevance"),
        "format_rate": (sum(int(bool(r["format_ok"])) for r in checked_rows) / len(checked_rows)
                        if checked_rows else None),
        "non_live_complete": all(c in per for c in NON_LIVE),
        "live_complete": all(c in per for c in LIVE),
        "headline": {"non_live": "non_live_macro", "live": "live_micro"},
        "protocols": dict(PROTOCOLS),
        "n_cases": len(rows),
        "n_missing": sum(1 for r in rows if r["error_type"] == "missing_response"),
    }
    return summary


def markdown_table(summary: dict[str, Any]) -> str:
    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:.2f}"

    lines = ["| category | correct | total | accuracy (%) | format rate (%) |", "|---|---:|---:|---:|---:|"]
    for cat, s in summary["categories"].items():
        lines.append(f"| {cat} | {s['correct']} | {s['total']} | {pct(s['accuracy'])} | {pct(s['format_rate'])} |")
    lines += ["", "| aggregate | accuracy (%) | protocol |", "|---|---:|---|"]
    for key in ("non_live_macro", "non_live_micro", "live_micro", "live_macro", "irrelevance", "live_irrelevance",
                "format_rate"):
        lines.append(f"| {key} | {pct(summary[key])} | {PROTOCOLS[key]} |")
    return "\n".join(lines)


@EVALUATORS.register("bfcl-v4")
class BFCLv4Evaluator(Evaluator):
    """BFCL-v4 single-turn AST accuracy (non-live and live), prompts in the RLLA tool-call format."""

    task = "toolcall"
    max_new_tokens = 1024
    prediction_formats = ("jsonl", "bfcl-result")

    def __init__(self, syntax: str = "rlla") -> None:
        self.syntax = syntax  # rlla: the task's tool-call block; bfcl: BFCL result files

    def read_responses_as(self, prediction_format: str) -> None:
        self.syntax = "bfcl" if prediction_format == "bfcl-result" else "rlla"

    def cases(self, data_dir: str | None = None, categories: Sequence[str] | None = None) -> list[EvalCase]:
        root = resolve_data_dir(data_dir)
        out: list[EvalCase] = []
        for category in expand_categories(categories):
            out.extend(_load_category(root, category))
        return out

    def score(self, cases: Sequence[EvalCase], responses: dict[str, str]) -> EvalReport:
        rows = [self.within_budget(lambda c=case: score_case(c, responses.get(c.id), self.syntax),
                                   lambda c=case: {"id": c.id, "category": c.category, "valid": False,
                                                   "error_type": TIMEOUT_REASON, "format_ok": False,
                                                   "error": f"the checks ran past {self.verifier_timeout_s:g} s"})[0]
                for case in cases]
        summary = summarize(rows)
        return EvalReport(rows=rows, summary=summary, table=markdown_table(summary))
