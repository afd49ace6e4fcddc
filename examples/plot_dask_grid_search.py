"""
=====================================================
Scaling out with dask: out-of-core fits, grid search
=====================================================

Two ways skrank uses a dask cluster (here a local one, started in this process; a real cluster
is used the same way through its :class:`~distributed.Client`):

1. :class:`~skrank.PointwiseROCSimilarity` and :class:`~skrank.MMC` fitted on a
   ``dask.array`` chunked by rows compute their pair statistics block by block on the
   cluster, so the items need not fit in memory; the fit equals the in-memory one.
2. :class:`~sklearn.model_selection.GridSearchCV` over skrank estimators runs its fits on the
   cluster's workers with ``joblib.parallel_backend("dask")``.

Needs the ``dask`` extra: dask and distributed, ``pip install ".[dask]"`` in the skrank
checkout.
"""

# %%
# A local cluster
# ---------------
import os

import dask.array as da
import matplotlib.pyplot as plt
import numpy as np
from distributed import Client
from joblib import parallel_backend
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import make_pipeline

from skrank import MMC, PointwiseROCSimilarity

quick = os.environ.get("SKRANK_EXAMPLE_QUICK") == "1"
# Threads in this process keep the example light; Client() alone starts worker processes.
client = Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None)

X, y = load_digits(return_X_y=True)
X = PCA(n_components=16, random_state=0).fit_transform(X)
if quick:
    X, y = X[:600], y[:600]

# %%
# A fit on a dask array
# ---------------------
# The items are cut into row blocks of uneven sizes (a larger-than-memory array would come from
# ``da.from_zarr``, ``da.from_array`` on a memory-mapped file, ...). Each block's class sums and
# Gram matrix are computed by a task on the cluster and merged; the held-out items of
# ``alpha="auto"``, the item reservoir and the sampled pairs of the threshold read only their
# rows. The result is the in-memory fit, to rounding.
chunked = da.from_array(X, chunks=((X.shape[0] // 3, 1, X.shape[0] - X.shape[0] // 3 - 1), -1))
on_cluster = PointwiseROCSimilarity(random_state=0).fit(chunked, y)
in_memory = PointwiseROCSimilarity(random_state=0).fit(X, y)
print("largest difference of A_:", np.abs(on_cluster.A_ - in_memory.A_).max())
print("thresholds:", on_cluster.threshold_, in_memory.threshold_)

# MMC on dask draws its dissimilar pairs (or K-tuples) as in memory and reads only their rows.
mmc = MMC(negatives="tuples", n_samples=200, random_state=0)
difference = mmc.fit(chunked, y).get_mahalanobis_matrix() - (
    MMC(negatives="tuples", n_samples=200, random_state=0).fit(X, y).get_mahalanobis_matrix()
)
print("MMC, largest difference of the metric:", np.abs(difference).max())

# %%
# A grid search on the cluster
# ----------------------------
# ``joblib.parallel_backend("dask")`` sends each (candidate, fold) fit of the search to the
# cluster; the estimators need no change.
search = GridSearchCV(
    make_pipeline(PCA(random_state=0), PointwiseROCSimilarity(random_state=0)),
    {
        "pca__n_components": [8, 16],
        "pointwiserocsimilarity__identity_weight": [0.0, 1.0, 3.0],
    },
    cv=StratifiedKFold(3, shuffle=True, random_state=0),
    n_jobs=-1,
)
with parallel_backend("dask"):
    search.fit(X, y)
print("best parameters:", search.best_params_)

# %%
# Held-out TPR at 5% FPR of each candidate (the estimator's ``score``).
results = search.cv_results_
for n_components in [8, 16]:
    rows = results["param_pca__n_components"] == n_components
    plt.plot(
        results["param_pointwiserocsimilarity__identity_weight"][rows].astype(float),
        results["mean_test_score"][rows],
        "o-",
        label=f"PCA to {n_components}",
    )
plt.xlabel("identity_weight")
plt.ylabel("TPR at 5% FPR (3-fold CV)")
plt.legend()
plt.title("GridSearchCV on a dask cluster")
plt.show()

client.close()
