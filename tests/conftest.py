"""Shared test configuration.

Hypothesis profiles: under ``CI=true`` property tests run derandomized (the same examples on
every run, no example database), so a green CI run means the same thing each time; elsewhere
they keep exploring with fresh random examples. Both print the failing example and its
reproduction blob. ``HYPOTHESIS_PROFILE`` picks a profile by name.
"""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
_ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if _ci else "dev"))


@pytest.fixture(scope="module")
def one_torch_thread():
    """One intra-op thread for a module's tiny models: far faster than several on a shared, busy CPU.
    Use with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
