"""The page of ``mrbench credit``: one self-contained HTML file (no network, no server).

Each response's tokens are coloured by the relevance q of the reward chosen in the control, on one
scale for the whole page (the reward's largest q on any response is the darkest shade; a colour bar
in the header gives it in numbers). Each stretch the checker read is boxed where it reads part of
the response (a whole-response checker draws no box, and its verdict says so), the verdict is
written above the text, and a solid mark under every token gives the final per-token advantage
(green positive, red negative, at least 3 px and half opaque; the control can also colour by it,
on the page's scale). The choice is kept in the
URL fragment, ``PAGE.html#reward=NAME``, so a link (or a headless browser) opens the page on a
given reward; without one it opens on the first reward that was replayed (has relevance q on some
response), since a reward without q shows no shading. Replayed rewards are marked (a diamond) in
the control and on the reward chips, and each group's cards follow its prompt (rows from before
prompts were kept say so instead). The rows (:mod:`harness.training.credit_rows`) are embedded as JSON.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mrbench_core.jsonio import atomic_write_text

TEMPLATE = Path(__file__).with_name("page.tmpl")
#: the control's value that colours tokens by the final advantage
ADVANTAGE = "__advantage__"


def page_html(rows: Sequence[dict[str, Any]], title: str, subtitle: str = "") -> str:
    """The page's HTML for ``rows``."""
    data = json.dumps(list(rows), ensure_ascii=False, separators=(",", ":"))
    data = data.replace("<", "\\u003c")  # nothing in the data can end or confuse its <script> element
    text = TEMPLATE.read_text(encoding="utf-8")
    return (text.replace("__TITLE__", html.escape(title)).replace("__SUBTITLE__", html.escape(subtitle))
            .replace("__DATA__", data))


def write_page(rows: Sequence[dict[str, Any]], out: str | Path, title: str, subtitle: str = "") -> Path:
    """Write the page to ``out`` (parent folders created); its path."""
    if not rows:
        raise ValueError("no credit rows to show")
    path = Path(out)
    atomic_write_text(path, page_html(rows, title, subtitle))
    return path
