"""
======================================================
Pointwise ROC optimisation: alpha picks the ROC region
======================================================

Reproduces Section 5.1 of Vogel, Bellet & Clémençon (2018). Three classes live on spherical caps
of the unit sphere of R^3 (two of them overlap). :class:`~skrank.PointwiseROCSimilarity` learns a
bilinear similarity ``S_A(x, x') = (1 + x^T A x') / 2`` that maximises the mean similarity of
same-class pairs subject to a bound ``alpha`` on the mean similarity of different-class pairs.

Solving the problem at several levels ``alpha`` optimises different regions of the ROC curve
of the pairs: a small ``alpha`` draws on the negative pairs and wins at low false-positive rates;
a large ``alpha`` wins at high ones. Note that ``alpha`` bounds the *mean* negative similarity,
not the false-positive rate; the achieved ROC point is only known a posteriori, which is why the
estimator calibrates a decision threshold on the training negative pairs (``threshold_fpr``).
"""

# %%
# Data: the paper's three spherical caps
# --------------------------------------
import os

import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import roc_curve

from skrank import PointwiseROCSimilarity
from skrank.datasets import make_sphere_classes
from skrank.metrics import pair_scores_and_labels, pairwise_roc_score
from skrank.similarity import feasible_alpha_range

quick = os.environ.get("SKRANK_EXAMPLE_QUICK") == "1"
n_train, n_test = (300, 400) if quick else (3000, 1500)
X, y, centers = make_sphere_classes(n_train, return_centers=True, random_state=0)
X_test, y_test = make_sphere_classes(n_test, random_state=1)

fig = plt.figure(figsize=(5, 5))
ax = fig.add_subplot(projection="3d")
for label in range(3):
    members = X[y == label]
    ax.scatter(*members.T, s=4, alpha=0.5, label=f"class {label}")
ax.scatter(*centers.T, marker="*", s=250, c="k", label="centroids")
ax.set_box_aspect((1, 1, 1))
ax.view_init(elev=20, azim=20)
ax.set_title("Training data on the unit sphere")
ax.legend(loc="upper left")

# %%
# Which levels are feasible?
# --------------------------
# The smallest mean negative similarity any ``A`` with ``||A||_F <= 1`` reaches is
# ``(1 - ||N||_F) / 2``: below it the problem is infeasible. Above
# ``(1 + <N, P> / ||P||_F) / 2`` the constraint is inactive and the solution stops changing.
unconstrained = PointwiseROCSimilarity(alpha=1.0, identity_weight=0.0).fit(X, y)
lowest, _ = feasible_alpha_range(unconstrained.N_)
inactive_from = (
    1 + np.vdot(unconstrained.N_, unconstrained.P_) / np.linalg.norm(unconstrained.P_)
) / 2
print(
    f"feasible alpha >= {lowest:.3f}; the constraint is inactive from alpha = {inactive_from:.3f}"
)

# %%
# ROC curves of held-out pairs, one per alpha
# -------------------------------------------
# Each model also calibrates a threshold at a false-positive rate of 5% on its training negative
# pairs; the dot marks the held-out (FPR, TPR) of :meth:`predict` at that threshold. The right
# panel shows the low-FPR end on a log scale: smaller ``alpha`` improves it, at the price of the
# high-FPR end.
alphas = [0.31, 0.35, 0.4, 0.5]
fig, (ax, ax_log) = plt.subplots(1, 2, figsize=(11, 4.8))
scores, same_class = pair_scores_and_labels(X_test @ X_test.T, y_test)
fpr, tpr, _ = roc_curve(same_class, scores)
for axis in (ax, ax_log):
    axis.plot(fpr, tpr, "k--", lw=1, label="cosine (identity A)")
print("alpha   TPR@FPR=1%  TPR@FPR=10%  TPR@FPR=50%  negative risk  active constraints")
for alpha in alphas:
    model = PointwiseROCSimilarity(alpha=alpha, identity_weight=0.0, threshold_fpr=0.05).fit(X, y)
    similarities = model.pairwise_similarity(X_test)
    scores, same_class = pair_scores_and_labels(similarities, y_test)
    fpr, tpr, _ = roc_curve(same_class, scores)
    predicted = scores > model.threshold_
    operating_point = predicted[~same_class].mean(), predicted[same_class].mean()
    for axis in (ax, ax_log):
        (line,) = axis.plot(fpr, tpr, label=f"alpha = {alpha}")
        axis.plot(*operating_point, "o", color=line.get_color())
    at = pairwise_roc_score(similarities, y_test, [0.01, 0.1, 0.5])
    print(
        f"{alpha:<7} {at[0]:<11.3f} {at[1]:<12.3f} {at[2]:<12.3f} {model.negative_risk_:<14.3f} "
        f"{', '.join(model.active_constraints_)}"
    )
for axis in (ax, ax_log):
    axis.set_xlabel("false-positive rate (different-class pairs)")
    axis.set_ylabel("true-positive rate (same-class pairs)")
ax.set_title("Held-out pair ROC curves (dots: threshold at 5% training FPR)")
ax.legend(loc="lower right")
ax_log.set_xscale("log")
ax_log.set_xlim(1e-3, 0.3)
ax_log.set_ylim(0, 0.7)
ax_log.set_title("The low-FPR end")
fig.tight_layout()
plt.show()
