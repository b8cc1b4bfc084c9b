"""Prediction files in mrbench's format or in the formats the official evaluators read.

=================  ===================================================  ==============================
format             layout                                               matched to a case by
=================  ===================================================  ==============================
jsonl              mrbench rows ``{"id": ..., "response": ...}``         id (``key`` also read); for
                   (a row without an id may give the ``prompt``)        text-to-SQL also the row index
ifeval-responses   IFEval / IFBench ``input_response_data``: rows       the prompt text
                   ``{"prompt": ..., "response": ...}``
sql-lines          Spider's ``evaluation.py --pred`` file: one SQL      line k -> question k of the
                   query per line (``SQL<TAB>db_id`` also read)         dataset file
bird-json          BIRD's ``predict_dev.json``: one JSON object         key k -> question k
                   ``{"0": "SQL\\t----- bird -----\\tdb_id", ...}``
bfcl-result        BFCL result rows ``{"id": ..., "result": ...}``, a    id
                   file or a folder of ``*.json`` result files
=================  ===================================================  ==============================

:func:`detect_format` tells them apart from the file itself; ``--format`` names one instead.
A blank line in a ``sql-lines`` file is an empty prediction for its question (the official
script drops blank lines, which moves every later query onto the wrong question); so is a
``bird-json`` value that is not text. A database named by a ``sql-lines`` or ``bird-json``
prediction is checked against its question's.

Bad data is a :class:`tasks.base.DataError` naming the file and the line (or key). Files are read
as UTF-8 with or without a byte-order mark. :func:`stream_prediction_file` yields predictions one at
a time (a line-based file is never held whole: memory follows the cases matched, not the file);
:func:`read_prediction_file` lists them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mrbench_core.errors import DataError
from mrbench_core.jsonio import iter_jsonl, iter_text_lines, read_text

FORMATS: dict[str, str] = {
    "jsonl": 'mrbench rows {"id": ..., "response": ...}',
    "ifeval-responses": 'IFEval/IFBench input_response_data rows {"prompt": ..., "response": ...}',
    "sql-lines": "one SQL query per line, in the order of the dataset file (Spider's evaluation.py --pred)",
    "bird-json": 'BIRD predict_dev.json {"0": "SQL\\t----- bird -----\\tdb_id", ...}',
    "bfcl-result": 'BFCL result rows {"id": ..., "result": ...} (a file, or a folder of them)',
}
BIRD_SEPARATOR = "\t----- bird -----\t"


@dataclass(frozen=True)
class Prediction:
    """One prediction as read: its response text and whatever the file keys it by."""

    where: str  # "line 3", "key '12'", "BFCL_v4_multiple_result.json, line 4"
    response: str
    id: str | None = None
    prompt: str | None = None
    position: int | None = None  # 0-based position of its question in the dataset file
    db_id: str | None = None

    def key_text(self) -> str:
        """What the prediction is keyed by, for messages."""
        if self.id is not None:
            return f"id {self.id!r}"
        if self.prompt is not None:
            return f"prompt {clip_text(self.prompt)!r}"
        if self.position is not None:
            return f"question {self.position}"
        return "no id"


@dataclass
class PredictionFile:
    path: str
    format: str
    detected: bool  # True when the format was detected, False when named
    #: a list (:func:`read_prediction_file`) or a one-pass iterator (:func:`stream_prediction_file`)
    predictions: Iterable[Prediction] = field(default_factory=list)


def clip_text(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _read_text(path: Path) -> str:
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    return read_text(path)


def _first_lines(path: Path, n: int) -> list[str]:
    """The first ``n`` non-blank lines (stripped), reading no further."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    out: list[str] = []
    for _, line in iter_text_lines(path):
        if line.strip():
            out.append(line.strip())
            if len(out) == n:
                break
    return out


def _is_index(key: str) -> bool:
    return key.isdigit() and key.isascii()


def detect_format(path: str | Path) -> str:
    """The format of a predictions file (module docstring), from its first line or whole content."""
    path = Path(path)
    if path.is_dir():
        return "bfcl-result"
    lines = _first_lines(path, 2)
    first = lines[0] if lines else ""
    if not first:
        raise DataError("holds no predictions", path=str(path))
    if first.startswith("{"):
        try:
            row = json.loads(first)
        except ValueError:
            row = None
        if row is None or len(lines) == 1:  # a JSON object over several lines, or a one-line file
            try:  # only then is the whole file read: a line-based file is never loaded whole
                whole = json.loads(_read_text(path)) if row is None else row
            except ValueError:
                whole = None
            if isinstance(whole, dict) and whole and all(_is_index(k) for k in whole):
                return "bird-json"
        if row is None:
            return "jsonl"  # its reader names the bad line
        if isinstance(row, dict) and "result" in row and "response" not in row:
            return "bfcl-result"
        if isinstance(row, dict) and "id" not in row and "key" not in row and "prompt" in row:
            return "ifeval-responses"
        return "jsonl"
    if first.startswith("["):
        raise DataError("a JSON array is not a predictions format: write one JSON object per line, or name "
                        f"--format (known: {', '.join(FORMATS)})", path=str(path))
    return "sql-lines"


def stream_prediction_file(path: str | Path, fmt: str | None = None) -> PredictionFile:
    """The predictions in ``path``, read in ``fmt`` (detected when None), as a one-pass iterator:
    bad rows raise when the iteration reaches them."""
    if fmt is not None and fmt not in FORMATS:
        raise ValueError(f"unknown predictions format {fmt!r}; known: {', '.join(FORMATS)}")
    chosen = fmt or detect_format(path)
    reader = {"jsonl": _read_jsonl, "ifeval-responses": _read_prompt_rows, "sql-lines": _read_sql_lines,
              "bird-json": _read_bird_json, "bfcl-result": _read_bfcl_results}[chosen]
    return PredictionFile(str(path), chosen, fmt is None, reader(Path(path)))


def read_prediction_file(path: str | Path, fmt: str | None = None) -> PredictionFile:
    """Every prediction in ``path``, listed (see :func:`stream_prediction_file`; the tests read
    whole files with it, the evaluation streams)."""
    file = stream_prediction_file(path, fmt)
    file.predictions = list(file.predictions)
    return file


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _response(row: dict[str, Any], path: Path, lineno: int, fmt: str) -> str:
    if "response" not in row:
        raise DataError(f"row has no 'response' field ({fmt} rows are {FORMATS[fmt]})", path=str(path), row=lineno)
    return _text(row["response"])


def _read_jsonl(path: Path) -> Iterator[Prediction]:
    for lineno, row in iter_jsonl(path):
        rid = row.get("id", row.get("key"))
        prompt = row.get("prompt") if rid is None and isinstance(row.get("prompt"), str) else None
        yield Prediction(f"line {lineno}", _response(row, path, lineno, "jsonl"),
                         id=None if rid is None else str(rid), prompt=prompt)


def _read_prompt_rows(path: Path) -> Iterator[Prediction]:
    for lineno, row in iter_jsonl(path):
        if not isinstance(row.get("prompt"), str):
            raise DataError("row has no 'prompt' string (ifeval-responses rows are "
                            f"{FORMATS['ifeval-responses']})", path=str(path), row=lineno)
        yield Prediction(f"line {lineno}", _response(row, path, lineno, "ifeval-responses"), prompt=row["prompt"])


def _read_sql_lines(path: Path) -> Iterator[Prediction]:
    blanks: list[int] = []  # blank lines seen since the last query: predictions only if a query follows
    for lineno, line in iter_text_lines(path):
        line = line.rstrip("\r\n")
        if not line.strip():
            blanks.append(lineno)
            continue
        for blank in blanks:
            yield Prediction(f"line {blank}", "", position=blank - 1)
        blanks.clear()
        sql, _, db_id = line.partition("\t")
        yield Prediction(f"line {lineno}", sql.strip(), position=lineno - 1, db_id=db_id.strip() or None)


def _read_bird_json(path: Path) -> list[Prediction]:
    try:
        data = json.loads(_read_text(path))
    except ValueError as exc:
        raise DataError(f"not valid JSON ({exc}); bird-json is {FORMATS['bird-json']}", path=str(path)) from exc
    if not isinstance(data, dict):
        raise DataError(f"expected one JSON object; bird-json is {FORMATS['bird-json']}", path=str(path))
    out = []
    for key, value in data.items():
        if not _is_index(key):
            raise DataError(f"key {key!r} is not a question index (0, 1, ...)", path=str(path))
        sql, sep, db_id = value.partition(BIRD_SEPARATOR) if isinstance(value, str) else ("", "", "")
        out.append(Prediction(f"key {key!r}", sql.strip(), position=int(key),
                              db_id=(db_id.strip() or None) if sep else None))
    return out


def _read_bfcl_results(path: Path) -> Iterator[Prediction]:
    files = sorted(p for p in path.rglob("*.json") if p.is_file()) if path.is_dir() else [path]
    if not files:
        raise DataError("folder holds no BFCL result files (*.json)", path=str(path))
    for file in files:
        prefix = f"{file.relative_to(path)}, " if path.is_dir() else ""
        for lineno, row in iter_jsonl(file):
            if "id" not in row or "result" not in row:
                raise DataError(f"row needs 'id' and 'result' (bfcl-result rows are {FORMATS['bfcl-result']})",
                                path=str(file), row=lineno)
            yield Prediction(f"{prefix}line {lineno}", _text(row["result"]), id=str(row["id"]))
