"""Subword → word pooling for a transformer listener.

The official PIQN max-pools each word's subwords (piqn-spec §2.4), as ``configs/piqn_trf.cfg``'s own
encoder does. thinc's ``reduce_max.v1`` raises on a word with no subwords (a whitespace token, a word the
tokenizer strips to nothing), which spacy-transformers' alignment produces; this layer gives such a word
a zero vector, as the query-carrying encoder does.
"""

from typing import Callable, Tuple

from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats2d, Ragged


@registry.layers("spacy-piqn.reduce_max.v1")
def reduce_max() -> Model[Ragged, Floats2d]:
    """Max over each sequence of a Ragged; a zero vector for an empty sequence."""
    return Model("piqn_reduce_max", _forward)


def _forward(model: Model[Ragged, Floats2d], Xr: Ragged, is_train: bool) -> Tuple[Floats2d, Callable]:
    ops = model.ops
    lengths = Xr.lengths
    nonempty = lengths > 0
    kept = ops.asarray1i(lengths[nonempty])
    # Empty sequences own no rows of Xr.data, so the rows are exactly those of the non-empty ones.
    maxes, which = ops.reduce_max(Xr.dataXd, kept)
    Y = ops.alloc2f(lengths.shape[0], Xr.dataXd.shape[1], dtype=maxes.dtype)
    Y[nonempty] = maxes

    def backprop(dY: Floats2d) -> Ragged:
        d_maxes = ops.xp.ascontiguousarray(dY[nonempty])
        return Ragged(ops.backprop_reduce_max(d_maxes, which, kept), lengths)

    return Y, backprop
