"""Documents in, entities out: a multi-sentence doc, with or without sentence boundaries, gets what its
sentences get one per Doc, and document Docs train."""

import json
import logging
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import spacy
import torch
from spacy.tokens import Doc, DocBin, Span
from spacy.training import Example
from thinc.api import fix_random_seed

from spacy_piqn.corpus import create_gold_token_corpus

from .conftest import NESTED_DATA, SHARED_DATA, TINY_PIQN, make_examples, one_doc_of_sentences, spans_of

GENIA = SHARED_DATA / "genia" / "dev.jsonl"


def _sentences(n: int):
    """The first n GENIA dev sentences of 8-40 tokens with entities that end with a "." token (else the hand-made
    nested data). Sentences whose last token carries its period ("protein.", a GENIA tokenization) are left out:
    spaCy's sentencizer rule cannot see that boundary (bench/RESULTS.md measures what that costs)."""
    if not GENIA.exists():
        return [(text.split(), spans) for text, spans in NESTED_DATA]
    rows = []
    with GENIA.open(encoding="utf8") as f:
        for line in f:
            row = json.loads(line)
            if 8 <= len(row["tokens"]) <= 40 and row["entities"] and row["tokens"][-1] == ".":
                rows.append((row["tokens"], [(e["start"], e["end"], e["label"]) for e in row["entities"]]))
            if len(rows) == n:
                break
    return rows


def _reference(nlp, sentences, sent_starts: bool) -> Doc:
    words, starts, spans = [], [], []
    for tokens, entities in sentences:
        offset = len(words)
        words += tokens
        starts += [True] + [False] * (len(tokens) - 1)
        spans += [(s + offset, e + offset, label) for s, e, label in entities]
    doc = Doc(nlp.vocab, words=words, sent_starts=starts if sent_starts else None)
    doc.spans["sc"] = [Span(doc, s, e, label=label) for s, e, label in spans]
    return doc


def _f(nlp, references, with_starts: bool) -> float:
    predicted = []
    for ref in references:
        starts = [t.is_sent_start for t in ref] if with_starts else None
        predicted.append(Doc(nlp.vocab, words=[t.text for t in ref], sent_starts=starts))
    return nlp.evaluate([Example(p, r) for p, r in zip(predicted, references)])["spans_sc_f"]


@pytest.fixture(scope="module")
def memorised():
    """The shipped default (add_pipe("piqn")) trained on 12 sentences until it reproduces them."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("piqn")
    sentences = _sentences(12)
    examples = [Example(Doc(nlp.vocab, words=t), _reference(nlp, [(t, e)], True)) for t, e in sentences]
    optimizer = nlp.initialize(lambda: examples)
    for step in range(1, 121):
        nlp.update(examples, sgd=optimizer)
        if step % 20 == 0 and nlp.evaluate(examples)["spans_sc_f"] == 1.0:
            break
    torch.set_num_threads(threads)
    return nlp, sentences


def test_running_text_finds_what_single_sentences_find(memorised):
    nlp, sentences = memorised
    one_per_doc = [_reference(nlp, [s], True) for s in sentences]
    six_per_doc = [_reference(nlp, sentences[i : i + 6], True) for i in range(0, len(sentences), 6)]
    alone = _f(nlp, one_per_doc, with_starts=True)
    # Not 1.0: trained in 32-token windows, it predicts in 16-token ones, where a memorised position can move.
    assert alone >= 0.9
    # Six sentences per Doc, with and without sentence boundaries: the component finds the sentences itself.
    assert _f(nlp, six_per_doc, with_starts=True) >= alone - 0.005
    assert _f(nlp, six_per_doc, with_starts=False) >= alone - 0.005


def test_windows_that_ignore_sentences_lose_entities(memorised, tmp_path):
    """The same pipeline with token_windows.v1 (one window over a doc without sentence boundaries) loses much
    of what it finds, and says so once (W004): the check above can fail."""
    nlp, sentences = memorised
    nlp.to_disk(tmp_path / "p")
    v1 = {"components": {"piqn": {"model": {"windows": {"@misc": "spacy-piqn.token_windows.v1"}}}}}
    old = spacy.load(tmp_path / "p", config=v1)
    six_per_doc = [_reference(nlp, sentences[i : i + 6], True) for i in range(0, len(sentences), 6)]
    logger = logging.getLogger("spacy_piqn")
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    try:
        without = _f(old, six_per_doc, with_starts=False)
    finally:
        logger.removeHandler(handler)
    assert without < _f(old, six_per_doc, with_starts=True) - 0.1
    assert sum("W004" in r.getMessage() for r in records) == 1


def test_pipe_equals_call_on_documents(memorised):
    nlp, sentences = memorised
    texts = [" ".join(" ".join(t) for t, _ in sentences[i : i + 4]) for i in range(0, len(sentences), 4)]
    called = [nlp(text) for text in texts]
    piped = list(nlp.pipe(texts, batch_size=2))
    for a, b in zip(called, piped):
        assert spans_of(a) == spans_of(b) and len(a.spans["sc"]) > 0
        np.testing.assert_allclose(a.spans["sc"].attrs["scores"], b.spans["sc"].attrs["scores"], atol=1e-6)


def test_document_docs_train_from_a_docbin(tmp_path, caplog):
    """One Doc per document (sentence starts in the reference only) through spacy-piqn.Corpus.v1: the predicted
    docs keep the gold tokens, every gold span is a target of its sentence's window, and training runs."""
    nlp = spacy.blank("en")
    data = [(text.split(), spans) for text, spans in NESTED_DATA]
    docs = [_reference(nlp, data[:2], True), _reference(nlp, data[2:], True)]
    DocBin(docs=docs, store_user_data=True).to_disk(tmp_path / "train.spacy")
    fix_random_seed(0)
    nlp.add_pipe("piqn", config=TINY_PIQN)
    examples = list(create_gold_token_corpus(tmp_path / "train.spacy")(nlp))
    assert [len(eg.predicted) for eg in examples] == [len(d) for d in docs]
    assert not examples[0].predicted.has_annotation("SENT_START")
    optimizer = nlp.initialize(lambda: examples)
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        losses = [nlp.update(examples, sgd=optimizer)["piqn"] for _ in range(3)]
    assert all(np.isfinite(losses))
    assert "W002" not in caplog.text  # no gold span crosses a window
    windows = nlp.get_pipe("piqn").model.attrs["get_windows"]([eg.predicted for eg in examples])
    assert [(w.doc, w.start, w.end) for w in windows] == [(0, 0, 12), (0, 12, 17), (1, 0, 4), (1, 4, 12)]


def test_context_words_are_read_around_each_sentence(nested_examples):
    nlp, _ = nested_examples
    config = {
        **TINY_PIQN,
        "model": {**TINY_PIQN["model"], "windows": {"@misc": "spacy-piqn.token_windows.v2", "context": 3}},
    }
    nlp.add_pipe("piqn", config=config)
    doc = _reference(nlp, [(t.split(), s) for t, s in NESTED_DATA], True)
    windows = nlp.get_pipe("piqn").model.attrs["get_windows"]([doc])
    assert [(w.start, w.end, w.left_context, w.right_context) for w in windows] == [
        (0, 12, 0, 3),
        (12, 17, 3, 3),
        (17, 21, 3, 3),
        (21, 29, 3, 0),
    ]
    examples = [Example(Doc(nlp.vocab, words=[t.text for t in doc]), doc)]
    optimizer = nlp.initialize(lambda: examples)
    assert np.isfinite(nlp.update(examples, sgd=optimizer)["piqn"])
    predicted = nlp(Doc(nlp.vocab, words=[t.text for t in doc]))
    assert all(0 <= s.start < s.end <= len(doc) for s in predicted.spans["sc"])
    assert len(predicted.spans["sc"].attrs["scores"]) == len(predicted.spans["sc"])


def test_context_gradient_reaches_every_word_read_and_predictions_only_the_sentence(nested_examples):
    """With context, the head reads words around a sentence (their vectors get a gradient) but predicts only on the
    sentence: the gradient of the first window's pointer logits flows into its context words, and no predicted span
    of a window lies outside its sentence."""
    from spacy_piqn.layers.torch_head import HeadInput

    nlp, _ = nested_examples
    config = {
        **TINY_PIQN,
        "model": {**TINY_PIQN["model"], "windows": {"@misc": "spacy-piqn.token_windows.v2", "context": 3}},
    }
    piqn = nlp.add_pipe("piqn", config=config)
    doc = _reference(nlp, [(t.split(), s) for t, s in NESTED_DATA], True)
    nlp.initialize(lambda: [Example(Doc(nlp.vocab, words=[t.text for t in doc]), doc)])
    head = piqn.model.get_ref("head")
    windows = piqn.model.attrs["get_windows"]([doc])
    second = windows[1]  # tokens 12-17, reading 9-20
    vectors = np.random.default_rng(0).normal(size=(len(doc), head.get_dim("nI"))).astype("float32")
    X = HeadInput([vectors[second.read_start : second.read_end]], np.asarray([[second.left_context, 5]]))
    (left, right, classes), backprop = head(X, is_train=True)
    assert left.shape[-1] == 5  # the 5 words of the sentence
    d_left = np.zeros_like(left)
    d_left[..., 0] = 1.0
    grads = backprop((d_left, np.zeros_like(right), np.zeros_like(classes))).words[0]
    assert grads.shape == (second.read_end - second.read_start, vectors.shape[1])
    # The BiLSTM and the layers carry the gradient to the context words on both sides.
    assert np.abs(grads[0]).sum() > 0 and np.abs(grads[-1]).sum() > 0


@pytest.mark.parametrize("n_layers", [1, 2])
def test_the_last_layer_skips_context_rows_without_changing_any_output(n_layers, monkeypatch):
    """The last word-level layer computes only the rows the pointer and classifier read: its outputs (and those
    of the layers before, in training's all-layers mode) equal those of a layer that runs every row, context
    included, and keeps the predicted ones."""
    from spacy_piqn.settings import DEFAULT_HEAD
    from spacy_piqn.torch_modules import head as head_module

    torch.manual_seed(0)
    head = head_module.PIQNHead(16, 4, replace(DEFAULT_HEAD, n_layers=n_layers)).eval()
    windows = [torch.randn(n, 16) for n in (20, 35, 9)]
    spans = torch.tensor([[3, 10], [5, 25], [0, 9]])  # (offset, length): context on either side, or none
    with torch.no_grad():
        skipped = head(windows, spans, all_layers=True)
        layer_forward = head_module.OneWayLayer.forward

        def every_row(self, words, queries, position, word_mask, query_mask=None, rows=None):
            words, queries = layer_forward(self, words, queries, position, word_mask, query_mask)
            return (words if rows is None else head_module.gather_words(words, rows)), queries

        monkeypatch.setattr(head_module.OneWayLayer, "forward", every_row)
        full = head(windows, spans, all_layers=True)
    assert skipped[0].shape == (n_layers, 3, DEFAULT_HEAD.n_queries, 25)
    for fast, slow in zip(skipped, full):
        torch.testing.assert_close(fast, slow)


@pytest.mark.parametrize("context,documents,warns", [(16, False, True), (16, True, False), (0, False, False)])
def test_initialize_warns_when_prediction_would_read_context_training_never_shows(context, documents, warns, caplog):
    """Trained on single sentences, the model never sees context words; with context > 0 it would meet them only in
    users' documents (W007). Documents in training, or context = 0, are silent."""
    nlp = spacy.blank("en")
    config = {**TINY_PIQN, "model": {**TINY_PIQN["model"], "windows": {"context": context}}}
    nlp.add_pipe("piqn", config=config)
    examples = [one_doc_of_sentences(nlp, NESTED_DATA)[0]] if documents else make_examples(nlp, NESTED_DATA)
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        nlp.initialize(lambda: examples)
    assert ("[W007]" in caplog.text) == warns


def test_corpus_reader_tokens_and_sentence_starts(tmp_path):
    """gold_tokens=False re-tokenizes converted docs (whose spaces are unknown) with the pipeline's tokenizer;
    sent_starts=True gives the predicted docs the reference's sentence boundaries (re-tokenized too), False none."""
    nlp = spacy.blank("en")
    doc = _reference(nlp, [("NF-kappa B binds .".split(), [(0, 2, "protein")]), ("It works .".split(), [])], True)
    DocBin(docs=[doc]).to_disk(tmp_path / "d.spacy")
    (retokenized,) = create_gold_token_corpus(tmp_path / "d.spacy", gold_tokens=False)(nlp)
    assert [t.text for t in retokenized.predicted][:3] == ["NF", "-", "kappa"]
    assert [(s.start, s.end) for s in retokenized.get_aligned_spans_y2x(retokenized.reference.spans["sc"])] == [(0, 4)]
    (with_starts,) = create_gold_token_corpus(tmp_path / "d.spacy", sent_starts=True)(nlp)
    assert [s.start for s in with_starts.predicted.sents] == [0, 4]
    (without,) = create_gold_token_corpus(tmp_path / "d.spacy")(nlp)
    assert not without.predicted.has_annotation("SENT_START")
    (both,) = create_gold_token_corpus(tmp_path / "d.spacy", gold_tokens=False, sent_starts=True)(nlp)
    assert [t.text for t in both.predicted][:3] == ["NF", "-", "kappa"]
    assert [s[0].text for s in both.predicted.sents] == ["NF", "It"]
    assert not retokenized.predicted.has_annotation("SENT_START")


def test_windows_keep_the_rules_boundaries_next_to_a_components():
    """A sentence splitter that finds too few boundaries (here: one sentence for the whole doc) does not put a
    paragraph into one window: the sentencizer rule's boundaries stay; a component's extra boundary is kept too."""
    from spacy_piqn.windows import configure_token_windows

    nlp = spacy.blank("en")
    words = "IL-2 binds . T cells grow fast with IL-4".split()
    get_windows = configure_token_windows()
    one_sentence = Doc(nlp.vocab, words=words, sent_starts=[True] + [False] * (len(words) - 1))
    assert [(w.start, w.end) for w in get_windows([one_sentence])] == [(0, 3), (3, 9)]
    extra = Doc(nlp.vocab, words=words, sent_starts=[True, False, False, True, False, False, True, False, False])
    assert [(w.start, w.end) for w in get_windows([extra])] == [(0, 3), (3, 6), (6, 9)]


@pytest.mark.parametrize("name", ["piqn_tok2vec.cfg", "piqn_trf_listener.cfg", "piqn_trf.cfg"])
def test_shipped_configs_learn_sentences_from_documents(name):
    """Every shipped config trains a senter before piqn and feeds piqn the gold sentences of training documents,
    so that raw text is read one sentence at a time; dev docs keep no sentence starts (scored as running text)."""
    config = spacy.util.load_config(Path(__file__).resolve().parents[1] / "configs" / name)
    pipeline = config["nlp"]["pipeline"]
    assert "senter" in pipeline and pipeline.index("senter") < pipeline.index("piqn")
    assert config["corpora"]["train"]["sent_starts"] is True and config["corpora"]["dev"]["sent_starts"] is False
    assert config["training"]["score_weights"]["sents_f"] == 0.0
