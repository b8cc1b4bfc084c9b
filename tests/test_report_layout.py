"""The report page's presentation: tables stay inside the page at 1,280 px (a wide one scrolls in
its own box), every ``(n=K)`` is explained, the curves come smoothed and raw, coinciding rows stay
distinguishable in the figure (own dash pattern, marker and offset; every legend entry), and
steps are integer ticks."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from harness import cli
from harness.config import resolve
from harness.records import RunRecord

STEPS = 12
BENCHES = [f"a-rather-long-benchmark-name-{i}/instruction_level_accuracy" for i in range(7)]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _record(root, algo, seed, score, fmt, benches=BENCHES):
    pairs = [("output.root", str(root)), ("task", "toolcall"), ("algo", algo), ("seed", str(seed)),
             ("model", "Qwen/Qwen2.5-1.5B-Instruct")]
    rec = RunRecord.open(resolve(None, pairs))
    rec.start(seed=seed, task_version="1", data_hash="x")
    for step in range(1, STEPS + 1):
        rec.append_metrics({"step": step, "reward/format": fmt(step), "reward_mean": fmt(step)})
    summary = {b.split("/")[0]: {"summary": {b.split("/")[1]: score + i / 100}} for i, b in enumerate(benches)}
    rec.write_eval({"benchmarks": summary})
    rec.finish({})
    rec.unlock()


@pytest.fixture(scope="module")
def wide_report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("layout")
    root = tmp / "records"
    for seed in range(3):
        same = (lambda s: 0.05 * s + (0.1 if s % 2 else 0.0))
        _record(root, "gdpo", seed, 0.5 + seed / 50, same)
        _record(root, "mrtpo", seed, 0.5 + seed / 50, same)  # identical curves: mrtpo would hide gdpo
        # grpo's seed 2 lacks the last benchmark: "(n=2)" in a 3-seed row
        _record(root, "grpo", seed, 0.4 + seed / 40, lambda s: 0.03 * s, BENCHES if seed < 2 else BENCHES[:-1])
    out = tmp / "out"
    assert cli.main(["report", "--root", str(root), "--out", str(out)]) == 0
    return out


def test_every_n_is_explained_and_both_views_are_written(wide_report):
    html = (wide_report / "report.html").read_text()
    md = (wide_report / "leaderboard.md").read_text()
    for text in (html, md):
        assert "(n=2)" in text
        assert "only K of the row&#x27;s seeds" in text or "only K of the row's seeds" in text
        assert "the number of seeds that both this row and the baseline row ran" in text
    assert (wide_report / "curves-toolcall-smoothed.png").stat().st_size > 1000
    assert "smoothed: centred moving average over 3 steps" in html and "raw per-step medians" in html


def test_coinciding_rows_stay_distinguishable_with_integer_step_ticks():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from harness.report.figures import _figure, moving_average, smoothing_window
    from harness.report.tables import Curve, TaskReport, Thresholds

    same = Curve([1, 2, 3, 4, 5], [0.1, 0.3, 0.2, 0.5, 0.4], [0.0] * 5, [0.6] * 5)
    curves = {"all": {"gdpo": same, "mrtpo": same, "grpo": Curve([1, 2], [0.0, 0.1], [0.0, 0.0], [0.2, 0.2])},
              "format": {"gdpo": same, "mrtpo": same}}
    rep = TaskReport("t", "gdpo", [], Thresholds([], "", []), curves)
    fig = _figure(plt, rep, 1)
    fig.canvas.draw()
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    g, m = lines["gdpo"], lines["mrtpo"]
    assert (g.get_linestyle(), g.get_marker()) != (m.get_linestyle(), m.get_marker())
    assert g.get_marker() != m.get_marker() and g.get_linestyle() != m.get_linestyle()
    assert all(abs(a - b) > 0 for a, b in zip(g.get_xdata(), m.get_xdata()))  # a small offset apart
    assert all(abs(a - b) <= 0.1 + 1e-9 for a, b in zip(g.get_xdata(), m.get_xdata()))
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert sorted(legend) == ["gdpo", "grpo", "mrtpo"]
    for axis in fig.axes:
        if axis.get_visible():
            ticks = [t for t in axis.get_xticks() if axis.get_xlim()[0] <= t <= axis.get_xlim()[1]]
            assert ticks and all(float(t).is_integer() for t in ticks), ticks
    plt.close(fig)
    assert smoothing_window(3) == 1 and smoothing_window(16) == 3 and smoothing_window(200) == 25
    assert moving_average([0.0, 3.0, 0.0, 3.0], 3) == [1.5, 1.0, 2.0, 1.5]


PROBE = """<script>
window.addEventListener("load", () => {
  const vw = window.innerWidth;
  const page = document.documentElement.scrollWidth;
  const boxes = [...document.querySelectorAll(".table-wrap")].map(d => {
    const r = d.getBoundingClientRect();
    return [Math.round(r.left), Math.round(r.right), d.scrollWidth, d.clientWidth];
  });
  const shown = () => [...document.images].filter(i => i.getBoundingClientRect().width > 0).map(i => i.alt);
  const before = shown();
  document.querySelector("label[for$='-raw']").click();
  const after = shown();
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify({vw, page, boxes, before, after});
  document.body.appendChild(pre);
});
</script>"""


@pytest.mark.engine
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium (scripts/setup.sh --dev installs Debian's package as root)")
def test_tables_stay_inside_the_page_at_1280_px(wide_report, tmp_path):
    html = (wide_report / "report.html").read_text()
    page = tmp_path / "probe.html"
    page.write_text(html.replace("</body>", PROBE + "</body>"))
    out = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                          "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}", "--hide-scrollbars",
                          "--virtual-time-budget=5000", "--window-size=1280,2000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    probe = json.loads(re.search(r'<pre id="probe">(.*?)</pre>', out, re.DOTALL).group(1).replace("&quot;", '"'))
    assert probe["vw"] == 1280
    assert probe["page"] <= probe["vw"], probe  # the page itself never scrolls sideways
    assert probe["boxes"] and all(0 <= left and right <= probe["vw"] for left, right, _, _ in probe["boxes"])
    assert probe["before"] == ["learning curves of toolcall, moving average over 3 steps"]
    assert probe["after"] == ["learning curves of toolcall, raw per-step medians"]
