"""Prompt and verifier-block texts of the text-to-SQL task (SQL-R1 style; paper Appendix C).

The prompt asks for reasoning in ``<think>`` and the final query in ``<answer>`` as a fenced
``sql`` block. The three blocks Z_k follow Appendix C: the format block states the required
format (its exact wording is not printed in the paper; this one states the same requirement the
format verifier checks), the executability block reports the response's own SQLite error, a
no-SQL message, or that the query ran; the execution block gives the reference query.
"""

from __future__ import annotations

SYSTEM_PROMPT = (
    "You are an expert in SQLite. You are given the schema of a database and a question about it. "
    "Think about the question step by step inside <think> </think>, then write one SQLite query that "
    "answers it inside <answer> </answer>, as a ```sql fenced code block."
)

USER_PROMPT = """Database schema:
{schema}
{evidence_part}
Question: {question}

Answer in exactly this format:
<think>
your reasoning
</think>
<answer>
```sql
your SQLite query
```
</answer>"""

EVIDENCE_PART = "\nExternal knowledge: {evidence}\n"

# -- verifier blocks (Z_k) ----------------------------------------------------------------
FORMAT_BLOCK = (
    "The required format is: reasoning inside <think> </think>, followed by the final answer inside "
    "<answer> </answer>; each tag appears exactly once and in this order, and the answer holds the query "
    "as a ```sql fenced code block."
)

EXECUTABLE_ERROR_BLOCK = "When this query was executed on this database, SQLite raised: {error}."
EXECUTABLE_LIMIT_BLOCK = "When this query was executed on this database, it was stopped: {error}."
EXECUTABLE_OK_BLOCK = "This query was executed on this database and ran without error."
NO_SQL_BLOCK = "This response contains no SQL code block inside <answer>."

EXECUTION_BLOCK = "The reference query for this question is: {query}."

# -- OPSD teacher ---------------------------------------------------------------------------
#: With no chain-of-thought reference solution, the teacher sees the reference query written as
#: an answer in the required format, with this short reasoning line in the think part.
TEACHER_REASONING = "The reference query below answers the question on this schema."

TEACHER_ANSWER = """<think>
{reasoning}
</think>
<answer>
```sql
{query}
```
</answer>"""


def render_user_prompt(schema: str, question: str, evidence: str | None = None) -> str:
    evidence_part = EVIDENCE_PART.format(evidence=evidence.strip()) if evidence and evidence.strip() else ""
    return USER_PROMPT.format(schema=schema.strip(), question=question.strip(), evidence_part=evidence_part)


def render_messages(schema: str, question: str, evidence: str | None = None) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": render_user_prompt(schema, question, evidence)},
    ]


def render_teacher_answer(query: str, reasoning: str | None = None) -> str:
    return TEACHER_ANSWER.format(reasoning=(reasoning or TEACHER_REASONING).strip(), query=query.strip())
