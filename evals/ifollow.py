"""Instruction-following benchmarks: IFEval, IFBench, MulDimIF (programmatic) and AdvancedIF (judge).

IFEval and IFBench (official layout: ``ifeval/input_data.jsonl``, ``ifbench/IFBench_test.jsonl``;
rows ``key``, ``prompt``, ``instruction_id_list``, ``kwargs``). Each instruction is checked strict
and loose (IFEval's definitions, :func:`tasks.ifollow.constraints.check`); the four figures are

- prompt-level strict/loose accuracy = mean over prompts of [every instruction followed];
- instruction-level strict/loose accuracy = followed instructions / all instructions (pooled).

A case with no response is scored as the empty response (it fails every instruction) and flagged
``missing`` in its row.

MulDimIF (``muldimif/test.json``: ``id``, ``conversations``, ``constraints`` as
``[category, subcategory, text]``): each triple is parsed into a programmatic check
(:mod:`tasks.ifollow.constraints.muldimif`); accuracy = mean over rows of [every constraint
holds], reported overall, per ``constraint_pattern`` and per ``difficulty``, with the
constraint-level rate alongside.

AdvancedIF: see :mod:`evals.ifollow_judge` (a judge must be configured).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evals.base import TIMEOUT_REASON, EvalCase, EvalReport, Evaluator
from evals.ifollow_judge import AdvancedIFEvaluator, Judge, register_judge
from evals.registry import EVALUATORS
from mrbench_core.errors import response_text
from mrbench_core.jsonio import iter_jsonl, read_text
from tasks.base import DataError
from tasks.ifollow import textutil
from tasks.ifollow.constraints import check
from tasks.ifollow.rows import parse_official

__all__ = ["AdvancedIFEvaluator", "IFBenchEvaluator", "IFEvalEvaluator", "Judge", "MulDimIFEvaluator",
           "register_judge"]


def find_file(data_dir: str | None, folder: str, filename: str, benchmark: str) -> Path:
    """``data_dir`` may be the file, its folder, or a root holding ``folder/filename``."""
    if data_dir is None:
        raise DataError(f"{benchmark}: no data directory given; pass --data-dir DIR with {folder}/{filename} "
                        f"(or the folder holding {filename}, or the file itself)")
    root = Path(data_dir)
    for candidate in (root, root / filename, root / folder / filename):
        if candidate.is_file():
            return candidate
    raise DataError(f"{benchmark}: {filename} not found (looked for {root}, {root / filename} and "
                    f"{root / folder / filename})")


def _rate(num: float, den: float) -> float:
    return num / den if den else 0.0


def _table(title: str, lines: list[tuple[str, Any]]) -> str:
    out = [f"| {title} | value |", "|---|---|"]
    for name, value in lines:
        out.append(f"| {name} | {value:.4f} |" if isinstance(value, float) else f"| {name} | {value} |")
    return "\n".join(out)


class _TimedOut:
    """The result of a check that ran past the verifier budget: failed, reason ``timeout``."""

    ok = False
    reason = TIMEOUT_REASON


class _InstructionListEvaluator(Evaluator):
    """Shared by IFEval and IFBench: rows in the official ``instruction_id_list``/``kwargs`` form."""

    task = "ifollow"
    folder = ""
    filename = ""
    max_new_tokens = 1280
    #: mrbench rows by key, or the official input_response_data rows matched by prompt text
    prediction_formats = ("jsonl", "ifeval-responses")

    def warm_up(self) -> None:
        textutil.warm_up()

    def cases(self, data_dir: str | None = None, categories: Sequence[str] | None = None) -> list[EvalCase]:
        path = find_file(data_dir, self.folder, self.filename, self.name)
        wanted = set(categories or [])
        out = []
        for lineno, row in iter_jsonl(path):
            constraints = parse_official(row, path=str(path), row_no=lineno)
            prompt = row.get("prompt")
            if not isinstance(prompt, str):
                raise DataError("row has no 'prompt' string", path=str(path), row=lineno)
            key = row.get("key", row.get("id", lineno))
            groups = sorted({cid.split(":")[0] for cid, _ in constraints})
            if wanted and not wanted & ({cid for cid, _ in constraints} | set(groups)):
                continue
            out.append(EvalCase(id=str(key), messages=[{"role": "user", "content": prompt}],
                                category=",".join(groups),
                                meta={"prompt": prompt, "constraints": [[c, kw] for c, kw in constraints]}))
        return out

    def score(self, cases: Sequence[EvalCase], responses: dict[str, str]) -> EvalReport:
        rows = []
        by_id: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # id -> [n, strict, loose]
        n_inst = strict_inst = loose_inst = strict_prompt = loose_prompt = 0
        timeouts = 0
        for case in cases:
            response = responses.get(case.id)
            text = response_text(response)

            def judge(case: EvalCase = case, text: str = text) -> tuple[list[bool], list[bool]]:
                strict, loose = [], []
                for cid, kw in case.meta["constraints"]:
                    s = check(cid, text, kw, prompt=case.meta.get("prompt")).ok
                    strict.append(s)
                    loose.append(s or check(cid, text, kw, loose=True, prompt=case.meta.get("prompt")).ok)
                return strict, loose

            n_c = len(case.meta["constraints"])
            (strict, loose), timed_out = self.within_budget(judge, lambda n_c=n_c: ([False] * n_c, [False] * n_c))
            timeouts += timed_out
            for (cid, _), s, lo in zip(case.meta["constraints"], strict, loose):
                stats = by_id[cid]
                stats[0] += 1
                stats[1] += s
                stats[2] += lo
            n_inst += len(strict)
            strict_inst += sum(strict)
            loose_inst += sum(loose)
            strict_prompt += all(strict)
            loose_prompt += all(loose)
            rows.append({"id": case.id, "category": case.category,
                         "instruction_id_list": [c for c, _ in case.meta["constraints"]],
                         "strict": strict, "loose": loose, "follow_all_strict": all(strict),
                         "follow_all_loose": all(loose), "missing": response is None,
                         **({"reason": TIMEOUT_REASON} if timed_out else {})})
        n = len(cases)
        summary: dict[str, Any] = {
            "verifier_timeouts": timeouts,
            "prompt_level_strict_acc": _rate(strict_prompt, n),
            "inst_level_strict_acc": _rate(strict_inst, n_inst),
            "prompt_level_loose_acc": _rate(loose_prompt, n),
            "inst_level_loose_acc": _rate(loose_inst, n_inst),
            "n_prompts": n,
            "n_instructions": n_inst,
            "by_instruction": {cid: {"n": v[0], "strict": _rate(v[1], v[0]), "loose": _rate(v[2], v[0])}
                               for cid, v in sorted(by_id.items())},
        }
        table = _table(self.name, [(k, summary[k]) for k in (
            "prompt_level_strict_acc", "inst_level_strict_acc", "prompt_level_loose_acc", "inst_level_loose_acc",
            "n_prompts", "n_instructions")])
        return EvalReport(rows=rows, summary=summary, table=table)


@EVALUATORS.register("ifeval")
class IFEvalEvaluator(_InstructionListEvaluator):
    """IFEval (541 prompts): strict/loose prompt- and instruction-level accuracy."""

    folder = "ifeval"
    filename = "input_data.jsonl"


@EVALUATORS.register("ifbench")
class IFBenchEvaluator(_InstructionListEvaluator):
    """IFBench (300 prompts, 58 constraint types): strict/loose prompt- and instruction-level accuracy."""

    folder = "ifbench"
    filename = "IFBench_test.jsonl"


def _muldimif_module() -> Any:
    try:
        from tasks.ifollow.constraints import muldimif
    except ImportError as exc:
        raise RuntimeError("MulDimIF constraint parsing is not available in this installation "
                           f"(tasks.ifollow.constraints.muldimif: {exc})") from exc
    return muldimif


@EVALUATORS.register("muldimif")
class MulDimIFEvaluator(Evaluator):
    """MulDimIF (1,200 prompts): accuracy (all constraints of a prompt hold)."""

    task = "ifollow"
    max_new_tokens = 1280

    def warm_up(self) -> None:
        textutil.warm_up()

    def cases(self, data_dir: str | None = None, categories: Sequence[str] | None = None) -> list[EvalCase]:
        path = find_file(data_dir, "muldimif", "test.json", self.name)
        try:
            rows = json.loads(read_text(path))
        except json.JSONDecodeError as exc:
            raise DataError(f"not valid JSON ({exc.msg})", path=str(path), row=exc.lineno) from exc
        if not isinstance(rows, list):
            raise DataError("expected a JSON list of rows", path=str(path))
        muldimif = _muldimif_module()
        wanted = set(categories or [])
        out = []
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise DataError("each row must be a JSON object", path=str(path), row=i)
            rid = str(row.get("id", i))
            try:
                constraints = muldimif.constraints_for_row(row)
            except (muldimif.MulDimIFParseError, ValueError) as exc:
                raise DataError(str(exc), path=str(path), row=f"{i} (id {rid})") from exc
            turns = row.get("conversations") or []
            messages = [{"role": t["role"], "content": t["content"]} for t in turns
                        if isinstance(t, dict) and t.get("role") in ("system", "user", "assistant")]
            if not messages or messages[-1]["role"] != "user":
                raise DataError("row needs 'conversations' ending with a user turn", path=str(path), row=f"{i} (id {rid})")
            pattern, level = str(row.get("constraint_pattern", "")), str(row.get("difficulty", ""))
            if wanted and not wanted & {pattern, level}:
                continue
            out.append(EvalCase(id=rid, messages=messages, category=pattern,
                                meta={"difficulty": level, "constraints": [[c, kw] for c, kw in constraints],
                                      "texts": [t[-1] for t in row.get("constraints") or []]}))
        return out

    def score(self, cases: Sequence[EvalCase], responses: dict[str, str]) -> EvalReport:
        rows = []
        groups: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        n_con = ok_con = ok_rows = 0
        timeouts = 0
        for case in cases:
            response = responses.get(case.id)
            text = response_text(response)
            results, timed_out = self.within_budget(
                lambda case=case, text=text: [check(cid, text, kw) for cid, kw in case.meta["constraints"]],
                lambda case=case: [_TimedOut() for _ in case.meta["constraints"]])
            timeouts += timed_out
            flags = [r.ok for r in results]
            correct = all(flags)
            ok_rows += correct
            n_con += len(flags)
            ok_con += sum(flags)
            for key in (f"pattern:{case.category}", f"difficulty:{case.meta.get('difficulty', '')}"):
                groups[key][0] += 1
                groups[key][1] += correct
            rows.append({"id": case.id, "category": case.category, "difficulty": case.meta.get("difficulty"),
                         "constraint_ids": [c for c, _ in case.meta["constraints"]], "results": flags,
                         "reasons": [r.reason for r in results], "correct": correct, "missing": response is None})
        summary: dict[str, Any] = {
            "verifier_timeouts": timeouts,
            "accuracy": _rate(ok_rows, len(cases)),
            "constraint_accuracy": _rate(ok_con, n_con),
            "n_prompts": len(cases),
            "n_constraints": n_con,
            "by_group": {k: {"n": v[0], "accuracy": _rate(v[1], v[0])} for k, v in sorted(groups.items())},
        }
        lines: list[tuple[str, Any]] = [("accuracy", summary["accuracy"]),
                                        ("constraint_accuracy", summary["constraint_accuracy"])]
        lines += [(f"accuracy {k}", v["accuracy"]) for k, v in summary["by_group"].items()]
        lines += [("n_prompts", len(cases)), ("n_constraints", n_con)]
        return EvalReport(rows=rows, summary=summary, table=_table(self.name, lines))
