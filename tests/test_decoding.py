import numpy as np
import pytest

from spacy_piqn.decoding import decode_queries, filter_candidates


def one_hot(n, i, hi=0.9, lo=0.01):
    row = np.full(n, lo)
    row[i] = hi
    return row


def test_decode_keeps_typed_valid_queries():
    p_class = np.array([[0.1, 0.8, 0.1], [0.9, 0.05, 0.05], [0.2, 0.1, 0.7], [0.1, 0.1, 0.8]])
    p_left = np.stack([one_hot(5, 1), one_hot(5, 0), one_hot(5, 2), one_hot(5, 4)])
    p_right = np.stack([one_hot(5, 2), one_hot(5, 0), one_hot(5, 2), one_hot(5, 3)])
    starts, ends, types, scores = decode_queries(p_class, p_left, p_right)
    # Query 1 is None; query 3 has left > right and is dropped, not repaired.
    assert starts.tolist() == [1, 2] and ends.tolist() == [3, 3] and types.tolist() == [1, 2]
    assert scores.tolist() == pytest.approx([0.8, 0.7])


def test_thresholds():
    p_class = np.array([[0.3, 0.7], [0.1, 0.9]])
    p_left = np.stack([one_hot(3, 0, hi=0.95), one_hot(3, 1, hi=0.4)])
    p_right = np.stack([one_hot(3, 0, hi=0.95), one_hot(3, 2, hi=0.95)])
    starts, *_ = decode_queries(p_class, p_left, p_right, class_threshold=0.8)
    assert starts.tolist() == [1]
    starts, *_ = decode_queries(p_class, p_left, p_right, boundary_threshold=0.5)
    assert starts.tolist() == [0]


def test_nested_filter_drops_crossing_and_duplicate_spans():
    starts = np.array([0, 1, 3, 0, 5, 1])
    ends = np.array([4, 2, 6, 4, 7, 3])
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    kept = filter_candidates(starts, ends, scores, "nested")
    # (3,6) crosses (0,4) (they share token 3); the second (0,4) duplicates the first.
    assert sorted(zip(starts[kept].tolist(), ends[kept].tolist())) == [(0, 4), (1, 2), (1, 3), (5, 7)]


def test_flat_filter_keeps_no_overlap():
    starts, ends = np.array([0, 1, 4]), np.array([3, 2, 6])
    kept = filter_candidates(starts, ends, np.array([0.5, 0.9, 0.7]), "flat")
    assert sorted(kept.tolist()) == [1, 2]


def test_unknown_mode():
    with pytest.raises(ValueError, match="decoding"):
        filter_candidates(np.zeros(0, int), np.zeros(0, int), np.zeros(0), "overlapping")
