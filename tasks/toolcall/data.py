"""Reading ToolRL / RLLA rows from files, directories or the hub.

Accepted row layouts (one example each; extra fields are ignored):

- ToolRL parquet: ``prompt`` (chat messages), ``reward_model.ground_truth``, ``extra_info.index``;
- ToolRL SFT JSON: ``instruction`` (system text), ``input`` (user text), ``output`` (reference answer);
- this project's exports: ``id``, ``messages``, ``meta.ground_truth`` (``Example.to_json()``), or
  ``ground_truth`` at the top level.

So a JSONL file of any of these rows plus a ``response`` field is valid input for
``mrbench score toolcall``. Malformed rows raise :class:`tasks.base.DataError` naming file and row.

Hub: ``data_dir="hub:OWNER/NAME[:SPLIT]"``: the rows of :func:`tasks.data_source.read_hub`.

Split files under a data directory (the directory itself or its ``toolrl/`` subfolder):
``test`` -> ``rlla_4k/test.parquet``, ``test.parquet`` or ``rlla_4k_test.parquet``;
``train`` -> ``rlla_4k/train.parquet``, ``train.parquet``, ``rlla_4k_train.parquet``, or, when no
RL training file exists, ``rlla_sft.json`` (400 rows in the same prompt format).
"""

from __future__ import annotations

import json
import os
from typing import Any

from mrbench_core.jsonio import read_jsonl as read_jsonl_rows
from mrbench_core.jsonio import read_text
from mrbench_core.text_check import check_text
from tasks.base import DataError

SPLIT_FILES = {
    "test": ("rlla_4k/test.parquet", "test.parquet", "rlla_4k_test.parquet"),
    "train": ("rlla_4k/train.parquet", "train.parquet", "rlla_4k_train.parquet", "rlla_sft.json"),
}


def _plain(value: Any) -> Any:
    """numpy arrays / scalars from parquet -> lists / Python scalars (recursively)."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def row_fields(row: dict[str, Any], where: str = "", index: int | None = None) -> tuple[str, list[dict[str, str]], str]:
    """(id, messages, reference answer) of one row in any accepted layout."""
    if not isinstance(row, dict):
        raise DataError(f"a row must be a JSON object, got {type(row).__name__}", path=where or None, row=index)
    row = _plain(row)
    meta = row.get("meta") if isinstance(row.get("meta"), dict) else {}
    reward_model = row.get("reward_model") if isinstance(row.get("reward_model"), dict) else {}
    extra = row.get("extra_info") if isinstance(row.get("extra_info"), dict) else {}

    messages = row.get("messages", row.get("prompt"))
    if messages is None and "instruction" in row:
        messages = [{"role": "system", "content": row.get("instruction")}, {"role": "user", "content": row.get("input")}]
    if not isinstance(messages, list) or not messages:
        raise DataError("no chat messages: expected 'prompt' or 'messages' (a list) or 'instruction' + 'input'",
                        path=where or None, row=index)
    clean = []
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise DataError(f"malformed message {str(m)[:80]!r}: needs string 'role' and 'content'",
                            path=where or None, row=index)
        clean.append({"role": m["role"], "content": m["content"]})
    if not any(m["role"] == "user" for m in clean):
        raise DataError("the messages contain no user turn", path=where or None, row=index)
    check_text([m["content"] for m in clean], "messages", path=where or None, row=index)

    truth = None
    for candidate in (reward_model.get("ground_truth"), row.get("ground_truth"), meta.get("ground_truth"),
                      row.get("output"), extra.get("output")):
        if isinstance(candidate, str):
            truth = candidate
            break
    if truth is None:
        raise DataError("no reference answer: expected 'reward_model.ground_truth', 'ground_truth', "
                        "'meta.ground_truth' or 'output'", path=where or None, row=index)

    ident = row.get("id", extra.get("index", row.get("index")))
    if ident is None:
        ident = f"row-{index}" if index is not None else "row"
    return str(ident), clean, truth


def read_rows(path: str) -> list[dict[str, Any]]:
    """Rows of a ``.parquet``, ``.json`` (a list of objects) or ``.jsonl`` file."""
    if not os.path.isfile(path):
        raise DataError("file not found", path=path)
    if path.endswith(".parquet"):
        import pandas as pd

        return [_plain(r) for r in pd.read_parquet(path).to_dict(orient="records")]
    if path.endswith(".jsonl"):
        return read_jsonl(path)
    try:
        data = json.loads(read_text(path))
    except ValueError as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"not JSON: {exc}", path=path) from exc
    if not isinstance(data, list):
        raise DataError("expected a JSON list of rows", path=path)
    return data


def read_jsonl(path: str) -> list[dict[str, Any]]:
    """Rows of a JSON-lines file (blank lines skipped; a line that is not JSON raises
    :class:`DataError` naming the file and its line). Also reads BFCL's ``.json`` files, which are
    JSON lines."""
    return read_jsonl_rows(path, objects=False)


def split_file(data_dir: str, split: str) -> str:
    """The file holding ``split`` under ``data_dir`` (or ``data_dir`` itself when it is a file)."""
    if os.path.isfile(data_dir):
        return data_dir
    if split not in SPLIT_FILES:
        raise ValueError(f"unknown split {split!r}; known splits: {', '.join(SPLIT_FILES)}")
    roots = [data_dir, os.path.join(data_dir, "toolrl")]
    tried = []
    for root in roots:
        for name in SPLIT_FILES[split]:
            path = os.path.join(root, name)
            tried.append(path)
            if os.path.isfile(path):
                return path
    raise DataError(f"no ToolRL file for split {split!r}; looked for: {', '.join(tried)}", path=data_dir)
