"""Fit metric-learn's MMC_Supervised in its own environment (driven by bench_mmc.py).

metric-learn 0.7 does not run with scikit-learn >= 1.8, so the benchmark calls this script with the
Python of a separate virtual environment (scikit-learn < 1.6, metric-learn, numpy, scipy)::

    python _metric_learn_mmc.py INPUT.npz OUTPUT.npz '{"n_constraints": 200}'

INPUT holds ``X`` and ``y``; OUTPUT receives ``components``, ``seconds``, ``n_iter`` and
``converged``. Only the fit is timed.
"""

import json
import sys
import time

import numpy as np
from metric_learn import MMC_Supervised


def main(input_path, output_path, params):
    data = np.load(input_path)
    model = MMC_Supervised(random_state=0, **json.loads(params))
    start = time.perf_counter()
    model.fit(data["X"], data["y"])
    seconds = time.perf_counter() - start
    np.savez(
        output_path,
        components=model.components_,
        seconds=seconds,
        n_iter=getattr(model, "n_iter_", -1),
        converged=bool(getattr(model, "converged_", False)),
    )


if __name__ == "__main__":
    main(*sys.argv[1:4])
