"""Shared test configuration.

Hypothesis profiles: under ``CI=true`` property tests run derandomized (the same examples on
every run, no example database), so a green CI run means the same thing each time; elsewhere
they keep exploring with fresh random examples. Both print the failing example and its
reproduction blob. ``HYPOTHESIS_PROFILE`` picks a profile by name.

No torch here: the torch-free subset (``-m torchfree``) runs where torch is not installed. Torch
fixtures live in ``torch_fixtures.py``, imported by the tests that use them.
"""

from __future__ import annotations

import os

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


def pytest_ignore_collect(collection_path, config):
    """Without torch, a test file that does not declare the ``torchfree`` marker is not collected
    (it would fail to import); run the subset with ``-m torchfree``."""
    if _HAS_TORCH or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    return TORCHFREE_MARK not in collection_path.read_text(errors="replace") or None
