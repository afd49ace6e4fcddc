"""Shared docstrings (``skrank.utils._docstrings``): entries and sections filled into functions
and classes."""

import pytest

from skrank.utils._docstrings import fill_docs, fill_shared_docs

_ENTRIES = {
    "x": ("x", "int", "The x."),
    "sections": {
        "Parameters": [("x", "int", "The x."), ("y", "str", "The y.")],
        "Returns": [("z", "float", "")],
    },
}


def test_fill_docs_renders_entries_and_whole_sections_with_the_signature_defaults():
    @fill_docs(_ENTRIES)
    def f(x, y="a"):
        """Summary.

        {sections}
        """

    assert f.__doc__ == (
        "Summary.\n\n        Parameters\n        ----------\n        x : int\n            The x."
        '\n        y : str, default="a"\n            The y.\n\n        Returns\n        -------'
        "\n        z : float\n        "
    )


def test_fill_shared_docs_fills_class_methods_and_checks_the_signature():
    @fill_shared_docs({"x": ("int", "The x.")}, methods=_ENTRIES)
    class C:
        """C.

        Parameters
        ----------
        {shared_parameters}
        """

        def __init__(self, x=3):
            self.x = x

        @classmethod
        def make(cls, x=1):
            """Make.

            {x}
            """

    assert C.__doc__.endswith("    x : int, default=3\n        The x.\n        ")
    assert (
        C.make.__doc__
        == "Make.\n\n            x : int, default=1\n                The x.\n            "
    )
    with pytest.raises(TypeError, match=r"D.__init__ lacks the shared parameters \['x'\]"):

        @fill_shared_docs({"x": ("int", "The x.")})
        class D:
            """{shared_parameters}"""

    with pytest.raises(KeyError, match="unknown"):

        @fill_docs(_ENTRIES)
        def g():
            """G.

            {unknown}
            """
