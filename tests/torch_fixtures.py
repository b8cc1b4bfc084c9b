"""Fixtures for tests that use torch (imported by those tests only, so that the conftest and the
torch-free subset never import torch)::

    from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)
    pytestmark = pytest.mark.usefixtures("one_torch_thread")
"""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="module")
def one_torch_thread():
    """One intra-op thread for a module's tiny models: far faster than several on a shared, busy CPU.
    Use with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
