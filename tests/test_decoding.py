import numpy as np
import pytest

from spacy_piqn.decoding import decode_queries, decode_windows, filter_candidates, owned_spans, tagged_boundaries
from spacy_piqn.windows import Window


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
    # Scores: class probability × √(P_left · P_right) = p × 0.9.
    assert scores.tolist() == pytest.approx([0.8 * 0.9, 0.7 * 0.9])


def test_thresholds():
    p_class = np.array([[0.3, 0.7], [0.1, 0.9]])
    p_left = np.stack([one_hot(3, 0, hi=0.95), one_hot(3, 1, hi=0.4)])
    p_right = np.stack([one_hot(3, 0, hi=0.95), one_hot(3, 2, hi=0.95)])
    starts, *_ = decode_queries(p_class, p_left, p_right, class_threshold=0.8)
    assert starts.tolist() == [1]
    starts, *_ = decode_queries(p_class, p_left, p_right, boundary_threshold=0.5)
    assert starts.tolist() == [0]


def sean_penn():
    """One window of four words, words 1-2 a name of type 1: the right pointer prefers word 1
    (0.6) over word 2 (0.3); the tagger marks both with type 1, words 0 and 3 not, and type 2 nowhere."""
    p_left = one_hot(4, 1, hi=0.9, lo=0.03)[None, :]
    p_right = np.array([[0.05, 0.6, 0.3, 0.05]])
    tags = np.array([[0.01, 0.02], [0.95, 0.02], [0.9, 0.02], [0.01, 0.02]])
    return p_left, p_right, tags


def test_tagger_extends_a_span_its_right_pointer_cut_short():
    p_left, p_right, tags = sean_penn()
    type_1, type_2 = np.array([[0.1, 0.9, 0.0]]), np.array([[0.1, 0.0, 0.9]])

    def decode(p_class, **kwargs):
        return decode_windows(p_class[None], p_left[None], p_right[None], [Window(0, 0, 4)], 1, **kwargs)[0]

    starts, ends, _, scores = decode(type_1, tags=tags[None], tag_weight=1.0)
    assert (starts.tolist(), ends.tolist()) == ([1], [3])
    # The score is the chosen boundaries' own: 0.9 × √(0.9 · 0.3).
    assert scores.tolist() == pytest.approx([0.9 * np.sqrt(0.9 * 0.3)])
    # Weight 0, or no tags: the pointers' argmax.
    for kwargs in ({"tags": tags[None], "tag_weight": 0.0}, {}):
        starts, ends, *_ = decode(type_1, **kwargs)
        assert (starts.tolist(), ends.tolist()) == ([1], [2])
    # The tagger is read for the query's own type.
    starts, ends, *_ = decode(type_2, tags=tags[None], tag_weight=1.0)
    assert (starts.tolist(), ends.tolist()) == ([1], [2])


def test_tagged_boundaries_of_a_batch_ignore_padding():
    """Windows decoded together give what each gives alone: a shorter window's padded words
    (pointer probability 0, any tag) are never chosen and never count as outside its span."""
    p_left, p_right, tags = sean_penn()
    # Window 1: the same name at its last two words (3 real words), then one padded word that
    # a tagger's padding row marks with type 1.
    short_left = np.array([[0.03, 0.9, 0.03, 0.0]])
    short_right = np.array([[0.05, 0.55, 0.4, 0.0]])
    short_tags = np.array([[0.01, 0.02], [0.95, 0.02], [0.9, 0.02], [0.99, 0.02]])
    p_class = np.array([[[0.1, 0.9, 0.0]]] * 2)
    batch = decode_windows(
        p_class,
        np.stack([p_left, short_left]),
        np.stack([p_right, short_right]),
        [Window(0, 0, 4), Window(1, 0, 3)],
        2,
        tags=np.stack([tags, short_tags]),
        tag_weight=1.0,
    )
    alone = decode_windows(
        p_class[1:],
        short_left[None, :, :3],
        short_right[None, :, :3],
        [Window(0, 0, 3)],
        1,
        tags=short_tags[None, :3],
        tag_weight=1.0,
    )
    assert [part.tolist() for part in batch[1]] == [part.tolist() for part in alone[0]]
    assert (batch[1][0].tolist(), batch[1][1].tolist()) == ([1], [3])


def test_tagged_boundaries_keep_the_argmax_when_every_pair_is_impossible():
    """A query whose every candidate pair is impossible (probability 0, or left > right) keeps its
    pointers' argmax, and a reversed argmax is dropped as without a tagger."""
    p_left = np.array([[[0.0, 1.0]]])
    p_right = np.array([[[1.0, 0.0]]])
    tags = np.full((1, 2, 1), 0.5)
    lefts, rights = tagged_boundaries(p_left, p_right, tags, np.array([[1]]), 1.0)
    assert (lefts.tolist(), rights.tolist()) == ([[1]], [[0]])
    found = decode_windows(np.array([[[0.0, 1.0]]]), p_left, p_right, [Window(0, 0, 2)], 1, tags=tags, tag_weight=1.0)
    assert found[0][0].tolist() == []


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


def test_same_type_nests_sharing_a_boundary_are_merged_when_types_are_given():
    # (0,4) A is best; (0,3) A shares its start: a near miss. (0,2) B shares it with another
    # type, (1,2) A nests without sharing a boundary with an A: both kept, as is everything
    # without types.
    starts = np.array([0, 0, 0, 1])
    ends = np.array([4, 3, 2, 2])
    types = np.array([1, 1, 2, 1])
    scores = np.array([0.9, 0.8, 0.7, 0.6])
    kept = filter_candidates(starts, ends, scores, "nested", types)
    assert kept.tolist() == [0, 2, 3]
    assert filter_candidates(starts, ends, scores, "nested").tolist() == [0, 1, 2, 3]
    # The better span wins whichever is outside.
    kept = filter_candidates(starts, ends, np.array([0.5, 0.8, 0.7, 0.6]), "nested", types)
    assert kept.tolist() == [1, 2, 3]


def test_a_same_type_nest_scoring_close_to_its_parent_survives_the_merge():
    # (0,3) A shares the start of the better (0,4) A: kept when it scores at least keep_ratio
    # times as high (a real nest), dropped below that (a near miss).
    starts, ends, types = np.array([0, 0]), np.array([4, 3]), np.array([1, 1])
    scores = np.array([0.9, 0.8])
    assert filter_candidates(starts, ends, scores, "nested", types, keep_ratio=0.85).tolist() == [0, 1]
    assert filter_candidates(starts, ends, scores, "nested", types, keep_ratio=0.9).tolist() == [0]
    assert filter_candidates(starts, ends, scores, "nested", types, keep_ratio=2.0).tolist() == [0]


def test_decode_windows_puts_candidates_in_doc_coordinates():
    p_class = np.array([[[0.1, 0.9]], [[0.2, 0.8]], [[0.9, 0.1]]])
    p_left = np.array([[one_hot(3, 1)], [one_hot(3, 0)], [one_hot(3, 0)]])
    p_right = np.array([[one_hot(3, 2)], [one_hot(3, 1)], [one_hot(3, 0)]])
    windows = [Window(0, 0, 3), Window(1, 5, 7), Window(1, 7, 8)]
    found = decode_windows(p_class, p_left, p_right, windows, n_docs=3)
    assert [f[0].tolist() for f in found] == [[1], [5], []]
    assert [f[1].tolist() for f in found] == [[3], [7], []]


def test_overlapping_windows_take_each_span_from_the_window_that_owns_its_centre():
    # One sentence cut into [0, 16) and [8, 24): the overlap [8, 16) splits at 12.
    windows = [Window(0, 0, 16), Window(0, 8, 24)]
    starts, ends = np.array([9, 2, 0, 9]), np.array([16, 6, 16, 13])
    # From the first window: [9, 16) is the second's (centre 12.5), which has it whole; [2, 6) and
    # [0, 16) are the first's; [9, 13) (centre 11) is the first's too.
    assert owned_spans(starts, ends, windows, 0).tolist() == [False, True, True, True]
    # From the second: [8, 12) is a piece of an entity cut at the window's left edge (centre 10, the
    # first window's); [10, 24) and [12, 14) are its own.
    starts, ends = np.array([8, 10, 12]), np.array([12, 24, 14])
    assert owned_spans(starts, ends, windows, 1).tolist() == [False, True, True]


def test_a_span_is_kept_where_its_owner_cannot_see_it_whole():
    windows = [Window(0, 0, 20), Window(0, 5, 8)]
    # Centre 15.5 lies in the second window's core (from 12.5 on), which does not hold [12, 19).
    assert owned_spans(np.array([12]), np.array([19]), windows, 0).tolist() == [True]


def test_sentence_windows_own_all_their_tokens():
    windows = [Window(0, 0, 5), Window(0, 5, 9), Window(0, 9, 12)]
    for k, w in enumerate(windows):
        starts = np.array([w.start, w.start, w.end - 1])
        ends = np.array([w.end, w.start + 1, w.end])
        assert owned_spans(starts, ends, windows, k).all()


def test_decode_windows_drops_the_cut_piece_and_keeps_the_whole_entity():
    # A doc of 24 tokens, windows [0, 16) and [8, 24); the entity is [6, 11). The first window sees
    # it whole, the second only from its left edge ([8, 11)); a second entity [18, 20) is the
    # second window's alone.
    p_class = np.array([[[0.1, 0.9], [0.9, 0.1]], [[0.2, 0.8], [0.1, 0.9]]])
    p_left = np.zeros((2, 2, 16))
    p_right = np.zeros((2, 2, 16))
    p_left[0, 0, 6], p_right[0, 0, 10] = 1.0, 1.0
    p_left[0, 1, 0], p_right[0, 1, 0] = 1.0, 1.0
    p_left[1, 0, 0], p_right[1, 0, 2] = 1.0, 1.0
    p_left[1, 1, 10], p_right[1, 1, 11] = 1.0, 1.0
    windows = [Window(0, 0, 16), Window(0, 8, 24)]
    starts, ends, types, scores = decode_windows(p_class, p_left, p_right, windows, n_docs=1)[0]
    assert sorted(zip(starts.tolist(), ends.tolist())) == [(6, 11), (18, 20)]
