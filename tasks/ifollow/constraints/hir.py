"""HIR-16K's second subset: Chat-Arena-style programmatic checks, as constraint types ``hir:*``.

HIR-16K itself cannot be downloaded here, so its exact type2 field names are not known to this
project; these are the checks that subset describes (quotes, sentence balance, ...) defined
with the semantics written below, and a HIR row may name them in ``instruction_id_list`` (or
in a ``checks`` list, see :mod:`tasks.ifollow.hir`). Words and sentences are counted as in
IFEval (``\\w+`` words, Punkt sentences).

- ``hir:quotation_count`` {min_quotes}: at least N double-quoted passages (``"..."`` or
  curly ``“...”``, non-empty, on one line).
- ``hir:sentence_balance`` {max_ratio}: at least two sentences, and the longest sentence has
  at most ``max_ratio`` times the words of the shortest non-empty one.
- ``hir:max_sentence_words`` {max_words}: no sentence longer than N words.
- ``hir:no_repeated_sentence`` {}: no sentence occurs twice (case- and space-insensitive).
- ``hir:starts_with`` {phrase}: the stripped response starts with the phrase (case-insensitive).
- ``hir:ends_with_question`` {}: the stripped response ends with "?".
- ``hir:max_characters`` {max_chars}: at most N characters after stripping.
- ``hir:numbered_list`` {num_items}: exactly N lines of the form ``1. ...``, ``2) ...``.
"""

from __future__ import annotations

import re
from typing import Any

from tasks.ifollow import textutil as tu
from tasks.ifollow.constraints.base import CheckResult, ConstraintType, register

_QUOTE = re.compile(r"\"[^\"\n]*[^\"\s][^\"\n]*\"|“[^”\n]*[^”\s][^”\n]*”")


def _int(v: Any, default: int = 0) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def _quotation_count(r: str, kw: dict[str, Any]) -> CheckResult:
    spans = [m.span() for m in _QUOTE.finditer(r)]
    n = _int(kw.get("min_quotes"), 1)
    return CheckResult(len(spans) >= n, f"{len(spans)} quoted passages, need at least {n}", spans)


def _sentence_lengths(r: str) -> tuple[list[tuple[int, int]], list[int]]:
    spans = tu.sentence_spans(r)
    return spans, [tu.count_words(r[s:e]) for s, e in spans]


def _sentence_balance(r: str, kw: dict[str, Any]) -> CheckResult:
    spans, lengths = _sentence_lengths(r)
    lengths = [n for n in lengths if n > 0]
    try:
        ratio = float(kw.get("max_ratio", 3))
    except (TypeError, ValueError):
        return CheckResult(False, f"bad max_ratio {kw.get('max_ratio')!r}", spans)
    if len(lengths) < 2:
        return CheckResult(False, f"{len(lengths)} sentence(s): balance needs at least two", spans)
    ok = max(lengths) <= ratio * min(lengths)
    return CheckResult(ok, f"sentence lengths {min(lengths)}..{max(lengths)} words, max ratio {ratio}", spans)


def _max_sentence_words(r: str, kw: dict[str, Any]) -> CheckResult:
    spans, lengths = _sentence_lengths(r)
    n = _int(kw.get("max_words"), 20)
    long = [sp for sp, k in zip(spans, lengths) if k > n]
    return CheckResult(not long, f"{len(long)} sentences over {n} words", long or spans)


def _no_repeated_sentence(r: str, kw: dict[str, Any]) -> CheckResult:
    seen: dict[str, tuple[int, int]] = {}
    for s, e in tu.sentence_spans(r):
        key = " ".join(r[s:e].lower().split())
        if key in seen:
            return CheckResult(False, f"sentence repeated: {r[s:e][:60]!r}", [seen[key], (s, e)])
        seen[key] = (s, e)
    return CheckResult(True, "no sentence repeated", list(seen.values()))


def _starts_with(r: str, kw: dict[str, Any]) -> CheckResult:
    phrase = str(kw.get("phrase", "")).strip().lower()
    off = len(r) - len(r.lstrip())
    ok = bool(phrase) and r.strip().lower().startswith(phrase)
    return CheckResult(ok, f"{'starts' if ok else 'does not start'} with {phrase!r}", [(off, min(len(r), off + len(phrase)))])


def _ends_with_question(r: str, kw: dict[str, Any]) -> CheckResult:
    end = len(r.rstrip())
    ok = r.rstrip().endswith("?")
    return CheckResult(ok, "ends with a question mark" if ok else "does not end with '?'", [(max(0, end - 1), end)])


def _max_characters(r: str, kw: dict[str, Any]) -> CheckResult:
    n = _int(kw.get("max_chars"), 0)
    size = len(r.strip())
    return CheckResult(size <= n, f"{size} characters, need at most {n}", [(0, len(r))])


def _numbered_list(r: str, kw: dict[str, Any]) -> CheckResult:
    spans = [m.span() for m in re.finditer(r"^\s*\d+[.)]\s+\S.*$", r, re.MULTILINE)]
    n = _int(kw.get("num_items"), -1)
    return CheckResult(len(spans) == n, f"{len(spans)} numbered items, need exactly {n}", spans)


_SPECS = [
    ("hir:quotation_count", ("min_quotes",), _quotation_count,
     lambda k: f"Quote at least {k.get('min_quotes', 1)} passages in double quotation marks."),
    ("hir:sentence_balance", ("max_ratio",), _sentence_balance,
     lambda k: f"Keep your sentences balanced: the longest may have at most {k.get('max_ratio', 3)} times "
               "the words of the shortest."),
    ("hir:max_sentence_words", ("max_words",), _max_sentence_words,
     lambda k: f"No sentence may be longer than {k.get('max_words', 20)} words."),
    ("hir:no_repeated_sentence", (), _no_repeated_sentence,
     lambda k: "Do not repeat any sentence."),
    ("hir:starts_with", ("phrase",), _starts_with,
     lambda k: f"Start your response with \"{k.get('phrase', '')}\"."),
    ("hir:ends_with_question", (), _ends_with_question,
     lambda k: "End your response with a question."),
    ("hir:max_characters", ("max_chars",), _max_characters,
     lambda k: f"Use at most {k.get('max_chars', 0)} characters."),
    ("hir:numbered_list", ("num_items",), _numbered_list,
     lambda k: f"Include a numbered list of exactly {k.get('num_items', 0)} items (1., 2., ...)."),
]

HIR_IDS: tuple[str, ...] = tuple(spec[0] for spec in _SPECS)

for _cid, _params, _checker, _render in _SPECS:
    register(ConstraintType(id=_cid, family="hir", params=_params, render=_render, checker=_checker,
                            description=f"HIR-16K type2 check {_cid}"))
