"""Benchmark layouts: where each split's questions, tables and databases live.

``data_dir`` may point at the dataset root holding the benchmark folders (``spider/``,
``spider-syn/``, ``spider-realistic/``, ``spider-dk/``, ``bird/``) or at one benchmark folder
itself. Official layouts read:

=================  ======================================  ===================================
name               questions                               databases (``<db_id>/<db_id>.sqlite``)
=================  ======================================  ===================================
spider-train       spider/train_spider.json                spider/database
spider-dev         spider/dev.json                         spider/database
spider-test        spider/test.json                        spider/test_database
spider-syn         spider-syn/dev.json (SpiderSynQuestion)  spider-syn/database, else Spider's
spider-realistic   spider-realistic/spider-realistic.json  spider-realistic/database, else Spider's
spider-dk          spider-dk/Spider-DK.json                spider-dk/database, then Spider's
bird-dev           bird/dev.json (SQL, evidence)           bird/dev_databases
=================  ======================================  ===================================

Hub datasets (``task.data_dir`` = ``hub:<repo>[:<split>]``, e.g. ``hub:xlangai/spider:train``)
are read by :func:`tasks.data_source.read_hub`; they carry no databases, which
are looked up under the task's ``database_dir`` option.

A question whose database file is absent keeps ``db_path=None`` and a ``skip_reason``; callers
report and skip it (never count it right or wrong). A malformed row raises
:class:`tasks.base.DataError` naming the file and row.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from mrbench_core.jsonio import read_text
from mrbench_core.text_check import check_text
from tasks.base import DataError


@dataclass(frozen=True)
class Layout:
    name: str
    folder: str
    questions: str
    db_dirs: tuple[str, ...]  # relative to the benchmark folder; "../spider/x" reaches a sibling
    tables: tuple[str, ...] = ("tables.json",)
    question_field: str = "question"
    query_field: str = "query"
    evidence_field: str | None = None
    category_field: str | None = None
    id_field: str | None = None


_SPIDER_DBS = ("../spider/database",)
LAYOUTS: dict[str, Layout] = {
    "spider-train": Layout("spider-train", "spider", "train_spider.json", ("database",)),
    "spider-dev": Layout("spider-dev", "spider", "dev.json", ("database",)),
    "spider-test": Layout("spider-test", "spider", "test.json", ("test_database", "database"),
                          tables=("test_tables.json", "tables.json")),
    "spider-syn": Layout("spider-syn", "spider-syn", "dev.json", ("database",) + _SPIDER_DBS,
                         tables=("tables.json", "../spider/tables.json"), question_field="SpiderSynQuestion"),
    "spider-realistic": Layout("spider-realistic", "spider-realistic", "spider-realistic.json",
                               ("database",) + _SPIDER_DBS, tables=("tables.json", "../spider/tables.json")),
    "spider-dk": Layout("spider-dk", "spider-dk", "Spider-DK.json", ("database",) + _SPIDER_DBS,
                        tables=("tables.json", "../spider/tables.json"), category_field="type"),
    "bird-dev": Layout("bird-dev", "bird", "dev.json", ("dev_databases",), tables=("dev_tables.json",),
                       query_field="SQL", evidence_field="evidence", category_field="difficulty",
                       id_field="question_id"),
}
SPLIT_ALIASES = {"train": "spider-train", "dev": "spider-dev", "test": "spider-test",
                 "validation": "spider-dev", "bird": "bird-dev"}


@dataclass
class Record:
    """One benchmark question, resolved against the files present."""

    id: str
    benchmark: str
    db_id: str
    question: str
    query: str
    evidence: str = ""
    category: str = ""
    db_path: str | None = None
    skip_reason: str = ""
    tables_entry: dict[str, Any] | None = field(default=None, repr=False)
    source: str = ""
    row: int = -1


def resolve_layout(name: str) -> Layout:
    key = SPLIT_ALIASES.get(name, name)
    if key not in LAYOUTS:
        known = sorted(set(LAYOUTS) | set(SPLIT_ALIASES))
        raise ValueError(f"unknown text2sql split or benchmark {name!r}; known: {', '.join(known)}")
    return LAYOUTS[key]


def benchmark_folder(layout: Layout, data_dir: str | None) -> str:
    """The folder holding ``layout.questions``: ``data_dir/<folder>`` or ``data_dir`` itself."""
    if not data_dir:
        raise FileNotFoundError(
            f"text2sql has no built-in data: point the data directory (mrbench run --task.data_dir DIR; "
            f"mrbench eval and score --data-dir DIR) at a folder holding {layout.folder}/{layout.questions} "
            f"(the official {layout.name} layout; the README's Data section says where to get it)")
    for folder in (os.path.join(data_dir, layout.folder), data_dir):
        if os.path.isfile(os.path.join(folder, layout.questions)):
            return folder
    raise FileNotFoundError(
        f"{layout.name}: neither {os.path.join(data_dir, layout.folder, layout.questions)} nor "
        f"{os.path.join(data_dir, layout.questions)} exists; point data_dir at the dataset root "
        f"holding {layout.folder}/ (official layout)")


def check_db_id(db_id: str, *, path: str | None, row: int | str | None) -> str:
    """``db_id`` when it is one folder name; else a :class:`DataError` naming the file and row (a
    ``db_id`` such as ``../x`` or ``/abs`` would point outside the database folders)."""
    if not is_folder_name(db_id):
        raise DataError(f"db_id {db_id!r} is not a folder name: it would point outside the database folders",
                        path=path, row=row)
    return db_id


def is_folder_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\\0") \
        and not os.path.isabs(name) and os.path.basename(name) == name


def database_path(db_dirs: list[str], db_id: str) -> str | None:
    """``<dir>/<db_id>/<db_id>.sqlite`` in the first of ``db_dirs`` that has it; None for a
    ``db_id`` that is not one folder name (never a path outside ``db_dirs``)."""
    if not is_folder_name(db_id):
        return None
    for d in db_dirs:
        path = os.path.join(d, db_id, db_id + ".sqlite")
        if os.path.isfile(path):
            return path
    return None


def _read_json_list(path: str) -> list[Any]:
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise DataError(f"not valid JSON: {exc}", path=path) from exc
    if not isinstance(data, list):
        raise DataError("expected a JSON list of questions", path=path)
    return data


def _tables(folder: str, names: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name in reversed(names):  # earlier names take precedence
        path = os.path.normpath(os.path.join(folder, name))
        if os.path.isfile(path):
            for entry in _read_json_list(path):
                if isinstance(entry, dict) and "db_id" in entry:
                    out[entry["db_id"]] = entry
    return out


def load_records(name: str, data_dir: str | None) -> list[Record]:
    """Every question of a split/benchmark, with its database resolved (or a skip reason); a hub
    dataset's rows are read by :func:`load_hub_records`."""
    layout = resolve_layout(name)
    folder = benchmark_folder(layout, data_dir)
    path = os.path.join(folder, layout.questions)
    db_dirs = [os.path.normpath(os.path.join(folder, d)) for d in layout.db_dirs]
    if data_dir:
        db_dirs += [os.path.join(data_dir, "spider", "database")] if layout.folder != "bird" else []
    tables = _tables(folder, layout.tables)
    records: list[Record] = []
    for i, row in enumerate(_read_json_list(path)):
        if not isinstance(row, dict):
            raise DataError("expected an object", path=path, row=i)
        values = {}
        for key in ("db_id", layout.question_field, layout.query_field):
            value = row.get(key)
            if not isinstance(value, str) or not value.strip():
                raise DataError(f"missing or empty string field {key!r}", path=path, row=i)
            values[key] = value
        check_text([values[layout.question_field], str(row.get(layout.evidence_field) or "")
                    if layout.evidence_field else ""], "question/evidence", path=path, row=i)
        db_id = check_db_id(values["db_id"], path=path, row=i)
        rid = row.get(layout.id_field) if layout.id_field else None
        rec = Record(
            id=f"{layout.name}-{rid if rid is not None else i}",
            benchmark=layout.name, db_id=db_id, question=values[layout.question_field],
            query=values[layout.query_field],
            evidence=str(row.get(layout.evidence_field) or "") if layout.evidence_field else "",
            category=str(row.get(layout.category_field, "")) if layout.category_field else "",
            tables_entry=tables.get(db_id), source=path, row=i,
        )
        rec.db_path = database_path(db_dirs, db_id)
        if rec.db_path is None:
            rec.skip_reason = f"database {db_id!r} is missing (looked for {db_id}/{db_id}.sqlite in " \
                              f"{', '.join(dict.fromkeys(db_dirs))})"
        records.append(rec)
    return records


#: Database folders searched under a dataset root for rows that name only a ``db_id``
#: (``mrbench score`` rows, hub datasets).
DB_DIRS = ("spider/database", "spider-dk/database", "bird/dev_databases", "database", "dev_databases",
           "test_database", "spider/test_database")


def find_database(data_dir: str, db_id: str) -> str | None:
    """``<dir>/<db_id>/<db_id>.sqlite`` for the known database folders under ``data_dir``, or the root."""
    return database_path([os.path.join(data_dir, sub) for sub in DB_DIRS + ("",)], db_id)


def load_hub_records(hub: Any, rows: list[dict[str, Any]], data_dir: str | None) -> list[Record]:
    """Questions from the ``rows`` of a hub dataset (a :class:`tasks.data_source.HubSource`, e.g.
    ``hub:xlangai/spider:train``, read by :func:`tasks.data_source.read_hub`). Rows need ``db_id``,
    a question (``question``) and a reference (``query`` or ``SQL``; ``evidence`` is read when
    present). Hub datasets carry no databases: they are looked up under ``data_dir``
    (:data:`DB_DIRS`), else the question is kept with a skip reason."""
    repo, split, spec = hub.repo, hub.split, hub.spec
    name = f"hub-{repo.replace('/', '-')}-{split}"
    records: list[Record] = []
    for i, row in enumerate(rows):
        row = dict(row)
        query = row.get("query") if row.get("query") is not None else row.get("SQL")
        for key, value in (("db_id", row.get("db_id")), ("question", row.get("question")), ("query", query)):
            if not isinstance(value, str) or not value.strip():
                raise DataError(f"missing or empty string field {key!r}", path=spec, row=i)
        check_text([row["question"], str(row.get("evidence") or "")], "question/evidence", path=spec, row=i)
        db_id = check_db_id(row["db_id"], path=spec, row=i)
        rec = Record(id=f"{name}-{i}", benchmark="bird-hub" if "SQL" in row and "query" not in row else name,
                     db_id=db_id, question=row["question"], query=query, evidence=str(row.get("evidence") or ""),
                     source=spec, row=i)
        rec.db_path = find_database(data_dir, db_id) if data_dir else None
        if rec.db_path is None:
            rec.skip_reason = f"database {db_id!r} is missing (hub datasets carry no databases; point " \
                              f"--task.options.database_dir at a folder holding {DB_DIRS[0]}/<db_id>/<db_id>.sqlite)"
        records.append(rec)
    return records
