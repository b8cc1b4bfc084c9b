"""The text-to-SQL task (paper Section 5.1): Spider training, three binary rewards, SQLite sandbox.

``Text2SQLTask().load(split, data_dir)`` reads the official layouts
(:mod:`tasks.text2sql.data`; ``split`` is ``train``/``dev``/``test``, a benchmark name such as
``spider-syn`` or ``bird-dev``). A hub dataset is named in ``data_dir`` as ``hub:<repo>[:<split>]``
(:mod:`tasks.data_source`); its databases are looked up under the ``database_dir`` option. There
is no built-in data: ``data_dir=None`` raises an error saying where to point it.

Training preparation (``split`` in ``filter_splits``, by default only ``train``) drops, and counts
in :attr:`Text2SQLTask.last_load_report`:

- questions whose database file is absent (``missing_database``);
- questions whose reference query fails to run in the sandbox (``reference_failed``; the paper
  drops 3 of Spider train);
- questions whose prompt is longer than ``max_prompt_tokens`` (4,096; the paper drops 82).
  Tokens are counted with ``tokenizer`` when one is set (its chat template when it has one, else
  ``encode`` of the joined messages); otherwise approximated as ``ceil(characters / 3.0)``: on
  400 Spider training prompts a BPE tokenizer (SmolLM2's) gives 3.0 characters per token on
  average (2.4 to 4.1 per prompt), identifiers and punctuation splitting into short pieces. Pass
  the policy's tokenizer for exact counts.

Other splits keep every question; those on absent databases are kept with ``meta["db_path"] =
None`` and ``meta["skip_reason"]`` (benchmark evaluators report them as skipped).

``load`` returns a :class:`tasks.data_source.Screened` pool: with the run's ``limit``, the harness
keeps a seeded sample of the questions that pass the filters, in file order (the questions are
walked in the ``data-sample`` stream's order of the seed until ``limit`` pass, so only those are
checked, then put back in file order); without it, every question is checked and kept if it passes.

``Example.meta`` holds: ``db_path``, ``db_id``, ``query`` (reference), ``question``, ``evidence``
(BIRD), ``benchmark``, ``match`` (execution-match semantics), ``source``/``row``.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from typing import Any

from tasks.base import DataError, Example, Message, RewardSpec, Task, Verdict
from tasks.data_source import Screened, check_split, hub_source, read_hub
from tasks.registry import TASKS
from tasks.text2sql import templates
from tasks.text2sql.data import (
    DB_DIRS,
    Record,
    benchmark_folder,
    find_database,
    load_hub_records,
    load_records,
    resolve_layout,
)
from tasks.text2sql.prompt import record_messages, record_meta, schema_text
from tasks.text2sql.refcache import ReferenceCache
from tasks.text2sql.sandbox import SandboxLimits
from tasks.text2sql.sqltext import normalize_for_match
from tasks.text2sql.verify import REWARD_NAMES, score_response
from tasks.text2sql.worker import WorkerSandbox

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 3.0


@TASKS.register("text2sql")
class Text2SQLTask(Task):
    """Text-to-SQL with rewards ``format``, ``executable``, ``execution`` (each {0,1})."""

    version = "1"
    format_reward = "format"
    block_order = tuple(REWARD_NAMES)  # the paper gives no other order for this task

    def __init__(self, max_prompt_tokens: int = 4096, sample_rows: int = 0, tokenizer: Any = None,
                 limits: SandboxLimits | None = None, filter_splits: Sequence[str] = ("train",),
                 cache_dir: str | None = None, database_dir: str | None = None) -> None:
        self.max_prompt_tokens = max_prompt_tokens
        self.database_dir = database_dir  # where a hub dataset's databases are (hub datasets carry none)
        self.sample_rows = sample_rows
        self.tokenizer = tokenizer
        self.filter_splits = tuple(filter_splits)
        self.sandbox = WorkerSandbox(limits)  # hard stop on overrun: see tasks.text2sql.worker
        self.reference_cache = ReferenceCache(self.sandbox, disk_dir=cache_dir)
        self.last_load_report: dict[str, Any] = {}

    # -- prompts --------------------------------------------------------------------------
    def schema_text(self, db_path: str | None, tables_entry: dict[str, Any] | None) -> str:
        return schema_text(db_path, tables_entry, self.sample_rows)

    def messages_for(self, record: Record) -> list[Message]:
        return record_messages(record, self.sample_rows)

    def use_tokenizer(self, tokenizer: Any) -> None:
        """Count prompt tokens with the policy's tokenizer (the paper's 4,096-token filter)."""
        self.tokenizer = tokenizer

    def count_tokens(self, messages: Sequence[Message]) -> int:
        """Prompt length in tokens (see the module docstring for the rule without a tokenizer)."""
        tok = self.tokenizer
        if tok is not None:
            if getattr(tok, "chat_template", None):
                ids = tok.apply_chat_template(list(messages), tokenize=True, add_generation_prompt=True)
                if isinstance(ids, dict) or hasattr(ids, "keys"):
                    ids = ids["input_ids"]
                return len(ids)
            return len(tok.encode("\n\n".join(m["content"] for m in messages)))
        return math.ceil(sum(len(m["content"]) for m in messages) / CHARS_PER_TOKEN)

    def example_from_record(self, record: Record) -> Example:
        return Example(id=record.id, messages=self.messages_for(record), reward_names=list(REWARD_NAMES),
                       meta=record_meta(record))

    # -- data -----------------------------------------------------------------------------
    def default_benchmarks(self, data_dir: str | None = None) -> dict[str, str | None]:
        """Spider dev when the training data directory holds it (``dev.json`` there or under
        ``spider/``); otherwise none."""
        if data_dir and hub_source(data_dir, "train") is None:
            folder = os.path.join(data_dir, "spider")
            if any(os.path.isfile(os.path.join(d, "dev.json")) for d in (data_dir, folder)):
                return {"spider-dev": data_dir}
        return {}

    def data_problem(self, split: str, data_dir: str | None) -> str | None:
        """No data directory, or no question file of ``split`` in it (a hub dataset is not checked;
        a hub name spelled otherwise than ``hub:`` or put in ``split`` is the problem)."""
        try:
            check_split(split)
            if hub_source(data_dir, split) is not None:
                return None
        except DataError as exc:
            return str(exc)
        try:
            benchmark_folder(resolve_layout(split), data_dir)
        except (FileNotFoundError, ValueError) as exc:
            return str(exc)
        return None

    def load(self, split: str = "train", data_dir: str | None = None) -> Screened[Record, Example]:
        """The split's questions as a :class:`tasks.data_source.Screened` pool: on a split of
        ``filter_splits`` a question is checked (:meth:`_drop_reason`) only when the harness's
        sample visits it; the counts go to :attr:`last_load_report` once the sample is taken."""
        check_split(split)
        hub = hub_source(data_dir, split)
        if hub is not None:
            name, filtering = hub.spec, hub.split in self.filter_splits
            records = load_hub_records(hub, read_hub(hub), self.database_dir)
        else:
            name = resolve_layout(split).name
            filtering = split in self.filter_splits or name in self.filter_splits
            records = load_records(name, data_dir)
        report: dict[str, Any] = {"split": name, "questions": len(records), "missing_database": 0,
                                  "reference_failed": 0, "too_long": 0, "filtered": filtering,
                                  "max_prompt_tokens": self.max_prompt_tokens,
                                  "token_count": "tokenizer" if self.tokenizer is not None
                                  else f"approx: ceil(chars / {CHARS_PER_TOKEN})",
                                  "dropped_ids": {"missing_database": [], "reference_failed": [], "too_long": []}}

        def keep(rec: Record) -> bool:
            reason = self._drop_reason(rec) if filtering else ""
            if reason:
                report[reason] += 1
                report["dropped_ids"][reason].append(rec.id)
            return not reason

        def finish(examples: list[Example]) -> None:
            report["kept"] = len(examples)
            report["skipped_missing_database"] = sum(1 for e in examples if e.meta.get("skip_reason"))
            self.last_load_report = report
            log.info("text2sql %s: %d kept; dropped %d (missing database), %d (reference fails), %d (prompt > %d "
                     "tokens)", name, len(examples), report["missing_database"], report["reference_failed"],
                     report["too_long"], self.max_prompt_tokens)

        return Screened(records, keep, self.example_from_record, finish)

    def _drop_reason(self, rec: Record) -> str:
        if rec.db_path is None:
            return "missing_database"
        if not self.reference_cache.get(rec.db_path, normalize_for_match(rec.query)).ok:
            return "reference_failed"
        if self.count_tokens(self.messages_for(rec)) > self.max_prompt_tokens:
            return "too_long"
        return ""

    def example_from_row(self, row: dict[str, Any], *, where: str = "", data_dir: str | None = None) -> Example:
        """A scoring example from a dataset row (``db_id``, ``question``, ``query``; BIRD's ``SQL`` and
        ``evidence`` are accepted). The database is looked up under ``data_dir`` (Spider, Spider-DK and
        BIRD database folders, or ``data_dir/<db_id>/<db_id>.sqlite``). A row whose database is absent is
        kept with a ``skip_reason`` (its ``executable`` and ``execution`` are NaN with that reason, never
        counted right or wrong), so a file such as Spider dev still scores when one database is missing;
        a ``data_dir`` holding no database folder at all is a DataError (a wrong root, not a missing
        database)."""
        if not isinstance(row, dict):
            raise DataError("expected a JSON object", path=where or None)
        db_id, question = row.get("db_id"), row.get("question") or row.get("SpiderSynQuestion")
        query = row.get("query") if row.get("query") is not None else row.get("SQL")
        for key, value in (("db_id", db_id), ("question", question), ("query", query)):
            if not isinstance(value, str) or not value.strip():
                raise DataError(f"missing or empty string field {key!r}", path=where or None)
        if not data_dir:
            raise DataError("text2sql rows need the dataset root: pass --data-dir (the folder holding "
                            "spider/database/...)", path=where or None)
        db_path = find_database(data_dir, db_id)
        looked = f"looked for <dir>/{db_id}/{db_id}.sqlite in {', '.join(DB_DIRS)} and the root"
        if db_path is None and not any(os.path.isdir(os.path.join(data_dir, d)) for d in DB_DIRS):
            raise DataError(f"database {db_id!r} not found under {data_dir}, which holds none of the database "
                            f"folders ({looked})", path=where or None)
        is_bird = "SQL" in row and "query" not in row
        rec = Record(id=str(row.get("id", row.get("question_id", ""))), benchmark="bird" if is_bird else "spider",
                     db_id=db_id, question=question, query=query, evidence=str(row.get("evidence") or ""),
                     db_path=db_path, source=where)
        if db_path is None:
            rec.skip_reason = f"database {db_id!r} is missing under {data_dir} ({looked})"
        return self.example_from_record(rec)

    def reward_specs(self) -> list[RewardSpec]:
        return [RewardSpec("format", 0.0, 1.0, "tags in order, each once, sql block in the answer"),
                RewardSpec("executable", 0.0, 1.0, "the query runs in the sandbox without error"),
                RewardSpec("execution", 0.0, 1.0, "the result equals the reference result")]

    # -- verifiers ------------------------------------------------------------------------
    def score(self, example: Example, response: str) -> list[Verdict]:
        return score_response(example.meta, response, self.sandbox, self.reference_cache)

    def teacher_messages(self, example: Example) -> list[Message]:
        """OPSD teacher context (Appendix B): the prompt, a reference solution as an earlier assistant
        answer, then the prompt again. The paper uses OmniSQL's chain-of-thought solutions; without one
        (``meta["reference_solution"]`` unset) the reference query is written as an answer in the
        required format with a one-line think part (:data:`templates.TEACHER_REASONING`)."""
        solution = example.meta.get("reference_solution") or templates.render_teacher_answer(example.meta["query"])
        system = [m for m in example.messages if m["role"] == "system"]
        rest = [m for m in example.messages if m["role"] != "system"]
        return [dict(m) for m in system] + [dict(m) for m in rest] + [
            {"role": "assistant", "content": solution}] + [dict(m) for m in rest]

