import numpy as np
import pytest
import torch

from spacy_piqn.loss import dense_boundary_loss, none_class_weight, piqn_loss, span_iou
from spacy_piqn.settings import HeadSettings, LossSettings
from spacy_piqn.torch_modules.head import OneWayLayer, PIQNHead

from .conftest import TINY_PIQN


def head_outputs(n_windows=3, n_layers=2, n_queries=5, n_words=6, n_classes=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    shape = (n_layers, n_windows, n_queries, n_words)
    left = torch.randn(shape, generator=g, requires_grad=True)
    right = torch.randn(shape, generator=g, requires_grad=True)
    classes = torch.randn(shape[:3] + (n_classes,), generator=g, requires_grad=True)
    return left, right, classes


def test_loss_is_finite_without_entities():
    left, right, classes = head_outputs()
    empty = [np.zeros((0, 3), dtype=np.int64)] * 3
    loss = piqn_loss(left, right, classes, [6, 4, 2], empty, LossSettings(n_slots=3))
    loss.backward()
    assert torch.isfinite(loss)
    assert torch.isfinite(classes.grad).all() and classes.grad.abs().sum() > 0
    # Pointers of unmatched queries are not supervised.
    assert left.grad is None or left.grad.abs().sum() == 0


@pytest.mark.parametrize("pointer", ["softmax", "sigmoid"])
def test_loss_supervises_boundaries_of_matched_queries(pointer):
    left, right, classes = head_outputs()
    gold = [np.array([[1, 0, 2], [2, 1, 1]]), np.zeros((0, 3), dtype=np.int64), np.array([[3, 0, 1]])]
    loss = piqn_loss(left, right, classes, [6, 4, 2], gold, LossSettings(n_slots=3), pointer=pointer)
    loss.backward()
    assert torch.isfinite(loss)
    assert left.grad[:, 0].abs().sum() > 0 and right.grad[:, 2].abs().sum() > 0
    # Window 1 has no gold; padded words of window 2 (length 2) get no boundary gradient.
    assert left.grad[:, 1].abs().sum() == 0
    assert left.grad[:, 2, :, 2:].abs().sum() == 0


def test_last_layer_one_to_one_supervises_one_query_per_entity():
    # One gold entity, 5 queries, 3 slots: the first layer trains 3 queries on it; with
    # last_layer_n_slots = 1 the last layer trains exactly one (the others learn "None").
    left, right, classes = head_outputs(n_windows=1)
    gold = [np.array([[1, 1, 3]])]
    loss = piqn_loss(left, right, classes, [6], gold, LossSettings(n_slots=3, last_layer_n_slots=1))
    loss.backward()
    supervised = (left.grad.abs().sum(-1) > 0).sum(-1)[:, 0]  # per layer: queries with a boundary gradient
    assert supervised.tolist() == [3, 1]
    with pytest.raises(ValueError, match="E043"):
        LossSettings(last_layer_n_slots=-1)


def test_span_iou_of_argmax_spans():
    # Three matched queries of one window, 6 words: exact, half-overlapping, crossed (left > right).
    left = torch.full((1, 3, 6), -5.0)
    right = torch.full((1, 3, 6), -5.0)
    for q, (first, last) in enumerate([(1, 3), (2, 5), (4, 1)]):
        left[0, q, first] = right[0, q, last] = 5.0
    target = torch.tensor([[1, 1, 3], [1, 1, 3], [1, 1, 3]])
    iou = span_iou(left, right, torch.zeros(3, dtype=torch.long), torch.arange(3), target)
    assert iou.tolist() == pytest.approx([1.0, 2 / 5, 0.0])


def pointed_outputs(first, last):
    """One window, one layer, 2 queries over 6 words, both pointing sharply at words first..last."""
    left = torch.full((1, 1, 2, 6), -8.0)
    right = torch.full((1, 1, 2, 6), -8.0)
    left[..., first] = right[..., last] = 8.0
    classes = torch.zeros((1, 1, 2, 3), requires_grad=True)
    return left, right, classes


def test_iou_class_target_leaves_well_placed_queries_alone_and_pushes_near_misses_to_none():
    gold = [np.array([[1, 1, 3]])]
    hard, soft = LossSettings(n_slots=2), LossSettings(n_slots=2, iou_class_target=0.5)
    exact = [piqn_loss(*pointed_outputs(1, 3), [6], gold, s) for s in (hard, soft)]
    assert exact[0].item() == pytest.approx(exact[1].item())
    grads = []
    for settings in (hard, soft):
        left, right, classes = pointed_outputs(3, 5)  # IoU 1/5 with the gold span
        piqn_loss(left, right, classes, [6], gold, settings).backward()
        grads.append(classes.grad[0, 0])
    # Descent raises the gold class less, and "None" more, when the span is misplaced.
    assert (-grads[1][:, 1] < -grads[0][:, 1]).all()
    assert (-grads[1][:, 0] > -grads[0][:, 0]).all()
    with pytest.raises(ValueError, match="E045"):
        LossSettings(iou_class_target=1.5)


def test_none_weight_balances_matched_and_none_queries():
    assert none_class_weight(12, 48) == 12 / 36
    assert none_class_weight(0, 48) == 1.0  # entity-free batch: no 0/0
    assert none_class_weight(48, 48) == 1.0


def test_gradient_reaches_the_encoder(nested_examples):
    nlp, examples = nested_examples
    nlp.add_pipe("piqn", config=TINY_PIQN)
    optimizer = nlp.initialize(lambda: examples)
    tok2vec = nlp.get_pipe("piqn").model.get_ref("tok2vec")
    embed = next(node for node in tok2vec.walk() if node.has_param("E"))
    weights = embed.get_param("E").copy()
    nlp.update(examples, sgd=optimizer)
    assert not np.allclose(weights, embed.get_param("E"))


def test_nested_gold_reaches_the_loss(nested_examples):
    nlp, examples = nested_examples
    piqn = nlp.add_pipe("piqn", config=TINY_PIQN)
    nlp.initialize(lambda: examples)
    scores, _ = piqn.model.begin_update([eg.predicted for eg in examples])
    gold = piqn._window_gold(examples, scores.windows)
    # All five spans of the first sentence, three of them nested at token 1, are targets.
    assert sorted(map(tuple, gold[0][:, 1:].tolist())) == [(1, 1), (1, 2), (1, 3), (5, 6), (8, 10)]


def test_words_never_see_queries():
    torch.manual_seed(0)
    layer = OneWayLayer(16, 4, 0.0, query_interaction=True).eval()
    words = torch.randn(2, 5, 16)
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    pos = torch.randn(3, 16)
    w1, q1 = layer(words, torch.randn(2, 3, 16), pos, mask)
    w2, q2 = layer(words, torch.randn(2, 3, 16), pos, mask)
    assert torch.equal(w1, w2)
    assert not torch.allclose(q1, q2)
    w3, q3 = layer(words + 1.0, torch.zeros(2, 3, 16), pos, mask)
    w4, q4 = layer(words, torch.zeros(2, 3, 16), pos, mask)
    assert not torch.allclose(q3, q4)


def test_head_word_path_is_independent_of_query_embeddings():
    torch.manual_seed(0)
    head = PIQNHead(8, 3, HeadSettings(width=16, n_queries=4, n_layers=2, n_heads=2)).eval()
    windows = [torch.randn(5, 8), torch.randn(3, 8)]
    words, mask = head.encode_words(windows)
    content, position = head.queries()
    outs = []
    for shift in (0.0, 1.0):
        w, q = words, content.unsqueeze(0).expand(2, -1, -1) + shift
        for layer in head.layers:
            w, q = layer(w, q, position, mask)
        outs.append(w)
    assert torch.equal(outs[0], outs[1])


def test_padding_does_not_change_predictions():
    torch.manual_seed(0)
    head = PIQNHead(8, 3, HeadSettings(width=16, n_queries=4, n_layers=2, n_heads=2)).eval()
    a, b = torch.randn(5, 8), torch.randn(2, 8)
    with torch.no_grad():
        together = head([a, b])
        alone = head([b])
    assert torch.allclose(together[2][:, 1], alone[2][:, 0], atol=1e-5)
    assert torch.allclose(together[0][:, 1, :, :2], alone[0][:, 0], atol=1e-5)


def test_dense_boundary_head_is_padded_like_the_pointers_and_trains_on_every_gold_boundary():
    torch.manual_seed(0)
    settings = HeadSettings(width=16, n_queries=4, n_layers=2, n_heads=2, dense_boundaries=True, max_padded_words=6)
    head = PIQNHead(8, 3, settings)
    windows = [torch.randn(5, 8), torch.randn(2, 8), torch.randn(3, 8)]  # two length groups
    dense = head(windows, all_layers=True)[3]
    assert dense.shape == (3, 5, 2)
    with torch.no_grad():
        alone = head([windows[1]])[3]
    assert torch.allclose(dense[1, :2], alone[0], atol=1e-5)
    assert (dense[1, 2:] <= -1e3).all()  # padded words
    gold = [np.array([[1, 0, 2], [2, 1, 1]]), np.zeros((0, 3), dtype=np.int64), np.array([[1, 2, 2]])]
    loss = dense_boundary_loss(dense, [5, 2, 3], gold)
    loss.backward()
    assert torch.isfinite(loss)
    empty = dense_boundary_loss(dense.detach(), [5, 2, 3], [np.zeros((0, 3), dtype=np.int64)] * 3)
    assert torch.isfinite(empty)  # entity-free windows: all-negative targets, no NaN
