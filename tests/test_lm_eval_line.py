"""The README's ``lm_eval`` line runs as written in the ``--dev`` venv, on a record's exported model,
on the local data folder (no hub): lm-eval's own IFEval task read from ``data/ifeval/`` through
``evals/lm_eval_tasks``. Its scores equal ``mrbench eval ifeval``'s on the responses lm-eval generated.

The line runs in a folder laid out like the repository root (``evals/`` and ``data/`` linked) with
two substitutions to keep it small: ``--limit 8`` becomes ``--limit 2`` and ``max_gen_toks=128``
becomes ``max_gen_toks=8``. Skips without lm-eval (``scripts/setup.sh --dev``) or without
``MRBENCH_DATA_DIR``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

from harness import cli

ROOT = Path(__file__).resolve().parent.parent
DATA = os.environ.get("MRBENCH_DATA_DIR")

pytestmark = [pytest.mark.skipif(importlib.util.find_spec("lm_eval") is None,
                                 reason="lm-eval is not installed (scripts/setup.sh --dev)"),
              pytest.mark.skipif(not DATA, reason="MRBENCH_DATA_DIR is not set: IFEval data unavailable"),
              pytest.mark.usefixtures("one_torch_thread")]


def readme_lm_eval_line() -> list[str]:
    lines = [line.strip() for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("lm_eval ")]
    assert len(lines) == 1, lines
    return shlex.split(lines[0])


def test_the_readme_line_names_local_data_and_the_repository_task():
    argv = readme_lm_eval_line()
    assert argv[argv.index("--tasks") + 1] == "ifeval_local"
    assert (ROOT / argv[argv.index("--include_path") + 1] / "ifeval_local.yaml").is_file()


@pytest.mark.timeout(900)  # lm_eval's own subprocess may take up to 600 s
def test_the_readme_lm_eval_line_runs_on_an_exported_model_and_scores_as_mrbench_does(tmp_path):
    args = ["run", "--model", "tiny-random", "--schedule.steps", "1", "--output.root", str(tmp_path / "results"),
            "--sampling.prompts_per_step", "1", "--sampling.group_size", "2", "--sampling.max_new_tokens", "8",
            "--schedule.eval_limit", "1", "--schedule.eval_max_new_tokens", "4"]
    assert cli.main(args) == 0
    record = tmp_path / "results" / "ifollow" / "mrtpo" / "tiny-random" / "seed0"
    here = tmp_path / "clone"
    here.mkdir()
    (here / "evals").symlink_to(ROOT / "evals")
    (here / "data").symlink_to(Path(DATA).resolve())
    argv = [a.replace("RECORD", str(record)) for a in readme_lm_eval_line()]
    argv[argv.index("--limit") + 1] = "2"
    argv = [re.sub(r"max_gen_toks=\d+", "max_gen_toks=8", a) for a in argv]
    script = Path(sys.executable).with_name("lm_eval")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "lm_eval"]
    command += argv[1:] + ["--output_path", str(tmp_path / "lm"), "--log_samples"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1")
    proc = subprocess.run(command, cwd=here, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ifeval_local" in proc.stdout and "inst_level_strict_acc" in proc.stdout

    results = json.loads(next((tmp_path / "lm").rglob("results_*.json")).read_text())["results"]["ifeval_local"]
    samples = [json.loads(line) for line in next((tmp_path / "lm").rglob("samples_ifeval_local_*.jsonl")).open()]
    assert len(samples) == 2

    from evals.ifollow import IFEvalEvaluator

    evaluator = IFEvalEvaluator()
    keys = {str(s["doc"]["key"]) for s in samples}
    cases = [c for c in evaluator.cases(DATA) if c.id in keys]
    responses = {str(s["doc"]["key"]): s["filtered_resps"][0] for s in samples}
    ours = evaluator.score(cases, responses).summary
    for name in ("prompt_level_strict_acc", "inst_level_strict_acc", "prompt_level_loose_acc",
                 "inst_level_loose_acc"):
        assert results[f"{name},none"] == pytest.approx(ours[name]), name
