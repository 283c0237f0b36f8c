"""Real corpora meet odd docs, long and dense docs, worker processes and reloads."""

import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import spacy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.util import make_tempdir
from thinc.api import fix_random_seed

from spacy_piqn.targets import gold_spans, window_targets
from spacy_piqn.tokenizer import create_piqn_tokenizer

from .conftest import (
    NESTED_DATA,
    REPO,
    TINY_PIQN,
    one_doc_of_sentences,
    spans_of,
    train_examples,
    train_tiny,
)

TOKENS = st.one_of(
    st.text(min_size=1, max_size=3),
    st.sampled_from(["IL-2", "gene", "T", "cells", ".", "🧬", "é", "\u200b", "NF-kappa", "x" * 500]),
)


def check_group(nlp, doc):
    group = doc.spans["sc"]
    labels = set(nlp.get_pipe("piqn").labels)
    assert len(group.attrs["scores"]) == len(group)
    for span, score in zip(group, group.attrs["scores"]):
        assert 0 <= span.start < span.end <= len(doc)
        assert span.label_ in labels
        assert 0.0 <= float(score) <= 1.0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(TOKENS, min_size=0, max_size=60))
def test_random_docs_give_valid_span_groups(trained_tiny, words):
    nlp, _ = trained_tiny
    check_group(nlp, nlp(Doc(nlp.vocab, words=words)))


def test_whitespace_and_huge_docs(trained_tiny):
    nlp, _ = trained_tiny
    docs = [
        Doc(nlp.vocab, words=[" ", "\n", "IL-2", "\t"], spaces=[False] * 4),
        Doc(nlp.vocab, words=(["IL-2", "gene", "in", "T", "cells", "."] * 850)[:5000]),
        Doc(nlp.vocab, words=[]),
    ]
    for doc in nlp.pipe(docs, batch_size=2):
        check_group(nlp, doc)


def test_long_doc_trains_and_predicts_in_the_last_window(caplog):
    """One 2,000+ token doc with sentence boundaries: sentence windows, trained and predicted across the whole doc.

    Checked on the structure, not on what a short training run finds (that depends on the head and on the CPU's
    float rounding): the last sentence is the last window, its gold is that window's training target, nothing is
    logged as left out, and the last window's logits equal those of the same sentence at the end of a short doc
    that repeats the sentences before it (the head reads 16 context words, the tok2vec 4 more). What a trained
    pipeline writes for a long doc, window by window: `test_long_doc_is_predicted_in_every_window` in test_pipe.py.
    """
    fix_random_seed(0)
    nlp = spacy.blank("en")
    # The shipped configs' tokenizer, which keeps NF-kappa whole as these gold tokens do (else W005 says so).
    nlp.tokenizer = create_piqn_tokenizer(split_hyphens=False)(nlp)
    piqn = nlp.add_pipe("piqn", config=TINY_PIQN)
    example, make_doc, gold = one_doc_of_sentences(nlp, [NESTED_DATA[i] for i in (0, 1, 3)] * 85)
    assert len(example.reference) > 2000
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        losses = train_examples(nlp, [example], steps=3)
    assert np.isfinite(losses["piqn"])
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text

    doc = make_doc(nlp.vocab)
    last = list(doc.sents)[-1]
    output = piqn.predict([doc])
    assert len(output.windows) == 255
    assert (output.windows[-1].start, output.windows[-1].end) == (last.start, last.end)
    per_doc, _ = gold_spans([example], piqn.key, piqn.labels, piqn.name)
    targets = window_targets(per_doc, output.windows, n_queries=8)[0][-1]
    last_gold = sorted((s - last.start, e - last.start) for s, e, _ in gold if s >= last.start)
    assert last_gold and sorted((int(s), int(e) + 1) for _, s, e in targets) == last_gold

    _, make_short, _ = one_doc_of_sentences(nlp, [NESTED_DATA[i] for i in (0, 1, 3)] * 2)
    short_doc = make_short(nlp.vocab)
    short = piqn.predict([short_doc])
    assert short.windows[-1].left_context == output.windows[-1].left_context == 16  # add_pipe's default context
    assert short.windows[-1].start >= 16 + 4
    n = last.end - last.start
    np.testing.assert_allclose(output.classes[-1][-1], short.classes[-1][-1], atol=1e-5)
    for name in ("left", "right"):  # (queries, words), padded to the longest window of the batch
        np.testing.assert_allclose(getattr(output, name)[-1][-1][:, :n], getattr(short, name)[-1][-1][:, :n], atol=1e-5)


def test_inference_is_deterministic(trained_tiny):
    nlp, _ = trained_tiny
    piqn = nlp.get_pipe("piqn")
    docs = [Doc(nlp.vocab, words=text.split()) for text, _ in NESTED_DATA]
    first, second = piqn.predict(docs), piqn.predict(docs)
    assert np.array_equal(first.classes, second.classes) and np.array_equal(first.left, second.left)


def test_training_is_deterministic_with_a_seed():
    weights = []
    for _ in range(2):
        nlp, _ = train_tiny(steps=5)
        weights.append(nlp.get_pipe("piqn").model.to_bytes())
    assert weights[0] == weights[1]


# Hang guards, not speed limits: generous enough for a machine busy with other jobs, small enough that a deadlocked
# fork still fails the suite.
HANG_TIMEOUT_S = 900


def run_python(code: str, env_extra=None, timeout=HANG_TIMEOUT_S) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )


def test_multiprocessing_matches_single_process_and_does_not_hang():
    # Torch's 2-thread pool has run in the parent before the fork: the case that hangs forked
    # workers without the component's fork hook (checked by hand: timeout with the hook off).
    result = run_python(
        """
        import torch
        torch.set_num_threads(1)
        from tests.conftest import train_tiny, NESTED_DATA
        nlp, _ = train_tiny()
        torch.set_num_threads(2)
        texts = [t for t, _ in NESTED_DATA] * 10
        one = [[(s.start, s.end, s.label_) for s in d.spans["sc"]] for d in nlp.pipe(texts)]
        two = [[(s.start, s.end, s.label_) for s in d.spans["sc"]] for d in nlp.pipe(texts, n_process=2, batch_size=4)]
        assert one == two, (one, two)
        print("OK")
        """,
        env_extra={"OMP_NUM_THREADS": "2"},
    )
    assert result.returncode == 0 and "OK" in result.stdout, result.stderr[-2000:]


def test_loads_offline_without_unpickling(trained_tiny):
    nlp, _ = trained_tiny
    expected = spans_of(nlp(Doc(nlp.vocab, words=NESTED_DATA[0][0].split())))
    with make_tempdir() as tmp:
        nlp.to_disk(tmp)
        result = run_python(
            f"""
            import torch, spacy
            def no_pickle(*args, **kwargs):
                raise AssertionError("torch.load (pickle) was called")
            torch.load = no_pickle
            from spacy.tokens import Doc
            nlp = spacy.load({str(tmp)!r})
            doc = nlp(Doc(nlp.vocab, words={NESTED_DATA[0][0].split()!r}))
            print(sorted((s.start, s.end, s.label_) for s in doc.spans["sc"]))
            """,
            env_extra={
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "HTTP_PROXY": "http://127.0.0.1:9",
                "HTTPS_PROXY": "http://127.0.0.1:9",
            },
        )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == str(sorted(expected))


def test_misaligned_gold_is_reported(caplog):
    nlp = spacy.blank("en")
    nlp.add_pipe("piqn", config=TINY_PIQN)
    ref = Doc(nlp.vocab, words=["NF-kappa", "B", "binds"])
    ref.spans["sc"] = [Span(ref, 0, 2, label="protein")]
    pred = nlp.make_doc("NF - kappa B binds")
    # Gold boundaries that fall inside a predicted token cannot be trained on.
    ref2 = Doc(nlp.vocab, words=["NF", "-kappa", "B"], spaces=[False, True, False])
    ref2.spans["sc"] = [Span(ref2, 1, 3, label="protein")]
    examples = [Example(pred, ref), Example(Doc(nlp.vocab, words=["NF-kappa", "B"]), ref2)]
    optimizer = nlp.initialize(lambda: examples)
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        nlp.update(examples, sgd=optimizer)
    assert "W003" in caplog.text
