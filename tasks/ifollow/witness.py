"""Build a response that satisfies every constraint of a prompt (a satisfiability witness).

Used by the tests to show that generated prompts are jointly satisfiable, and usable to seed
SFT warm-starts. The builder assembles plain English sentences (no commas, none of the
generator's forbidden words, no rare letters) with the items each constraint asks for: title,
keywords, placeholders, highlights, capital words, bullets ("- "), sections, ``***``
paragraphs, postscript, end phrase, surrounding quotes, lower case. It then searches over the
number of filler sentences until every constraint holds (strict checking), and returns None if
no count works.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tasks.ifollow.constraints import check

FILLER: tuple[str, ...] = (
    "The morning was calm and the street was quiet.",
    "We walked to the park and sat on a bench.",
    "A small bird sang from the top of the old tree.",
    "The people there were kind and patient.",
    "Everyone agreed that the plan made good sense.",
    "The light faded slowly as the evening came.",
    "It was a good time to rest and to think.",
    "Our friends arrived later with warm bread.",
    "The road home was long but pleasant.",
    "In the end the day felt complete.",
)


def _kw(constraints: Sequence[tuple[str, dict[str, Any]]], cid: str) -> list[dict[str, Any]]:
    return [kw for c, kw in constraints if c == cid]


def build(constraints: Sequence[tuple[str, dict[str, Any]]], n_filler: int) -> str:
    """One candidate response with ``n_filler`` filler sentences."""
    lower = bool(_kw(constraints, "change_case:english_lowercase"))
    core: list[str] = []  # one sentence per constraint, to stay under sentence limits
    for kw in _kw(constraints, "keywords:existence"):
        core.append("We talked about " + " and ".join(f"the {w}" for w in kw.get("keywords", [])) + ".")
    for kw in _kw(constraints, "keywords:frequency"):
        core.append(" and ".join([f"the {kw['keyword']}"] * int(kw.get("frequency", 1))).capitalize() + " stayed.")
    for kw in _kw(constraints, "detectable_content:number_placeholders"):
        core.append("Please send it to " + " and ".join(f"[place {i + 1}]" for i in range(int(kw["num_placeholders"])))
                    + " soon.")
    for kw in _kw(constraints, "detectable_format:number_highlighted_sections"):
        core.append("We saw " + " and ".join(f"*key point {i + 1}*" for i in range(int(kw["num_highlights"])))
                    + " today.")
    for kw in _kw(constraints, "change_case:capital_word_frequency"):
        if kw.get("capital_relation") == "at least":
            core.append(" ".join(["NOTE"] * int(kw["capital_frequency"])) + " this well.")
    for kw in _kw(constraints, "keywords:letter_frequency"):
        if kw.get("let_relation") == "at least":
            core.append("The tea at ten tonight is an eaten treat to note.")
    body = core + [FILLER[i % len(FILLER)] for i in range(n_filler)]
    if not body:
        body = [FILLER[0]]

    sections = _kw(constraints, "detectable_format:multiple_sections")
    paragraphs = _kw(constraints, "length_constraints:number_paragraphs")
    if sections:
        word, n = sections[0]["section_spliter"], int(sections[0]["num_sections"])
        chunks = [body[i::n] for i in range(n)]
        blocks = [f"{word} {i + 1}\n" + " ".join(c or [FILLER[1]]) for i, c in enumerate(chunks)]
        text = "\n\n".join(blocks)
    elif paragraphs:
        n = int(paragraphs[0]["num_paragraphs"])
        chunks = [body[i::n] for i in range(n)]
        blocks = [" ".join(c or [FILLER[2]]) for c in chunks]
        text = "\n***\n".join(blocks)
    else:
        text = " ".join(body)
    for kw in _kw(constraints, "detectable_format:number_bullet_lists"):
        bullets = "\n".join(f"- item {i + 1} to remember" for i in range(int(kw["num_bullets"])))
        text = text + "\n" + bullets  # after the text: a leading quote would hide the first bullet
    if _kw(constraints, "detectable_format:title"):
        text = "<<A Day to Remember>>\n" + text
    for kw in _kw(constraints, "detectable_content:postscript"):
        marker = kw.get("postscript_marker", "P.S.")
        text += f"\n\n{marker}{'' if marker.endswith('.') else '.'} We hope to return soon."
    for kw in _kw(constraints, "startend:end_checker"):
        text += " " + kw["end_phrase"]
    if lower:
        text = text.lower()
    if _kw(constraints, "startend:quotation"):
        text = '"' + text + '"'
    return text


def find_witness(constraints: Sequence[tuple[str, dict[str, Any]]], max_filler: int = 30) -> str | None:
    """The first candidate (fewest filler sentences) that satisfies every constraint, or None."""
    for n in range(max_filler + 1):
        text = build(constraints, n)
        if all(check(cid, text, kw).ok for cid, kw in constraints):
            return text
    return None
