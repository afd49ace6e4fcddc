"""
=====================================================
A new estimator on the training engine (contrastive)
=====================================================

:class:`skrank.nn.BaseTorchEstimator` is the engine of skrank's torch estimators. Overriding two
of its steps, ``initialize_module`` and ``get_loss``, gives a scikit-learn estimator with
everything the built-in ones have: class-balanced batches drawn on the device, callbacks,
validation scores in ``history_``, early stopping, checkpoints, GPUs, pickling, and the
engine's parameters (``learning_rate``, ``max_epochs``, ``device``, ...) in its signature beside
its own. Here, an embedder trained with the contrastive loss of pairs in a batch.
"""

import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.base import TransformerMixin
from sklearn.model_selection import train_test_split
from torch.nn import functional as F

from skrank.datasets import load_mnist
from skrank.metrics import mean_auprc_score
from skrank.nn import MLP, TORCH_PARAMETER_CONSTRAINTS, BaseTorchEstimator, store_parameters
from skrank.plotting import TrainingHistoryDisplay
from skrank.sampling import ClassBalancedBatchSampler


class ContrastiveEmbedder(TransformerMixin, BaseTorchEstimator):
    _parameter_constraints = dict(TORCH_PARAMETER_CONSTRAINTS)

    engine_defaults = {"batch_size": 128, "max_epochs": 10}  # the engine's other defaults stay

    def __init__(self, margin=0.5, n_components=32, **engine_parameters):
        store_parameters(self, locals())

    def fit(self, X, y):
        X, y = np.asarray(X, dtype=np.float32), np.unique(y, return_inverse=True)[1]
        X_train, y_train, validation = self.split_validation(X, y, stratify=y)
        return self.fit_loop(X_train, y_train, validation)

    def initialize_module(self, n_features):
        return MLP(n_features, (256,), self.n_components)  # L2-normalised outputs

    def get_batch_sampler(self, y, device, random_state):
        return ClassBalancedBatchSampler(y, self.batch_size, 4, random_state=random_state,
                                         device=device)  # fmt: skip

    def get_loss(self, batch, targets):
        embeddings = self.module_(batch.inputs)
        same = targets[batch.indices][:, None] == targets[batch.indices][None, :]
        distance = torch.cdist(embeddings, embeddings)
        pairs = torch.where(same, distance.square(), F.relu(self.margin - distance).square())
        mask = batch.valid[:, None] & batch.valid[None, :]
        return (pairs * mask).sum() / mask.sum()

    def validation_score(self, X_val, y_val):
        return mean_auprc_score(self.transform(X_val), y_val)

    def transform(self, X):
        return self.forward(np.asarray(X, dtype=np.float32), as_numpy=True)


X, y = load_mnist(return_X_y=True)  # pixels already scaled to [0, 1]
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.5, random_state=0)
model = ContrastiveEmbedder(max_epochs=8, validation_fraction=0.2, device="cpu", random_state=0)
model.fit(X_train[:2000], y_train[:2000])
print(f"raw pixels mean AUPRC {mean_auprc_score(X_test, y_test):.3f}, "
      f"contrastive embedding {mean_auprc_score(model.transform(X_test), y_test):.3f}")  # fmt: skip
TrainingHistoryDisplay.from_estimator(model, name="ContrastiveEmbedder")
plt.show()
