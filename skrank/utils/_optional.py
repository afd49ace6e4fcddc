"""How an error names the command that installs an optional dependency."""


def install_hint(packages, extra):
    """The install command for an optional dependency, for an ImportError's message.

    skrank is installed from a checkout of its repository, not from a package index, so the
    message names the packages themselves and, as the alternative, the checkout's extra.

    Parameters
    ----------
    packages : str
        The pip requirements of the dependency, as typed after ``pip install``.
    extra : str
        The extra of ``pyproject.toml`` that installs them.

    Returns
    -------
    hint : str
        E.g. ``pip install matplotlib (or, in a skrank checkout, pip install ".[plot]")``.

    Examples
    --------
    >>> from skrank.utils._optional import install_hint
    >>> install_hint("matplotlib", "plot")
    'pip install matplotlib (or, in a skrank checkout, pip install ".[plot]")'
    """
    return f'pip install {packages} (or, in a skrank checkout, pip install ".[{extra}]")'
