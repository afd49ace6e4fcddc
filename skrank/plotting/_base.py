"""What the displays share: the optional matplotlib import, the axes to draw on, the
documentation of their common parameters, and :class:`CurveDisplay`, the base of the displays
that draw one curve on unit axes."""

from ..metrics._scorer import final_estimator
from ..utils._docstrings import fill_docs, fill_shared_docs
from ..utils._optional import install_hint

_AX = "Axes to draw on; None creates a figure and axes."
_PLOT_KWARGS = "Keyword arguments of :meth:`matplotlib.axes.Axes.plot` for the curve."
_HISTORY_KWARGS = (
    "Keyword arguments of :meth:`plot` (``validation_label``) and of "
    ":meth:`matplotlib.axes.Axes.plot`."
)

#: The parameters the displays' methods share, for :func:`skrank.utils._docstrings.fill_docs`.
DISPLAY_PARAMETER_DOCS = {
    "ax": ("ax", "matplotlib Axes", _AX),
    "history_ax": ("ax", "matplotlib Axes or sequence of Axes", "See :meth:`plot`."),
    "plot_name": ("name", "str", "Name of the curve in the legend; None uses ``estimator_name``."),
    "legend_name": ("name", "str", "Legend name."),
    "estimator_name": ("name", "str", "Legend name; None uses the estimator's class name."),
    "run_name": ("name", "str", "Name of the run in the legends."),
    "kwargs": ("**kwargs", "dict", _PLOT_KWARGS),
    "history_kwargs": ("**kwargs", "dict", _HISTORY_KWARGS),
    "recall_levels": (
        "recall_levels",
        "array-like of shape (n_levels,)",
        "Recall levels in [0, 1]; None means 101 levels ``0, 0.01, ..., 1``.",
    ),
    "chunk_size": (
        "chunk_size",
        "int",
        "Queries per chunk; None picks it from scikit-learn's ``working_memory``.",
    ),
}
DISPLAY_PARAMETER_DOCS["plot_parameters"] = [
    DISPLAY_PARAMETER_DOCS[key] for key in ("ax", "plot_name", "kwargs")
]
DISPLAY_PARAMETER_DOCS["curve_parameters"] = [
    DISPLAY_PARAMETER_DOCS[key] for key in ("recall_levels", "chunk_size")
]


#: Constructor parameter and fitted attributes of every :class:`CurveDisplay`
#: (for :func:`skrank.utils._docstrings.fill_shared_docs`).
CURVE_PARAMETER_DOCS = {"estimator_name": ("str", "Name of the curve in the legend.")}
CURVE_ATTRIBUTE_DOCS = {
    "ax_": ("matplotlib.axes.Axes", "Axes with the curve."),
    "figure_": ("matplotlib.figure.Figure", "Figure with the curve."),
}


def import_pyplot():
    """``matplotlib.pyplot``, or an ImportError saying how to install it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError(
            f"skrank.plotting needs matplotlib: {install_hint('matplotlib', 'plot')}."
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


def draw_curve(display, x, y, *, ax, name, summary_name, summary, xlabel, ylabel, **kwargs):
    """Draw the main curve of a display on unit axes; set its ``figure_``, ``ax_``, ``line_``.

    ``name`` None falls back to the display's ``estimator_name``; the legend label is
    :func:`curve_label`. Returns the label (empty when there is nothing to show).
    """
    display.figure_, display.ax_ = axes_to_draw_on(ax)
    name = display.estimator_name if name is None else name
    label = curve_label(name, summary_name, summary)
    (display.line_,) = display.ax_.plot(x, y, label=label, **kwargs)
    display.ax_.set(xlabel=xlabel, ylabel=ylabel, xlim=(-0.01, 1.01), ylim=(-0.01, 1.01))
    return label


class CurveDisplay:
    """Base of the displays that draw one curve on unit axes (scikit-learn's Display API).

    A subclass names the attributes holding the curve's x and y values and its summary (shown
    in the legend), the summary's name, the axis labels and the legend's place, and may mark
    points on the curve in :meth:`_draw_marks`. Its docstring's ``{shared_parameters}`` and
    ``{shared_attributes}`` lines receive the entries every curve display shares.
    """

    _x = _y = _summary = _summary_name = _xlabel = _ylabel = None
    _legend_loc = "lower right"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        fill_shared_docs(CURVE_PARAMETER_DOCS, CURVE_ATTRIBUTE_DOCS)(cls)

    @fill_docs(DISPLAY_PARAMETER_DOCS)
    def plot(self, ax=None, *, name=None, **kwargs):
        """Draw the curve (and its marked points, if the display has any).

        Parameters
        ----------
        {plot_parameters}

        Returns
        -------
        display : display of the same class
            The display itself (``self``), holding ``line_``, ``ax_``, ``figure_`` and the
            markers of its points.
        """
        label = draw_curve(
            self,
            getattr(self, self._x),
            getattr(self, self._y),
            ax=ax,
            name=name,
            summary_name=self._summary_name,
            summary=getattr(self, self._summary),
            xlabel=self._xlabel,
            ylabel=self._ylabel,
            **kwargs,
        )
        if self._draw_marks(self.line_.get_color()) or label:
            self.ax_.legend(loc=self._legend_loc)
        return self

    def _draw_marks(self, color):
        """Mark points on the curve in its ``color``; whether any was drawn (with a label)."""
        return False
