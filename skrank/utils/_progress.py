"""Progress bars whose display is chosen when one is shown, not when skrank is imported.

``tqdm.auto`` picks a widget in a Jupyter kernel and text elsewhere when it is first imported,
and in a kernel without ipywidgets that import prints tqdm's "IProgress not found" warning:
imported by skrank's modules, it would print on ``import skrank``. :func:`progress_bar` imports
it only for a bar that is shown.
"""


def progress_bar(iterable=None, *, disable=False, **options):
    """A tqdm bar: ``tqdm.auto.tqdm(iterable, **options)``, or a hidden one with ``disable``.

    Parameters
    ----------
    iterable : iterable or None, default=None
        What the bar iterates over; None for a bar updated by hand (``total`` in ``options``).
    disable : bool, default=False
        Show nothing (tqdm's plain bar, disabled: no display is chosen).
    **options
        tqdm's other keyword arguments (``total``, ``desc``, ``unit``, ``leave``, ...).

    Returns
    -------
    bar : tqdm.tqdm
        In a Jupyter kernel with ipywidgets, a widget; elsewhere, text on stderr.
    """
    if disable:
        from tqdm.std import tqdm  # noqa: PLC0415 (no display to choose)

        return tqdm(iterable, disable=True, **options)
    from tqdm.auto import tqdm  # noqa: PLC0415 (chooses the display: imported when shown)

    return tqdm(iterable, **options)
