"""Constraint-type protocol and registry.

A constraint type has an official id (exactly as the official data files write it, e.g.
``"punctuation:no_comma"``), its parameters, the instruction text it renders, and a checker.

Checkers never raise on a response: they return a :class:`CheckResult` with ``ok`` and the
character spans of the response they read. ``loose`` checking follows IFEval's definition
(also try the response with its first line removed, its last line removed, both, and with
asterisks removed) and is applied by :func:`check`, not by each checker.

Rules applied here, for every family, so that checkers need not repeat them:

- a response that is empty or whitespace-only fails every constraint, strict and loose
  (IFEval: ``response.strip() and check(response)``);
- kwargs whose value is ``None`` are dropped before checking (IFBench's files list every
  kwarg of every type with nulls for the unused ones);
- a checker that raises on some response is reported as not satisfied, with the error in the
  reason (a verifier never raises on model output).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mrbench_core.errors import response_text
from mrbench_core.registry import Registry


@dataclass
class CheckResult:
    ok: bool
    reason: str = ""
    spans: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class ConstraintType:
    id: str  # official id, e.g. "keywords:existence"
    family: str  # "ifeval" | "ifbench" | "muldimif"
    params: tuple[str, ...]  # accepted kwargs names, as the official files write them
    render: Callable[[dict[str, Any]], str]  # kwargs -> instruction sentence
    checker: Callable[[str, dict[str, Any]], CheckResult]  # (response, kwargs) -> result
    description: str = ""
    #: extra context a checker needs besides kwargs (e.g. the prompt for "repeat the request");
    #: when True, :func:`check` passes the prompt as kwargs["__prompt__"]
    needs_prompt: bool = False


CONSTRAINTS = Registry("constraint type", "mrbench.constraints")


def register(ctype: ConstraintType) -> ConstraintType:
    CONSTRAINTS.add(ctype.id, ctype, ctype.description)
    return ctype


def get_constraint(cid: str) -> ConstraintType:
    return CONSTRAINTS.get(cid)


def known_ids() -> list[str]:
    """Every registered constraint id, sorted."""
    return sorted(CONSTRAINTS.names())


def clean_kwargs(kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """Drop null-valued kwargs (IFBench writes every kwarg name with ``null`` for unused ones)."""
    return {k: v for k, v in dict(kwargs or {}).items() if v is not None}


def _run(ctype: ConstraintType, text: str, kwargs: dict[str, Any]) -> CheckResult:
    try:
        result = ctype.checker(text, kwargs)
    except Exception as exc:  # noqa: BLE001 - a checker must never take the run down on model output
        return CheckResult(False, f"checker error ({type(exc).__name__}: {exc})")
    if not isinstance(result, CheckResult):
        return CheckResult(bool(result), "")
    n = len(text)  # spans are clamped to the text, whatever a checker reports
    result.spans = [(min(max(int(s), 0), n), min(max(int(e), int(s), 0), n)) for s, e in result.spans]
    return result


def check(cid: str | ConstraintType, response: str, kwargs: Mapping[str, Any] | None = None, *,
          loose: bool = False, prompt: str | None = None) -> CheckResult:
    """Check one constraint on one response, strict or loose (IFEval's definitions).

    Strict: the checker on the response itself. Loose: satisfied if the checker accepts any of
    IFEval's eight variants (:func:`tasks.ifollow.textutil.loose_variants`), tried in order;
    the spans reported are those of the first accepted variant mapped back onto the response
    (or, when none is accepted, those of the response itself). Variants that are empty or
    whitespace-only are skipped, as IFEval does.
    """
    from tasks.ifollow.textutil import loose_variants

    ctype = cid if isinstance(cid, ConstraintType) else get_constraint(cid)
    response = response_text(response)
    kw = clean_kwargs(kwargs)
    if ctype.needs_prompt and prompt is not None:
        kw.setdefault("__prompt__", prompt)
    if not response.strip():
        return CheckResult(False, "empty or whitespace-only response")
    strict = _run(ctype, response, kw)
    if strict.ok or not loose:
        return strict
    for variant in loose_variants(response)[1:]:
        if not variant.text.strip():
            continue
        res = _run(ctype, variant.text, kw)
        if res.ok:
            return CheckResult(True, f"loose ({variant.name}): {res.reason}".rstrip(": "),
                               variant.spans_to_original(res.spans))
    return strict
