"""The project's concatenation template for multi-constraint prompts, and leave-one-out variants.

Template (documented decision)::

    {base request}

    {constraint sentence 1} {constraint sentence 2} ... {constraint sentence K}

The base request, a blank line, then the constraints' rendered sentences in order, joined by a
single space. P_all is this text; P_\\k is the same template over the constraints without k, so
that exactly the substring ``" " + sentence_k`` (or ``sentence_k + " "`` for k = 0, when other
constraints follow) disappears and everything else, including every other sentence, is byte for
byte unchanged. Everything up to the removed sentence is a shared prefix of P_all and P_\\k
(which the replay engine can use to share the prompt's KV cache).

With no constraints left (K = 1, k = 0) P_\\k is the base request alone, which is also the
CoRT "prompt without its rubric".

HIR-16K rows were built by HiR's own templates (:mod:`tasks.ifollow.hir_template`); for them
(``hir_q_type`` set) P_\\k is that template over the other constraints' texts instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tasks.ifollow.hir_template import render_hir

SEPARATOR = "\n\n"
JOINER = " "


@dataclass
class ConstrainedPrompt:
    """A prompt with its constraints.

    ``base`` is the request without constraints and ``sentences[k]`` the text of constraint k
    inside ``prompt``; both are known for templated prompts (generated, or rows giving them) and
    may be None for rows that only give the final prompt (then P_\\k cannot be built for k).
    ``hir_q_type`` names HiR's template (``type1``..``type6``) when the prompt is HiR's rendering
    of ``base`` (HiR's question) and ``sentences`` (its criteria); None for the project's template.
    """

    id: str
    base: str | None
    constraints: list[tuple[str, dict[str, Any]]]
    sentences: list[str | None] = field(default_factory=list)
    prompt: str = ""
    source: str = ""
    hir_q_type: str | None = None


def without_constraint(item: ConstrainedPrompt, k: int) -> str | None:
    """P_\\k as text: the template without constraint k, or None if its text is unknown."""
    sentences = item.sentences
    if item.hir_q_type is not None:
        if item.base is None or any(s is None for s in sentences):
            return None
        return render_hir(item.base, sentences, item.hir_q_type, skip=k)  # type: ignore[arg-type]
    if item.base is not None and all(s is not None for s in sentences) and item.prompt == render_prompt(
            item.base, sentences):  # type: ignore[arg-type]
        return render_prompt(item.base, sentences, skip=k)  # type: ignore[arg-type]
    sentence = sentences[k] if k < len(sentences) else None
    return _remove(item.prompt, sentence)


def _remove(text: str, sentence: str | None) -> str | None:
    """``text`` without the first occurrence of ``sentence`` and one adjacent space; None if absent."""
    if not sentence or sentence not in text:
        return None
    i = text.index(sentence)
    j = i + len(sentence)
    if text[j:j + 1] == JOINER:
        j += 1
    elif text[i - 1:i] == JOINER:
        i -= 1
    return text[:i] + text[j:]


def without_all(item: ConstrainedPrompt) -> str:
    """The request without any constraint (CoRT's x-): the base, else the prompt minus every known sentence."""
    if item.base is not None:
        return item.base.strip()
    text = item.prompt
    for sentence in item.sentences:
        text = _remove(text, sentence) or text
    return text.strip()


def render_prompt(base: str, sentences: Sequence[str], skip: int | None = None) -> str:
    """The template over ``sentences`` (leaving out index ``skip`` when given)."""
    kept = [s.strip() for i, s in enumerate(sentences) if i != skip and s.strip()]
    base = base.strip()
    if not kept:
        return base
    return base + SEPARATOR + JOINER.join(kept)


def removed_text(base: str, sentences: Sequence[str], k: int) -> tuple[int, str]:
    """Where (character offset in P_all) and what text leaving constraint k out removes."""
    full = render_prompt(base, sentences)
    prefix = render_prompt(base, sentences[:k]) if k else base.strip()
    sentence = sentences[k].strip()
    if k == 0:
        rest = [s for s in sentences[1:] if s.strip()]
        if rest:
            return len(prefix) + len(SEPARATOR), sentence + JOINER
        return len(prefix), SEPARATOR + sentence
    start = len(prefix)
    assert full[start:start + len(JOINER) + len(sentence)] == JOINER + sentence
    return start, JOINER + sentence
