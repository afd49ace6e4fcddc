"""Descriptions (``DESCR``) of the shipped data sets; the figures were measured on the files."""

MNIST = """\
.. _mnist_dataset:

MNIST handwritten digits (test set)
-----------------------------------

**Data Set Characteristics:**

:Number of Instances: 10,000 (the MNIST test set, files ``t10k-*-idx*-ubyte``)
:Number of Attributes: 784 = 28 x 28 pixels
:Attribute Information: grey levels stored as float32 in [0, 1] (the original 0..255 / 255;
    0 is background, 1 is ink)
:Classes: 10 digits, 0-9, with 980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009 images
:Missing Attribute Values: None

The MNIST database of handwritten digits was built from NIST Special Databases 1 and 3; the
digits were size-normalised and centred in a 28 x 28 image. skrank ships only the 10,000 test
images (gzip-compressed IDX files, unchanged), which suffice for its retrieval and similarity
examples; ``images`` holds the same values as ``data``, shaped (n, 28, 28).

.. rubric:: References

- Y. LeCun, L. Bottou, Y. Bengio and P. Haffner, "Gradient-based learning applied to document
  recognition", Proceedings of the IEEE, 86(11):2278-2324, 1998.
"""

BIBTEX = """\
.. _bibtex_dataset:

Bibtex multi-label text data (Mulan)
------------------------------------

**Data Set Characteristics:**

:Number of Instances: 7,395 (train 4,880, test 2,515: the split distributed by Mulan)
:Number of Attributes: 1,836 binary bag-of-words features
:Number of Labels: 159 tags (``TAG_*``); 2.40 labels per instance on average (1 to 28)
:Sparsity: 68.7 non-zero features per instance
:Missing Attribute Values: None

BibTeX entries of the social bookmarking system BibSonomy, with the tags users gave them, as
used in the ECML/PKDD 2008 Discovery Challenge and distributed by the Mulan multi-label library
(files ``bibtex-train.arff``, ``bibtex-test.arff``, ``bibtex.xml``). ``data`` is a CSR matrix of
float64 (values 0/1), ``target`` a CSR label-indicator matrix of int64; ``target_names`` are the
label names of the Mulan XML header, which are the last 159 attributes of the ARFF files.

.. rubric:: References

- I. Katakis, G. Tsoumakas and I. Vlahavas, "Multilabel Text Classification for Automated Tag
  Suggestion", Proceedings of the ECML/PKDD 2008 Discovery Challenge, Antwerp, Belgium, 2008.
"""

COREL5K = """\
.. _corel5k_dataset:

Corel5k multi-label image data (Mulan)
--------------------------------------

**Data Set Characteristics:**

:Number of Instances: 5,000 (train 4,500, test 500: the split distributed by Mulan)
:Number of Attributes: 499 binary features (``Cluster1`` ... ``Cluster499``)
:Number of Labels: 374 keywords; 3.52 labels per instance on average (1 to 5)
:Sparsity: 8.3 non-zero features per instance
:Missing Attribute Values: None

5,000 Corel images annotated with keywords. Each image was segmented into regions, the regions
were clustered into 499 "blobs" (a visual vocabulary) and a feature says whether a blob occurs in
the image. Files ``Corel5k-train-sparse.arff``, ``Corel5k-test-sparse.arff`` and ``Corel5k.xml``
of the Mulan multi-label library. ``data`` is a CSR matrix of float64 (values 0/1), ``target`` a
CSR label-indicator matrix of int64; ``target_names`` are the label names of the Mulan XML
header, which are the last 374 attributes of the ARFF files. Every label occurs in the union, but
3 labels never occur in the training set and 111 never occur in the test set.

.. rubric:: References

- P. Duygulu, K. Barnard, N. de Freitas and D. Forsyth, "Object recognition as machine
  translation: Learning a lexicon for a fixed image vocabulary", 7th European Conference on
  Computer Vision (ECCV), pp. IV:97-112, 2002. https://doi.org/10.1007/3-540-47979-1_7
"""
