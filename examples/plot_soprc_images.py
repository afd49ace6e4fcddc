"""
===================================================
Image retrieval: a convolutional network with SOPRC
===================================================

:class:`skrank.SOPRCEmbedder` takes images as they are: ``X`` of shape ``(n, height, width)``
(one channel) or ``(n, channels, height, width)``, ``uint8`` grey levels read as values / 255.
With ``module=None`` it then trains a small convolutional network
(:class:`skrank.nn.ConvNet`) instead of the MLP it trains on feature rows, and an
``augmentation`` callable, here kornia's random affine maps, transforms every training batch.

This example compares, on classes never seen in training, the MLP on the flattened pixels with
the convolutional network, without and with augmentation, and shows what each retrieves. It is
small, so that it runs in about a minute on one CPU thread: 1,541 training images, a small
network, 15 epochs. ``benchmarks/bench_soprc_images.py`` measures the same comparison on 6,000
training images, over seeds, against tuned peers.
"""

# %%
# Data: pairs of MNIST digits, 50 classes to train, 50 others to retrieve
# ------------------------------------------------------------------------
# :func:`skrank.datasets.make_composite_digits` puts two MNIST digits side by side (class
# ``37`` shows a 3 then a 7), with long-tailed class sizes. Its ``"train"`` and ``"test"``
# halves share no class and no MNIST image. The images become ``uint8`` arrays of shape
# ``(n, 28, 56)``.
import os

import kornia.augmentation as K
import matplotlib.pyplot as plt
import numpy as np
import torch

from skrank import SOPRCEmbedder
from skrank.datasets import make_composite_digits
from skrank.metrics import mean_auprc_score, recall_at_k_score

quick = os.environ.get("SKRANK_EXAMPLE_QUICK") == "1"
torch.set_num_threads(1)
composite = dict(n_samples=1_000 if quick else 3_000, n_digits=2, n_classes=100, random_state=0)
train = make_composite_digits(**composite, subset="train")
test = make_composite_digits(**composite, subset="test")
images_train = np.rint(train.images * 255).astype(np.uint8)
images_test = np.rint(test.images * 255).astype(np.uint8)
print(f"train: {images_train.shape}, {len(train.target_names)} classes; "
      f"test: {images_test.shape}, {len(test.target_names)} other classes")  # fmt: skip

# %%
# Three embedders
# ---------------
# The same estimator and seed; only the inputs, the network and the augmentation change. The
# settings are those of a short budget on a small set: batches of 16 classes
# (``batch_size=64``) give four times the steps per epoch of the default 224, and the
# convolutional network has half the default channels (``hidden_layer_sizes=(16, 32, 64)``;
# ``"auto"`` is ``(32, 64, 128)``).
#
# ``augmentation`` receives each training batch as a float tensor ``(batch, 1, 28, 56)`` and
# returns one of the same shape: here a random affine map (rotation up to 5 degrees, shift up
# to 1.4 pixels each way, scale within 5%), each image's drawn independently, the strength
# that ``benchmarks/bench_soprc_images.py`` chose on held-out training classes. It is never
# applied by ``transform`` or ``score``.
budget = dict(batch_size=64, max_epochs=3 if quick else 15, random_state=0)
convolutional = dict(hidden_layer_sizes=(16, 32, 64), **budget)
affine = K.AugmentationSequential(
    K.RandomAffine(degrees=5.0, translate=(0.025, 0.05), scale=(0.95, 1.05), p=1.0)
)
embedders = {
    "MLP, flattened pixels": SOPRCEmbedder(**budget),
    "CNN, images": SOPRCEmbedder(**convolutional),
    "CNN, images, random affine maps": SOPRCEmbedder(augmentation=affine, **convolutional),
}


def flattened(images):
    """The MLP's input: the same pixels as rows of floats in [0, 1]."""
    return images.reshape(images.shape[0], -1) / np.float32(255)


embeddings = {}
for name, embedder in embedders.items():
    inputs = flattened if name.startswith("MLP") else np.asarray  # CNN: the uint8 images
    embedder.fit(inputs(images_train), train.target)
    embeddings[name] = embedder.transform(inputs(images_test))
    mean_auprc = mean_auprc_score(embeddings[name], test.target, metric="cosine")
    recall = recall_at_k_score(embeddings[name], test.target, k=1, metric="cosine")
    print(f"{name:31s} test mean AUPRC {mean_auprc:.3f}, Recall@1 {recall:.3f}")

# %%
# What each retrieves
# -------------------
# Three test images as queries (left) and, for each embedder, the five images nearest to each
# by cosine similarity among the other test images (the embeddings are unit rows: the dot
# product), framed green when of the query's class, red when not.


def top_5(embedding, queries):
    similarity = embedding[queries] @ embedding.T
    similarity[np.arange(len(queries)), queries] = -np.inf  # not the query itself
    return np.argsort(-similarity, axis=1)[:, :5]


def show(ax, image, colour=None):
    ax.imshow(image, cmap="gray_r")
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_visible(colour is not None)
        if colour is not None:
            spine.set_color(colour)
            spine.set_linewidth(3)


queries = np.random.default_rng(0).choice(len(test.target), size=3, replace=False)
fig, axes = plt.subplots(len(embedders) * len(queries), 6, figsize=(9, 9.5))
for block, (name, embedding) in enumerate(embeddings.items()):
    for row, (query, found) in enumerate(zip(queries, top_5(embedding, queries), strict=True)):
        line = axes[block * len(queries) + row]
        show(line[0], images_test[query])
        line[0].set_ylabel(f"class {test.target[query]:02d}", fontsize=8)
        for ax, item in zip(line[1:], found, strict=True):
            right = test.target[item] == test.target[query]
            show(ax, images_test[item], "tab:green" if right else "tab:red")
    axes[block * len(queries), 3].set_title(name, fontsize=10)
fig.suptitle("Queries (left) and their top-5 retrieved images: green right, red wrong")
fig.tight_layout()
plt.show()

# %%
# Choosing the network and the augmentation
# -----------------------------------------
# ``hidden_layer_sizes`` sets the channels of the convolution blocks of the default network;
# a pretrained backbone, with a projection head and ``freeze_batchnorm=True``, is passed as
# ``module`` (:ref:`soprc-images`). Choose the augmentation's strength, like the learning
# rate, on a validation split of the *training* classes: a shift that moves a digit out of
# view, or a flip that turns a digit into another for the network, makes the task harder
# rather than the embedding better, and a short budget may not repay even a mild one.
