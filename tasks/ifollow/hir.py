"""HIR-16K rows: its first two subsets, from local JSONL or the rows of the hub reader
(:func:`tasks.data_source.read_hub`).

A HIR-16K row is a verl data row:

- ``data_source``: the subset, which also names the checkers HiR's reward code scores it with:
  ``type1`` rows with IFEval's checkers, ``type2`` rows with IFBench's (family ``ifeval`` and
  ``ifbench`` here; a constraint id of another family in such a row is a data error). The paper
  trains on these two subsets; rows of other subsets (``type3`` and up) are skipped.
- ``reward_model.ground_truth``: the constraints, a JSON text (or object) in the official form
  (``instruction_id_list`` + ``kwargs``) or a list of ``[id, kwargs]`` / ``{id, kwargs}``
  items. Rows may instead give ``instruction_id_list``/``kwargs`` at top level.
- ``extra_info``: ``question`` (the request), ``criteria`` (each constraint's text, in the order
  of the constraints) and ``q_type`` (HiR's concatenation template, ``type1``..``type6``, see
  :mod:`tasks.ifollow.hir_template`).
- ``prompt``: the chat turns (or a string); its user turn must be HiR's ``q_type`` template over
  the question and all criteria, so that P_all (the prompt) and each P_\\k (the template without
  criterion k) differ only by what leaving constraint k out changes. Without a prompt, it is
  built from ``extra_info``.

Every constraint therefore has its leave-one-out context: a row without ``extra_info`` is an
error, not a row on which MRTPO would silently fall back to uniform weights. Every malformed row
is a :class:`tasks.base.DataError` naming the file and line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mrbench_core.jsonio import iter_jsonl
from tasks.base import DataError
from tasks.ifollow.constraints import CONSTRAINTS
from tasks.ifollow.hir_template import check_template_inputs, render_hir
from tasks.ifollow.rows import Constraint, parse_official, parse_pairs, prompt_of
from tasks.ifollow.template import ConstrainedPrompt

#: subset -> family of the checkers HiR's reward code scores it with (the subsets the paper trains on)
CHECKER_FAMILY = {"type1": "ifeval", "type2": "ifbench"}


def row_type(row: dict[str, Any]) -> str:
    """The row's subset, ``type1``/``type2``/..., from ``data_source`` (or ``type``/``subset``)."""
    for key in ("data_source", "type", "subset"):
        value = row.get(key)
        if value is not None:
            text = str(value).lower().replace(" ", "").replace("_", "")
            return text if text.startswith("type") else f"type{text}"
    return "type1"


def _ground_truth(row: dict[str, Any], *, path: str | None, row_no: int | str | None) -> list[Constraint]:
    if row.get("instruction_id_list") is not None:
        return parse_official(row, path=path, row_no=row_no)
    reward_model = row.get("reward_model")
    truth = reward_model.get("ground_truth") if isinstance(reward_model, dict) else None
    if truth is None:
        raise DataError("row has neither 'reward_model.ground_truth' nor 'instruction_id_list'", path=path, row=row_no)
    if isinstance(truth, str):
        try:
            truth = json.loads(truth)
        except json.JSONDecodeError as exc:
            raise DataError(f"'reward_model.ground_truth' is not valid JSON ({exc.msg})", path=path,
                            row=row_no) from exc
    if isinstance(truth, dict) and truth.get("instruction_id_list") is not None:
        return parse_official(truth, path=path, row_no=row_no)
    if isinstance(truth, list) and truth:
        items = [{"id": t.get("instruction_id", t.get("id")), "kwargs": t.get("kwargs")} if isinstance(t, dict)
                 else t for t in truth]
        return parse_pairs(items, path=path, row_no=row_no)
    raise DataError("'reward_model.ground_truth' must hold 'instruction_id_list'/'kwargs' or a non-empty list "
                    "of [id, kwargs] items", path=path, row=row_no)


def _check_family(constraints: list[Constraint], kind: str, *, path: str | None, row_no: int | str | None) -> None:
    family = CHECKER_FAMILY[kind]
    wrong = [cid for cid, _ in constraints if CONSTRAINTS.get(cid).family != family]
    if wrong:
        raise DataError(f"{kind} rows are scored with the {family} checkers (as HiR's reward code does), "
                        f"but the row names {wrong}", path=path, row=row_no)


def parse_row(row: dict[str, Any], *, path: str | None, row_no: int | str | None) -> ConstrainedPrompt | None:
    """One HIR row as a constrained prompt; None for subsets the paper does not train on."""
    if not isinstance(row, dict):
        raise DataError("each row must be a JSON object", path=path, row=row_no)
    kind = row_type(row)
    if kind not in CHECKER_FAMILY:
        return None
    constraints = _ground_truth(row, path=path, row_no=row_no)
    _check_family(constraints, kind, path=path, row_no=row_no)
    info = row.get("extra_info")
    if not isinstance(info, dict) or not all(k in info for k in ("question", "criteria", "q_type")):
        raise DataError("row needs 'extra_info' with 'question', 'criteria' and 'q_type' (HiR's template inputs) "
                        "to build the leave-one-out contexts", path=path, row=row_no)
    question, criteria, q_type = info["question"], info["criteria"], info["q_type"]
    problem = check_template_inputs(question, criteria, q_type)
    if problem:
        raise DataError(f"extra_info: {problem}", path=path, row=row_no)
    if len(criteria) != len(constraints):
        raise DataError(f"extra_info.criteria lists {len(criteria)} texts for {len(constraints)} constraints",
                        path=path, row=row_no)
    rendered = render_hir(question, criteria, q_type)
    has_prompt = row.get("prompt") is not None or row.get("messages") is not None
    prompt = prompt_of(row, path=path, row_no=row_no) if has_prompt else rendered
    if prompt != rendered:
        at = next((i for i, (a, b) in enumerate(zip(prompt, rendered)) if a != b), min(len(prompt), len(rendered)))
        raise DataError(f"the prompt is not HiR's {q_type} template over extra_info (first difference at "
                        f"character {at}: {prompt[at:at + 30]!r} vs {rendered[at:at + 30]!r})", path=path, row=row_no)
    key = next((v for v in (row.get("key"), row.get("id"), info.get("index")) if v is not None), row_no)
    return ConstrainedPrompt(id=f"hir-{key}", base=question, constraints=constraints, sentences=list(criteria),
                             prompt=prompt, source=f"hir-{kind}", hir_q_type=q_type)


def hir_files(data_dir: str | Path) -> list[Path]:
    """The JSONL files to read: the path itself if a file, else ``*.jsonl`` under it (``hir`` first)."""
    root = Path(data_dir)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such file or directory (expected HIR-16K JSONL rows)")
    for sub in (root / "hir", root / "hir-16k", root / "HIR-16K", root):
        files = sorted(sub.glob("*.jsonl")) if sub.is_dir() else []
        if files:
            return files
    raise FileNotFoundError(f"{root}: no *.jsonl files (expected HIR-16K rows in {root}/hir/*.jsonl or {root}/*.jsonl)")


def parse_rows(rows: Iterable[tuple[int, Any]], *, where: str) -> list[ConstrainedPrompt]:
    """The type1/type2 rows of (row number, row) pairs read from ``where``, in order."""
    out = []
    for row_no, row in rows:
        item = parse_row(dict(row) if isinstance(row, dict) else row, path=where, row_no=row_no)
        if item is not None:
            out.append(item)
    return out


def load_local(data_dir: str | Path) -> list[ConstrainedPrompt]:
    """Type1/type2 rows from local JSONL files, in file order."""
    out: list[ConstrainedPrompt] = []
    for path in hir_files(data_dir):
        out += parse_rows(iter_jsonl(path, objects=False), where=str(path))
    return out
