"""Gold spans → per-window targets (pure numpy)."""

import numpy as np

from spacy_piqn.targets import window_targets
from spacy_piqn.windows import Window


def test_targets_are_window_relative_and_inclusive():
    per_doc = [np.array([[1, 0, 2], [2, 3, 5], [1, 4, 5]]), np.zeros((0, 3), dtype=np.int64)]
    windows = [Window(0, 0, 3), Window(0, 3, 6), Window(1, 0, 4)]
    targets, report = window_targets(per_doc, windows, n_queries=4)
    assert targets[0].tolist() == [[1, 0, 1]]
    assert targets[1].tolist() == [[2, 0, 1], [1, 1, 1]]
    assert targets[2].shape == (0, 3)
    assert report.n_outside == 0 and report.first_outside is None
    assert report.n_over_capacity == 0 and not report.crowded


def test_spans_no_window_holds_and_spans_beyond_the_queries_are_counted():
    # (2, 4) crosses the two windows; the second window has 3 spans for 2 queries.
    per_doc = [np.array([[1, 2, 4], [1, 4, 5], [2, 4, 6], [1, 5, 6]])]
    windows = [Window(0, 0, 3), Window(0, 3, 6)]
    targets, report = window_targets(per_doc, windows, n_queries=2)
    assert report.n_outside == 1 and report.first_outside == (0, 2, 4)
    assert report.n_over_capacity == 1 and report.crowded == [(windows[1], 3)]
    # Targets keep every span a window holds; the assignment decides which M it can use.
    assert len(targets[1]) == 3
