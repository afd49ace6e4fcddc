"""Progress bars: hidden ones choose no display, shown ones are tqdm.auto's."""

import io

import tqdm.auto
import tqdm.std

from skrank.utils._progress import progress_bar


def test_a_hidden_bar_is_tqdms_plain_bar_and_still_iterates():
    stream = io.StringIO()
    bar = progress_bar(range(3), disable=True, desc="hidden", file=stream)
    assert type(bar) is tqdm.std.tqdm
    assert list(bar) == [0, 1, 2]
    assert stream.getvalue() == ""


def test_a_shown_bar_is_tqdm_autos_and_draws_its_progress():
    stream = io.StringIO()
    bar = progress_bar(total=2, desc="fitting", file=stream)
    assert isinstance(bar, tqdm.auto.tqdm)
    with bar:
        bar.update(2)
    assert "fitting" in stream.getvalue() and "2/2" in stream.getvalue()
