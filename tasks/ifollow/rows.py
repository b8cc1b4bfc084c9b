"""Reading constraint lists from data rows, with clear errors naming the file and row.

Rows in the official form (IFEval, IFBench, HIR-16K type1, ``mrbench score`` input) carry
``instruction_id_list`` and a parallel ``kwargs`` list of dicts. Null-valued kwargs are dropped
(IFBench lists every kwarg name with nulls); the remaining names must be parameters of the type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mrbench_core.text_check import check_text
from tasks.base import DataError
from tasks.ifollow.constraints import CONSTRAINTS, clean_kwargs, known_ids

Constraint = tuple[str, dict[str, Any]]


def unknown_id_message(cid: Any) -> str:
    ids = known_ids()
    return f"unknown constraint id {cid!r} (known ids, {len(ids)}: {', '.join(ids)})"


def parse_constraint(cid: Any, kwargs: Any, *, path: str | None, row: int | str | None,
                     check_params: bool = True) -> Constraint:
    """Validate one (id, kwargs) pair; DataError naming file and row if it is malformed."""
    if not isinstance(cid, str) or cid not in CONSTRAINTS:
        raise DataError(unknown_id_message(cid), path=path, row=row)
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict):
        raise DataError(f"kwargs of {cid!r} must be an object, got {type(kwargs).__name__}", path=path, row=row)
    kw = clean_kwargs(kwargs)
    if check_params:
        params = CONSTRAINTS.get(cid).params
        extra = sorted(set(kw) - set(params))
        if extra:
            raise DataError(f"{cid!r} takes {list(params)}, got unexpected {extra}", path=path, row=row)
    return cid, kw


def parse_official(row: dict[str, Any], *, path: str | None, row_no: int | str | None,
                   check_params: bool = True) -> list[Constraint]:
    """The constraints of a row with ``instruction_id_list`` and ``kwargs`` (official form)."""
    ids = row.get("instruction_id_list")
    if not isinstance(ids, list) or not ids:
        raise DataError("row needs a non-empty 'instruction_id_list' list", path=path, row=row_no)
    kwargs = row.get("kwargs")
    if kwargs is None:
        kwargs = [{} for _ in ids]
    if not isinstance(kwargs, list) or len(kwargs) != len(ids):
        n = len(kwargs) if isinstance(kwargs, list) else type(kwargs).__name__
        raise DataError(f"'kwargs' must be a list parallel to 'instruction_id_list' ({len(ids)} ids, got {n})",
                        path=path, row=row_no)
    return [parse_constraint(c, k, path=path, row=row_no, check_params=check_params) for c, k in zip(ids, kwargs)]


def parse_pairs(items: Sequence[Any], *, path: str | None, row_no: int | str | None) -> list[Constraint]:
    """Constraints given as ``[[id, kwargs], ...]`` or ``[{"id": ..., "kwargs": ...}, ...]``."""
    out = []
    for item in items:
        if isinstance(item, dict):
            cid, kw = item.get("id", item.get("type")), item.get("kwargs", {})
        elif isinstance(item, (list, tuple)) and len(item) == 2:
            cid, kw = item
        else:
            raise DataError(f"a constraint must be [id, kwargs] or {{id, kwargs}}, got {item!r}", path=path, row=row_no)
        out.append(parse_constraint(cid, kw, path=path, row=row_no))
    return out


def prompt_of(row: dict[str, Any], *, path: str | None, row_no: int | str | None) -> str:
    """The row's prompt: ``prompt`` (a string, or a list of chat turns as verl's data files hold
    it), else ``messages``/``conversations``; of a list of turns, the first user turn's content."""
    prompt = row.get("prompt")
    if isinstance(prompt, str) and prompt.strip():
        check_text(prompt, "prompt", path=path, row=row_no)
        return prompt
    for key in ("prompt", "messages", "conversations"):
        turns = row.get(key)
        if isinstance(turns, list):
            for i, turn in enumerate(turns):
                if isinstance(turn, dict) and turn.get("role") == "user" and isinstance(turn.get("content"), str):
                    check_text(turn["content"], f"{key}[{i}].content", path=path, row=row_no)
                    return turn["content"]
    raise DataError("row has no 'prompt' (nor a user turn in 'prompt'/'messages'/'conversations')", path=path,
                    row=row_no)
