"""Sphinx configuration of the skrank documentation.

Build (warnings are errors, as in CI)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

Examples of the gallery are executed by default; ``-D plot_gallery=0`` (or the environment
variable ``SKRANK_DOCS_PLOT_GALLERY=0``) renders them without running them, for a fast build.
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the docs document the checkout they live in

import skrank  # noqa: E402

project = "skrank"
author = "skrank developers"
copyright = "2026, skrank developers"
version = release = skrank.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax 3 copied into _static/mathjax: math renders offline
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "sg_execution_times.rst"]
default_role = "literal"

# API reference: one page per public object, generated from the docstrings.
autosummary_generate = True
autodoc_default_options = {"members": True}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True

# MathJax is served from the built site itself (sphinx-mathjax-offline sets ``mathjax_path`` to
# ``_static/mathjax/tex-chtml.js``): no page needs the internet. .ci/check_docs_browser.py checks
# it in headless Chromium with the network off.
html_theme = "pydata_sphinx_theme"
html_title = f"skrank {version}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_static_path = []

# Gallery: examples/plot_*.py, executed unless plot_gallery is off.
os.environ.setdefault("MPLBACKEND", "Agg")
plot_gallery = "False" if os.environ.get("SKRANK_DOCS_PLOT_GALLERY") == "0" else "True"
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "doc_module": ("skrank",),
    "backreferences_dir": "generated/backreferences",
    "download_all_examples": True,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "matplotlib_animations": False,
    # The computation-times page loads jQuery and DataTables from a CDN: not written, so that no
    # page needs the internet (.ci/check_docs_browser.py).
    "write_computation_times": False,
    # A cell's last expression is shown only when it has an HTML repr (estimators, tables), not
    # as "<... object at 0x...>".
    "capture_repr": ("_repr_html_",),
}


def _skip_metadata_request_methods(app, what, name, obj, skip, options):
    """Hide scikit-learn's generated ``set_{method}_request`` methods (metadata routing)."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_metadata_request_methods)
