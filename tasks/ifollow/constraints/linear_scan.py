"""Scanners that give exactly the matches of some of the official checkers' regular expressions, in
linear time.

Python's regex engine retries a failed match from every later start position, so a pattern with
an unbounded run before what it must find (``\\[.*?\\]``, ``^\\s*-.*$``, ``<<[^\\n]+>>``,
``\\s*p\\.\\s?s\\..*$``) takes quadratic time on model output that has the run but not the rest
(50,000 '[' took 19 s). Each function here names the pattern it reproduces and why its one pass
finds the same spans; ``tests/test_verifier_linear_time.py`` checks them against the regexes.
"""

from __future__ import annotations

import re
from collections.abc import Callable

SearchAll = Callable[[str, str, int], list[tuple[int, int]]]


def bracket_spans(text: str) -> list[tuple[int, int]]:
    """The spans of ``re.finditer(r"\\[.*?\\]", text)`` (IFEval's placeholders) in one pass: a '['
    matches up to the first ']' after it on its line; a '[' with no ']' before the end of its line
    fails, and so does every later '[' of that line (the regex retries each one: quadratic)."""
    out: list[tuple[int, int]] = []
    n = len(text)
    i = text.find("[")
    line_end = -1  # end of the line holding i (found once per line, not per '[')
    while i != -1:
        if i > line_end:
            line_end = text.find("\n", i)
            line_end = n if line_end == -1 else line_end
        j = text.find("]", i + 1, line_end)
        if j == -1:
            i = text.find("[", line_end)
        else:
            out.append((i, j + 1))
            i = text.find("[", j + 1)
    return out


def leading_space_search(pattern: str, text: str, flags: int, search_all: SearchAll) -> list[tuple[int, int]]:
    """``search_all(pattern, text, flags)`` of a pattern ``\\s*REST`` in linear time: the matches of REST, each
    widened over the whitespace just before it (not into the previous match). Where REST cannot
    begin with whitespace, these are the matches of the whole pattern; the regex engine itself
    would rescan a long run of whitespace from each of its positions (quadratic). Any other pattern
    (or one that does not compile) goes to ``search_all`` unchanged."""
    rest = pattern.removeprefix(r"\s*")
    try:
        rx = re.compile(rest, flags) if rest != pattern else None
        re.compile(pattern, flags)
    except re.error:
        rx = None
    if rx is None or "|" in rest or rest[:1] in ("", "\\", "[", ".", "(", ")", "^", "$", "*", "+", "?", "{") \
            or rest[:1].isspace():
        return search_all(pattern, text, flags)
    out: list[tuple[int, int]] = []
    floor = 0
    for m in rx.finditer(text):
        start = m.start()
        while start > floor and text[start - 1].isspace():
            start -= 1
        out.append((start, m.end()))
        floor = m.end()
    return out


def star_bullet_head(text: str, q: int) -> int:
    """After the whitespace at a line start: ``\\*[^\\*]`` at ``q``? The index after it, else -1
    (``[^\\*]`` takes a newline too)."""
    return q + 2 if text.startswith("*", q) and q + 1 < len(text) and text[q + 1] != "*" else -1


def dash_bullet_head(text: str, q: int) -> int:
    """``-`` at ``q``? The index after it, else -1."""
    return q + 1 if text.startswith("-", q) else -1


def line_start_spans(text: str, head: Callable[[str, int], int]) -> list[tuple[int, int]]:
    """The spans of ``re.finditer(r"^\\s*HEAD.*$", text, re.MULTILINE)`` where HEAD begins with a
    character that is not whitespace (``head`` says whether it matches at a position).

    From a line start, ``\\s*`` can only hand over to HEAD at the end of the whitespace run (HEAD
    does not begin with whitespace), so each run is read once: on success the match runs to the end
    of the line HEAD ends on; on failure every line start inside the run fails the same way and the
    scan moves to the first line start after it."""
    out: list[tuple[int, int]] = []
    n, p = len(text), 0
    while p <= n:
        q = p
        while q < n and text[q].isspace():
            q += 1
        after = head(text, q) if q < n else -1
        if after == -1:
            nl = text.find("\n", q)
            if nl == -1:
                break
            p = nl + 1
            continue
        end = text.find("\n", min(after, n))
        end = n if end == -1 else end
        out.append((p, end))
        if end > 0 and text[end - 1] == "\n":  # an empty ".*" right after a newline: a line start
            p = end
        elif end < n:
            p = end + 1
        else:
            break
    return out


def title_spans(text: str) -> list[tuple[int, int]]:
    """The spans of ``re.finditer(r"<<[^\\n]+>>", text)``: on each line, from the first '<<' to the
    last '>>' that leaves at least one character between them (the greedy ``[^\\n]+`` backs off to
    the last '>>' of the line, so a line holds at most one match, and if its first '<<' finds none,
    no later '<<' of that line can)."""
    out: list[tuple[int, int]] = []
    n, pos = len(text), 0
    while True:
        i = text.find("<<", pos)
        if i == -1:
            return out
        line_end = text.find("\n", i)
        line_end = n if line_end == -1 else line_end
        j = text.rfind(">>", i + 3, line_end)
        if j != -1:
            out.append((i, j + 2))
        pos = line_end
