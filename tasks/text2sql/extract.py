"""Reading a response: the format check and the SQL it holds, with the character spans read.

Format (reward ``format`` = 1) requires, on the raw response:

- each of ``<think>``, ``</think>``, ``<answer>``, ``</answer>`` exactly once, in this order;
- nothing but whitespace before ``<think>``, between ``</think>`` and ``<answer>`` and after
  ``</answer>``;
- a fenced sql block (```` ```sql ... ``` ````; the language tag ``sql`` or ``sqlite``, any case)
  with a non-empty body inside the answer.

The training verifiers take the SQL from the first sql block inside ``<answer>`` (to the end of
the text when ``</answer>`` is missing); no such block means "no SQL". The benchmark evaluators
read raw model text more leniently (:func:`extract_sql_lenient`), in this order: the sql block
inside the answer; the last sql block anywhere; the last fenced block of any language; the
answer's text when it starts like a query; the whole text when it starts like a query.
Only the first statement of what is found is executed (Spider's official rule).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mrbench_core.errors import response_text
from tasks.text2sql.sqltext import first_statement, split_statements

TAGS = ("<think>", "</think>", "<answer>", "</answer>")
_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n(.*?)```", re.DOTALL)
_SQL_LANGS = {"sql", "sqlite"}
_QUERY_START_RE = re.compile(r"^\s*(select|with)\b", re.IGNORECASE)

Span = tuple[int, int]


@dataclass
class FoundSQL:
    """SQL found in a response: the block body, its span, and the first statement to run."""

    block: str
    span: Span  # span of the block body in the response
    statement: str  # first statement of the body ("" when the body holds no code)
    statement_span: Span  # span of that statement in the response
    extra_statements: int  # statements after the first (not executed)
    rule: str  # which extraction rule found it


@dataclass
class FormatCheck:
    ok: bool
    reason: str
    tag_spans: list[Span] = field(default_factory=list)


def check_format(response: str) -> FormatCheck:
    """The format reward's check (see the module docstring). Never raises."""
    text = response_text(response)
    spans: list[Span] = []
    positions: list[int] = []
    for tag in TAGS:
        count = text.count(tag)
        if count != 1:
            found = [(m.start(), m.end()) for m in re.finditer(re.escape(tag), text)]
            spans.extend(found)
            what = "missing" if count == 0 else f"present {count} times"
            return FormatCheck(False, f"tag {tag} {what} (each tag must appear exactly once)", sorted(spans))
        pos = text.index(tag)
        positions.append(pos)
        spans.append((pos, pos + len(tag)))
    if positions != sorted(positions):
        return FormatCheck(False, "tags out of order (required: <think> </think> <answer> </answer>)", spans)
    t_open, t_close, a_open, a_close = positions
    if text[:t_open].strip():
        return FormatCheck(False, "text before <think>", spans)
    if text[t_close + len("</think>"):a_open].strip():
        return FormatCheck(False, "text between </think> and <answer>", spans)
    if text[a_close + len("</answer>"):].strip():
        return FormatCheck(False, "text after </answer>", spans)
    body_start = a_open + len("<answer>")
    found = _first_sql_block(text, body_start, a_close)
    if found is None:
        return FormatCheck(False, "no ```sql code block inside <answer>", spans)
    if not found.block.strip():
        return FormatCheck(False, "the ```sql code block inside <answer> is empty", spans)
    return FormatCheck(True, "tags in order, each once, with a sql block in the answer", spans)


def _first_sql_block(text: str, start: int, end: int) -> FoundSQL | None:
    for m in _FENCE_RE.finditer(text, start, end):
        if m.group(1).lower() in _SQL_LANGS:
            return _found(text, m.start(2), m.end(2), "answer_sql_block")
    return None


def _found(text: str, start: int, end: int, rule: str) -> FoundSQL:
    body = text[start:end]
    statements = split_statements(body)
    stmt = first_statement(body)
    s_start = start + body.find(stmt) if stmt else start
    return FoundSQL(block=body, span=(start, end), statement=stmt,
                    statement_span=(s_start, s_start + len(stmt)),
                    extra_statements=max(0, len(statements) - 1), rule=rule)


def _answer_region(text: str) -> Span | None:
    a_open = text.find("<answer>")
    if a_open < 0:
        return None
    start = a_open + len("<answer>")
    a_close = text.find("</answer>", start)
    return (start, a_close if a_close >= 0 else len(text))


def extract_answer_sql(response: str) -> FoundSQL | None:
    """Training rule: the first sql block inside <answer> (None: the response holds no SQL)."""
    text = response_text(response)
    region = _answer_region(text)
    if region is None:
        return None
    found = _first_sql_block(text, *region)
    if found is None or not found.statement:
        return None
    return found


def extract_sql_lenient(response: str) -> FoundSQL | None:
    """Evaluation rule for raw model text (see the module docstring); None when nothing is found."""
    text = response_text(response)
    found = extract_answer_sql(text)
    if found is not None:
        return found
    fences = list(_FENCE_RE.finditer(text))
    for m in reversed(fences):
        if m.group(1).lower() in _SQL_LANGS and first_statement(m.group(2)):
            return _found(text, m.start(2), m.end(2), "last_sql_block")
    for m in reversed(fences):
        if first_statement(m.group(2)):
            return _found(text, m.start(2), m.end(2), "last_code_block")
    region = _answer_region(text)
    if region is not None and _QUERY_START_RE.match(text[region[0]:region[1]]):
        return _found(text, region[0], region[1], "answer_text")
    if _QUERY_START_RE.match(text):
        return _found(text, 0, len(text), "whole_text")
    return None
