"""The credit page compares across responses (issue 36, finding 8), in a real headless browser:
one colour scale for the whole page with a colour bar in numbers, read-spans drawn only where a
checker reads part of the response (one box per stretch, none for a whole-response checker), and an
advantage mark that shows even for a small advantage, checked on a screenshot."""

from __future__ import annotations

import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_credit_page_browser import CHROMIUM

from harness.credit.page import ADVANTAGE, write_page

pytestmark = [pytest.mark.engine,
              pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (scripts/setup.sh --dev installs it with apt)")]

N = 8
VOID = {"meta", "input", "br", "img", "link", "hr", "wbr", "col", "source"}


def _row(index, q_whole, q_part, advantage, prompt=None):
    tokens = [f"word{i} " for i in range(N)]
    row = {"step": 1, "example": "e1", "group": 0, "index": index, "tokens": tokens, "advantage": advantage,
           "rewards": [{"name": "whole", "family": "whole", "value": 1.0, "satisfied": True, "reason": "no commas",
                        "read": [[0, N]], "q": q_whole, "w": [1.0] * N},
                       {"name": "part", "family": "part", "value": 0.0, "satisfied": False, "reason": "bad ending",
                        "read": [[2, 4], [6, 7]], "q": q_part, "w": [1.0] * N}]}
    if prompt:
        row["prompt"] = prompt
    return row


def _page(tmp_path: Path) -> Path:
    first = _row(0, [0.0, 0.1, 0.8, 0.1, 0, 0, 0, 0], [0.0] * N, [1.0] + [0.1] * (N - 1), prompt="Say it.")
    second = _row(1, [0.3, 0.0, 0.0, 0.0, 0, 0, 0, 0], [0.0] * N, [-0.5] * N)
    return write_page([first, second], tmp_path / "page.html", "t")


class _Page(HTMLParser):
    """Token spans (row, class, style), read boxes (their token indices), the colour bar's ticks."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens: list[tuple[int, str, str]] = []
        self.boxes: list[list[int]] = []
        self.ticks: list[str] = []
        self.scale_max = None
        self.text: list[str] = []
        self._row = -1
        self._stack: list[str] = []
        self._in_ticks = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if tag in VOID:
            return
        self._stack.append("box" if "read-span" in cls else ("ticks" if "ticks" in cls else tag))
        if tag == "div" and "card" in cls:
            self._row += 1
        if a.get("id") == "scale":
            self.scale_max = a.get("data-max")
        if "read-span" in cls:
            self.boxes.append([])
        if "ticks" in cls:
            self._in_ticks = True
        if tag == "span" and "tok" in cls:
            self.tokens.append((self._row, a.get("class", ""), a.get("style") or ""))
            if "box" in self._stack[:-1]:
                self.boxes[-1].append(int(a["data-i"]))
        elif tag == "span" and self._in_ticks and "ticks" not in cls:
            self.ticks.append("")

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        top = self._stack.pop() if self._stack else None
        if top == "ticks":
            self._in_ticks = False

    def handle_data(self, data):
        if "script" not in self._stack:
            self.text.append(data)
        if self._in_ticks and self.ticks and self._stack and self._stack[-1] == "span":
            self.ticks[-1] += data


def _chromium(page: Path, fragment: str, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    out = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                          "--no-first-run", "--hide-scrollbars", f"--user-data-dir={profile}",
                          "--virtual-time-budget=5000", *extra, page.resolve().as_uri() + fragment],
                         check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out


def _dom(page: Path, fragment: str, profile: Path) -> _Page:
    parsed = _Page()
    parsed.feed(_chromium(page, fragment, profile, "--dump-dom").stdout)
    return parsed


def _background(style: str) -> str:
    return re.search(r"background-color:\s*([^;]+)", style).group(1).strip()


def _alpha(colour: str) -> float:
    parts = colour[colour.index("(") + 1:-1].split(",")
    return float(parts[3]) if len(parts) == 4 else 1.0


def test_one_colour_scale_for_the_whole_page_with_a_colour_bar_in_numbers(tmp_path):
    page = _page(tmp_path)
    dom = _dom(page, "#reward=whole", tmp_path / "profile")
    first = [s for r, _, s in dom.tokens if r == 0]
    second = [s for r, _, s in dom.tokens if r == 1]
    assert _background(first[2]) == "rgba(207, 34, 46, 0.85)"  # the page's largest q: 0.8
    # the second response's largest q (0.3) is shaded on the same scale, not as its own maximum
    assert _alpha(_background(second[0])) == pytest.approx(0.85 * 0.3 / 0.8, abs=2e-3)
    assert dom.scale_max == "0.8" and dom.ticks == ["0", "0.2", "0.4", "0.6", "0.8"]
    adv = _dom(page, "#reward=" + ADVANTAGE, tmp_path / "profile")
    assert adv.scale_max == "1" and adv.ticks == ["-1", "-0.5", "0", "0.5", "1"]
    assert _alpha(_background([s for r, _, s in adv.tokens if r == 1][0])) == pytest.approx(0.425, abs=2e-3)


def test_read_spans_only_where_a_checker_reads_part_of_the_response(tmp_path):
    page = _page(tmp_path)
    whole = _dom(page, "#reward=whole", tmp_path / "profile")
    assert whole.boxes == [] and not any("read" in c.split() for _, c, _ in whole.tokens)
    assert "the checker reads the whole response" in "".join(whole.text)
    part = _dom(page, "#reward=part", tmp_path / "profile")
    assert part.boxes == [[2, 3], [6], [2, 3], [6]]  # one box per stretch read, on each response
    assert "the checker reads the whole response" not in "".join(part.text)


def test_the_advantage_mark_shows_for_a_small_advantage(tmp_path):
    """Tokens whose advantage is a tenth of the page's largest still get a solid mark of at least
    3 px: on the screenshot, the first response's underline runs under all its tokens."""
    image = pytest.importorskip("PIL.Image")
    page = _page(tmp_path)
    dom = _dom(page, "#reward=part", tmp_path / "profile")  # part's q is 0 everywhere: no background
    marks = [re.search(r"rgba?\(26, 127, 55(?:, ([\d.]+))?\) 0px -(\d+)px", s) for r, _, s in dom.tokens if r == 0]
    assert all(marks) and all(float(m.group(1) or 1) >= 0.55 and int(m.group(2)) >= 3 for m in marks)
    shot = tmp_path / "credit.png"
    _chromium(page, "#reward=part", tmp_path / "profile", "--window-size=1000,700", f"--screenshot={shot}")
    pixels = image.open(shot).convert("RGB")
    greens = [x for x in range(pixels.width) for y in range(pixels.height)
              if (lambda p: p[1] - p[0] > 40 and p[0] < 170)(pixels.getpixel((x, y)))]
    assert greens and max(greens) - min(greens) > 0.8 * 8 * N * 7  # under all 8 tokens (6 characters + space each)
