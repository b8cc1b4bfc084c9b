"""The example plugin package of the guides (docs/examples), installed as a real distribution and
driven through the ``mrbench`` command.

The package is made discoverable without pip: a ``*.dist-info`` folder whose ``entry_points.txt``
is generated from ``docs/examples/pyproject.toml`` goes into a temporary folder, and that folder
plus ``docs/examples`` (the code) are put on the ``PYTHONPATH`` of a subprocess, so the registries
find the plugins through ``importlib.metadata`` exactly as they would after ``pip install``. A new
interpreter is the point of ``mrbench list`` (discovery at start-up) and of the signal and crash
tests; the other commands run in this process with the same two folders on ``sys.path``
(:func:`plugins_in_process`), the registries rereading their entry points, and everything as it
was afterwards.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples"
GUIDES = sorted((ROOT / "docs").glob("adding-*.md"))
CANNED = ["apple", "river", "The word you asked for is apple."]
SECTIONS = {"mrbench.tasks": "tasks", "mrbench.algorithms": "algorithms", "mrbench.backends": "backends",
            "mrbench.evaluators": "evaluators"}


def example_project() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    return tomllib.loads((EXAMPLES / "pyproject.toml").read_text())["project"]


def write_dist_info(site: Path, project: dict) -> None:
    """What pip would install for the example package's metadata: METADATA and entry_points.txt."""
    name = project["name"].replace("-", "_")
    info = site / f"{name}-{project['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    groups = [f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items())
              for group, entries in project["entry-points"].items()]
    (info / "entry_points.txt").write_text("\n".join(groups))


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The folder holding the example package's dist-info, as pip would leave it."""
    site = tmp_path_factory.mktemp("site")
    write_dist_info(site, example_project())
    return site


@pytest.fixture(scope="module")
def env(site):
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(EXAMPLES), str(site)]))


def mrbench(env: dict, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=180, check=False)


def _registries() -> list:
    from algorithms.registry import ALGORITHMS
    from evals.ifollow_judge import JUDGES
    from evals.registry import EVALUATORS
    from harness.backends import BACKENDS
    from tasks.ifollow.constraints.base import CONSTRAINTS
    from tasks.registry import TASKS

    return [ALGORITHMS, TASKS, BACKENDS, EVALUATORS, JUDGES, CONSTRAINTS]


@contextlib.contextmanager
def plugins_in_process(site: Path) -> Iterator[None]:
    """The example package installed in this process for the block: its dist-info and code on
    ``sys.path``, every registry rereading its entry points; afterwards the registries, ``sys.path``
    and ``sys.modules`` are as they were (no other test sees the plugins)."""
    registries = _registries()
    saved = [(r, dict(r._entries), r._plugins_loaded, r._plugin_error) for r in registries]
    modules, path = set(sys.modules), list(sys.path)
    sys.path[:0] = [str(EXAMPLES), str(site)]
    importlib.invalidate_caches()
    for r in registries:
        r._plugins_loaded, r._plugin_error = False, None
    try:
        yield
    finally:
        sys.path[:] = path
        for r, entries, loaded, error in saved:  # built-ins resolved meanwhile stay resolved
            for name in set(r._entries) - set(entries):
                del r._entries[name]
            r._plugins_loaded, r._plugin_error = loaded, error
        for name in set(sys.modules) - modules:
            if name.split(".")[0] == "mrbench_plugin_example":
                del sys.modules[name]
        importlib.invalidate_caches()


@pytest.fixture
def mrbench_here(site, monkeypatch, capsys):
    """``mrbench_here(*args, cwd=DIR)``: the command through ``harness.cli.main`` in this process, with
    the example package installed (:func:`plugins_in_process`); returns its exit code and output."""

    def run(*args: str, cwd: Path) -> SimpleNamespace:
        from harness import cli

        capsys.readouterr()
        with monkeypatch.context() as m, plugins_in_process(site):
            m.chdir(cwd)
            code = cli.main(list(args))
        out, err = capsys.readouterr()
        return SimpleNamespace(returncode=code, stdout=out, stderr=err)

    return run


def listed(stdout: str) -> dict[str, set[str]]:
    """``mrbench list`` output -> section title -> names."""
    out: dict[str, set[str]] = {}
    section = ""
    for line in stdout.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            section = line[:-1]
            out[section] = set()
        elif line.strip():
            out[section].add(line.split()[0])
    return out


def canned_run(out: Path, steps: int = 4) -> list[str]:
    return ["run", "--task", "example-echo", "--algo", "example-clip", "--backend", "example-canned",
            "--output.dir", str(out), "--schedule.steps", str(steps), "--sampling.group_size", "4",
            "--backend.options.example-canned.responses", json.dumps(CANNED)]


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_list_shows_each_plugin_in_its_kind_and_the_derived_composite(env, tmp_path):
    res = mrbench(env, "list", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    sections = listed(res.stdout)
    for group, entries in example_project()["entry-points"].items():
        assert set(entries) <= sections[SECTIONS[group]], (group, sections[SECTIONS[group]])
    assert "mrtpo+example-clip" in sections["algorithms"]  # the plugin reweighter composes with MRTPO


def test_canned_backend_run_writes_a_finished_record(mrbench_here, tmp_path):
    from harness.backends.base import REQUIRED_STEP_KEYS

    out = tmp_path / "run"
    res = mrbench_here(*canned_run(out), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    config = json.loads((out / "config.json").read_text())
    assert config["backend"]["options"] == {"example-canned": {"responses": CANNED}}
    assert json.loads((out / "provenance.json").read_text())["status"] == "finished"
    metrics = rows(out / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2, 3, 4]
    for m in metrics:
        assert set(REQUIRED_STEP_KEYS) <= set(m) and {"reward/echo", "reward/brief"} <= set(m)
        assert "algo/rescale_scale" in m  # the algorithm's own metrics, from advantages(batch)
    samples = rows(out / "samples.jsonl")
    assert samples and {s["response"] for s in samples} <= set(CANNED)
    bench = json.loads((out / "eval.json").read_text())["benchmarks"]["example-echo-bench"]  # the task's default
    assert bench["cases"] == 2 and 0.0 <= bench["summary"]["accuracy"] <= 1.0
    assert not (out / "checkpoint").exists()
    # the shared prologue's credit log, word by word with the example's tokenizer (output.credit_groups: 1)
    credit = rows(out / "credit.jsonl")
    assert [r["step"] for r in credit] == [1] * 4 + [2] * 4 + [3] * 4 + [4] * 4  # one group of four a step
    for r in credit:  # a token per word: the words' pieces make the response again
        assert "".join(r["tokens"]) in CANNED and len(r["tokens"]) == len("".join(r["tokens"]).split())
        assert len(r["advantage"]) == len(r["tokens"]) and {w["name"] for w in r["rewards"]} == {"echo", "brief"}
    # what its defaults turn on that it does not run: said once after pre-flight, kept in the provenance
    assert json.loads((out / "provenance.json").read_text())["not_run"] == ["optim.grad_clip=1.0",
                                                                            "output.save_model=true"]
    (note,) = [line for line in res.stderr.splitlines() if "does not run" in line]
    assert note == ("mrbench run: note: backend 'example-canned' does not run what these defaults turn on: "
                    "optim.grad_clip=1.0, output.save_model=true")


def test_a_step_given_no_tokenizer_writes_no_credit_log_and_says_why(tmp_path, capsys):
    sys.path.insert(0, str(EXAMPLES))
    from mrbench_plugin_example.backend import CannedBackend
    from mrbench_plugin_example.task import EchoTask

    from algorithms import get_algorithm
    from harness.config import resolve
    from harness.records import RunRecord
    from harness.training.run_loop import RunLoop
    from harness.training.step import Step

    cfg = resolve(None, [("backend", "example-canned"), ("schedule.steps", "2"), ("sampling.group_size", "4"),
                         ("backend.options.example-canned.responses", json.dumps(CANNED)),
                         ("output.dir", str(tmp_path / "run"))])
    task, algorithm = EchoTask(), get_algorithm("grpo")
    engine, record = CannedBackend(cfg, task, algorithm), RunRecord.open(cfg)
    try:  # the canned engine's train, but its step given no tokenizer
        step, examples = Step.open(cfg, task, algorithm, record, None, extra={"backend": "example-canned"})
        RunLoop(step, engine, record).run(examples)
    finally:
        record.unlock()
    why = "output.credit_groups=1: no credit.jsonl (this backend gives the step no tokenizer to split its responses"
    assert f"mrbench: note: {why}" in capsys.readouterr().out
    assert step.credit is None and not (tmp_path / "run" / "credit.jsonl").exists()
    assert [m["step"] for m in rows(tmp_path / "run" / "metrics.jsonl")] == [1, 2]
    (note,) = json.loads((tmp_path / "run" / "provenance.json").read_text())["not_run"]
    assert note.startswith(why)


def comparable(path: Path) -> list[dict]:
    return [{k: v for k, v in m.items() if not k.startswith("time_")} for m in rows(path / "metrics.jsonl")]


@pytest.fixture(scope="module")
def whole(site, tmp_path_factory) -> Path:
    """An uninterrupted four-step run of the canned backend."""
    from harness import cli

    out = tmp_path_factory.mktemp("whole") / "run"
    with plugins_in_process(site):
        assert cli.main(canned_run(out)) == 0
    return out


def test_canned_backend_resumes_a_crashed_run_as_if_uninterrupted(mrbench_here, tmp_path, whole, monkeypatch):
    from harness.training.step import Step

    resumed = tmp_path / "resumed"
    run = Step.run

    def crash_at_third_step(self, engine, n, examples):
        if n == 2:
            raise RuntimeError("simulated crash")
        return run(self, engine, n, examples)

    with monkeypatch.context() as m:
        m.setattr(Step, "run", crash_at_third_step)
        with pytest.raises(RuntimeError, match="simulated crash"):
            mrbench_here(*canned_run(resumed), cwd=tmp_path)
    assert json.loads((resumed / "provenance.json").read_text())["status"] == "failed"
    assert [m["step"] for m in rows(resumed / "metrics.jsonl")] == [1, 2]
    assert mrbench_here(*canned_run(resumed), cwd=tmp_path).returncode == 0
    assert comparable(resumed) == comparable(whole)
    assert json.loads((resumed / "provenance.json").read_text())["status"] == "finished"


# SIGTERM arrives during the second step (the shared run loop's handler notes it; the step finishes)
SIGTERM_SCRIPT = """
import os, signal, sys
from harness import cli
from harness.training.step import Step

run = Step.run
def sigterm_in_second_step(self, engine, n, examples):
    if n == 1:
        os.kill(os.getpid(), signal.SIGTERM)
    return run(self, engine, n, examples)
Step.run = sigterm_in_second_step
sys.exit(cli.main(sys.argv[1:]))
"""


def test_canned_backend_checkpoints_on_sigterm_through_the_shared_loop_and_resumes(env, mrbench_here, tmp_path, whole):
    from harness.cli import INTERRUPTED_EXIT

    out = tmp_path / "stopped"
    stopped = subprocess.run([sys.executable, "-c", SIGTERM_SCRIPT, *canned_run(out)], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=180, check=False)
    assert stopped.returncode == INTERRUPTED_EXIT, stopped.stderr
    assert "SIGTERM: checkpoint written after step 2; rerun the same command to resume" in stopped.stderr
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["status"] == "interrupted" and prov["interruption"].startswith("SIGTERM")
    state = json.loads((out / "checkpoint" / "canned.json").read_text())  # the engine's save, by the loop
    assert state["step"] == 2 and state["position"] == 4  # two steps of two prompts (sampling.prompts_per_step)
    assert [m["step"] for m in rows(out / "metrics.jsonl")] == [1, 2]
    assert mrbench_here(*canned_run(out), cwd=tmp_path).returncode == 0
    assert comparable(out) == comparable(whole)


def test_canned_backend_stops_without_signal_through_the_shared_loop(mrbench_here, tmp_path):
    out = tmp_path / "flat"
    args = canned_run(out, steps=6)
    args[-1] = json.dumps(["apple"])  # one candidate: every group's rewards are equal, every step
    res = mrbench_here(*args, "--schedule.no_signal_steps", "3", "--schedule.stop_without_signal", "true",
                       cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "no learning signal" in res.stderr and "for 3 consecutive steps (steps 1-3)" in res.stderr
    assert [m["step"] for m in rows(out / "metrics.jsonl")] == [1, 2, 3]
    assert all(m["frac_groups_no_signal"] == 1.0 for m in rows(out / "metrics.jsonl"))
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["status"] == "finished"
    assert prov["summary"]["stopped_without_signal"] == 3 and prov["summary"]["steps_without_signal"] == 3


def test_preflight_refuses_a_replay_the_canned_backend_cannot_run(mrbench_here, tmp_path):
    out = tmp_path / "refused"
    res = mrbench_here("run", "--task", "example-echo", "--algo", "mrtpo", "--backend", "example-canned",
                       "--output.dir", str(out), cwd=tmp_path)
    assert res.returncode == 2
    assert "cannot run the leave_one_out replay" in res.stderr
    assert not out.exists()  # refused before any record was opened


def test_local_backend_replays_exactly_the_varying_pairs_of_the_example_task(mrbench_here, tmp_path):
    out = tmp_path / "local"
    res = mrbench_here("run", "--task", "example-echo", "--algo", "mrtpo+example-clip", "--model", "tiny-random",
                       "--output.dir", str(out), "--schedule.steps", "1", "--sampling.prompts_per_step", "1",
                       "--sampling.group_size", "4", "--sampling.max_new_tokens", "12", "--schedule.eval_limit", "2",
                       "--schedule.eval_max_new_tokens", "8", "--algo.warmup_steps", "0",
                       "--task.options.max_chars", "6", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads((out / "provenance.json").read_text())["status"] == "finished"
    (row,) = rows(out / "metrics.jsonl")
    samples = rows(out / "samples.jsonl")  # the whole group of four (log_samples defaults to 4)
    assert len(samples) == 4 and row["reward_pairs"] == 8
    varying = [name for name in ("echo", "brief") if len({s["rewards"][name] for s in samples}) > 1]
    assert row["replay_pairs"] == 4 * len(varying)  # MRTPO replays only rewards that vary within the group
    assert "example-echo-bench" in json.loads((out / "eval.json").read_text())["benchmarks"]


def test_eval_scores_a_predictions_file_with_the_plugin_evaluator(mrbench_here, tmp_path):
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"id": "test-0", "response": "Lantern!"}) + "\n"
                     + json.dumps({"id": "test-1", "response": "a stone"}) + "\n")
    res = mrbench_here("eval", "example-echo-bench", "--predictions", str(preds), "--out", str(tmp_path / "ev"),
                       cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    summary = json.loads((tmp_path / "ev" / "summary.json").read_text())
    assert summary["accuracy"] == 0.5 and summary["cases"] == 2 and summary["predictions_format"] == "jsonl"


FILE_MARK = re.compile(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", re.DOTALL)


def test_guides_quote_the_example_files_as_they_are():
    quoted = {}
    for guide in GUIDES:
        for path, body in FILE_MARK.findall(guide.read_text()):
            assert body == (ROOT / path).read_text(), f"{guide.name} quotes {path} out of date"
            quoted[path] = guide.name
    package = {str(p.relative_to(ROOT)) for p in (EXAMPLES / "mrbench_plugin_example").glob("[!_]*.py")}
    assert GUIDES and package <= set(quoted), sorted(package - set(quoted))
