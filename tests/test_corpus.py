"""The corpus reader keeps the reference docs it has read once, and training with it is unchanged."""

import io
import random

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.training.initialize import init_nlp
from spacy.training.loop import train as train_nlp

from spacy_piqn.convert import jsonl_to_docs
from spacy_piqn.corpus import create_gold_token_corpus

from .conftest import NESTED_DATA, REPO, make_examples


@pytest.fixture
def docbin(tmp_path):
    nlp = spacy.blank("en")
    path = tmp_path / "d.spacy"
    DocBin(docs=[eg.reference for eg in make_examples(nlp, NESTED_DATA)]).to_disk(path)
    return path


def _read(reader, nlp):
    """Each example's predicted words and gold spans."""
    return [
        ([t.text for t in eg.predicted], [(s.start, s.end, s.label_) for s in eg.reference.spans["sc"]])
        for eg in reader(nlp)
    ]


def test_a_complete_read_is_kept_for_the_same_vocab(docbin):
    nlp = spacy.blank("en")
    reader = create_gold_token_corpus(docbin)
    next(iter(reader(nlp)))  # a partial read keeps nothing
    first = list(reader(nlp))
    docbin.unlink()
    again = list(reader(nlp))
    assert _read(lambda _: again, nlp) == _read(lambda _: first, nlp) and len(first) == len(NESTED_DATA)
    assert all(a.reference is b.reference and a.predicted is not b.predicted for a, b in zip(first, again))
    with pytest.raises(FileNotFoundError):  # another pipeline's vocab reads the files again
        list(reader(spacy.blank("en")))


def test_cache_false_reads_the_files_every_time(docbin):
    nlp = spacy.blank("en")
    reader = create_gold_token_corpus(docbin, cache=False)
    list(reader(nlp))
    docbin.unlink()
    with pytest.raises(FileNotFoundError):
        list(reader(nlp))


def test_shuffle_reorders_the_kept_docs_each_read(docbin):
    nlp = spacy.blank("en")
    in_order = _read(create_gold_token_corpus(docbin), nlp)
    reader = create_gold_token_corpus(docbin, shuffle=True)
    random.seed(0)
    orders = [_read(reader, nlp) for _ in range(4)]
    assert all(sorted(order) == sorted(in_order) for order in orders)
    assert len({tuple(map(str, order)) for order in orders}) > 1


def _trained(tmp_path, cache: bool):
    """A few updates of the shipped tok2vec config on the sample corpus, every read through the reader: the
    piqn component's weights and the last evaluation's losses and dev scores."""
    paths = {}
    for split in ("train", "dev"):
        nlp = spacy.blank("en")
        paths[split] = tmp_path / f"{split}.spacy"
        if not paths[split].exists():
            DocBin(docs=list(jsonl_to_docs(REPO / "assets" / "sample" / f"{split}.jsonl", nlp))).to_disk(paths[split])
    overrides = {
        "paths.train": str(paths["train"]),
        "paths.dev": str(paths["dev"]),
        "corpora.train.cache": cache,
        "corpora.dev.cache": cache,
        "corpora.train.shuffle": True,
        "training.max_steps": 6,
        "training.eval_frequency": 3,
        "training.optimizer.learn_rate.total_steps": 6,
        "training.batcher.size.start": 100,
        "training.batcher.size.stop": 100,
        "components.piqn.model.head.hidden_width": 32,
        "components.piqn.model.head.n_queries": 6,
    }
    config = spacy.util.load_config(REPO / "configs" / "piqn_tok2vec.cfg", overrides=overrides)
    nlp = init_nlp(config)
    nlp, _ = train_nlp(nlp, None, stdout=io.StringIO())
    return nlp.get_pipe("piqn").to_bytes(exclude=["vocab"]), nlp.meta["performance"]


def test_training_reads_the_same_with_and_without_the_cache(tmp_path):
    """Six updates and two evaluations over several epochs give the same weights whether the reader keeps the
    docs or reads the files each time: nothing in training changes a reference doc it would read again."""
    weights, scores = _trained(tmp_path, True)
    assert scores["piqn_loss"] > 0 and scores["sents_f"] > 0
    assert (weights, scores) == _trained(tmp_path, False)
