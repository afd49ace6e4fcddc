"""
=====================================================
Learning a metric from same / different pairs only
=====================================================

Many users hold no class labels, only judgements on pairs: duplicate records confirmed by a
reviewer, two signatures marked same or different. Xing et al.'s MMC is defined on exactly
that side information, a set of similar pairs and a set of dissimilar pairs, and so is the
pointwise ROC criterion of Vogel, Bellet & Clémençon. :class:`skrank.MMC` and
:class:`skrank.PointwiseROCSimilarity` take such pairs directly: ``fit(pairs, y)`` with ``y`` 1
for a similar pair and -1 (or 0, or False) for a dissimilar one, the pairs given as the row
indices of their items in a table (``items=``) or as an (n_pairs, 2, n_features) array.

Here a reviewer has judged pairs of handwritten digits (sklearn's digits, PCA to 20
dimensions) within batches of images; the learners never see the digits' classes. The pairs
that share images form connected groups, so the cross-validation splits pairs by those groups
(:func:`skrank.similarity.pair_groups` with :class:`~sklearn.model_selection.GroupKFold`): no
image is on both sides of a split. The figure shows the ROC curves of the pairs of held-out
images (a second set of batches, never seen in training).
"""

# %%
# Pairs judged within batches of images
# -------------------------------------
import os

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.metrics import RocCurveDisplay
from sklearn.model_selection import GridSearchCV, GroupKFold
from sklearn.preprocessing import StandardScaler

from skrank import MMC, PointwiseROCSimilarity
from skrank.similarity import pair_groups

quick = os.environ.get("SKRANK_EXAMPLE_QUICK") == "1"
rng = np.random.RandomState(0)
images, digits = load_digits(return_X_y=True)
order = rng.permutation(images.shape[0])
images, digits = images[order], digits[order]
test_images = images.shape[0] // 3  # the last third: held out, paired among themselves
scaler = StandardScaler().fit(images[test_images:])
items = PCA(n_components=20, random_state=0).fit(scaler.transform(images[test_images:]))
items = items.transform(scaler.transform(images))


def judged_pairs(first_image, n_images, n_batches, pairs_per_batch):
    """Pairs within batches of consecutive images, half of them judged similar."""
    pairs, labels = [], []
    for batch in np.array_split(np.arange(first_image, first_image + n_images), n_batches):
        same = digits[batch][:, None] == digits[batch][None, :]
        for wanted in (True, False):
            candidates = np.argwhere(np.triu(same == wanted, k=1))
            chosen = candidates[rng.choice(len(candidates), pairs_per_batch // 2, replace=False)]
            pairs.append(batch[chosen])
            labels.append(np.full(len(chosen), 1 if wanted else -1))
    return np.concatenate(pairs), np.concatenate(labels)


per_batch = 100 if quick else 300
train_pairs, train_labels = judged_pairs(test_images, images.shape[0] - test_images, 6, per_batch)
test_pairs, test_labels = judged_pairs(0, test_images, 3, per_batch)
groups = pair_groups(train_pairs)
print(f"{len(train_pairs)} training pairs in {groups.max() + 1} groups of shared images")
print(f"{len(test_pairs)} held-out pairs of {test_images} other images")

# %%
# MMC on the pairs, its settings chosen by group-aware cross-validation
# ---------------------------------------------------------------------
# ``score(pairs, y)`` of MMC is the ROC AUC of its negated pair distances, so a grid search
# over pairs selects by held-out pairs. The grid holds the defaults (a trace penalty
# ``scatter_ridge=1`` and a rank control ``min_rank=0.5`` that pull the metric toward the
# Euclidean one) and the paper's criterion (``1e-8, None``).
search = GridSearchCV(
    MMC(items=items),
    {"scatter_ridge": [1e-8, 1.0], "min_rank": [None, 0.5]},
    cv=GroupKFold(n_splits=3),
).fit(train_pairs, train_labels, groups=groups)
print("selected:", search.best_params_, f"validation ROC AUC {search.best_score_:.3f}")
mmc = search.best_estimator_

# %%
# The pointwise ROC similarity on the same pairs
# ----------------------------------------------
# ``alpha="auto"`` holds out a fifth of the pairs to choose the level with the best TPR at
# ``threshold_fpr``; ``threshold_`` is calibrated on the training dissimilar pairs, so
# ``predict`` returns the labels ``fit`` saw (here -1 and 1).
roc = PointwiseROCSimilarity(items=items, threshold_fpr=0.05, random_state=0)
roc.fit(train_pairs, train_labels)
predicted = roc.predict(test_pairs)
print(
    f"PointwiseROCSimilarity: held-out TPR {np.mean(predicted[test_labels == 1] == 1):.3f}, "
    f"FPR {np.mean(predicted[test_labels == -1] == 1):.3f} at its calibrated threshold"
)

# %%
# ROC curves of the held-out pairs
# --------------------------------
euclidean = -np.linalg.norm(items[test_pairs[:, 0]] - items[test_pairs[:, 1]], axis=1)
fig, ax = plt.subplots(figsize=(6, 5))
curves = {
    "Euclidean distance": euclidean,
    f"MMC {search.best_params_}": mmc.decision_function(test_pairs),
    "PointwiseROCSimilarity": roc.decision_function(test_pairs),
}
for name, scores in curves.items():
    RocCurveDisplay.from_predictions(test_labels, scores, pos_label=1, name=name, ax=ax)
ax.axvline(roc.threshold_fpr, color="grey", linestyle=":", label="threshold_fpr")
ax.set_title("Held-out pairs of unseen images")
ax.legend(loc="lower right", fontsize="small")
plt.show()
