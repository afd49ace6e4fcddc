"""The pooling of ``skrank.nn.ConvNet`` and the image defaults of ``SOPRCEmbedder``.

On the validation split of ``bench_soprc_images.py`` (held-out training classes of the 2- and
3-digit composite images, class- and image-disjoint; 5 epochs, no augmentation, one thread),
``SOPRCEmbedder`` with a ConvNet of the default channels whose last map is pooled as
:data:`POOLINGS` says (globally, a cell a digit, or the default grid, with or without batch norm
of the pooled features); and, with the default network, the feature rows' ``prior_warmup=0.25``
and ``weight_averaging=0.4`` against ``"auto"`` (None for images), seeds 0 and 1.

Usage::

    PYTHONPATH=benchmarks python benchmarks/studies/convnet_pooling.py   # ~25 min on one thread

Writes ``benchmarks/studies/results/convnet_pooling.json``.
"""

import torch
from _harness import parser, results_name
from _results import STUDIES_DIR, Results
from bench_soprc_images import composite_images, evaluate

from skrank import SOPRCEmbedder
from skrank.nn import ConvNet

POOLINGS = {  # name: (the grid of the last map, batch norm of the pooled features)
    "global": ("global", False),
    "global + batch norm": ("global", True),
    "a cell a digit + batch norm": ("row", True),
    "grid_cells=2 + batch norm (default)": ("grid", True),
    "grid_cells=2": ("grid", False),
}
IMAGE_DEFAULTS = {  # name: the estimator's parameters, with the default network
    '"auto" (None for images)': {},
    "prior_warmup=0.25, weight_averaging=0.4": dict(prior_warmup=0.25, weight_averaging=0.4),
}


def pooled(item_shape, pooling, batch_norm, seed):
    """A ConvNet of the default channels with the last map pooled as ``pooling`` says."""
    torch.manual_seed(seed)
    module = ConvNet(item_shape)
    features = module.features[:-3]  # the convolution blocks, without the pooling
    with torch.no_grad():
        channels, height, width = features.eval()(torch.zeros(1, *item_shape)).shape[1:]
    features.train()
    grid = {"global": (1, 1), "row": (1, round(width / height)), "grid": module.grid}[pooling]
    tail = [torch.nn.AdaptiveAvgPool2d(grid), torch.nn.Flatten()]
    if batch_norm:
        tail.append(torch.nn.BatchNorm1d(channels * grid[0] * grid[1]))
    module.features = torch.nn.Sequential(*features, *tail)
    module.projection = torch.nn.Linear(
        channels * grid[0] * grid[1], module.projection.out_features
    )
    return module


def fit_and_score(data, seed, **params):
    X, y, X_val, y_val = data
    model = SOPRCEmbedder(max_epochs=5, device="cpu", random_state=seed, **params).fit(X, y)
    return evaluate(model.transform(X_val), y_val)


def main(argv=None):
    args = parser(__doc__, "tag").parse_args(argv)
    results = Results(results_name("convnet_pooling", args.tag))
    rows = []
    for digits in (2, 3):
        data = composite_images(digits)["validation"]
        for name, (pooling, batch_norm) in POOLINGS.items():
            module = pooled(data[0].shape[1:], pooling, batch_norm, seed=0)
            rows.append([f"{digits} digits", name, 0, *fit_and_score(data, 0, module=module)])
            print(rows[-1], flush=True)
    data = composite_images(2)["validation"]
    for seed in (0, 1):
        for name, params in IMAGE_DEFAULTS.items():
            rows.append(["2 digits", name, seed, *fit_and_score(data, seed, **params)])
            print(rows[-1], flush=True)
    results.add_table(
        "ConvNet pooling and the image defaults: validation (held-out training classes)",
        ["data", "setting", "seed", "validation mAUPRC", "validation R@1"],
        [[*row[:3], round(row[3], 4), round(row[4], 4)] for row in rows],
        notes="SOPRCEmbedder, 5 epochs, no augmentation, one thread; bench_soprc_images.py's "
        "validation split (2 digits: 30 classes fitted, 20 held out; 3 digits: 90 and 60).",
        show=True,
    )
    results.save(STUDIES_DIR)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
