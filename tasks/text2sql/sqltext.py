"""SQL text: statements, clause and column spans from sqlglot, and the text rules of Spider's execution match.

Nothing here executes SQL. Structure comes from sqlglot (SQLite dialect):

- :func:`lex` -- sqlglot's tokens with ``[start, end)`` character offsets. Comments are skipped
  and string literals and quoted identifiers are single tokens, so the rules below never touch
  their contents. Where sqlglot cannot read on (an unterminated literal or quoted identifier, a
  malformed hex literal: model output often has one) the rest of the text is one token, and an
  unterminated comment runs to the end, as SQLite reads them.
- :func:`split_statements` / :func:`first_statement` -- statements split at the semicolon tokens;
  only the first statement is executed (as the official evaluator does).
- :func:`clause_spans` -- the select lists, the conditions (WHERE / ON / HAVING), the tables and the
  column references of a query, from sqlglot's parse tree: the parts the execution verifier
  "reads", for the localisation analysis. Text sqlglot cannot parse has no clause spans.

The official evaluator's textual rules stay hand-written, applied to the code tokens:

- :func:`normalize_for_match` repairs ``> =``, ``< =``, ``! =`` written with one space and
  removes the keyword DISTINCT everywhere (also inside ``COUNT(DISTINCT x)``), as the
  Spider test-suite ``exec_eval`` does before executing both queries (here on code, never inside a
  string literal or quoted identifier).
- :func:`order_matters` is true when the reference text contains ``order by`` anywhere
  (case-insensitive substring test, as in the official code, so a subquery's ORDER BY counts).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from itertools import pairwise

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError, TokenError

_DIALECT = sqlglot.Dialect.get_or_raise("sqlite")
#: compound queries (UNION / INTERSECT / EXCEPT); older sqlglot releases name their base Union
_SET_OPERATIONS = getattr(exp, "SetOperation", exp.Union)

Span = tuple[int, int]


@dataclass(frozen=True)
class Lexeme:
    """One sqlglot token of a text: its type name (``SELECT``, ``STRING``, ``IDENTIFIER``,
    ``VAR``, ``SEMICOLON``, ...), its raw text (quotes included) and its ``[start, end)`` offsets."""

    type: str
    text: str
    start: int
    end: int

    @property
    def upper(self) -> str:
        return self.text.upper()


def lex(sql: str) -> list[Lexeme]:
    """The code tokens of ``sql`` (:func:`_lex`), memoised: scoring one response reads the same SQL
    several times, and sqlglot's tokenizer takes seconds on a megabyte of model output."""
    return list(_lex_memo(sql))


@functools.lru_cache(maxsize=16)
def _lex_memo(sql: str) -> tuple[Lexeme, ...]:
    return tuple(_lex(sql))


def _lex(sql: str) -> list[Lexeme]:
    """The code tokens of ``sql`` (comments and whitespace skipped). Never raises: where sqlglot
    stops tokenizing, the rest of the text is one ``UNKNOWN`` token (SQLite too reads an
    unterminated literal or identifier to the end and rejects a malformed hex literal), or
    nothing when it is an unterminated comment."""
    tokenizer = _DIALECT.tokenizer_class(dialect=_DIALECT)
    rest = None
    try:
        tokens = tokenizer.tokenize(sql)
    except (TokenError, ValueError, IndexError):
        tokens = list(tokenizer.tokens)  # those read before the error
        rest = tokens[-1].end + 1 if tokens else 0
    out = []
    for tok in tokens:
        end = min(tok.end + 1, len(sql))
        out.append(Lexeme(tok.token_type.name, sql[tok.start:end], tok.start, end))
    if rest is not None:
        rest = _skip_blank(sql, rest)
        if rest < len(sql):
            out.append(Lexeme("UNKNOWN", sql[rest:], rest, len(sql)))
    return out


def _skip_blank(sql: str, pos: int) -> int:
    """The offset of the first character from ``pos`` on that is neither whitespace nor inside a
    comment (an unterminated block comment runs to the end)."""
    while pos < len(sql):
        if sql[pos].isspace():
            pos += 1
        elif sql.startswith("--", pos):
            end = sql.find("\n", pos)
            pos = len(sql) if end < 0 else end + 1
        elif sql.startswith("/*", pos):
            end = sql.find("*/", pos + 2)
            pos = len(sql) if end < 0 else end + 2
        else:
            break
    return pos


def statement_spans(sql: str) -> list[Span]:
    """``[start, end)`` of each statement of ``sql`` (split at semicolon tokens), without the
    surrounding whitespace; statements holding no code (only comments or nothing) are left out."""
    spans: list[Span] = []
    start, has_code = 0, False
    for tok in lex(sql):
        if tok.type == "SEMICOLON":
            if has_code:
                spans.append((start, tok.start))
            start, has_code = tok.end, False
        else:
            has_code = True
    if has_code:
        spans.append((start, len(sql)))
    out = []
    for s, e in spans:
        piece = sql[s:e]
        lead = len(piece) - len(piece.lstrip())
        out.append((s + lead, s + len(piece.rstrip())))
    return out


def split_statements(sql: str) -> list[str]:
    """Statements of ``sql`` split at semicolons, stripped, empty ones dropped."""
    return [sql[s:e] for s, e in statement_spans(sql)]


def first_statement(sql: str) -> str:
    """The first non-empty statement of ``sql`` ("" when there is none)."""
    spans = statement_spans(sql)
    return sql[spans[0][0]:spans[0][1]] if spans else ""


# -- the official evaluator's text rules ----------------------------------------------------------


def normalize_for_match(sql: str) -> str:
    """Spider ``exec_eval`` text normalisation: first statement, every DISTINCT keyword removed,
    then ``> =``-style operators written with one space repaired. String literals and quoted
    identifiers are left untouched."""
    stmt = first_statement(sql)
    pieces, pos = [], 0
    for tok in lex(stmt):
        if tok.type == "DISTINCT":
            pieces.append(stmt[pos:tok.start])
            pos = tok.end
    pieces.append(stmt[pos:])
    return _repair_split_ops("".join(pieces))


def _repair_split_ops(sql: str) -> str:
    """An operator ending in ``>``, ``<`` or ``!`` followed by exactly one space and an operator
    starting with ``=`` loses the space (the official ``replace('> =', '>=')`` and its ``< =`` and
    ``! =`` siblings, on code tokens only)."""
    toks = lex(sql)
    cut = [a.end for a, b in pairwise(toks)
           if a.text[-1:] in ("<", ">", "!") and b.text.startswith("=") and sql[a.end:b.start] == " "]
    if not cut:
        return sql
    out, pos = [], 0
    for at in cut:
        out.append(sql[pos:at])
        pos = at + 1
    out.append(sql[pos:])
    return "".join(out)


def order_matters(reference_sql: str) -> bool:
    """Official rule: row order counts iff the reference text contains ``order by`` (lower-cased)."""
    return "order by" in reference_sql.lower()


# -- structure from the parse tree ----------------------------------------------------------------

CLAUSE_KINDS = ("select", "conditions", "tables", "columns")
#: the longest text :func:`clause_spans` parses (the sandbox's default ``max_sql_chars``)
MAX_PARSED_CHARS = 100_000

#: tokens that bound a clause: a select list or condition never extends over one of these
_BOUNDARIES = frozenset({
    "SELECT", "DISTINCT", "ALL", "FROM", "WHERE", "GROUP_BY", "HAVING", "ORDER_BY", "LIMIT", "OFFSET",
    "UNION", "INTERSECT", "EXCEPT", "JOIN", "INNER", "LEFT", "RIGHT", "FULL", "CROSS", "NATURAL", "OUTER",
    "STRAIGHT_JOIN", "ON", "USING", "WINDOW", "QUALIFY", "WITH", "SEMICOLON", "L_PAREN", "R_PAREN",
})


def clause_spans(sql: str) -> dict[str, list[Span]]:
    """Character spans (relative to ``sql``) of the parts of a query, from sqlglot's parse tree:

    - ``select``: each select list (first to last selected expression, commas included);
    - ``conditions``: each WHERE, JOIN ... ON and HAVING condition;
    - ``tables``: each table reference (name and alias);
    - ``columns``: each column reference, wherever it appears.

    sqlglot records the offsets of the tokens it turns into leaves (names, literals, function
    names, ``*``). A node covers the tokens from its first to its last leaf, widened to balance
    its parentheses; a subquery, parenthesised expression or tuple also takes its keywords and
    parentheses; a select list or condition also takes the neighbouring tokens that are no
    node's leaf (``NULL``, ``NOT``, ``IS``, ``EXISTS``) up to the keywords that bound its clause.
    Every kind is empty when sqlglot cannot parse ``sql``, when its tree is too deep to walk (a
    long chain such as ``1 + 1 + ...``), and for text longer than :data:`MAX_PARSED_CHARS` (the
    sandbox refuses to run such a query, and parsing a megabyte of SQL takes minutes). Never raises."""
    out: dict[str, list[Span]] = {kind: [] for kind in CLAUSE_KINDS}
    if len(sql) > MAX_PARSED_CHARS:
        return out
    try:
        trees = [t for t in sqlglot.parse(sql, read=_DIALECT) if t is not None]
        tree = _Extents(lex(sql), trees)
        for root in trees:
            for node in root.walk():
                for kind, part, absorb in _parts(node):
                    span = tree.span(part, absorb)
                    if span is not None:
                        out[kind].append(span)
    except (SqlglotError, RecursionError, ValueError, IndexError, KeyError, TypeError, AttributeError):
        return {kind: [] for kind in CLAUSE_KINDS}
    return {kind: sorted(set(spans)) for kind, spans in out.items()}


def _parts(node: exp.Expression) -> list[tuple[str, list[exp.Expression], bool]]:
    """(kind, the nodes of the part, whether it takes the unpositioned tokens around it)."""
    if isinstance(node, exp.Select) and node.expressions:
        return [("select", list(node.expressions), True)]
    if isinstance(node, (exp.Where, exp.Having)) and node.this is not None:
        return [("conditions", [node.this], True)]
    if isinstance(node, exp.Join) and node.args.get("on") is not None:
        return [("conditions", [node.args["on"]], True)]
    if isinstance(node, exp.Table):
        return [("tables", [node], False)]
    if isinstance(node, exp.Column):
        return [("columns", [node], False)]
    return []


class _Extents:
    """Token ranges of the nodes of parsed statements."""

    def __init__(self, toks: list[Lexeme], trees: list[exp.Expression]):
        self.toks = toks
        self.at = {tok.start: i for i, tok in enumerate(toks)}
        self.memo: dict[int, tuple[int, int] | None] = {}
        self.leaves: set[int] = set()
        for root in trees:
            self._extent(root, None)

    def span(self, nodes: list[exp.Expression], absorb: bool) -> Span | None:
        ranges = [r for r in (self.memo.get(id(n)) for n in nodes) if r is not None]
        if not ranges:
            return None
        toks, first, last = self.toks, min(r[0] for r in ranges), max(r[1] for r in ranges)
        first, last = _balance(toks, first, last)
        if absorb:
            while first > 0 and self._loose(first - 1):
                first -= 1
            while last + 1 < len(toks) and self._loose(last + 1):
                last += 1
        return toks[first].start, toks[last].end

    def _loose(self, i: int) -> bool:
        return i not in self.leaves and self.toks[i].type not in _BOUNDARIES

    def _extent(self, node: exp.Expression, parent: exp.Expression | None) -> tuple[int, int] | None:
        found: list[int] = []
        start = node.meta.get("start") if node.meta else None
        if start is not None and int(start) in self.at:
            found.append(self.at[int(start)])
            self.leaves.add(found[-1])
        for child in node.iter_expressions():
            r = self._extent(child, node)
            if r is not None:
                found += r
        rng = None
        if found:
            rng = _balance(self.toks, min(found), max(found))
            if isinstance(node, (exp.Paren, exp.Tuple)) or (
                    isinstance(node, (exp.Select, _SET_OPERATIONS)) and parent is not None
                    and not isinstance(parent, _SET_OPERATIONS)):
                rng = self._enclose(*rng)
        self.memo[id(node)] = rng
        return rng

    def _enclose(self, first: int, last: int) -> tuple[int, int]:
        """``first..last`` widened to the parentheses around it, when only unpositioned tokens
        (keywords) lie between them."""
        toks, i = self.toks, first - 1
        while i >= 0 and toks[i].type != "L_PAREN" and i not in self.leaves and toks[i].type != "R_PAREN":
            i -= 1
        j = last + 1
        while j < len(toks) and toks[j].type != "R_PAREN" and j not in self.leaves and toks[j].type != "L_PAREN":
            j += 1
        if i >= 0 and toks[i].type == "L_PAREN" and j < len(toks) and toks[j].type == "R_PAREN":
            return i, j
        return first, last


def _balance(toks: list[Lexeme], first: int, last: int) -> tuple[int, int]:
    """Widen ``toks[first..last]`` to the opening parentheses of the closing ones it holds and
    the closing parentheses of the opening ones it holds."""
    depth = 0
    for i in range(first, last + 1):
        depth += (toks[i].type == "L_PAREN") - (toks[i].type == "R_PAREN")
        if depth < 0:  # a closing parenthesis opened before ``first``: take back to its opener
            need, j = -depth, first - 1
            while j >= 0 and need:
                need += (toks[j].type == "R_PAREN") - (toks[j].type == "L_PAREN")
                j -= 1
            if need:
                break
            first, depth = j + 1, 0
    while depth > 0 and last + 1 < len(toks):
        last += 1
        depth += (toks[last].type == "L_PAREN") - (toks[last].type == "R_PAREN")
    return first, last
