"""The database schema shown to the model.

Rendered from the database itself: its ``CREATE TABLE`` statements as stored in
``sqlite_master`` (in creation order), each optionally followed by a comment with the first
``sample_rows`` rows of the table (values longer than 40 characters are cut). When the database
file is absent (BIRD dev without its ``dev_databases/``, or a database Spider's files lack), the
schema can instead be rendered from the benchmark's ``tables.json`` entry, as ``CREATE TABLE``
statements with column types, primary and foreign keys, so such questions can still be prompted
(never executed).

Schemas are cached per (database file, sample_rows).
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3
import urllib.parse
from typing import Any

_SIMPLE_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _open_ro(db_path: str) -> sqlite3.Connection:
    uri = "file:" + urllib.parse.quote(os.path.abspath(db_path)) + "?mode=ro&immutable=1"
    conn = sqlite3.connect(uri, uri=True)
    conn.text_factory = lambda b: b.decode("utf-8", errors="replace")
    return conn


def quote_ident(name: str) -> str:
    return name if _SIMPLE_NAME_RE.match(name) else '"' + name.replace('"', '""') + '"'


def _short(value: Any, width: int = 40) -> str:
    text = "NULL" if value is None else (repr(value) if isinstance(value, bytes) else str(value))
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


@functools.lru_cache(maxsize=512)
def schema_from_database(db_path: str, sample_rows: int = 0) -> str:
    """CREATE TABLE statements of the database, with ``sample_rows`` example rows per table."""
    conn = _open_ro(db_path)
    try:
        tables = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql IS NOT NULL "
            "AND name NOT LIKE 'sqlite_%' ORDER BY rowid").fetchall()
        parts: list[str] = []
        for name, sql in tables:
            text = sql.strip().rstrip(";") + ";"
            if sample_rows > 0:
                try:
                    cur = conn.execute(f"SELECT * FROM {quote_ident(name)} LIMIT {int(sample_rows)}")
                    cols = [d[0] for d in cur.description or []]
                    rows = cur.fetchall()
                except sqlite3.Error:
                    rows, cols = [], []
                if rows:
                    lines = [" | ".join(cols)] + [" | ".join(_short(v) for v in r) for r in rows]
                    text += f"\n/* {len(rows)} example rows of {name}:\n" + "\n".join(lines) + "\n*/"
            parts.append(text)
        return "\n\n".join(parts)
    finally:
        conn.close()


def schema_from_tables_entry(entry: dict[str, Any]) -> str:
    """CREATE TABLE statements rebuilt from one ``tables.json`` entry (Spider/BIRD layout)."""
    tables: list[str] = entry.get("table_names_original") or entry.get("table_names") or []
    columns: list[list[Any]] = entry.get("column_names_original") or entry.get("column_names") or []
    types: list[str] = entry.get("column_types") or []
    pks: set[int] = set()
    for pk in entry.get("primary_keys") or []:
        pks.update(pk if isinstance(pk, list) else [pk])
    by_table: dict[int, list[int]] = {i: [] for i in range(len(tables))}
    for idx, (t, _name) in enumerate(columns):
        if t >= 0 and t in by_table:
            by_table[t].append(idx)
    fks: dict[int, list[tuple[int, int]]] = {}
    for src, dst in entry.get("foreign_keys") or []:
        if 0 <= src < len(columns) and 0 <= dst < len(columns):
            fks.setdefault(columns[src][0], []).append((src, dst))
    out: list[str] = []
    for t, tname in enumerate(tables):
        lines = []
        for c in by_table[t]:
            ctype = types[c].upper() if c < len(types) else ""
            lines.append(f"  {quote_ident(columns[c][1])} {ctype}".rstrip())
        table_pks = [c for c in by_table[t] if c in pks]
        if table_pks:
            lines.append("  PRIMARY KEY (" + ", ".join(quote_ident(columns[c][1]) for c in table_pks) + ")")
        for src, dst in fks.get(t, []):
            lines.append(f"  FOREIGN KEY ({quote_ident(columns[src][1])}) REFERENCES "
                         f"{quote_ident(tables[columns[dst][0]])}({quote_ident(columns[dst][1])})")
        out.append(f"CREATE TABLE {quote_ident(tname)} (\n" + ",\n".join(lines) + "\n);")
    return "\n\n".join(out)
