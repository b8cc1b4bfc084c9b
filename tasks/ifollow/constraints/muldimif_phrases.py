"""Reading numbers, count bounds and quoted strings out of MulDimIF constraint text.

Used by :mod:`muldimif_parse`. ``bound(text, unit)`` turns "no more than 150 words", "between 3 to
5 sentences", "a row limit of 5", "a single paragraph", "exactly two columns" into
``{"min": a, "max": b}`` (either absent); "fewer than N" is ``max N-1`` and "more than N" is
``min N+1``; a bare "N <unit>" is exact.
"""

from __future__ import annotations

import re

_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "twenty": 20,
    "thirty": 30, "forty": 40, "fifty": 50, "hundred": 100, "single": 1, "once": 1, "twice": 2,
}
NUM = r"(\d[\d,]*|" + "|".join(_NUMBER_WORDS) + r")"


class MulDimIFParseError(ValueError):
    """A MulDimIF constraint text that no parsing rule understands."""


def to_int(token: str) -> int:
    token = token.lower().replace(",", "")
    return int(token) if token.isdigit() else _NUMBER_WORDS[token]


_MAX_Q = (r"at most|no more than|not more than|not exceed(?:ing)?|(?:do|does|must|should|will) not exceed|"
          r"exceed(?:ing)?|(?:a )?maximum(?: length)? of|maximum|up to|limited to(?: only)?|limit(?:ed)? to|"
          r"no longer than|within|under|(?:a )?total of")
_STRICT_MAX_Q = r"fewer than|less than"
_MIN_Q = r"at least|(?:a )?minimum of|no fewer than|no less than|minimum"
_STRICT_MIN_Q = r"(?<!no )(?<!not )more than"
_EXACT_Q = r"exactly|precisely|consist(?:s|ing)? of"
_GAP = r"\W+(?:[a-z]+\W+){0,4}?"  # up to four filler words between a quantifier and its number
_TAIL = r"\W+(?:[\w'-]+\W+){0,2}?"  # up to two words between the number and the unit


def bound(text: str, unit: str) -> dict[str, int] | None:
    """``{"min": a, "max": b}`` (either may be absent) for a count of ``unit`` stated in ``text``."""
    t = text.lower()
    m = re.search(r"(?:between|range of|from)?\s*" + NUM + r"\s*(?:and|to|-|–)\s*" + NUM + _TAIL + unit, t)
    if m:
        return {"min": to_int(m.group(1)), "max": to_int(m.group(2))}
    m = re.search(r"(?:row|column|word|sentence|paragraph) limit of\s+" + NUM, t)
    if m and re.search(unit, m.group(0)):
        return {"max": to_int(m.group(1))}
    found: dict[str, int] = {}
    for quant, kind in ((_STRICT_MAX_Q, "smax"), (_MAX_Q, "max"), (_STRICT_MIN_Q, "smin"), (_MIN_Q, "min"),
                        (_EXACT_Q, "exact")):
        m = re.search(r"\b(?:" + quant + r")" + _GAP + NUM + _TAIL + unit, t)
        if m:
            n = to_int(m.group(1))
            if kind in ("smax", "max") and "max" not in found:
                found["max"] = n - 1 if kind == "smax" else n
            elif kind in ("smin", "min") and "min" not in found:
                found["min"] = n + 1 if kind == "smin" else n
            elif kind == "exact" and not found:
                return {"min": n, "max": n}
    if found:
        return found
    m = re.search(r"\b(?:a|one) single\s+" + unit + r"|\bsingle\s+" + unit, t)
    if m:
        return {"min": 1, "max": 1}
    m = re.search(r"\b" + NUM + _TAIL + unit, t)
    if m and m.group(1) not in ("once", "twice"):
        n = to_int(m.group(1))
        return {"min": n, "max": n}
    return None


def mentions_each(text: str) -> bool:
    """Whether the text scopes the rule to each element ("each"/"every", not "each word")."""
    return re.search(r"\b(each|every)\b(?! word)", text, re.IGNORECASE) is not None


def unreadable(text: str, why: str) -> MulDimIFParseError:
    """The error for a constraint text no rule reads."""
    return MulDimIFParseError(f"{why}: {text!r}")



_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”|「([^」]+)」|‘([^’]+)’|(?<![\w])'(.+?)'(?=[\s,.;:!?)]|$)")


def quoted(text: str) -> list[str]:
    return [next(g for g in m.groups() if g is not None).strip() for m in _QUOTED.finditer(text)]
