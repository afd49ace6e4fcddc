"""Shared test fixtures."""

import pytest
import torch


@pytest.fixture
def one_torch_thread():
    """Run a test on one torch thread: tiny models train faster than on a busy thread pool."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
