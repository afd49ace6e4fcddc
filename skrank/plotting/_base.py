"""What the displays share: the optional matplotlib import and the axes to draw on."""

from ..metrics._scorer import final_estimator


def import_pyplot():
    """``matplotlib.pyplot``, or an ImportError saying how to install it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError(
            'skrank.plotting needs matplotlib: pip install "skrank[plot]" (or pip install '
            "matplotlib)."
        ) from error
    return plt


def axes_to_draw_on(ax):
    """``(figure, ax)``: a new figure and axes when ``ax`` is None, else ``ax`` and its figure."""
    plt = import_pyplot()
    if ax is None:
        return plt.subplots()
    return ax.figure, ax


def estimator_name(estimator):
    """Default legend name of an estimator: its class, or a pipeline's final step's class."""
    return type(final_estimator(estimator)).__name__


def curve_label(name, summary_name, summary):
    """Legend label ``"name (summary_name = summary)"``, without the parts that are None."""
    if summary is None:
        return name
    text = f"{summary_name} = {summary:.3f}"
    return f"{name} ({text})" if name else text
