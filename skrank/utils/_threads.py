"""torch's intra-op thread count, set for a block of code and restored afterwards."""

from contextlib import contextmanager


@contextmanager
def torch_threads(n_threads):
    """Run the block with ``n_threads`` torch intra-op threads; yields the previous count.

    torch's count is process-wide: callers that may run concurrently must take turns (see
    :mod:`skrank.metrics._torch_retrieval`), or one could restore another's lowered value.
    """
    import torch  # noqa: PLC0415 (skrank.utils stays importable without loading torch)

    previous = torch.get_num_threads()
    torch.set_num_threads(n_threads)
    try:
        yield previous
    finally:
        torch.set_num_threads(previous)
