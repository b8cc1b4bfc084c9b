"""A plugin that takes a built-in's name is reported by every command alike (reliability probe 4,
S8): ``mrbench list`` used to fail on it while ``mrbench run --algo grpo`` went on with the
built-in in silence (a first lookup that caught the error hid it from the later ones). The
plugin is a dist-info on PYTHONPATH, as a ``pip install`` leaves it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mrbench_core.registry import Registry, RegistryError

ROOT = Path(__file__).resolve().parents[1]
CLASH = "registers algorithm 'grpo', which is already registered"


def _plugin_site(tmp_path: Path) -> Path:
    dist = tmp_path / "site" / "shadow_grpo-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: shadow-grpo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[mrbench.algorithms]\ngrpo = os:system\n")
    return dist.parent


@pytest.mark.parametrize("args", [["list"], ["run", "--algo", "grpo", "--model", "tiny-random", "--dry-run"],
                                  ["run", "--algo", "mrtpo", "--model", "tiny-random", "--dry-run"]])
def test_list_and_run_say_the_same_about_a_shadowing_plugin(tmp_path, args):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(_plugin_site(tmp_path)), str(ROOT)])}
    done = subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and CLASH in lines[0] and "'os:system'" in lines[0], done.stderr


def test_the_clash_is_raised_on_every_lookup_not_only_the_first(monkeypatch):
    from importlib import metadata

    class EP:
        name, value = "builtin", "os:system"

    monkeypatch.setattr(metadata, "entry_points", lambda group=None: [EP()] if group == "mrbench.things" else [])
    reg = Registry("thing", "mrbench.things")
    reg.add("builtin", 1)
    for lookup in (reg.names, lambda: reg.get("builtin"), lambda: "builtin" in reg):
        with pytest.raises(RegistryError, match="registers thing 'builtin', which is already registered"):
            lookup()
