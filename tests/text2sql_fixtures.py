"""A hand-written SQLite database shared by the text-to-SQL tests (built fresh in a temp folder)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

SCHEMA = """
CREATE TABLE dept (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE emp (
  id INTEGER PRIMARY KEY, name TEXT NOT NULL, dept_id INTEGER REFERENCES dept(id),
  salary REAL, age INTEGER, bonus INTEGER, code TEXT
);
INSERT INTO dept VALUES (1, 'Sales'), (2, 'Research'), (3, 'Empty');
INSERT INTO emp VALUES
  (1, 'Ann',  1, 1000.5, 30, 10,   '5'),
  (2, 'Bob',  1, 2000.0, 40, NULL, '7'),
  (3, 'Cid',  2, 1500.0, 30, 5,    '5'),
  (4, 'Dee',  2, 3000.0, 50, NULL, '9'),
  (5, 'Eve',  1, 1000.5, 25, 10,   '5');
"""


def make_db(folder: Path, name: str = "toy") -> Path:
    """``folder/<name>/<name>.sqlite`` with the tables above (the Spider layout)."""
    path = folder / name / f"{name}.sqlite"
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA)
    conn.commit()
    conn.close()
    return path


def answer(sql: str, think: str = "reasoning") -> str:
    """A well-formed response holding ``sql``."""
    return f"<think>\n{think}\n</think>\n<answer>\n```sql\n{sql}\n```\n</answer>"
