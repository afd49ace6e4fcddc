"""Training from a memory-mapped X: anonymous memory under a cap, and the cost of reading batches.

Data: composite digits of three MNIST digits (2,352 float32 features, 1,000 long-tailed
classes), drawn in chunks with successive seeds and written to an ``.npy`` file of four times
the memory cap (``--cap``, default 256 MiB: a 1 GiB file of 114,000 rows); the class of an item
is the number its digits spell, the same in every chunk.

``--part memory``: a child process opens the file with ``np.load(..., mmap_mode="r")``, fits
``SOPRCEmbedder`` (``validation_fraction=0.1``, scored every epoch) and transforms every row,
while a thread samples its anonymous resident memory (``RssAnon``: not the file's pages, which
are the page cache's) every millisecond (``PeakMemory(anonymous=True)``); reported: the peak
above what the process held before the fit (after a warm-up fit of 1,000 rows, so that torch's
first allocations are not counted), and the seconds of each phase; against the same fit of the
array loaded into memory. ``working_memory`` = 16 MiB keeps the validation score's chunks small.

``--part images``: the same from a file of the digits as ``uint8`` images ``(n, 1, 28, 84)``
(4 x 128 MiB: 228,261 images), memory-mapped only, fitted with a one-block
:class:`~skrank.nn.ConvNet` of 8 channels in batches of 64 (an epoch over the file takes
minutes on one thread), ``validation_fraction=0.05``; the bytes of the output of ``transform``
(float32, 64 columns) are taken off its peak.

``--part reads``: the rows of a batch (200 random rows) read from the file as the engine reads
them (``RowSubset.take``: in the batch's order), read in increasing row order and put back in
the batch's order, and gathered from the array in memory as a torch tensor (a fit of an
in-memory X); from the page cache and after the file's pages were dropped from it
(``posix_fadvise(DONTNEED)`` before each pass). Median milliseconds per batch over a pass, and
the ratio to the in-memory gather.

Usage::

    python benchmarks/bench_memmap.py [--part memory|reads] [--cap 256]
    python benchmarks/bench_memmap.py --part images --cap 128 --epochs 1
    python benchmarks/bench_memmap.py --quick [--part ...]  # cap 64 MiB (images: 16), a smoke run
"""

import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from _harness import PeakMemory, parser, results_name, run_in_child, timed
from _results import Results

from skrank.datasets import make_composite_digits
from skrank.nn import RowSubset

N_DIGITS, BATCH, CHUNK = 3, 200, 10_000
PARAMS = {
    "memory": dict(hidden_layer_sizes=(512,), n_components=128, validation_fraction=0.1,
                   batch_size=200),
    "images": dict(hidden_layer_sizes=(8,), n_components=64, validation_fraction=0.05,
                   batch_size=64),
}  # fmt: skip


def fit_and_transform(path, mode, epochs, part="memory"):
    """``--part memory``, in a child process: fit and transform from the file ``path`` opened
    memory-mapped or loaded (``mode``); the anonymous memory and the seconds of each phase."""
    import sklearn

    from skrank import SOPRCEmbedder

    torch.set_num_threads(1)
    sklearn.set_config(working_memory=16)
    y = np.load(path.replace(".npy", "_y.npy"))
    params = dict(**PARAMS[part], max_epochs=epochs, device="cpu", random_state=0)
    warm_up = np.array(np.load(path, mmap_mode="r")[:1000])
    SOPRCEmbedder(**{**params, "max_epochs": 1}).fit(warm_up, y[:1000]).transform(warm_up)
    del warm_up
    seconds, mmap_mode = {}, "r" if mode == "memory-mapped" else None
    with PeakMemory(anonymous=True) as memory:
        X, seconds["load"] = timed(np.load, path, mmap_mode=mmap_mode)
        model, seconds["fit"] = timed(SOPRCEmbedder(**params).fit, X, y)
        after_fit = memory.increase_so_far()
        embedding, seconds["transform"] = timed(model.transform, X)
    return dict(start=memory.start, fit=after_fit, all=memory.increase, seconds=seconds,
                validation_score=model.history_[-1]["validation_score"],
                rows=int(embedding.shape[0]), output=embedding.nbytes)  # fmt: skip


def write_data(path, n_bytes, images=False):
    """Composite digits of ``n_bytes`` in ``path`` (and their labels): float32 features, or
    ``uint8`` images ``(n, 1, 28, 28 N_DIGITS)``."""
    n_features = 28 * 28 * N_DIGITS
    n_rows = n_bytes // ((1 if images else 4) * n_features)
    dtype, shape = (np.uint8, (1, 28, 28 * N_DIGITS)) if images else (np.float32, (n_features,))
    X = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(n_rows, *shape))
    labels = []
    for seed, start in enumerate(range(0, n_rows, CHUNK)):
        rows = min(CHUNK, n_rows - start)
        data, target = make_composite_digits(
            rows, n_digits=N_DIGITS, tail_exponent=1.0, min_class_size=2, subset="all",
            return_X_y=True, random_state=seed,
        )  # fmt: skip
        X[start : start + rows] = (np.rint(data * 255) if images else data).reshape(rows, *shape)
        labels.append(target)
    X.flush()
    del X
    np.save(str(path).replace(".npy", "_y.npy"), np.concatenate(labels))
    return n_rows, n_features


def memory(path, cap, epochs, results, part):
    rows = []
    for mode in ("memory-mapped",) if part == "images" else ("memory-mapped", "in memory"):
        found = run_in_child(
            __file__,
            "fit_and_transform",
            {"path": str(path), "mode": mode, "epochs": epochs, "part": part},
        )
        if part == "images":  # the transform's output is not counted
            found["all"] = max(found["fit"], found["all"] - found["output"])
        print(f"  {mode}: {found}", flush=True)
        peaks = [f"{found['fit'] / 2**20:.0f}", f"{found['all'] / 2**20:.0f}"]
        seconds = [f"{found['seconds'][phase]:.1f}" for phase in ("load", "fit", "transform")]
        rows.append([mode, *peaks, f"{found['all'] / cap:.2f}", *seconds,
                     f"{found['validation_score']:.4f}"])  # fmt: skip
        results.add_figure(mode, found)
    kind = "uint8 images" if part == "images" else "X"
    settings = ", ".join(f"{name}={value}" for name, value in PARAMS[part].items())
    less = " less its output" if part == "images" else ""
    results.add_table(
        f"Anonymous memory of a fit and transform of {kind} = 4 x the cap of {cap / 2**20:.0f} MiB",
        ["X", "peak RssAnon growth, fit (MiB)", f"peak, fit + transform{less} (MiB)",
         "peak / cap", "s load", "s fit", "s transform", "validation mAUPRC"],
        rows,
        notes=f"SOPRCEmbedder({settings}, max_epochs={epochs}), one torch thread, "
        "working_memory=16 MiB; RssAnon sampled every millisecond, growth over the process's "
        "memory after a warm-up fit.",
    )  # fmt: skip


def _drop_cached_pages(path):
    with open(path, "rb") as file:
        os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def _sorted_read(X, rows):
    """``X[rows]`` read in increasing row order (forward through the file)."""
    order = np.argsort(rows)
    taken = np.empty((rows.shape[0], X.shape[1]), dtype=X.dtype)
    taken[order] = X[rows[order]]
    return taken


def reads(path, n_batches, results):
    in_memory = np.load(path)
    tensor = torch.from_numpy(in_memory)
    n_rows = in_memory.shape[0]
    rng = np.random.default_rng(0)
    batches = [rng.choice(n_rows, BATCH, replace=False) for _ in range(n_batches)]
    readers = {
        "in memory, torch gather (a fit of an in-memory X)": lambda X, rows: tensor[
            torch.from_numpy(rows)
        ],
        "memory-mapped, rows in batch order (skrank: RowSubset.take)": lambda X, rows: RowSubset(
            X, rows
        ).take(slice(None)),
        "memory-mapped, rows sorted, then put in batch order": _sorted_read,
    }
    timings = {}
    for cache in ("page cache", "pages dropped"):
        for name, reader in readers.items():
            if cache == "pages dropped" and name.startswith("in memory"):
                continue
            if cache == "pages dropped":
                _drop_cached_pages(path)
            X = np.load(path, mmap_mode="r")
            if cache == "page cache":
                np.asarray(X).sum()  # every page read once
            times = []
            for rows in batches:
                clock = time.perf_counter()
                taken = np.asarray(reader(X, rows))
                times.append(1000 * (time.perf_counter() - clock))
                assert np.array_equal(taken, in_memory[rows])
            del X
            timings[name, cache] = float(np.median(times))
            print(f"  {name}, {cache}: {timings[name, cache]:.2f} ms / batch", flush=True)
    reference = next(iter(timings.values()))
    rows = []
    for (name, cache), ms in timings.items():
        mb_per_second = BATCH * in_memory.shape[1] * 4 / ms / 1000
        rows.append([name, cache, f"{ms:.2f}", f"{mb_per_second:.0f}", f"{ms / reference:.1f}"])
    results.add_table(
        f"Reading a batch of {BATCH} random rows of {in_memory.shape[1]} float32 features",
        ["read", "from", "median ms / batch", "MB/s", "ratio to the in-memory gather"],
        rows,
        notes=f"{n_rows:,} rows ({in_memory.nbytes / 2**30:.2f} GiB) in an .npy file; medians "
        f"over {n_batches} batches; 'pages dropped': the file's pages dropped from the page "
        "cache (posix_fadvise DONTNEED) before the pass, so that its reads go to the disk (or "
        "to the host's cache of a virtual machine).",
    )


def main(argv=None):
    arguments = parser(__doc__, "quick", "tag")
    arguments.add_argument("--part", choices=["memory", "reads", "images"], default="memory")
    arguments.add_argument("--cap", type=int, default=256, help="memory cap (MiB); X is 4x it")
    arguments.add_argument("--epochs", type=int, default=2, help="--part memory: max_epochs")
    arguments.add_argument("--batches", type=int, default=200, help="--part reads: batches")
    args = arguments.parse_args(argv)
    if args.quick:
        args.cap, args.epochs, args.batches = 16 if args.part == "images" else 64, 1, 20
    torch.set_num_threads(1)
    cap = args.cap * 2**20
    results = Results(results_name("bench_memmap", args, args.part))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "X.npy"
        n_rows, n_features = write_data(path, 4 * cap, images=args.part == "images")
        print(f"X: {n_rows:,} rows of {n_features} values in {path}", flush=True)
        if args.part in ("memory", "images"):
            memory(path, cap, args.epochs, results, args.part)
        else:
            reads(path, args.batches, results)
    results.save()


if __name__ == "__main__":
    main()
