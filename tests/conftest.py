"""Shared test configuration.

Hypothesis profiles: under ``CI=true`` property tests run derandomized (the same examples on
every run, no example database), so a green CI run means the same thing each time; elsewhere
they keep exploring with fresh random examples. Both print the failing example and its
reproduction blob. ``HYPOTHESIS_PROFILE`` picks a profile by name.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
_ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if _ci else "dev"))
