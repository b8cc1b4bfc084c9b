"""The one concatenation template for multi-constraint prompts, and its leave-one-out variants.

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
"""

from __future__ import annotations

from collections.abc import Sequence

SEPARATOR = "\n\n"
JOINER = " "


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
