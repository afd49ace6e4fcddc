"""Where the extreme-classification benchmark finds the Python of the PECOS environment.

libpecos (PECOS XR-Linear) pins numpy < 2 and scipy < 1.14, so it runs in a virtual environment
of its own, driven as a subprocess (``benchmarks/_pecos_xmc.py``). Create it beside the
benchmarks::

    python3 -m venv benchmarks/.venv-pecos
    benchmarks/.venv-pecos/bin/pip install "numpy<2" "scipy<1.14" scikit-learn
    benchmarks/.venv-pecos/bin/pip install libpecos --no-deps

or point ``SKRANK_PECOS_PYTHON`` at the Python of an environment elsewhere.
"""

import os
from pathlib import Path

PECOS_PYTHON = Path(
    os.environ.get(
        "SKRANK_PECOS_PYTHON", Path(__file__).with_name(".venv-pecos") / "bin" / "python"
    )
)
