"""Constraint-type protocol and registry.

A constraint type has an official id (exactly as the official data files write it, e.g.
``"punctuation:no_comma"``), its parameters, the instruction text it renders, and a checker.

Checkers never raise on a response: they return a :class:`CheckResult` with ``ok`` and the
character spans of the response they read. ``loose`` checking follows IFEval's definition
(also try the response with its first line removed, its last line removed, both, and with
asterisks removed) and is applied by :func:`check`, not by each checker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from harness.registry import Registry


@dataclass
class CheckResult:
    ok: bool
    reason: str = ""
    spans: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class ConstraintType:
    id: str  # official id, e.g. "keywords:existence"
    family: str  # "ifeval" | "ifbench" | "muldimif" | "hir"
    params: tuple[str, ...]  # accepted kwargs names, as the official files write them
    render: Callable[[dict[str, Any]], str]  # kwargs -> instruction sentence
    checker: Callable[[str, dict[str, Any]], CheckResult]  # (response, kwargs) -> result
    description: str = ""
    #: extra context a checker needs besides kwargs (e.g. the prompt for "repeat the request")
    needs_prompt: bool = False


CONSTRAINTS = Registry("constraint type")


def register(ctype: ConstraintType) -> ConstraintType:
    CONSTRAINTS.add(ctype.id, ctype, ctype.description)
    return ctype


def get_constraint(cid: str) -> ConstraintType:
    return CONSTRAINTS.get(cid)
