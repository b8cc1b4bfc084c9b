"""Report tables a reader can scan (issue 36, finding 7): one number per cell in the difference and
gain tables, with the interval, what it rules out, the verdict and the smallest effect these seeds
can detect in a note under the table (and the cell's tooltip on the page); no "about N seeds for
±0.01" / "over 1000 seeds"; and ``mrbench report`` prints the verdict on the terminal."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest
from test_report_values import ACC, BASE, _base, _record

from harness import cli

ONE_NUMBER = re.compile(r"^(?:[+-]\d+\.\d{3}(?: [▲▼])?|baseline|base model|—)$")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scan")
    root = tmp / "records"
    for seed, acc in ACC.items():
        _record(root, "gdpo", seed, acc)
        _record(root, "mrtpo", seed, acc + 0.01 * (seed - 1) + 0.005, reward=0.4 + 0.05 * seed)
    _base(root, BASE)
    out = tmp / "out"
    return root, out


def _md_tables(md: str, title: str) -> list[list[list[str]]]:
    """The Markdown tables that follow a ``title:`` line, as rows of cells (header and rule dropped)."""
    tables = []
    for block in md.split(f"\n{title}:\n")[1:]:
        rows = [line for line in block.strip().split("\n\n")[0].splitlines() if line.startswith("|")]
        tables.append([[c.strip() for c in r.strip("|").split(" | ")] for r in rows[2:]])
    return tables


class _Cells(HTMLParser):
    """The ``td`` cells (text, title) of the tables with a given class."""

    def __init__(self, css: str) -> None:
        super().__init__()
        self.css, self.inside, self.cells, self._td = css, False, [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.inside = a.get("class") == self.css
        if tag == "td" and self.inside:
            self._td = ["", a.get("title", "")]

    def handle_endtag(self, tag):
        if tag == "td" and self._td is not None:
            self.cells.append(tuple(self._td))
            self._td = None
        if tag == "table":
            self.inside = False

    def handle_data(self, data):
        if self._td is not None:
            self._td[0] += data


def test_difference_tables_hold_one_number_per_cell_and_the_rest_in_notes(report, capsys):
    root, out = report
    assert cli.main(["report", "--root", str(root), "--out", str(out)]) == 0
    md = (out / "leaderboard.md").read_text()
    tables = _md_tables(md, "Difference from gdpo") + _md_tables(md, "Gain over the base model")
    assert len(tables) == 3  # benchmarks: difference and gain; training rewards: difference
    for rows in tables:
        for cells in rows:
            assert all(ONE_NUMBER.match(c) for c in cells[2:]), cells
    assert "seeds for ±" not in md.split("## Verdict")[1] and "over 1000 seeds" not in md
    # the note under the table: the interval, what it rules out, the verdict and the smallest detectable effect
    note = next(line for line in md.splitlines() if line.startswith("- mrtpo (tiny-random), ifollow-heldout/"))
    assert re.search(r": \+\d\.\d{3} \[[+-]\d\.\d{3}, [+-]\d\.\d{3}\]; rules out ", note), note
    assert "smallest effect detectable with these 3 seeds: ±" in note and "no verdict possible with 3 seeds" in note

    html = (out / "report.html").read_text()
    for css in ("versus", "gain"):
        parser = _Cells(css)
        parser.feed(html)
        numbers = [(text, title) for text, title in parser.cells if re.match(r"^[+-]\d", text)]
        assert numbers and all(ONE_NUMBER.match(text) for text, _ in numbers)
        assert all(title.startswith(text.split()[0] + " [") and "smallest effect detectable" in title
                   for text, title in numbers)  # the tooltip
    assert "<details class=\"cell-notes\">" in html

    data = json.loads((out / "leaderboard.json").read_text())
    vs = next(r for r in data["tasks"]["ifollow"]["tables"][0]["rows"] if r["algorithm"] == "mrtpo")[
        "cells"]["ifollow-heldout/instruction_level"]["vs_baseline"]
    assert vs["smallest_detectable"] > 0 and vs["smallest_detectable_text"] in note


def test_report_prints_the_verdict_on_the_terminal(report, capsys):
    root, out = report
    capsys.readouterr()
    assert cli.main(["report", "--root", str(root), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    data = json.loads((out / "leaderboard.json").read_text())
    # 3 seeds: the verdict says first that no comparison can reach one, then the gains
    assert printed.startswith("Verdict:\n  ifollow: with 3 seeds no comparison here can reach a verdict")
    assert " ".join(printed.split("wrote:")[0].split()[1:]).startswith(data["verdict"][0].split(" No difference")[0])
    assert str(out / "report.html") in printed.split("wrote:")[1]


def test_a_difference_that_reaches_a_verdict_is_marked_in_its_one_number():
    from harness.report.render import compare_cell, compare_text
    from harness.report.stats import compare, decide

    ours = {s: 0.70 + 0.001 * s for s in range(6)}
    theirs = {s: 0.60 + 0.002 * s for s in range(6)}
    (higher,) = decide({"acc": compare(ours, theirs, 0.01)}).values()
    (lower,) = decide({"acc": compare(theirs, ours, 0.01)}).values()
    assert (higher.word, lower.word) == ("higher", "lower")  # 6 seeds: the exact test's p = 1/32
    assert compare_cell(higher) == "+0.097 ▲" and compare_cell(lower) == "-0.097 ▼"
    assert compare_text(higher).startswith("+0.097 [") and "higher (exact p=0.0312" in compare_text(higher)
    assert "smallest effect detectable with these 6 seeds: ±" in compare_text(higher)
