import numpy as np
import pytest
import torch

from spacy_piqn.loss import loss_boundaries, loss_classes, match, none_class_weight, piqn_loss, span_iou
from spacy_piqn.settings import HeadSettings, LossSettings
from spacy_piqn.targets import gold_spans, window_targets
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


def test_match_returns_one_distinct_query_per_slot_and_loss_terms_read_those_indices():
    left, right, classes = (t[0].detach() for t in head_outputs(n_windows=2, n_queries=5))
    gold = [np.array([[1, 0, 2], [2, 1, 1]]), np.zeros((0, 3), dtype=np.int64)]
    indices = match(left, right, classes, gold, LossSettings(n_slots=3), "softmax")
    queries, slots = indices[0]
    # 3 slots for 2 entities: entity 0 gets two queries, entity 1 one; all queries distinct.
    assert len(set(queries.tolist())) == 3 and sorted(slots.tolist()) == [0, 0, 1]
    assert len(indices[1][0]) == 0
    classes.requires_grad_(True)
    loss_classes(classes, indices, gold).backward()
    # Every query gets a class gradient (matched ones their type, the rest "None").
    assert (classes.grad.abs().sum(-1) > 0).all()
    left.requires_grad_(True)
    mask = torch.ones((2, 6), dtype=torch.bool)
    loss_boundaries(left, right, indices, gold, mask, "softmax").backward()
    supervised = set(np.flatnonzero(left.grad[0].abs().sum(-1) > 0).tolist())
    assert supervised == set(queries.tolist()) and left.grad[1].abs().sum() == 0


def test_static_assignment_is_shared_by_all_layers():
    left, right, classes = head_outputs(n_windows=1, n_layers=3)
    gold = [np.array([[1, 0, 2], [2, 3, 4]])]
    piqn_loss(left, right, classes, [6], gold, LossSettings(n_slots=2), ordered=True).backward()
    supervised = [set(np.flatnonzero(left.grad[layer, 0].abs().sum(-1) > 0).tolist()) for layer in range(3)]
    assert len(supervised[0]) == 2 and supervised[0] == supervised[1] == supervised[2]


def test_paper_static_assignment_supervises_the_first_queries_whatever_they_predict():
    gold = [np.array([[1, 0, 2], [2, 3, 4]])]
    for seed in range(3):
        left, right, classes = head_outputs(n_windows=1, n_layers=2, seed=seed)
        piqn_loss(left, right, classes, [6], gold, LossSettings(n_slots=3, static_assignment=True)).backward()
        for layer in range(2):
            assert np.flatnonzero(left.grad[layer, 0].abs().sum(-1) > 0).tolist() == [0, 1, 2]


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
    per_doc, _ = gold_spans(examples, piqn.key, piqn.labels, piqn.name)
    gold, _ = window_targets(per_doc, scores.windows, n_queries=8)
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


def test_context_words_are_read_but_never_predicted_on():
    torch.manual_seed(0)
    head = PIQNHead(8, 3, HeadSettings(width=16, n_queries=4, n_layers=1, n_heads=2)).eval()
    sentence = torch.randn(4, 8)
    before, after = torch.randn(3, 8), torch.randn(2, 8)
    with torch.no_grad():
        alone = head([sentence])
        read = head([torch.cat([before, sentence, after])], spans=torch.tensor([[3, 4]]))
        no_context = head([sentence], spans=torch.tensor([[0, 4]]))
    # Pointers cover the 4 predicted words only; the context changes what the head sees.
    assert read[0].shape == alone[0].shape == (1, 1, 4, 4)
    assert not torch.allclose(read[2], alone[2])
    assert torch.allclose(no_context[0], alone[0]) and torch.allclose(no_context[2], alone[2])
    # Probabilities at prediction: each query's boundaries are a distribution over the 4 words.
    assert torch.allclose(read[0].sum(-1), torch.ones(1, 1, 4))


def test_predicted_words_index_the_window_after_its_left_context():
    from spacy_piqn.torch_modules.head import predicted_words

    mask = torch.tensor([[True] * 9, [True] * 2 + [False] * 7])
    index, target_mask = predicted_words(torch.tensor([[3, 4], [0, 2]]), mask)
    assert index.tolist() == [[3, 4, 5, 6], [0, 1, 0, 0]]
    assert target_mask.tolist() == [[True] * 4, [True, True, False, False]]


def test_label_smoothing_penalises_a_confident_right_type_and_is_validated():
    gold = [np.array([[1, 0, 2]])]
    indices = [(np.array([0]), np.array([0]))]
    # Query 0 is sure of type 1, query 1 sure of "None": both right.
    classes = torch.full((1, 2, 3), -20.0)
    classes[0, 0, 1] = classes[0, 1, 0] = 20.0
    assert float(loss_classes(classes, indices, gold)) < 1e-6
    smoothed = float(loss_classes(classes, indices, gold, label_smoothing=0.1))
    # 0.1 of the target spread over 3 classes: each wrong class costs (0.1 / 3) · 40 nats.
    assert smoothed == pytest.approx(2 * 0.1 / 3 * 40.0, rel=1e-3)
    with pytest.raises(ValueError, match="label_smoothing"):
        LossSettings(label_smoothing=1.0)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
def test_class_loss_is_least_at_the_smoothed_target_of_every_query(label_smoothing):
    """Matched queries are few (None weighs 1/4), yet a None query's optimum is the documented
    target, (1 − ε) on None plus ε spread over all classes, and a matched query's likewise."""
    n_classes, eps = 5, label_smoothing
    gold = [np.array([[2, 0, 1]])]
    indices = [(np.array([0]), np.array([0]))]
    target = np.full((5, n_classes), eps / n_classes)
    target[0, 2] += 1 - eps
    target[1:, 0] += 1 - eps
    # Logits at the target's log-probabilities (a floor where the target is 0): the gradient vanishes.
    classes = torch.tensor(np.log(np.maximum(target, 1e-12)), dtype=torch.float32)[None].requires_grad_(True)
    loss_classes(classes, indices, gold, label_smoothing=label_smoothing).backward()
    assert none_class_weight(1, 5) == 0.25
    assert classes.grad.abs().max() < 1e-5
    # Without smoothing it is torch's weighted cross-entropy.
    if eps == 0.0:
        logits = torch.randn((1, 5, n_classes), generator=torch.Generator().manual_seed(0))
        weights = torch.tensor([0.25] + [1.0] * (n_classes - 1))
        expected = torch.nn.functional.cross_entropy(logits[0], torch.tensor([2, 0, 0, 0, 0]), weight=weights)
        assert float(loss_classes(logits, indices, gold)) == pytest.approx(float(expected), rel=1e-6)


def test_iou_class_target_lets_a_query_that_points_wrong_doubt_its_type():
    """Gold words 1-3: a query pointing at 1-3 keeps its whole type target, one pointing at word 1
    alone (IoU 1/3) learns the type at 1 − w·(1 − 1/3) and "None" at the rest, one whose left
    boundary lies after its right one at 1 − w."""
    left, right = torch.full((1, 3, 6), -10.0), torch.full((1, 3, 6), -10.0)
    for query, (start, end) in enumerate([(1, 3), (1, 1), (4, 2)]):
        left[0, query, start] = right[0, query, end] = 10.0
    gold = [np.array([[2, 1, 3]])]
    indices = [(np.array([0, 1, 2]), np.array([0, 0, 0]))]
    iou = span_iou(left, right, indices, gold)
    assert torch.allclose(iou, torch.tensor([1.0, 1 / 3, 0.0]))
    keep = 1.0 - 0.5 * (1.0 - iou)
    target = torch.zeros((3, 4))
    target[:, 2], target[:, 0] = keep, 1.0 - keep
    classes = torch.log(target.clamp(min=1e-9))[None].requires_grad_(True)
    loss_classes(classes, indices, gold, keep=keep).backward()
    assert classes.grad.abs().max() < 1e-5
    with pytest.raises(ValueError, match="iou_class_target"):
        LossSettings(iou_class_target=1.5)


def test_iou_class_target_changes_the_loss_and_a_full_keep_is_the_hard_target():
    left, right, classes = head_outputs()
    gold = [np.array([[1, 0, 2], [2, 1, 1]]), np.zeros((0, 3), dtype=np.int64), np.array([[3, 0, 1]])]
    plain = piqn_loss(left, right, classes, [6, 4, 2], gold, LossSettings(n_slots=3, label_smoothing=0.1))
    weighted = LossSettings(n_slots=3, label_smoothing=0.1, iou_class_target=1.0)
    assert float(plain) != float(piqn_loss(left, right, classes, [6, 4, 2], gold, weighted))
    # All-ones keep is the hard target: the same loss through the soft path, label smoothing included.
    indices = match(left[0], right[0], classes[0], gold, LossSettings(n_slots=3), "softmax")
    n_matched = sum(len(q) for q, _ in indices)
    hard = loss_classes(classes[0], indices, gold, 0.1)
    soft = loss_classes(classes[0], indices, gold, 0.1, keep=torch.ones(n_matched))
    assert float(hard) == pytest.approx(float(soft), rel=1e-6)


def test_word_tagger_loss_targets_every_label_covering_a_word_and_skips_padding():
    """Tag targets: 1 for each label of a gold entity over the word (nested entities give a word
    two labels), 0 elsewhere; padded words get no gradient."""
    left, right, classes = head_outputs(n_windows=2, n_classes=4)
    tags = torch.zeros((1, 2, 6, 3), requires_grad=True)
    gold = [np.array([[1, 0, 2], [2, 1, 1]]), np.zeros((0, 3), dtype=np.int64)]
    loss = piqn_loss(left, right, classes, [6, 4], gold, LossSettings(n_slots=3, loss_tag_weight=2.0), tags=tags)
    loss.backward()
    grad = tags.grad[0]
    covered = torch.zeros((2, 6, 3), dtype=torch.bool)
    covered[0, 0:3, 0] = True
    covered[0, 1, 1] = True
    real = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    assert (grad[covered] < 0).all()
    assert (grad[~covered & real[:, :, None]] > 0).all()
    assert (grad[~real] == 0).all()
    # At logits 0 each real word's summed BCE is 3·ln 2; the mean over 10 real words, weighted 2.
    without = piqn_loss(left, right, classes, [6, 4], gold, LossSettings(n_slots=3))
    assert float(loss - without) == pytest.approx(2.0 * 3 * np.log(2.0), abs=1e-5)
