"""HIR-16K loader: its first two subsets, from local JSONL or (with access) the hub.

HIR-16K rows come in four types; the paper trains on the first two, both checked by programs:

- type1, IFEval-style: ``prompt`` + ``instruction_id_list`` + ``kwargs`` (official form);
- type2, Chat-Arena-style checks: the ``hir:*`` constraint types
  (:mod:`tasks.ifollow.constraints.hir`), named either in ``instruction_id_list``/``kwargs`` or in
  a ``checks`` (or ``constraints``) list of ``[id, kwargs]`` / ``{"id", "kwargs"}`` items.

Rows marked ``type3``/``type4`` (field ``type`` or ``subset``) need an LLM judge and are skipped.
Optional fields: ``base`` (or ``instruction``/``query``), the request without constraints, and
``constraint_texts`` (or ``descriptions``), each constraint's text inside the prompt: with
them, leave-one-out contexts remove exactly that text. Without a base, a row's prompt is used
as is and P_\\k is built only for constraints whose text is found in the prompt.

Every malformed row is a :class:`tasks.base.DataError` naming the file and line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tasks.base import DataError
from tasks.ifollow.rows import parse_official, parse_pairs, prompt_of
from tasks.ifollow.template import ConstrainedPrompt

HUB_NAME = "sastpg/HIR-16K"
TRAINED_TYPES = ("type1", "type2")


def row_type(row: dict[str, Any]) -> str:
    """``type1``/``type2``/``type3``/``type4`` from the row's ``type``/``subset`` field, else inferred."""
    for key in ("type", "subset", "data_type"):
        value = row.get(key)
        if value is not None:
            text = str(value).lower().replace(" ", "").replace("_", "")
            return text if text.startswith("type") else f"type{text}"
    if row.get("checks") is not None or row.get("constraints") is not None:
        return "type2"
    return "type1"


def parse_row(row: dict[str, Any], *, path: str | None, row_no: int | str | None) -> ConstrainedPrompt | None:
    """One HIR row as a constrained prompt; None for types 3-4 (judge-graded, not trained on)."""
    if not isinstance(row, dict):
        raise DataError("each row must be a JSON object", path=path, row=row_no)
    kind = row_type(row)
    if kind not in TRAINED_TYPES:
        return None
    prompt = prompt_of(row, path=path, row_no=row_no)
    if row.get("instruction_id_list") is not None:
        constraints = parse_official(row, path=path, row_no=row_no)
    else:
        items = row.get("checks", row.get("constraints"))
        if not isinstance(items, list) or not items:
            raise DataError("row has neither 'instruction_id_list' nor a non-empty 'checks' list", path=path,
                            row=row_no)
        constraints = parse_pairs(items, path=path, row_no=row_no)
    base = next((row[k] for k in ("base", "instruction", "query") if isinstance(row.get(k), str)), None)
    texts = row.get("constraint_texts", row.get("descriptions"))
    if texts is not None and (not isinstance(texts, list) or len(texts) != len(constraints)):
        raise DataError(f"'constraint_texts' must list one text per constraint ({len(constraints)})",
                        path=path, row=row_no)
    sentences: list[str | None] = [t if isinstance(t, str) and t in prompt else None for t in (texts or [])]
    if not sentences:
        sentences = [None] * len(constraints)
    key = row.get("key", row.get("id", row_no))
    return ConstrainedPrompt(id=f"hir-{key}", base=base, constraints=constraints, sentences=sentences,
                             prompt=prompt, source=f"hir-{kind}")


def _jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    yield lineno, json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DataError(f"not valid JSON ({exc.msg})", path=str(path), row=lineno) from exc


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


def load_local(data_dir: str | Path, limit: int | None = None) -> list[ConstrainedPrompt]:
    """Type1/type2 rows from local JSONL files, in file order."""
    out: list[ConstrainedPrompt] = []
    for path in hir_files(data_dir):
        for lineno, row in _jsonl(path):
            item = parse_row(row, path=str(path), row_no=lineno)
            if item is not None:
                out.append(item)
                if limit is not None and len(out) >= limit:
                    return out
    return out


def load_hub(name: str = HUB_NAME, split: str = "train", limit: int | None = None) -> list[ConstrainedPrompt]:
    """Type1/type2 rows from the Hugging Face hub (needs ``datasets`` and access to ``name``)."""
    try:
        import datasets
    except ImportError as exc:
        raise RuntimeError(f"loading {name} from the hub needs the 'datasets' package "
                           "(pip install 'mrbench[hub]'), or pass a local JSONL with --data-dir") from exc
    try:
        rows = datasets.load_dataset(name, split=split)
    except Exception as exc:  # any hub failure gets the same advice
        raise RuntimeError(f"could not load {name} (split {split!r}) from the hub: {type(exc).__name__}: {exc}. "
                           "Download its JSONL and pass the file or folder with --data-dir instead.") from exc
    out = []
    for i, row in enumerate(rows):
        item = parse_row(dict(row), path=f"hub:{name}", row_no=i)
        if item is not None:
            out.append(item)
            if limit is not None and len(out) >= limit:
                break
    return out
