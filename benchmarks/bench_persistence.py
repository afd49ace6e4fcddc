"""Saved estimators: size and load time of each estimator's skops file, beside its pickle.

The estimators, the safe skops load (``get_untrusted_types``, then ``loads(trusted=...)``) against
``pickle.loads`` (protocol 5, as joblib) and the checks of the loaded models: see
benchmarks/README.md, section "Saved estimators". Loads alternate, each keeping its fastest of
``--repeats``; the torch estimators train for ``--epochs`` epochs.

Usage::

    python benchmarks/bench_persistence.py
    python benchmarks/bench_persistence.py --repeats 3 --epochs 1   # quicker
    python benchmarks/bench_persistence.py --quick   # 1 epoch, 2 loads, 10,000 labels
"""

import pickle
import warnings

import numpy as np
import skops.io as sio
from _harness import alternate, parser, results_name, timed
from _results import Results
from sklearn.datasets import load_digits

from skrank import MMC, PointwiseROCSimilarity, SNMClassifier, SOPRCEmbedder
from skrank.datasets import load_bibtex, load_mnist, make_large_output_classification

COLUMNS = ["estimator", "fitted on", "skops (MiB)", "pickle (MiB)", "size ratio",
           "skops load (ms)", "pickle load (ms)", "load ratio", "types to trust"]  # fmt: skip


def fitted_estimators(epochs, n_labels=100_000):
    """(name, data, fitted estimator, outputs) of each estimator measured."""
    mnist_X, mnist_y = load_mnist(return_X_y=True)
    bibtex_X, bibtex_Y = load_bibtex(subset="train", return_X_y=True)
    large_X, large_y = make_large_output_classification(
        n_samples=20_000, n_features=64, n_labels=n_labels, random_state=0
    )
    digits_X, digits_y = load_digits(return_X_y=True)
    torch_params = dict(max_epochs=epochs, device="cpu", random_state=0)
    cases = [
        ("SOPRCEmbedder", "MNIST test (10,000 x 784)", SOPRCEmbedder(**torch_params), mnist_X,
         mnist_y),
        ("SNMClassifier", "Bibtex train (4,880 x 1,836, 159 labels)",
         SNMClassifier(**torch_params), bibtex_X, bibtex_Y),
        ("SNMClassifier", f"{n_labels:,} labels (20,000 x 64)",
         SNMClassifier(embedding_dim=64, **torch_params), large_X, large_y),
        ("PointwiseROCSimilarity", "MNIST test (10,000 x 784)", PointwiseROCSimilarity(),
         mnist_X, mnist_y),
        ("MMC", "digits (1,797 x 64)", MMC(random_state=0), digits_X / 16, digits_y),
    ]  # fmt: skip
    for name, data, estimator, X, y in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, seconds = timed(estimator.fit, X, y)
        print(f"{name} on {data}: fitted in {seconds:.1f} s", flush=True)
        yield name, data, estimator, X[:500]


def outputs(estimator, X):
    if isinstance(estimator, SNMClassifier):
        return estimator.predict_top_k(X, 5, return_scores=True)
    if isinstance(estimator, PointwiseROCSimilarity):
        return (estimator.pairwise_similarity(X),)
    return (estimator.transform(X),)


def saved(estimator):
    return {"skops": sio.dumps(estimator), "pickle": pickle.dumps(estimator, protocol=5)}


def load_skops(data):
    return sio.loads(data, trusted=sio.get_untrusted_types(data=data))


def fastest_loads(files, repeats):
    """The fastest of ``repeats`` loads of each file, alternated; and the last loaded objects."""
    loaders = {"skops": load_skops, "pickle": pickle.loads}
    loads = alternate(lambda kind: timed(loaders[kind], files[kind]), files, repeats)
    seconds = {kind: min(taken for _, taken in runs) for kind, runs in loads.items()}
    return seconds, {kind: runs[-1][0] for kind, runs in loads.items()}


def main(argv=None):
    arguments = parser(__doc__, "quick", "tag", "repeats", repeats=7)
    arguments.add_argument(
        "--epochs", type=int, default=2, help="training epochs of torch estimators"
    )
    args = arguments.parse_args(argv)
    if args.quick:
        args.repeats, args.epochs = 2, 1

    results = Results(results_name("bench_persistence", args), packages=("skops",))
    rows = []
    n_labels = 10_000 if args.quick else 100_000
    for name, data, estimator, X in fitted_estimators(args.epochs, n_labels):
        files, save_seconds = timed(saved, estimator)
        untrusted = sio.get_untrusted_types(data=files["skops"])
        if not all(type_name.startswith("skrank.") for type_name in untrusted):
            raise AssertionError(f"{name}: skops lists types other than skrank's: {untrusted}")
        seconds, loaded = fastest_loads(files, args.repeats)
        expected = outputs(estimator, X)
        for kind, restored in loaded.items():
            for before, after in zip(expected, outputs(restored, X), strict=True):
                np.testing.assert_array_equal(before, after, err_msg=f"{name} via {kind}")
        skops_size, pickle_size = len(files["skops"]), len(files["pickle"])
        rows.append(
            [name, data, round(skops_size / 2**20, 3), round(pickle_size / 2**20, 3),
             round(skops_size / pickle_size, 2), round(1000 * seconds["skops"], 3),
             round(1000 * seconds["pickle"], 3), round(seconds["skops"] / seconds["pickle"], 1),
             len(untrusted)]
        )  # fmt: skip
        print(rows[-1], f"(both saves: {save_seconds:.2f} s)", flush=True)
    results.add_table(
        "Saved estimators: skops file against pickle (bytes in memory)",
        COLUMNS,
        rows,
        notes=(
            "skops load: get_untrusted_types then loads with those types trusted (all skrank's "
            "own, checked); pickle: pickle.loads of protocol 5 (as joblib). Fastest of "
            f"{args.repeats} alternated loads each; predictions after loading checked bitwise "
            f"equal to the fitted estimator's. Torch estimators trained {args.epochs} epochs."
        ),
    )
    results.save()


if __name__ == "__main__":
    main()
