"""A text-to-SQL question as the policy sees it, and what its verifiers read: one place for the
training task (:class:`tasks.text2sql.task.Text2SQLTask`) and the benchmark evaluators
(``evals/text2sql.py``), neither of which needs a sandbox for this."""

from __future__ import annotations

from typing import Any

from tasks.base import Message
from tasks.text2sql import templates
from tasks.text2sql.data import Record
from tasks.text2sql.schema import schema_from_database, schema_from_tables_entry


def schema_text(db_path: str | None, tables_entry: dict[str, Any] | None, sample_rows: int = 0) -> str:
    """The schema shown in the prompt: from the database, else from ``tables.json``'s entry."""
    if db_path:
        return schema_from_database(db_path, sample_rows)
    if tables_entry:
        return schema_from_tables_entry(tables_entry)
    return "(schema unavailable: the database is missing)"


def record_messages(record: Record, sample_rows: int = 0) -> list[Message]:
    """The chat messages of one question (schema, question, evidence where BIRD gives it)."""
    schema = schema_text(record.db_path, record.tables_entry, sample_rows)
    return templates.render_messages(schema, record.question, record.evidence or None)


def record_meta(record: Record) -> dict[str, Any]:
    """What the verifiers read of one question: database, reference query, match semantics, source
    row, and the skip reason of a question that cannot be scored."""
    meta: dict[str, Any] = {
        "db_path": record.db_path, "db_id": record.db_id, "query": record.query,
        "question": record.question, "evidence": record.evidence, "benchmark": record.benchmark,
        "category": record.category, "match": "bird" if record.benchmark.startswith("bird") else "spider",
        "source": record.source, "row": record.row,
    }
    if record.skip_reason:
        meta["skip_reason"] = record.skip_reason
    return meta
