"""Text readers for the MulDimIF checkers: words, sentences, paragraphs, elements, tables,
headings, JSON and XML as MulDimIF's official checker reads them (its rules are facts we follow;
the code is ours). Deviations are marked "ours".

- Words: if the text holds any CJK character (ideographs, CJK punctuation, full-width forms), the
  number of such characters; otherwise the number of whitespace-separated tokens.
- Sentences: non-blank stretches ending in '.', '!' or '?' (``[^.!?]*[.!?]``), so "Dr. Smith" is
  two and a final fragment with no end mark is none; ours: 。！？ also end one.
- Paragraphs: the non-blank pieces of the text split on a blank line ("\\n\\n").
- Elements of an "each <target> must include ..." keyword rule: :func:`each_elements`; of an
  "each <target> ... N words" limit: :func:`word_limit_elements`; ours, when the text names no
  target: :func:`elements` (first table's rows, else list items, else paragraphs).
- Table limits: everything between the first and the last '|' is one table (:func:`pipe_block`);
  ours, for table scopes and elements: proper Markdown pipe tables (:func:`tables`).
- Headings: any stripped line of '#'s, whitespace and text (:func:`md_headings`); ours, for case
  scopes: ATX headings outside code fences (:func:`headings`).
- JSON: the first ```json block, else the whole text, as one document; depth counts objects and
  arrays (:func:`container_depth`). XML: attributes of every start tag.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+\S")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+\S")
_SEPARATOR_CELL = re.compile(r"^\s*:?-{2,}:?\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


_CJK_ANY = re.compile(r"[\u4e00-\u9fff\u3400-\u4dbf\U00020000-\U0002a6df\u3000-\u303f\uff00-\uffef]")


def count_words(text: str) -> int:
    """CJK characters if there are any, else whitespace tokens (MulDimIF's count)."""
    cjk = _CJK_ANY.findall(text)
    return len(cjk) if cjk else len(text.split())


_SENTENCE_END = re.compile(r"[.!?。！？]")


def sentences(text: str) -> list[str]:
    """Non-blank stretches ending in . ! ? (or 。！？), MulDimIF's sentence count.

    The matches of ``[^.!?。！？]*[.!?。！？]`` are exactly the stretches from one end mark (or the
    start) to the next end mark; cut there in one pass (the regex itself retries from every
    position of a final stretch with no end mark: quadratic time on text without one)."""
    out, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        piece = text[start:m.end()].strip()
        if piece:
            out.append(piece)
        start = m.end()
    return out


def paragraphs(text: str) -> list[str]:
    """Non-blank stretches between two consecutive newlines (MulDimIF splits on "\\n\\n")."""
    return [p.strip() for p in text.split("\n\n") if p.strip()]


_MD_HEADING = re.compile(r"^(#+)\s+(.*?)\s*$")


def md_headings(text: str) -> list[tuple[int, str]]:
    """(level, content) of every line that, stripped, is '#'s, whitespace and text (MulDimIF's
    heading reading: any number of '#', code blocks not excluded)."""
    out = []
    for line in text.split("\n"):
        m = _MD_HEADING.match(line.strip())
        if m:
            out.append((len(m.group(1)), m.group(2).strip()))
    return out


def headings(text: str) -> list[tuple[int, str]]:
    """(level, heading line) of every ATX heading outside code fences."""
    out, in_code = [], False
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_code = not in_code
            continue
        m = _HEADING.match(line)
        if m and not in_code:
            out.append((len(m.group(1)), line.strip()))
    return out


def list_items(text: str) -> list[str]:
    return [ln.strip() for ln in text.split("\n") if _LIST_ITEM.match(ln)]


def _is_table_line(line: str) -> bool:
    s = line.strip()
    return s.startswith("|") or s.count("|") >= 2


def _cells(line: str) -> list[str]:
    s = line.strip()
    s = s.removeprefix("|")
    s = s.removesuffix("|")
    return [c.strip() for c in s.split("|")]


def _is_separator(line: str) -> bool:
    cells = _cells(line)
    return bool(cells) and all(_SEPARATOR_CELL.match(c) for c in cells)


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]

    @property
    def n_columns(self) -> int:
        return len(self.header)


def tables(text: str) -> list[Table]:
    """Every Markdown pipe table (header + separator + data rows) in ``text``."""
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines) - 1:
        if _is_table_line(lines[i]) and _is_separator(lines[i + 1]):
            header = _cells(lines[i])
            j = i + 2
            rows = []
            while j < len(lines) and _is_table_line(lines[j]):
                if not _is_separator(lines[j]):
                    rows.append(_cells(lines[j]))
                j += 1
            out.append(Table(header, rows))
            i = j
        else:
            i += 1
    return out


def pipe_block(text: str) -> tuple[int, int] | None:
    """(rows, columns) of the text between the first and the last '|', read as one table, or None
    when the text has no '|' (MulDimIF's table reading).

    Lines are the non-empty stripped lines of that stretch; rows = lines - 2 when the second line
    holds '---' (header and separator), else lines - 1; columns = '|'-separated parts of the first
    line minus the two outer ones.
    """
    first, last = text.find("|"), text.rfind("|")
    if first == -1:
        return None
    lines = [ln.strip() for ln in text[first:last + 1].split("\n") if ln.strip()]
    rows = len(lines) - 2 if len(lines) > 1 and "---" in lines[1] else len(lines) - 1
    return rows, len(lines[0].split("|")) - 2


_SEPARATOR_LINE = re.compile(r"^\s*([-*=])\1{2,}\s*$")


def _norm_word(word: str) -> str:
    return re.sub(r"\W", "", word).lower()


def each_elements(text: str, target: str) -> list[str]:
    """MulDimIF's elements for "each <target> must ..." keyword rules.

    By the text's leading format: a JSON document -> its top-level values; a Markdown table (lines
    starting and ending with '|', at least header, separator and one row) -> the cells of the
    column whose header shares most words with ``target`` (else of the column with the most words
    per cell); a response that starts with a numbered item -> numbered items; one that starts with
    a bullet -> bullet items; otherwise the stretches between separator lines (---, ***, ===).
    An empty list means nothing to check (the rule then fails).
    """
    if re.match(r"\s*[{\[]", text):
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            return []
        if isinstance(data, dict):
            return [str(v) for v in data.values()]
        return [str(v) for v in data] if isinstance(data, list) else []
    if re.search(r"^\s*\|.+\|", text, re.MULTILINE):
        lines = [ln.strip() for ln in text.split("\n") if ln.strip().startswith("|") and ln.strip().endswith("|")]
        if len(lines) < 3:
            return []
        header = [h.strip() for h in lines[0].split("|")[1:-1]]
        rows = [[c.strip() for c in ln.split("|")[1:-1]] for ln in lines[2:]]
        rows = [r for r in rows if len(r) == len(header)]
        if not header or not rows:
            return []
        wanted = {_norm_word(w) for w in target.split() if _norm_word(w)}
        scores = [sum(1 for w in h.split() if _norm_word(w) in wanted) for h in header]
        if max(scores) > 0:
            col = scores.index(max(scores))
        else:
            widths = [sum(len(r[i].split()) for r in rows) / len(rows) for i in range(len(header))]
            col = widths.index(max(widths))
        return [re.sub(r"^#+\s*", "", r[col]).strip() for r in rows]
    if re.match(r"\s*\d+\.\s+", text):
        return [ln.split(".", 1)[1].strip() for ln in text.split("\n") if re.match(r"\s*\d+\.\s+", ln)]
    if re.match(r"\s*[-*] ", text):
        return [re.sub(r"^\s*[-*] ", "", ln).strip() for ln in text.split("\n") if re.match(r"\s*[-*] ", ln)]
    sections, current = [], []
    for line in text.split("\n"):
        if _SEPARATOR_LINE.match(line):
            if current:
                sections.append("\n".join(current).strip())
                current = []
        else:
            current.append(line)
    if current:
        sections.append("\n".join(current).strip())
    return sections or [text]


def word_limit_elements(text: str, target: str | None) -> list[str]:
    """MulDimIF's elements for "each <target> ... N words" limits.

    A response starting with JSON -> its top-level values; one holding a Markdown table -> the
    data cells under headers that contain ``target`` (all cells, headers included, when none
    does); one starting with a numbered item -> the items (text after a ':' and the number);
    one starting with a bullet -> the items; otherwise every non-blank line that is not a table
    row and does not end with ':' (leading '#' removed).
    """
    if re.match(r"\s*[{\[]", text):
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            return []
        return [str(v) for v in data.values()] if isinstance(data, dict) else []
    if re.search(r"^\s*\|.+\|", text, re.MULTILINE):
        cells: list[str] = []
        for line in (ln.strip() for ln in text.split("\n")):
            if not line.startswith("|"):
                continue
            if re.match(r"^[\s|*-]+$", line):
                cells.append("\0split")
            else:
                cells += [c.strip() for c in line[1:-1].split("|") if c.strip()]
        if "\0split" not in cells:
            return cells
        cut = cells.index("\0split")
        header, data_cells = cells[:cut], [c for c in cells[cut + 1:] if c != "\0split"]
        if not header:
            return []
        wanted = (target or "cells").lower()
        picked = []
        for i in range(0, len(data_cells) - len(header) + 1, len(header)):
            for key, value in zip(header, data_cells[i:i + len(header)]):
                if key.lower() != value.lower() and wanted in key.lower():
                    picked.append(value)
        return picked or cells
    if re.match(r"\s*\d+\.\s+", text):
        return [ln.split(":", 1)[-1].split(".", 1)[-1].strip() for ln in text.split("\n")
                if re.match(r"\s*\d+\.\s+", ln)]
    if re.match(r"\s*[-*] ", text):
        return [re.sub(r"^\s*[-*] ", "", ln).strip() for ln in text.split("\n") if re.match(r"\s*[-*] ", ln)]
    return [ln.strip().lstrip("#").strip() for ln in text.split("\n")
            if ln.strip() and not ln.strip().strip("*#'\"").endswith(":") and not re.match(r"^\|.*\|$", ln.strip())]


def elements(text: str) -> list[str]:
    """The units an "each X must ..." constraint applies to (see the module docstring)."""
    found = tables(text)
    if found and found[0].rows:
        return [" ".join(cells) for cells in found[0].rows]
    items = list_items(text)
    if items:
        return [re.sub(r"^\s*(?:[-*+•]|\d+[.)])\s+", "", it) for it in items]
    return paragraphs(text)


def official_json(text: str) -> object | None:
    """MulDimIF's JSON reading: the first ```json fenced block if any, else the whole text, parsed
    as one JSON document; None when it does not parse."""
    m = re.search(r"```json(.*?)```", text, re.DOTALL)
    try:
        return json.loads(m.group(1).strip() if m else text)
    except (ValueError, RecursionError):
        return None


def container_depth(value: object) -> int:
    """MulDimIF's nesting depth: every object or array adds one level, a scalar none, and an empty
    container ends the count there (``{"a": {"b": 1}}`` -> 2, ``[{"a": 1}]`` -> 2, ``{}`` -> 0)."""
    if isinstance(value, dict) and value:
        return 1 + max(container_depth(v) for v in value.values())
    if isinstance(value, list) and value:
        return 1 + max(container_depth(v) for v in value)
    return 0


_XML_TAG = re.compile(r"<([A-Za-z_][\w.\-]*)((?:\s+[A-Za-z_:][\w:.\-]*\s*=\s*(?:\"[^\"]*\"|'[^']*'))*)\s*/?>")
_XML_ATTR = re.compile(r"[A-Za-z_:][\w:.\-]*\s*=\s*(?:\"[^\"]*\"|'[^']*')")


def xml_attribute_counts(text: str) -> list[int]:
    """Number of attributes of every XML start tag (or empty-element tag) in ``text``."""
    return [len(_XML_ATTR.findall(m.group(2))) for m in _XML_TAG.finditer(text)]
