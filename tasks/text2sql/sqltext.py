"""Lexical handling of SQL text: a small lexer and the text rules of Spider's execution match.

Nothing here executes SQL. The lexer only needs to know where string literals, quoted
identifiers and comments are, so that the rules below never touch their contents:

- :func:`first_statement` keeps only the first statement (the official evaluator does the same).
- :func:`normalize_for_match` repairs ``> =``, ``< =``, ``! =`` written with one space and
  removes the keyword DISTINCT everywhere (also inside ``COUNT(DISTINCT x)``), as the
  Spider test-suite ``exec_eval`` does before executing both queries.
- :func:`order_matters` is true when the reference text contains ``order by`` anywhere
  (case-insensitive substring test, as in the official code, so a subquery's ORDER BY counts).
- :func:`clause_spans` finds the select lists and the conditions (WHERE / ON / HAVING) of a
  query, the parts the execution verifier "reads", for the localisation analysis.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<comment>--[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<string>'(?:[^']|'')*(?:'|\Z))
  | (?P<quoted>"(?:[^"]|"")*(?:"|\Z)|`(?:[^`]|``)*(?:`|\Z)|\[[^\]]*(?:\]|\Z))
  | (?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)
  | (?P<word>[A-Za-z_\u0080-\uffff][A-Za-z0-9_$\u0080-\uffff]*)
  | (?P<op>[<>!=]=|<>|\|\||[^\s])
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True)
class Token:
    kind: str  # ws, comment, string, quoted, number, word, op
    text: str
    start: int
    end: int

    @property
    def upper(self) -> str:
        return self.text.upper()


def tokenize(sql: str) -> list[Token]:
    """Split ``sql`` into tokens covering every character (never raises)."""
    tokens: list[Token] = []
    pos = 0
    while pos < len(sql):
        m = _TOKEN_RE.match(sql, pos)
        if m is None or m.end() == pos:  # cannot happen with the catch-all, but stay total
            tokens.append(Token("op", sql[pos], pos, pos + 1))
            pos += 1
            continue
        kind = m.lastgroup or "op"
        tokens.append(Token(kind, m.group(), pos, m.end()))
        pos = m.end()
    return tokens


def split_statements(sql: str) -> list[str]:
    """Statements of ``sql`` split at top-level semicolons, stripped, empty ones dropped."""
    out: list[str] = []
    start = 0
    for tok in tokenize(sql):
        if tok.kind == "op" and tok.text == ";":
            out.append(sql[start:tok.start])
            start = tok.end
    out.append(sql[start:])
    return [s.strip() for s in out if _has_code(s)]


def _has_code(text: str) -> bool:
    return any(t.kind not in ("ws", "comment") for t in tokenize(text))


def first_statement(sql: str) -> str:
    """The first non-empty statement of ``sql`` ("" when there is none)."""
    parts = split_statements(sql)
    return parts[0] if parts else ""


def normalize_for_match(sql: str) -> str:
    """Spider ``exec_eval`` text normalisation: first statement, repaired ``> =``-style operators,
    every DISTINCT keyword removed. String literals and quoted identifiers are left untouched."""
    stmt = first_statement(sql)
    pieces: list[str] = []
    for tok in tokenize(stmt):
        if tok.kind == "word" and tok.upper == "DISTINCT":
            continue
        pieces.append(tok.text)
    # operators written with one space ("> =") are repaired on code tokens only
    return _repair_split_ops("".join(pieces))


def _repair_split_ops(sql: str) -> str:
    toks = tokenize(sql)
    out: list[str] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if (t.kind == "op" and t.text in "<>!" and i + 2 < len(toks) and toks[i + 1].text == " "
                and toks[i + 2].kind == "op" and toks[i + 2].text.startswith("=")):
            out.append(t.text + toks[i + 2].text)
            i += 3
            continue
        out.append(t.text)
        i += 1
    return "".join(out)


def order_matters(reference_sql: str) -> bool:
    """Official rule: row order counts iff the reference text contains ``order by`` (lower-cased)."""
    return "order by" in reference_sql.lower()


_CLAUSE_END = {
    "FROM", "WHERE", "GROUP", "ORDER", "LIMIT", "HAVING", "UNION", "INTERSECT", "EXCEPT",
    "JOIN", "INNER", "LEFT", "RIGHT", "FULL", "CROSS", "NATURAL", "ON", "WINDOW", "OFFSET",
}


def clause_spans(sql: str) -> dict[str, list[tuple[int, int]]]:
    """Character spans (relative to ``sql``) of every select list and every condition.

    A select list runs from after SELECT (and DISTINCT/ALL) to the FROM or clause keyword at the
    same parenthesis depth; a condition runs from after WHERE, ON or HAVING to the next clause
    keyword at the same depth or the closing parenthesis of its subquery. Never raises.
    """
    spans: dict[str, list[tuple[int, int]]] = {"select": [], "conditions": []}
    open_clauses: list[tuple[str, int, int]] = []  # (kind, depth, start offset)
    depth = 0
    last_code_end: dict[int, int] = {}  # depth -> end of the last code token seen at that depth

    def close(at_depth: int, end: int) -> None:
        """Close every open clause at ``at_depth`` or deeper, ending at its last code token."""
        while open_clauses and open_clauses[-1][1] >= at_depth:
            kind, d, start = open_clauses.pop()
            stop = last_code_end.get(d, end)
            if stop > start:
                spans[kind].append((start, stop))

    for tok in tokenize(sql):
        if tok.kind in ("ws", "comment"):
            continue
        word = tok.upper if tok.kind == "word" else ""
        if tok.kind == "op" and tok.text == "(":
            last_code_end[depth] = tok.end
            depth += 1
            continue
        if tok.kind == "op" and tok.text == ")":
            close(depth, tok.start)
            depth = max(0, depth - 1)
            last_code_end[depth] = tok.end
            continue
        if word in _CLAUSE_END or word == "SELECT":
            close(depth, tok.start)
            if word == "SELECT":
                open_clauses.append(("select", depth, tok.end))
                last_code_end[depth] = tok.end
            elif word in ("WHERE", "ON", "HAVING"):
                open_clauses.append(("conditions", depth, tok.end))
                last_code_end[depth] = tok.end
            continue
        if word in ("DISTINCT", "ALL") and open_clauses and open_clauses[-1][0] == "select" \
                and last_code_end.get(depth) == open_clauses[-1][2]:
            kind, d, _ = open_clauses.pop()
            open_clauses.append((kind, d, tok.end))
            last_code_end[depth] = tok.end
            continue
        last_code_end[depth] = tok.end
    close(0, len(sql))
    # strip leading whitespace from each span
    cleaned: dict[str, list[tuple[int, int]]] = {}
    for kind, items in spans.items():
        out = []
        for s, e in items:
            while s < e and sql[s].isspace():
                s += 1
            if e > s:
                out.append((s, e))
        cleaned[kind] = sorted(out)
    return cleaned
