"""Where the benchmarks find the Python of the metric-learn environment.

metric-learn 0.7 does not run with scikit-learn >= 1.8, so its rows run in a separate virtual
environment, driven as a subprocess. Create it beside the benchmarks::

    python3 -m venv benchmarks/.venv-ml
    benchmarks/.venv-ml/bin/pip install "scikit-learn<1.6" metric-learn numpy scipy

or point ``SKRANK_METRIC_LEARN_PYTHON`` at the Python of an environment elsewhere. The
benchmarks' ``--metric-learn-python`` option overrides both.
"""

import os
from pathlib import Path

METRIC_LEARN_PYTHON = Path(
    os.environ.get(
        "SKRANK_METRIC_LEARN_PYTHON", Path(__file__).with_name(".venv-ml") / "bin" / "python"
    )
)
