"""piqn_senter: spaCy's senter with a learning-rate scale (the transformer configs' sentence splitter)."""

import numpy
import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example
from thinc.api import SGD, fix_random_seed

from .conftest import REPO

WORDS = "IL-2 binds NF-kappa B . Jurkat cells express IL-4 . No entities here .".split()


def _examples(nlp):
    starts = [word_index in (0, 5, 10) for word_index in range(len(WORDS))]
    return [Example(Doc(nlp.vocab, words=WORDS), Doc(nlp.vocab, words=WORDS, sent_starts=starts))]


def _senter(factory: str, **config):
    fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe(factory, name="senter", config=config)
    examples = _examples(nlp)
    nlp.initialize(lambda: examples)
    return nlp, examples


def _weights(nlp):
    model = nlp.get_pipe("senter").model
    return {
        (node.name, i, name): node.get_param(name).copy()
        for i, node in enumerate(model.walk())
        for name in node.param_names
        if node.has_param(name)
    }


def test_piqn_senter_steps_lr_scale_times_as_far_as_senter():
    """One plain-SGD update from the same start moves every weight lr_scale times as far as spaCy's senter does."""
    steps = {}
    for factory, config in (("senter", {}), ("piqn_senter", {"lr_scale": 20.0})):
        nlp, examples = _senter(factory, **config)
        before = _weights(nlp)
        nlp.update(examples, sgd=SGD(0.001))
        after = _weights(nlp)
        steps[factory] = {key: after[key] - before[key] for key in before}
    assert steps["senter"].keys() == steps["piqn_senter"].keys()
    moved = [key for key, step in steps["senter"].items() if numpy.abs(step).max() > 0]
    assert moved
    for key in moved:
        numpy.testing.assert_allclose(steps["piqn_senter"][key], 20.0 * steps["senter"][key], rtol=1e-4, atol=1e-9)


def test_piqn_senter_is_a_senter_that_round_trips(tmp_path):
    nlp, examples = _senter("piqn_senter", lr_scale=20.0)
    optimizer = nlp.resume_training()
    for _ in range(30):
        nlp.update(examples, sgd=optimizer)
    starts = [token.is_sent_start for token in nlp(" ".join(WORDS))]
    assert nlp.evaluate(examples)["sents_f"] == 1.0
    nlp.to_disk(tmp_path / "p")
    loaded = spacy.load(tmp_path / "p")
    assert loaded.get_pipe("senter").lr_scale == 20.0
    assert [token.is_sent_start for token in loaded(" ".join(WORDS))] == starts


def test_piqn_senter_rejects_a_non_positive_lr_scale():
    with pytest.raises(ValueError, match=r"\[E058\] piqn_senter needs lr_scale > 0.*got 0"):
        spacy.blank("en").add_pipe("piqn_senter", config={"lr_scale": 0.0})


@pytest.mark.parametrize("name", ["piqn_trf_listener.cfg", "piqn_trf.cfg"])
def test_transformer_configs_give_their_senter_the_heads_learning_rate(name):
    """At a transformer's rate (5e-5) a fresh senter learns no boundary: the configs scale its rate as the head's,
    so that both learn at 1e-3 whatever rate the transformer fine-tunes at."""
    config = spacy.util.load_config(REPO / "configs" / name)
    senter = config["components"]["senter"]
    rate = config["training"]["optimizer"]["learn_rate"]["initial_rate"]
    assert senter["factory"] == "piqn_senter"
    assert senter["lr_scale"] == config["components"]["piqn"]["model"]["head"]["lr_scale"]
    assert senter["lr_scale"] * rate == pytest.approx(1e-3)
