"""Behaviour of the piqn component that users rely on."""

import logging

import numpy as np
import pytest
import spacy
import torch
from spacy.tokens import Doc
from spacy.util import load_model_from_path, make_tempdir
from thinc.api import fix_random_seed

from spacy_piqn.targets import gold_spans, window_targets

from .conftest import NESTED_DATA, TINY_PIQN, make_examples, one_doc_of_sentences, spans_of, train_examples, train_tiny


def predict(nlp, text):
    return nlp(Doc(nlp.vocab, words=text.split()))


def check_span_group(nlp, doc, key="sc"):
    """What the component writes: a score per span, every span inside the doc and with a known label."""
    group = doc.spans[key]
    assert len(group.attrs["scores"]) == len(group)
    labels = set(nlp.get_pipe("piqn").labels)
    assert all(0 <= s.start < s.end <= len(doc) and s.label_ in labels for s in group)


def test_add_pipe_without_config_learns_the_labels_and_predicts(nested_examples):
    nlp, examples = nested_examples
    piqn = nlp.add_pipe("piqn")
    nlp.initialize(lambda: examples)
    assert piqn.labels == tuple(sorted({label for _, spans in NESTED_DATA for _, _, label in spans}))
    check_span_group(nlp, predict(nlp, NESTED_DATA[0][0]))


def test_overfit_nested_entities(trained_tiny):
    nlp, examples = trained_tiny
    scores = nlp.evaluate(examples)
    assert scores["spans_sc_f"] == 1.0
    assert scores["spans_sc_loc_f"] == 1.0
    for text, gold in NESTED_DATA:
        doc = predict(nlp, text)
        assert sorted(spans_of(doc)) == sorted(gold)
        group_scores = doc.spans["sc"].attrs["scores"]
        assert len(group_scores) == len(doc.spans["sc"])
        assert all(0.0 <= s <= 1.0 for s in group_scores)


def test_pipe_equals_call(trained_tiny):
    nlp, _ = trained_tiny
    docs = [Doc(nlp.vocab, words=text.split()) for text, _ in NESTED_DATA]
    piped = list(nlp.pipe([Doc(nlp.vocab, words=d.text.split()) for d in docs], batch_size=2))
    called = [nlp(d) for d in docs]
    for a, b in zip(piped, called):
        assert spans_of(a) == spans_of(b)
        assert np.allclose(a.spans["sc"].attrs["scores"], b.spans["sc"].attrs["scores"], atol=1e-6)


def test_disk_and_bytes_round_trip(trained_tiny):
    nlp, _ = trained_tiny
    text = NESTED_DATA[0][0]
    expected = predict(nlp, text)
    with make_tempdir() as tmp:
        nlp.to_disk(tmp)
        loaded = load_model_from_path(tmp)
    doc = predict(loaded, text)
    assert spans_of(doc) == spans_of(expected)
    assert np.array_equal(doc.spans["sc"].attrs["scores"], expected.spans["sc"].attrs["scores"])
    assert loaded.get_pipe("piqn").labels == nlp.get_pipe("piqn").labels

    fresh = spacy.blank("en")
    fresh.add_pipe("piqn", config=TINY_PIQN)
    fresh.from_bytes(nlp.to_bytes())
    doc = predict(fresh, text)
    assert spans_of(doc) == spans_of(expected)


def test_uninitialized_round_trip_keeps_labels_and_settings():
    nlp = spacy.blank("en")
    piqn = nlp.add_pipe("piqn", config={**TINY_PIQN, "spans_key": "genes", "class_threshold": 0.25})
    piqn.add_label("DNA")
    piqn.add_label("protein")
    with make_tempdir() as tmp:
        nlp.to_disk(tmp)
        loaded = load_model_from_path(tmp).get_pipe("piqn")
    assert loaded.labels == ("DNA", "protein") and loaded.key == "genes"
    assert loaded.cfg == piqn.cfg


def test_empty_and_tiny_docs(trained_tiny):
    """Empty docs get an empty group with empty scores, and do not shift the predictions of the docs after them in
    a batch: each doc gets what it gets alone."""
    nlp, _ = trained_tiny
    words = [[], ["IL-4"], [], [], "Jurkat cells express IL-4 .".split(), [], ["cells", "."]]
    piped = list(nlp.pipe([Doc(nlp.vocab, words=w) for w in words], batch_size=len(words)))
    alone = [nlp(Doc(nlp.vocab, words=w)) for w in words]
    assert spans_of(piped[4]) == [(0, 2, "cell_line"), (3, 4, "protein")]
    for doc, single in zip(piped, alone):
        check_span_group(nlp, doc)
        assert spans_of(doc) == spans_of(single)
        assert np.allclose(doc.spans["sc"].attrs["scores"], single.spans["sc"].attrs["scores"], atol=1e-5)


def test_whitespace_is_never_an_entity_nor_part_of_one(trained_tiny):
    nlp, _ = trained_tiny
    blank = nlp("   \n\t  ")
    assert len(blank) > 0 and len(blank.spans["sc"]) == 0
    # spaCy keeps runs of whitespace as tokens; no span starts or ends with one.
    doc = nlp("  \n The IL-2 gene promoter binds NF-kappa B in human T cells \n\n . \n ")
    assert any(token.is_space for token in doc) and len(doc.spans["sc"]) > 0
    for span in doc.spans["sc"]:
        assert not span[0].is_space and not span[-1].is_space, span


def test_long_doc_is_predicted_in_every_window(trained_tiny):
    """A 1,500-token doc of 300 sentences is predicted window by window, to its last sentence.

    The head reads 16 context words on each side and the default tok2vec 4 more, less than four of these 5-token
    sentences. So the first and last four sentences must get exactly the spans (and scores) of the first and last
    four of a nine-sentence doc, and the 292 between those of its middle one: equalities that hold however well the
    model was trained.
    """
    nlp, _ = trained_tiny
    sentence = "Jurkat cells express IL-4 .".split()

    def sentence_predictions(n_sentences: int) -> list:
        words = sentence * n_sentences
        doc = nlp(Doc(nlp.vocab, words=words, sent_starts=[i % 5 == 0 for i in range(len(words))]))
        found = [[] for _ in range(n_sentences)]
        for span, score in zip(doc.spans["sc"], doc.spans["sc"].attrs["scores"]):
            i = span.start // 5
            assert span.end <= 5 * (i + 1), "a span crosses a sentence boundary"
            found[i].append((span.start - 5 * i, span.end - 5 * i, span.label_, float(score)))
        return [sorted(spans) for spans in found]

    def same(a: list, b: list) -> bool:
        return [s[:3] for s in a] == [s[:3] for s in b] and np.allclose([s[3] for s in a], [s[3] for s in b], atol=1e-5)

    nine = sentence_predictions(9)
    assert nine[-1], "the overfit pipeline finds the entities of a training sentence"
    per_sentence = sentence_predictions(300)
    edges = per_sentence[:4] + per_sentence[-4:]
    assert all(same(found, expected) for found, expected in zip(edges, nine[:4] + nine[-4:]))
    assert all(same(found, nine[4]) for found in per_sentence[4:-4])
    # Without sentence boundaries the component finds them itself: the same predictions.
    words = sentence * 300
    doc = nlp(Doc(nlp.vocab, words=words))
    assert len(doc.spans["sc"].attrs["scores"]) == len(doc.spans["sc"])
    found = [[] for _ in range(300)]
    for span, score in zip(doc.spans["sc"], doc.spans["sc"].attrs["scores"]):
        i = span.start // 5
        found[i].append((span.start - 5 * i, span.end - 5 * i, span.label_, float(score)))
    assert all(same(sorted(a), b) for a, b in zip(found, per_sentence))


def test_doc_with_more_entities_than_queries(caplog):
    """One doc of 30 sentences with 100 (nested) entities and 8 queries per window: sentence windows keep every
    entity reachable, in training and in prediction.

    Checked on the structure, which no training run can change: one window per sentence, 8 queries in each
    (240 for 100 entities), all 100 entities in the training targets of their windows (none logged as left out),
    finite losses. What a short training run then predicts depends on the head and on the CPU's float rounding
    (often nothing at all), so it is not asserted here: `test_overfit_nested_entities` covers learning, and
    `test_long_doc_is_predicted_in_every_window` what a trained pipeline writes for a doc of many sentences.
    """
    fix_random_seed(0)
    nlp = spacy.blank("en")
    piqn = nlp.add_pipe("piqn", config=TINY_PIQN)
    example, make_doc, gold = one_doc_of_sentences(nlp, [NESTED_DATA[i] for i in (0, 1, 3)] * 10)
    assert len(gold) == 100
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        losses = train_examples(nlp, [example], steps=3)
    assert np.isfinite(losses["piqn"])
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text  # no W001/W002/W003

    doc = make_doc(nlp.vocab)
    sentences = [(sent.start, sent.end) for sent in doc.sents]
    assert len(sentences) == 30
    output = piqn.predict([doc])
    assert [(w.start, w.end) for w in output.windows] == sentences
    n_windows, n_queries = output.classes[-1].shape[:2]
    assert (n_windows, n_queries) == (30, TINY_PIQN["model"]["head"]["n_queries"])

    # The training targets: every gold entity, in the window of its sentence (window-relative, end inclusive).
    per_doc, _ = gold_spans([example], piqn.key, piqn.labels, piqn.name)
    targets, _ = window_targets(per_doc, output.windows, n_queries)
    labels = piqn.labels
    found = [
        (int(start) + window.start, int(end) + window.start + 1, labels[int(label) - 1])
        for window, rows in zip(output.windows, targets)
        for label, start, end in rows
    ]
    assert sorted(found) == sorted(gold)
    assert max(len(rows) for rows in targets) == 5


def test_gold_over_capacity_trains_and_is_logged(caplog):
    # 3x more entities than the 8 queries of the one window.
    data = [(" ".join(["IL-4"] * 24), [(i, i + 1, "protein") for i in range(24)])]
    fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("piqn", config=TINY_PIQN)
    examples = make_examples(nlp, data)
    optimizer = nlp.initialize(lambda: examples)
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        losses = nlp.update(examples, sgd=optimizer)
    assert np.isfinite(losses["piqn"])
    assert "W001" in caplog.text and "16 of them" in caplog.text


def test_gold_outside_windows_is_logged(caplog):
    nlp = spacy.blank("en")
    config = {
        **TINY_PIQN,
        "model": {**TINY_PIQN["model"], "windows": {"@misc": "spacy-piqn.token_windows.v2", "size": 4, "stride": 4}},
    }
    nlp.add_pipe("piqn", config=config)
    examples = make_examples(nlp, [("a b c d e f", [(2, 6, "X")])])
    optimizer = nlp.initialize(lambda: examples)
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        nlp.update(examples, sgd=optimizer)
    # The warning names the span it leaves out, so that a user can find why.
    assert "W002" in caplog.text and "doc 0 tokens 2-6" in caplog.text


def test_entity_free_batch_trains(nested_examples):
    """A batch without entities still teaches the classifier: every query's target is "None"."""
    nlp, examples = nested_examples
    piqn = nlp.add_pipe("piqn", config=TINY_PIQN)
    optimizer = nlp.initialize(lambda: examples)
    empty = [eg for eg in examples if not eg.reference.spans["sc"]]
    classifier = piqn.model.get_ref("head").layers[0].shims[0]._model.classifier
    before = [p.detach().clone() for p in classifier.parameters()]
    losses = nlp.update(empty, sgd=optimizer)
    assert np.isfinite(losses["piqn"]) and losses["piqn"] > 0
    assert any(not torch.equal(old, new) for old, new in zip(before, classifier.parameters()))


def test_unknown_gold_label_is_a_clear_error(nested_examples):
    nlp, examples = nested_examples
    nlp.add_pipe("piqn", config=TINY_PIQN)
    optimizer = nlp.initialize(lambda: examples)
    bad = make_examples(nlp, [("IL-4 binds", [(0, 1, "GENE")])])
    with pytest.raises(ValueError, match="E001.*'GENE'"):
        nlp.update(bad, sgd=optimizer)


def test_labels_are_fixed_after_initialize(nested_examples):
    nlp, examples = nested_examples
    piqn = nlp.add_pipe("piqn", config=TINY_PIQN)
    assert piqn.add_label("extra") == 1
    nlp.initialize(lambda: examples)
    assert "extra" in piqn.labels
    with pytest.raises(ValueError, match="E002"):
        piqn.add_label("new")


def test_initialize_without_labels_says_where_to_look():
    nlp = spacy.blank("en")
    nlp.add_pipe("piqn", config=TINY_PIQN)
    examples = make_examples(nlp, [("nothing here", [])])
    with pytest.raises(ValueError, match="E003"):
        nlp.initialize(lambda: examples)


def test_set_ents_writes_a_flat_selection(trained_tiny):
    nlp, _ = trained_tiny
    piqn = nlp.get_pipe("piqn")
    piqn.cfg["set_ents"] = True
    try:
        doc = predict(nlp, NESTED_DATA[0][0])
    finally:
        piqn.cfg["set_ents"] = False
    ents = [(e.start, e.end) for e in doc.ents]
    assert ents and all(a[1] <= b[0] for a, b in zip(ents, ents[1:]))
    assert set(ents) <= {(s.start, s.end) for s in doc.spans["sc"]}


def test_custom_spans_key():
    """spans_key only says where gold is read and predictions go: trained on the same gold under "genes", the
    pipeline learns the weights that the default key gives, and writes and scores the same spans under "genes"."""

    def trained(key: str):
        fix_random_seed(0)
        nlp = spacy.blank("en")
        nlp.add_pipe("piqn", config={**TINY_PIQN, "spans_key": key})
        examples = make_examples(nlp, NESTED_DATA, key=key)
        train_examples(nlp, examples, steps=3)
        return nlp, examples

    genes, genes_examples = trained("genes")
    sc, sc_examples = trained("sc")
    assert genes.get_pipe("piqn").model.to_bytes() == sc.get_pipe("piqn").model.to_bytes()
    doc, expected = predict(genes, NESTED_DATA[0][0]), predict(sc, NESTED_DATA[0][0])
    assert list(doc.spans) == ["genes"] and spans_of(doc, "genes") == spans_of(expected)
    genes_scores, sc_scores = genes.evaluate(genes_examples), sc.evaluate(sc_examples)
    assert {k.replace("genes", "sc"): v for k, v in genes_scores.items() if k.startswith("spans_")} == {
        k: v for k, v in sc_scores.items() if k.startswith("spans_")
    }


def test_flat_decoding_gives_no_overlaps(trained_tiny):
    nlp, _ = trained_tiny
    piqn = nlp.get_pipe("piqn")
    piqn.cfg["decoding"] = "flat"
    try:
        doc = predict(nlp, NESTED_DATA[0][0])
    finally:
        piqn.cfg["decoding"] = "nested"
    spans = sorted(spans_of(doc))
    assert spans and all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


def test_bad_decoding_mode():
    nlp = spacy.blank("en")
    with pytest.raises(ValueError, match="E015"):
        nlp.add_pipe("piqn", config={"decoding": "overlapping"})
    with pytest.raises(ValueError, match="E052.*merge_keep_ratio"):
        nlp.add_pipe("piqn", config={"merge_keep_ratio": -0.5})
    with pytest.raises(ValueError, match="E053.*class_threshold"):
        nlp.add_pipe("piqn", config={"class_threshold": 1.5})


def test_corrupted_model_file_is_a_clear_error(trained_tiny):
    nlp, _ = trained_tiny
    with make_tempdir() as tmp:
        nlp.to_disk(tmp)
        (tmp / "piqn" / "model").write_bytes(b"not a model")
        with pytest.raises(ValueError, match="E005"):
            load_model_from_path(tmp)
        (tmp / "piqn" / "model").unlink()
        with pytest.raises(ValueError, match="E005"):
            load_model_from_path(tmp)


def test_length_groups_cover_every_window_within_the_budget():
    from spacy_piqn.torch_modules.common import length_groups

    lengths = [5, 3, 9, 1, 7, 30, 2, 2]
    groups = length_groups(lengths, max_padded_words=12)
    assert sorted(i for group in groups for i in group) == list(range(len(lengths)))
    for group in groups:
        longest = max(lengths[i] for i in group)
        assert len(group) * longest <= 12 or len(group) == 1
    assert length_groups(lengths, max_padded_words=0) == [sorted(range(len(lengths)), key=lengths.__getitem__)]


def test_length_groups_change_neither_predictions_nor_losses(trained_tiny):
    """Running the windows in length groups (here: one window per group) is a speed setting:
    predicted spans and scores, and the training loss, equal those of one padded batch."""
    nlp, _ = trained_tiny
    docs = [Doc(nlp.vocab, words=text.split()) for text, _ in NESTED_DATA]
    one_batch = list(nlp.pipe(docs))
    one_per_group = {"components": {"piqn": {"model": {"head": {"max_padded_words": 1}}}}}
    with make_tempdir() as tmp:
        nlp.to_disk(tmp)
        grouped = spacy.load(tmp, config=one_per_group)
    for a, b in zip(one_batch, grouped.pipe([Doc(nlp.vocab, words=d.text.split()) for d in docs])):
        assert spans_of(a) == spans_of(b)
        assert np.allclose(a.spans["sc"].attrs["scores"], b.spans["sc"].attrs["scores"], atol=1e-5)

    def first_losses(max_padded_words: int) -> list:
        fix_random_seed(0)
        fresh = spacy.blank("en")
        head = {**TINY_PIQN["model"]["head"], "max_padded_words": max_padded_words}
        fresh.add_pipe("piqn", config={**TINY_PIQN, "model": {"head": head}})
        examples = make_examples(fresh, NESTED_DATA)
        optimizer = fresh.initialize(lambda: examples)
        return [fresh.update(examples, sgd=optimizer)["piqn"] for _ in range(2)]

    assert np.allclose(first_losses(0), first_losses(1), rtol=1e-5)


def test_ordered_warmup_trains_then_hands_over_to_matching(monkeypatch):
    """With an ordered warm-up the pipeline still learns the nested gold exactly; the warm-up
    covers the first updates of the process only, the later ones use Hungarian matching."""
    import spacy_piqn.loss

    ordered = []
    loss_and_gradient = spacy_piqn.loss.loss_and_gradient

    def recording(scores, gold, weights, pointer, is_ordered=False):
        ordered.append(is_ordered)
        return loss_and_gradient(scores, gold, weights, pointer, is_ordered)

    monkeypatch.setattr(spacy_piqn.loss, "loss_and_gradient", recording)
    nlp, examples = train_tiny(config={**TINY_PIQN, "ordered_warmup_updates": 20})
    assert len(ordered) == nlp.get_pipe("piqn").n_updates > 20
    assert ordered == [True] * 20 + [False] * (len(ordered) - 20)
    assert nlp.evaluate(examples)["spans_sc_f"] == 1.0


def test_prediction_windows_apart_from_training_windows():
    """token_windows.v3: the model cuts docs into training windows in begin_update and into the (shorter)
    prediction windows in predict, so evaluation and nlp() read what predict_size says."""
    nlp = spacy.blank("en")
    windows = {"@misc": "spacy-piqn.token_windows.v3", "size": 8, "stride": 4, "predict_size": 4, "predict_stride": 2}
    nlp.add_pipe("piqn", config={**TINY_PIQN, "model": {**TINY_PIQN["model"], "windows": windows}})
    examples = make_examples(nlp, [("a b c d e f g h i j", [(2, 4, "X")])])
    nlp.initialize(lambda: examples)
    model = nlp.get_pipe("piqn").model
    docs = [eg.predicted for eg in examples]
    trained, _ = model.begin_update(docs)
    assert [(w.start, w.end) for w in trained.windows] == [(0, 8), (4, 10)]
    assert [(w.start, w.end) for w in model.predict(docs).windows] == [(0, 4), (2, 6), (4, 8), (6, 10)]
    doc = nlp("a b c d e f g h i j")
    assert all(0 <= s.start < s.end <= 10 for s in doc.spans["sc"])


def test_word_tagger_trains_round_trips_and_checks_boundaries(tmp_path):
    """The word tagger's logits come out in training and its probabilities at prediction, where
    decoding checks each query's boundaries with them; the loss and the predictions are the same
    whether windows run in one batch or in length groups, and a saved pipeline keeps the switch
    and its decoding weight."""
    head = {**TINY_PIQN["model"]["head"], "word_tagger": True}
    config = {**TINY_PIQN, "model": {"head": head}, "loss_tag_weight": 2.0}
    nlp, examples = train_tiny(config=config)
    assert nlp.evaluate(examples)["spans_sc_f"] == 1.0
    model = nlp.get_pipe("piqn").model
    docs = [eg.predicted for eg in examples]
    trained, _ = model.begin_update(docs)
    assert trained.tags is not None and trained.tags.shape[:3] == (1, len(trained.windows), trained.left.shape[-1])
    predicted = model.predict(docs)
    assert predicted.tags.shape == trained.tags.shape
    assert 0.0 <= predicted.tags.min() and predicted.tags.max() <= 1.0
    nlp.get_pipe("piqn").cfg["tagger_boundary_weight"] = 2.0
    nlp.to_disk(tmp_path)
    loaded = spacy.load(tmp_path)
    assert loaded.get_pipe("piqn").model.get_ref("head").attrs["settings"]["word_tagger"] is True
    assert loaded.get_pipe("piqn").cfg["tagger_boundary_weight"] == 2.0
    texts = [text for text, _ in NESTED_DATA]
    assert [spans_of(d) for d in loaded.pipe(texts)] == [spans_of(d) for d in nlp.pipe(texts)]
    grouped = spacy.load(tmp_path, config={"components": {"piqn": {"model": {"head": {"max_padded_words": 1}}}}})
    assert [spans_of(d) for d in grouped.pipe(texts)] == [spans_of(d) for d in nlp.pipe(texts)]
    # The real words' tags agree (padding differs: length groups pad with zeros).
    one_batch, in_groups = (p.get_pipe("piqn").model.predict(docs) for p in (loaded, grouped))
    for b, n in enumerate(one_batch.lengths):
        assert np.allclose(one_batch.tags[0, b, :n], in_groups.tags[0, b, :n], atol=1e-6)

    def first_losses(max_padded_words: int) -> list:
        fix_random_seed(0)
        fresh = spacy.blank("en")
        fresh.add_pipe("piqn", config={**config, "model": {"head": {**head, "max_padded_words": max_padded_words}}})
        fresh_examples = make_examples(fresh, NESTED_DATA)
        optimizer = fresh.initialize(lambda: fresh_examples)
        return [fresh.update(fresh_examples, sgd=optimizer)["piqn"] for _ in range(2)]

    assert np.allclose(first_losses(0), first_losses(1), rtol=1e-5)
