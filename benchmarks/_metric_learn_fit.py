"""Fit one of metric-learn's supervised learners in its own environment (for bench_pair_learners).

metric-learn 0.7 does not run with scikit-learn >= 1.8, so the benchmark calls this script with the
Python of a separate virtual environment (scikit-learn < 1.6, metric-learn, numpy, scipy)::

    python _metric_learn_fit.py LEARNER INPUT.npz OUTPUT.npz '{"max_iter": 100}'

LEARNER is a class name of ``metric_learn`` (``ITML_Supervised``, ``LMNN``, ...); INPUT holds
``X`` and ``y``; OUTPUT receives ``components`` and ``seconds`` (the fit alone is timed).
"""

import json
import sys
import time

import metric_learn
import numpy as np


def main(learner, input_path, output_path, params):
    data = np.load(input_path)
    model = getattr(metric_learn, learner)(random_state=0, **json.loads(params))
    start = time.perf_counter()
    model.fit(data["X"], data["y"])
    seconds = time.perf_counter() - start
    np.savez(output_path, components=model.components_, seconds=seconds)


if __name__ == "__main__":
    main(*sys.argv[1:5])
