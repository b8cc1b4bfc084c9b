"""Security of the SQLite sandbox: nothing a model writes can change a database or run unbounded.

Destructive attempts run against copies of a hand-written database in a temp folder (writable, so
a missing guard would show); a last test runs them against a real Spider database. Every attack
must be refused or stopped within the time limit plus one second, and every database file keeps
its checksum (no journal, WAL or other new file appears next to it either).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time

import pytest
from text2sql_fixtures import answer, make_db

from tasks.base import Example
from tasks.text2sql.sandbox import Sandbox, SandboxLimits, file_checksum
from tasks.text2sql.task import Text2SQLTask

TIMEOUT = 0.5
# how long past its budget a stopped query may take to come back: the kill and the reply, which a
# busy host slows down (the attacks run for minutes, or forever, when nothing stops them, and
# the result's kind says the budget stopped them)
KILL_SLACK_S = 10.0
LIMITS = SandboxLimits(timeout_s=TIMEOUT, max_rows=50_000, max_bytes=16 * 1024 * 1024,
                       max_value_bytes=1024 * 1024)
_RECURSE = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "

# (name, statement, {"refused"}: error kinds accepted)
ATTACKS = [
    ("drop table", "DROP TABLE emp", {"denied"}),
    ("delete", "DELETE FROM emp", {"denied"}),
    ("update", "UPDATE emp SET age = 0", {"denied"}),
    ("insert", "INSERT INTO emp (id, name) VALUES (99, 'x')", {"denied"}),
    ("insert through a CTE", "WITH v AS (SELECT 1) INSERT INTO dept SELECT 9, 'x' FROM v", {"denied"}),
    ("replace", "REPLACE INTO dept VALUES (1, 'x')", {"denied"}),
    ("create table", "CREATE TABLE t (a)", {"denied"}),
    ("create temp table", "CREATE TEMP TABLE t (a)", {"denied"}),
    ("create table as select", "CREATE TABLE t AS SELECT * FROM emp", {"denied"}),
    ("create index", "CREATE INDEX i ON emp (age)", {"denied"}),
    ("create view", "CREATE VIEW v AS SELECT 1", {"denied"}),
    ("create trigger", "CREATE TRIGGER tr AFTER INSERT ON emp BEGIN DELETE FROM dept; END", {"denied"}),
    ("alter table", "ALTER TABLE emp ADD COLUMN z INTEGER", {"denied"}),
    ("rename table", "ALTER TABLE emp RENAME TO emp2", {"denied"}),
    ("attach another file", "ATTACH DATABASE '{other}' AS o", {"denied", "sqlite"}),
    ("attach memory", "ATTACH DATABASE ':memory:' AS m", {"denied", "sqlite"}),
    ("detach", "DETACH DATABASE main", {"denied", "sqlite"}),
    ("pragma query_only off", "PRAGMA query_only = 0", {"denied"}),
    ("pragma journal mode", "PRAGMA journal_mode = WAL", {"denied"}),
    ("pragma writable schema", "PRAGMA writable_schema = 1", {"denied"}),
    ("pragma read", "PRAGMA table_info(emp)", {"denied"}),
    ("load_extension", "SELECT load_extension('libc.so.6')", {"denied"}),
    ("vacuum", "VACUUM", {"denied"}),
    ("vacuum into a file", "VACUUM INTO '{other}'", {"denied"}),
    ("reindex", "REINDEX", {"denied"}),
    ("analyze", "ANALYZE", {"denied"}),
    ("begin", "BEGIN IMMEDIATE", {"denied"}),
    ("savepoint", "SAVEPOINT s", {"denied"}),
    ("two statements", "SELECT 1; DROP TABLE emp", {"sqlite"}),
    ("never-ending recursive CTE", _RECURSE + "SELECT count(*) FROM c", {"timeout"}),
    ("never-ending recursive CTE, rows", _RECURSE + "SELECT x FROM c", {"timeout", "row_limit"}),
    ("huge cross join", "SELECT * FROM emp a, emp b, emp c, emp d, emp e, emp f, emp g, emp h",
     {"timeout", "row_limit", "byte_limit"}),
    ("huge cross join aggregated", ("SELECT count(*) FROM emp a, emp b, emp c, emp d, emp e, emp f, emp g, "
     "emp h, emp i, emp j, emp k, emp l, emp m WHERE a.name || b.name || c.name != ''"), {"timeout"}),
    ("huge sort", ("SELECT a.name FROM emp a, emp b, emp c, emp d, emp e, emp f, emp g, emp h, emp i "
     "ORDER BY random()"), {"timeout", "row_limit", "byte_limit"}),
    ("enormous zeroblob", "SELECT zeroblob(2000000000)", {"sqlite"}),
    ("enormous randomblob", "SELECT randomblob(1000000000)", {"sqlite"}),
    ("enormous replace", "SELECT replace(hex(zeroblob(500000)), '0', '0000000000')", {"sqlite"}),
    ("enormous group_concat", _RECURSE + "SELECT group_concat(printf('%.1000c', 'x'), '') FROM c",
     {"sqlite", "timeout"}),
    ("many moderate strings", _RECURSE + "SELECT printf('%.100000c', 'x') FROM c",
     {"byte_limit", "timeout", "row_limit"}),
]


@pytest.fixture()
def db_copy(tmp_path):
    original = make_db(tmp_path / "orig")
    copy_dir = tmp_path / "copy" / "toy"
    copy_dir.mkdir(parents=True)
    copy = copy_dir / "toy.sqlite"
    shutil.copy(original, copy)
    return copy


def _listing(folder) -> list[str]:
    return sorted(os.listdir(folder))


@pytest.mark.parametrize("name,sql,kinds", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_attack_is_refused_or_stopped(db_copy, tmp_path, name, sql, kinds):
    other = tmp_path / "other.db"
    before_sum, before_files = file_checksum(str(db_copy)), _listing(db_copy.parent)
    sandbox = Sandbox(LIMITS)
    start = time.perf_counter()
    result = sandbox.run(str(db_copy), sql.format(other=other))
    elapsed = time.perf_counter() - start
    assert not result.ok, f"{name}: the sandbox ran it"
    assert result.error_kind in kinds, f"{name}: {result.error_kind}: {result.error}"
    assert elapsed < TIMEOUT + KILL_SLACK_S
    sandbox.close()
    assert file_checksum(str(db_copy)) == before_sum
    assert _listing(db_copy.parent) == before_files
    assert not other.exists()
    # the data is intact for an ordinary reader
    conn = sqlite3.connect(db_copy)
    assert conn.execute("SELECT count(*) FROM emp").fetchone() == (5,)
    assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone() == (2,)
    conn.close()


def test_connection_state_survives_attacks(db_copy):
    """After a refused or stopped query, the same cached connection still answers correctly."""
    sandbox = Sandbox(LIMITS)
    for _, sql, _ in ATTACKS:
        sandbox.run(str(db_copy), sql.format(other=db_copy.parent / "x.db"))
        ok = sandbox.run(str(db_copy), "SELECT count(*) FROM emp")
        assert ok.ok and ok.rows == [(5,)]


def test_rewards_on_attacks_are_zero_and_never_raise(db_copy):
    task = Text2SQLTask(limits=LIMITS)
    ex = Example(id="a", messages=[{"role": "user", "content": "q"}],
                 reward_names=["format", "executable", "execution"],
                 meta={"db_path": str(db_copy), "query": "SELECT name FROM emp"})
    before = file_checksum(str(db_copy))
    for name, sql, _ in ATTACKS:
        verdicts = task.score(ex, answer(sql.format(other=db_copy.parent / "x.db")))
        values = [v.value for v in verdicts]
        if name == "two statements":  # only the first statement runs: SELECT 1
            assert values == [1.0, 1.0, 0.0]
        else:
            assert values == [1.0, 0.0, 0.0], name
            assert verdicts[1].block.startswith("When this query was executed on this database")
    assert file_checksum(str(db_copy)) == before


def test_limits_are_reported_by_kind(db_copy):
    sandbox = Sandbox(SandboxLimits(timeout_s=0.3, max_rows=3))
    assert sandbox.run(str(db_copy), "SELECT * FROM emp").error_kind == "row_limit"
    assert sandbox.run(str(db_copy), _RECURSE + "SELECT count(*) FROM c").error_kind == "timeout"
    assert sandbox.run(str(db_copy), "SELECT * FROM emp LIMIT 3").ok
    assert sandbox.run(str(db_copy / "nope"), "SELECT 1").error_kind == "no_database"
    assert sandbox.run(str(db_copy), "   ").error_kind == "empty"


def test_real_spider_database_unchanged():
    data = os.environ.get("MRBENCH_DATA_DIR")
    if not data:
        pytest.skip("MRBENCH_DATA_DIR is not set (the real Spider databases live there)")
    db = os.path.join(data, "spider", "database", "concert_singer", "concert_singer.sqlite")
    if not os.path.isfile(db):
        pytest.skip(f"{db} is absent")
    before, files = file_checksum(db), _listing(os.path.dirname(db))
    sandbox = Sandbox(LIMITS)
    for name, sql, _ in ATTACKS:
        start = time.perf_counter()
        result = sandbox.run(db, sql.replace("emp", "singer").format(other="/nonexistent/o.db"))
        assert not result.ok, name
        assert time.perf_counter() - start < TIMEOUT + 1.0
    sandbox.close()
    assert file_checksum(db) == before
    assert _listing(os.path.dirname(db)) == files


def test_every_real_spider_database_unchanged():
    """Every refusal-type attack on every Spider database; every file's checksum is unchanged."""
    data = os.environ.get("MRBENCH_DATA_DIR")
    if not data:
        pytest.skip("MRBENCH_DATA_DIR is not set (the real Spider databases live there)")
    root = os.path.join(data, "spider", "database")
    dbs = sorted(os.path.join(root, d, d + ".sqlite") for d in os.listdir(root)
                 if os.path.isfile(os.path.join(root, d, d + ".sqlite")))
    if not dbs:
        pytest.skip(f"no databases under {root}")
    before = {db: (file_checksum(db), _listing(os.path.dirname(db))) for db in dbs}
    fast = [(n, q) for n, q, kinds in ATTACKS if kinds <= {"denied", "sqlite"}]
    sandbox = Sandbox(LIMITS)
    for db in dbs:
        tables = sandbox.run(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").rows
        table = tables[0][0].replace('"', '""') if tables else "t"
        for name, sql in fast:
            assert not sandbox.run(db, sql.replace("emp", f'"{table}"').format(other="/nonexistent/o.db")).ok, name
    sandbox.close()
    print(f"\n{len(dbs)} Spider databases x {len(fast)} attacks: all refused, checksums unchanged")
    assert {db: (file_checksum(db), _listing(os.path.dirname(db))) for db in dbs} == before
