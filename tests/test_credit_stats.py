"""The localisation statistics and the token/character alignment on constructed cases."""

from __future__ import annotations

import pytest

from harness.credit.report import analyse, csv_text, markdown
from harness.credit.stats import (
    concentration_curve,
    correlation,
    pairwise_correlations,
    part_share,
    tokens_for_share,
)
from harness.models import byte_tokenizer
from harness.token_align import _prefix_pieces, align, as_ranges, from_ranges, touched

READ = [False, False, True, True, False, False, False, False, False, False]  # 2 of 10 tokens


def test_distance_concentrated_on_the_read_part():
    dist, tok = part_share([0, 0, 1, 1, 0, 0, 0, 0, 0, 0], READ)
    assert (dist, tok) == (1.0, 0.2) and dist / tok == pytest.approx(5.0)
    dist, tok = part_share([1, 1, 2, 2, 1, 1, 1, 1, 1, 1], READ)
    assert dist == pytest.approx(4 / 12) and tok == 0.2 and dist / tok == pytest.approx(5 / 3)


def test_uniform_distance_gives_ratio_one():
    for read in (READ, [True] * 10, [i % 3 == 0 for i in range(10)]):
        dist, tok = part_share([0.3] * 10, read)
        assert dist == pytest.approx(tok) and dist / tok == pytest.approx(1.0)


def test_undefined_shares():
    assert part_share([0.0] * 10, READ) is None  # no distance
    assert part_share([1.0] * 10, [False] * 10) is None  # nothing read
    with pytest.raises(ValueError, match="read flags"):
        part_share([1.0] * 3, [True] * 4)


def test_concentration_and_correlation():
    assert tokens_for_share([8, 1, 1, 0, 0, 0, 0, 0, 0, 0], 0.8) == 0.1
    assert tokens_for_share([1.0] * 10, 0.8) == pytest.approx(0.8)
    assert concentration_curve([2.0] * 4, points=4) == pytest.approx([0, 0.25, 0.5, 0.75, 1.0])
    assert concentration_curve([1.0, 0, 0, 0], points=4) == pytest.approx([0, 1, 1, 1, 1])
    assert correlation([0, 1, 2, 3], [0, 2, 4, 6]) == pytest.approx(1.0)
    assert correlation([0, 1, 2, 3], [1, 1, 1, 1]) is None
    assert pairwise_correlations([[0, 1, 2], [2, 1, 0], [0, 1, 2]]) == pytest.approx([-1.0, 1.0, -1.0])


def test_multibyte_characters_split_across_tokens():
    tok = byte_tokenizer()  # one token per byte: "é" is two tokens, "🙂" four
    text = "aé🙂b"
    ids = list(tok(text, add_special_tokens=False)["input_ids"]) + [tok.eos_token_id]
    al = align(tok, ids, tok.decode(ids, skip_special_tokens=True))
    assert al.pieces == ["a", "", "é", "", "", "", "🙂", "b", ""]
    assert "".join(al.pieces) == text and al.offsets[2] == (1, 2) and al.offsets[6] == (2, 3)
    assert touched(al, [(1, 2)]) == [False, True, True, False, False, False, False, False, False]
    assert touched(al, [(2, 3)]) == [False, False, False, True, True, True, True, False, False]
    assert touched(al, [(0, 4)])[-1] is False  # the end-of-turn token holds no character
    assert _prefix_pieces(tok, ids, text) == al.pieces


class _WordTokenizer:
    """Multi-character tokens, one string each."""

    vocab = ("Hel", "lo wor", "ld", "<eos>")
    all_special_ids = (3,)

    def decode(self, ids, skip_special_tokens=True):
        return "".join(self.vocab[i] for i in ids if not (skip_special_tokens and i in self.all_special_ids))


def test_spans_starting_or_ending_inside_a_token():
    tok = _WordTokenizer()
    al = align(tok, [0, 1, 2, 3], "Hello world")
    assert al.offsets == [(0, 3), (3, 9), (9, 11), (11, 11)]
    assert touched(al, [(4, 7)]) == [False, True, False, False]  # inside one token
    assert touched(al, [(2, 4)]) == [True, True, False, False]  # starts in one token, ends in the next
    assert touched(al, [(8, 10)]) == [False, True, True, False]
    assert touched(al, [(9, 9)]) == [False, False, True, False]  # an insertion point
    assert touched(al, [(11, 11)]) == [False, False, False, False]
    flags = touched(al, [(0, 1), (9, 11)])
    assert as_ranges(flags) == [[0, 1], [2, 3]] and from_ranges(as_ranges(flags), 4) == flags


def _row(kind: str, satisfied: bool, q: list[float], read: list[list[int]]):
    return {"tokens": ["x"] * len(q), "rewards": [{"name": kind, "family": kind, "value": float(satisfied),
                                                   "satisfied": satisfied, "read": read, "q": q}]}


def test_table4_aggregates_types_verdicts_and_pools():
    concentrated = [0, 0, 1, 1, 0, 0, 0, 0, 0, 0]
    rows = [_row("end", True, concentrated, [[2, 4]]) for _ in range(5)]
    rows += [_row("end", False, [1.0] * 10, [[0, 5]]) for _ in range(4)]
    rows += [_row("comma", True, [1.0] * 10, [[0, 10]]) for _ in range(5)]
    result = analyse(rows)
    end = next(r for r in result["table4"] if r["type"] == "end")
    assert end["satisfied"]["dist_pct"] == pytest.approx(100.0) and end["satisfied"]["tok_pct"] == pytest.approx(20.0)
    assert end["satisfied"]["ratio"] == pytest.approx(5.0) and end["violated"]["n"] == 4
    assert result["pooled"]["satisfied"]["n"] == 10
    assert result["pooled"]["satisfied"]["ratio"] == pytest.approx((0.5 * 1.0 + 0.5 * 1.0) / (0.5 * 0.2 + 0.5 * 1.0))
    assert result["pooled"]["violated"]["ratio"] == pytest.approx(1.0)
    assert result["concentration"]["by_reward"]["end"]["n"] == 9
    md = markdown(result, "constructed")
    assert "| end | 100.0 | 20.0 | 5.00 | 5 | \u2013 | \u2013 | \u2013 | 4 |" in md
    assert "| comma | 100.0 | 100.0 | 1.00 | 5 |" in md
    lines = csv_text(result).splitlines()
    assert "end,violated,50.0000,50.0000,1.0000,4,True" in lines and lines[0].startswith("type,verdict")


def test_the_concentration_figure_draws_a_curve_per_reward_however_many():
    import matplotlib.pyplot as plt

    from harness.credit.figure import draw

    xs = [i / 10 for i in range(11)]
    for k in (3, 13):  # below and above the colour-legend limit: every reward still gets its own curve
        names = [f"r{i}" for i in range(k)]
        result = {"curves": {"x": xs, "by_reward": {n: [min(1.0, x * (1 + i / k)) for x in xs]
                                                    for i, n in enumerate(names)}, "pooled": xs},
                  "concentration": {"share": 0.8, "by_reward": {n: {"n": 5 + i} for i, n in enumerate(names)}}}
        fig = draw(result, "t")
        first, *panels = fig.axes
        assert len(first.get_lines()) >= k + 2  # the diagonal, each reward, the pooled curve
        assert [ax.get_title() for ax in panels] == [f"{n} (n={5 + i} pairs)" for i, n in enumerate(names)]
        for i, ax in enumerate(panels):
            ys = [100 * y for y in result["curves"]["by_reward"][names[i]]]
            assert any(list(line.get_ydata()) == ys for line in ax.get_lines())
        plt.close(fig)
