"""The concatenation template and its leave-one-out variants (hand-written expectations)."""

from __future__ import annotations

import pytest

from tasks.ifollow.template import (
    ConstrainedPrompt,
    removed_text,
    render_prompt,
    without_all,
    without_constraint,
)

pytestmark = pytest.mark.torchfree  # runs where torch is not installed (.ci/run)

BASE = "Write about tea."
S = ["Use no commas.", "Add a <<title>>.", "End with Bye."]


def test_render_and_skip_by_hand() -> None:
    assert render_prompt(BASE, S) == "Write about tea.\n\nUse no commas. Add a <<title>>. End with Bye."
    assert render_prompt(BASE, S, skip=0) == "Write about tea.\n\nAdd a <<title>>. End with Bye."
    assert render_prompt(BASE, S, skip=1) == "Write about tea.\n\nUse no commas. End with Bye."
    assert render_prompt(BASE, S, skip=2) == "Write about tea.\n\nUse no commas. Add a <<title>>."
    assert render_prompt(BASE, S[:1], skip=0) == BASE  # nothing left: the base request alone
    assert render_prompt("  " + BASE + "\n", []) == BASE


def test_removed_text_locates_exactly_the_sentence() -> None:
    full = render_prompt(BASE, S)
    for k in range(3):
        pos, text = removed_text(BASE, S, k)
        assert full[pos:pos + len(text)] == text and S[k] in text
        assert full[:pos] + full[pos + len(text):] == render_prompt(BASE, S, skip=k)
    assert removed_text(BASE, S[:1], 0) == (len(BASE), "\n\n" + S[0])


def test_without_constraint_on_templated_and_free_prompts() -> None:
    item = ConstrainedPrompt("a", BASE, [("x", {})] * 3, list(S), render_prompt(BASE, S))
    assert without_constraint(item, 1) == render_prompt(BASE, S, skip=1)
    assert without_all(item) == BASE
    free = ConstrainedPrompt("b", None, [("x", {})] * 2, ["Do not use commas.", None],
                             "Describe a cat. Do not use commas. Write 50 words.")
    assert without_constraint(free, 0) == "Describe a cat. Write 50 words."
    assert without_constraint(free, 1) is None  # unknown text: not replayed
    assert without_all(free) == "Describe a cat. Write 50 words."
