"""metric-learn's learners, fitted in a child process with the Python of metric-learn's own
environment (``_harness.METRIC_LEARN_PYTHON``; metric-learn 0.7 does not run with scikit-learn
>= 1.8: see ``_harness.py`` to create it), for ``bench_pair_learners.py``."""

import tempfile
from pathlib import Path

from _harness import METRIC_LEARN_PYTHON, ChildFailed, run_in_child, timed


def fit(learner, data, params):
    """In metric-learn's environment: ``metric_learn.<learner>(random_state=0, **params)``
    fitted on ``X``, ``y`` of the ``.npz`` file ``data``; its components, the seconds of the fit
    alone, its iterations and whether it converged (-1 and False where it does not say)."""
    import metric_learn
    import numpy as np

    arrays = np.load(data)
    model = getattr(metric_learn, learner)(random_state=0, **params)
    _, seconds = timed(model.fit, arrays["X"], arrays["y"])
    return {
        "components": model.components_,
        "seconds": seconds,
        "n_iter": int(getattr(model, "n_iter_", -1)),
        "converged": bool(getattr(model, "converged_", False)),
    }


def fit_metric_learn(learner, X, y, params=None, timeout=None):
    """:func:`fit` of ``metric_learn.<learner>`` on ``(X, y)``: ``components`` (an ndarray),
    ``seconds``, ``n_iter``, ``converged``. Raises :class:`ChildFailed` where the environment is
    absent, or the fit fails or runs past ``timeout`` seconds (its ``reason`` says which)."""
    import numpy as np

    if not METRIC_LEARN_PYTHON.exists():
        raise ChildFailed("metric-learn environment absent")
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder) / "data.npz"
        np.savez(data, X=X, y=y)
        arguments = {"learner": learner, "data": str(data), "params": params or {}}
        fitted = run_in_child(
            __file__, "fit", arguments, python=METRIC_LEARN_PYTHON, source=None, timeout=timeout
        )
    return {**fitted, "components": np.array(fitted["components"])}
