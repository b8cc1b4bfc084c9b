"""Which characters of a response each of its tokens holds (a harness utility: the credit rows, the
mrtpo-oracle read masks of :mod:`harness.replay_builders` and the step diagnostics join tokens to
a verifier's character spans through it).

A response is a list of token ids and the text decoded from them (special tokens skipped). Each
token gets its *piece*: the text it adds. Pieces partition the text, in order. A token that holds
only some of the bytes of a multi-byte character adds nothing by itself; the token that completes
the character gets the whole character. A special token (end of turn) adds nothing.

For joining with a verifier's character spans each token also has a *reach*: its piece, or, for
a token holding part of a character's bytes, that character (so both halves of a split character
count as read when the character is). A token touches a span ``[s, e)`` when its reach overlaps
it; an empty span ``[p, p)`` (an insertion point) touches the token whose reach holds ``p``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Span = tuple[int, int]


@dataclass
class Alignment:
    pieces: list[str]
    offsets: list[Span]  # [start, end) of each piece in the text
    reach: list[Span]  # the characters each token helps write (see the module docstring)

    def __len__(self) -> int:
        return len(self.pieces)


def _decode(tokenizer: Any, ids: Sequence[int]) -> str:
    return tokenizer.decode(list(ids), skip_special_tokens=True)


def _incremental_pieces(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    """Pieces by incremental decoding: each token is decoded after the few tokens before it (a
    window that keeps a leading space), and its text waits until no character is incomplete."""
    pieces: list[str] = []
    prefix, read = 0, 0
    for i in range(len(ids)):
        before = _decode(tokenizer, ids[prefix:read])
        now = _decode(tokenizer, ids[prefix:i + 1])
        if len(now) > len(before) and not now.endswith("\ufffd") and now.startswith(before):
            pieces.append(now[len(before):])
            prefix, read = read, i + 1
        else:
            pieces.append("")
    return pieces


def _prefix_pieces(tokenizer: Any, ids: Sequence[int], text: str) -> list[str]:
    """Pieces from whole-prefix decodes: a token ends where the decoded prefix stops agreeing
    with ``text`` (quadratic; used when incremental decoding does not rebuild the text)."""
    pieces, end = [], 0
    for i in range(len(ids)):
        prefix = _decode(tokenizer, ids[:i + 1])
        agree = 0
        for a, b in zip(prefix, text):
            if a != b:
                break
            agree += 1
        agree = max(agree, end)
        pieces.append(text[end:agree])
        end = agree
    if pieces:
        pieces[-1] += text[end:]
    return pieces


def align(tokenizer: Any, ids: Sequence[int], text: str) -> Alignment:
    """The alignment of ``ids`` with ``text`` (the response decoded with special tokens skipped)."""
    pieces = _incremental_pieces(tokenizer, ids)
    if "".join(pieces) != text:
        pieces = _prefix_pieces(tokenizer, ids, text)
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    offsets, reach, pos = [], [], 0
    for tok, piece in zip(ids, pieces):
        offsets.append((pos, pos + len(piece)))
        if piece or int(tok) in special or pos >= len(text):
            reach.append((pos, pos + len(piece)))
        else:
            reach.append((pos, pos + 1))
        pos += len(piece)
    return Alignment(pieces, offsets, reach)


def touched(alignment: Alignment, spans: Sequence[Sequence[int]]) -> list[bool]:
    """For each token, whether it touches one of ``spans`` (character ``[start, end)`` pairs)."""
    out = []
    for rs, re_ in alignment.reach:
        hit = False
        for s, e in spans:
            if (s < e and rs < e and re_ > s) or (s == e and rs <= s < re_):
                hit = True
                break
        out.append(hit)
    return out


def as_ranges(flags: Sequence[bool]) -> list[list[int]]:
    """``[[first, end), ...]`` of the runs of true flags (a compact list of token indices)."""
    out: list[list[int]] = []
    for i, flag in enumerate(flags):
        if flag:
            if out and out[-1][1] == i:
                out[-1][1] = i + 1
            else:
                out.append([i, i + 1])
    return out


def from_ranges(ranges: Sequence[Sequence[int]], n: int) -> list[bool]:
    """The flags of :func:`as_ranges` back, for ``n`` tokens."""
    flags = [False] * n
    for a, b in ranges:
        for i in range(max(0, a), min(n, b)):
            flags[i] = True
    return flags
