"""Shared pieces of the IFBench constraint types: registration, kwargs hygiene, word splitting.

IFBench (Pyatkin et al., 2025) adds 58 out-of-distribution constraint types to IFEval's. Each
type module (``ifbench_count``, ``ifbench_words``, ``ifbench_format``, ``ifbench_custom``)
registers its types through :func:`ifbench_type`, which wraps the type's verdict function so that

- ``None`` kwargs are dropped first (the official data writes every kwarg of every type, with
  ``null`` for the unused ones, and the official strict check drops them before building the
  instruction; its loose check relies on that having happened);
- an empty or whitespace-only response fails (the official evaluator checks
  ``response.strip()`` before calling any checker);
- a missing required parameter or any unexpected failure inside a checker becomes a failed
  :class:`CheckResult` with a reason, never an exception (a verifier never raises on model output).

Verdict functions return ``bool`` or ``(bool, spans)`` or a full :class:`CheckResult`. The
MulDimIF types (:mod:`muldimif_checks`) register through the same wrapper with ``family="muldimif"``.
The memoised Punkt/Treebank readers here are shared by both families.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Callable, Iterable
from typing import Any

from tasks.ifollow import textutil
from tasks.ifollow.constraints.base import CheckResult, ConstraintType, clean_kwargs, register

FAMILY = "ifbench"

#: ASCII punctuation, as Python's ``string.punctuation``: IFBench strips exactly these.
PUNCT = string.punctuation
PUNCT_SPACE = PUNCT + " "
_DROP_PUNCT = str.maketrans("", "", PUNCT)


def drop_punct(text: str) -> str:
    """``text`` with every ASCII punctuation character deleted."""
    return text.translate(_DROP_PUNCT)


def split_words_lower(text: str) -> list[str]:
    """Lower-case, delete ASCII punctuation, split on whitespace (IFBench's ``words:repeats`` words)."""
    return drop_punct(text.lower()).split()


@functools.lru_cache(maxsize=512)
def punkt_sentences(text: str) -> tuple[str, ...]:
    """Punkt sentences of ``text`` (``nltk.sent_tokenize``), memoised: many checkers read the same response."""
    return tuple(textutil.split_sentences(text))


@functools.lru_cache(maxsize=512)
def sentence_spans(text: str) -> tuple[tuple[int, int], ...]:
    """Character spans of the Punkt sentences of ``text``, memoised."""
    return tuple(textutil.sentence_spans(text))


@functools.lru_cache(maxsize=512)
def treebank_words(text: str) -> tuple[str, ...]:
    """``nltk.word_tokenize(text)`` offline (Punkt sentences, then Treebank words), memoised."""
    return tuple(textutil.treebank_words(text))


_ASCII_LETTER = re.compile("[A-Za-z]")
_ASCII_ALNUM = re.compile("[A-Za-z0-9]")


def ascii_without_letters(text: str, digits_too: bool = False) -> bool:
    """ASCII text with no letter (and, with ``digits_too``, no digit). Treebank tokens are pieces of
    the text (quotes aside), so then none has a letter: checkers skip the tokenizer, which is slow
    on long runs of brackets or asterisks (about 1 s per MB), with the verdict unchanged."""
    return text.isascii() and (_ASCII_ALNUM if digits_too else _ASCII_LETTER).search(text) is None


def whole(response: str) -> list[tuple[int, int]]:
    """The span covering the whole response."""
    return [(0, len(response))]


def as_int(value: Any) -> int:
    """An integer parameter; the data writes some as floats (``3.0``)."""
    return int(value)


def _to_result(out: Any, response: str) -> CheckResult:
    if isinstance(out, CheckResult):
        return out
    if isinstance(out, tuple):
        ok, spans = out
        return CheckResult(bool(ok), "", list(spans))
    return CheckResult(bool(out), "", whole(response))


def ifbench_type(
    cid: str,
    params: Iterable[str],
    render: Callable[[dict[str, Any]], str] | str,
    description: str = "",
    required: Iterable[str] | None = None,
    family: str = FAMILY,
) -> Callable[[Callable[..., Any]], Callable[[str, dict[str, Any]], CheckResult]]:
    """Decorator: register ``fn(response, **kwargs)`` as the checker of IFBench type ``cid``.

    ``render`` is either a ``str.format`` template over the kwargs or a function of them.
    ``required`` defaults to ``params``: the kwargs the verdict cannot be computed without.
    ``family`` is "ifbench" unless another family reuses this machinery (MulDimIF does).
    """
    params = tuple(params)
    needed = tuple(params if required is None else required)

    def renderer(kwargs: dict[str, Any]) -> str:
        # The data writes integer parameters as floats (5.0); the instruction text says "5".
        kw = {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in clean_kwargs(kwargs).items()}
        if callable(render):
            return render(kw)
        return render.format(**kw) if params else render  # a fixed text may hold literal braces

    def decorate(fn: Callable[..., Any]) -> Callable[[str, dict[str, Any]], CheckResult]:
        def checker(response: str, kwargs: dict[str, Any] | None = None) -> CheckResult:
            kw = clean_kwargs(kwargs)
            missing = [p for p in needed if p not in kw]
            if missing:
                return CheckResult(False, f"{cid}: missing parameter(s) {missing}", [])
            if not isinstance(response, str) or not response.strip():
                return CheckResult(False, "empty response", [])
            try:
                result = _to_result(fn(response, **{k: kw[k] for k in params if k in kw}), response)
            except Exception as exc:  # a verifier never raises on model output
                return CheckResult(False, f"{cid}: checker failed on this response ({exc!r})", [])
            if not result.reason:
                result.reason = "satisfied" if result.ok else "not satisfied"
            return result

        checker.__name__ = fn.__name__
        checker.__doc__ = fn.__doc__
        register(ConstraintType(id=cid, family=family, params=params, render=renderer, checker=checker,
                                description=description or (fn.__doc__ or "").strip().split("\n")[0]))
        return checker

    return decorate
