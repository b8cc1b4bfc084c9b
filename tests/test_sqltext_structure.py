"""Statements and clause spans from sqlglot (tasks/text2sql/sqltext.py), on hand-written queries."""

from __future__ import annotations

from tasks.text2sql.sqltext import clause_spans, first_statement, lex, normalize_for_match, split_statements


def _texts(sql: str) -> dict[str, list[str]]:
    return {kind: [sql[s:e] for s, e in spans] for kind, spans in clause_spans(sql).items()}


def test_statements_split_at_semicolons_outside_literals_identifiers_and_comments():
    sql = "SELECT 'a;b', \"c;d\", [e;f], `g;h` -- i;j\n FROM t /* k;l */; ; SELECT 2;"
    assert split_statements(sql) == ["SELECT 'a;b', \"c;d\", [e;f], `g;h` -- i;j\n FROM t /* k;l */", "SELECT 2"]
    assert first_statement("-- only a comment; \n ;") == ""


def test_unterminated_literals_and_comments_run_to_the_end():
    assert split_statements("SELECT 'abc; DROP TABLE t") == ["SELECT 'abc; DROP TABLE t"]
    assert split_statements('SELECT "abc; DROP TABLE t') == ['SELECT "abc; DROP TABLE t']
    assert split_statements("SELECT 1 /* note; SELECT 2") == ["SELECT 1 /* note; SELECT 2"]
    assert split_statements("/* note; SELECT 2") == []
    assert [t.type for t in lex("SELECT 'abc")] == ["SELECT", "UNKNOWN"]


def test_offsets_are_characters_with_multibyte_text():
    sql = "SELECT 'héllo🙂' AS x, név FROM t WHERE név = 'é'"
    for tok in lex(sql):
        assert sql[tok.start:tok.end] == tok.text
    assert _texts(sql)["conditions"] == ["név = 'é'"]
    assert _texts(sql)["select"] == ["'héllo🙂' AS x, név"]


def test_text_rules_touch_code_only():
    assert normalize_for_match("SELECT DISTINCT a FROM t WHERE b <> = 1 AND c = '> = DISTINCT'") == \
        "SELECT  a FROM t WHERE b <>= 1 AND c = '> = DISTINCT'"


def test_clause_spans_of_joins_subqueries_and_keywords_without_positions():
    sql = ("SELECT T1.name, count(*) FROM singer AS T1 JOIN concert AS T2 ON T1.id = T2.sid "
           "WHERE T1.age > (SELECT avg(age) FROM singer) AND T2.year IS NOT NULL GROUP BY T1.name")
    parts = _texts(sql)
    assert parts["select"] == ["T1.name, count(*)", "avg(age)"]
    assert parts["conditions"] == ["T1.id = T2.sid",
                                   "T1.age > (SELECT avg(age) FROM singer) AND T2.year IS NOT NULL"]
    assert parts["tables"] == ["singer AS T1", "concert AS T2", "singer"]
    assert parts["columns"] == ["T1.name", "T1.id", "T2.sid", "T1.age", "age", "T2.year", "T1.name"]


def test_subquery_in_a_select_list_and_not_exists():
    sql = "SELECT (SELECT max(a) FROM t), NULL FROM u WHERE NOT EXISTS (SELECT 1 FROM v WHERE v.a = u.a)"
    parts = _texts(sql)
    assert parts["select"] == ["(SELECT max(a) FROM t), NULL", "max(a)", "1"]
    assert parts["conditions"] == ["NOT EXISTS (SELECT 1 FROM v WHERE v.a = u.a)", "v.a = u.a"]


def test_unparsable_text_has_no_clause_spans():
    assert clause_spans("SELECT a FROM t WHERE b > = 1") == {"select": [], "conditions": [], "tables": [],
                                                             "columns": []}
    assert clause_spans("<think>not sql at all ((") == {"select": [], "conditions": [], "tables": [], "columns": []}
