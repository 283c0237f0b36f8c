"""spacy-piqn.reduce_max.v1: thinc's max pooling, with a zero vector for a word without subwords."""

import numpy
import pytest
from spacy.util import registry
from thinc.api import reduce_max as thinc_reduce_max
from thinc.types import Ragged

import spacy_piqn

spacy_piqn.register()


def ragged(lengths, width=3, seed=0):
    data = numpy.random.default_rng(seed).normal(size=(sum(lengths), width)).astype("float32")
    return Ragged(data, numpy.asarray(lengths, dtype="int32"))


def test_equals_thincs_max_where_every_word_has_subwords():
    X = ragged([2, 1, 3])
    ours, theirs = registry.layers.get("spacy-piqn.reduce_max.v1")(), thinc_reduce_max()
    Y, backprop = ours(X, is_train=True)
    Y_ref, backprop_ref = theirs(X, is_train=True)
    numpy.testing.assert_array_equal(Y, Y_ref)
    dY = numpy.arange(Y.size, dtype="float32").reshape(Y.shape)
    numpy.testing.assert_array_equal(backprop(dY).data, backprop_ref(dY).data)


def test_a_word_without_subwords_pools_to_zeros_and_takes_no_gradient():
    X = ragged([2, 0, 3, 0])
    Y, backprop = registry.layers.get("spacy-piqn.reduce_max.v1")()(X, is_train=True)
    assert Y.shape == (4, 3)
    numpy.testing.assert_array_equal(Y[[1, 3]], 0.0)
    numpy.testing.assert_array_equal(Y[0], X.data[:2].max(axis=0))
    numpy.testing.assert_array_equal(Y[2], X.data[2:].max(axis=0))
    dX = backprop(numpy.ones_like(Y))
    assert dX.data.shape == X.data.shape
    assert list(dX.lengths) == [2, 0, 3, 0]
    # Each output column's gradient reaches exactly one subword of its word.
    numpy.testing.assert_array_equal(dX.data[:2].sum(axis=0), 1.0)
    numpy.testing.assert_array_equal(dX.data[2:].sum(axis=0), 1.0)


def test_thincs_max_refuses_the_empty_word_this_layer_exists_for():
    with pytest.raises(ValueError):
        thinc_reduce_max()(ragged([2, 0]), is_train=False)
