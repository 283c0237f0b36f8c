"""Denoising queries: noised gold copies that train the head in parallel to the matched queries."""

import copy

import numpy as np
import pytest
import spacy
import torch

from spacy_piqn.denoising import noised_copies
from spacy_piqn.settings import HeadSettings, LossSettings
from spacy_piqn.torch_modules.head import PIQNHead

from .conftest import TINY_PIQN, train_tiny


def test_noised_copies_stay_in_the_window_near_their_gold():
    gold = [np.array([[1, 0, 0], [2, 3, 7], [3, 9, 9]]), np.zeros((0, 3), dtype=np.int64)]
    rng = np.random.default_rng(0)
    for _ in range(50):
        copies = noised_copies(gold, [10, 4], 4, 0.4, 0.0, 30, rng)
        assert [len(c) for c in copies] == [3, 0]
        c = copies[0]
        assert (c[:, :3] == gold[0]).all() and (c[:, 3] == gold[0][:, 0]).all()
        left, right = c[:, 4], c[:, 5]
        assert ((0 <= left) & (left <= right) & (right <= 9)).all()
        reach = np.ceil(0.4 * (gold[0][:, 2] - gold[0][:, 1] + 1))
        # Putting crossed boundaries back in order never moves them further than the reach.
        assert (np.abs(left - gold[0][:, 1]) <= reach).all() and (np.abs(right - gold[0][:, 2]) <= reach).all()
    # No noise: the copy is the gold; full label noise draws entity classes only.
    exact = noised_copies(gold, [10, 4], 4, 0.0, 0.0, 30, rng)[0]
    assert (exact[:, 3:] == exact[:, :3]).all()
    relabelled = np.concatenate([noised_copies(gold, [10, 4], 4, 0.0, 1.0, 30, rng)[0][:, 3] for _ in range(30)])
    assert set(relabelled) == {1, 2, 3}
    assert len(noised_copies(gold, [10, 4], 4, 0.4, 0.2, 2, rng)[0]) == 2


@pytest.mark.parametrize("max_padded_words", [1024, 8])
def test_matched_queries_never_see_the_denoising_queries(max_padded_words):
    """The M queries' outputs are the same with or without denoising queries next to them, and
    there are M + max D outputs per window (also when windows run in length groups)."""
    torch.manual_seed(0)
    settings = HeadSettings(
        width=32,
        n_queries=6,
        n_heads=4,
        n_layers=2,
        pointer_width=16,
        denoising=True,
        max_padded_words=max_padded_words,
    )
    head = PIQNHead(16, 4, settings).eval()
    words = [torch.randn(9, 16), torch.randn(5, 16)]
    # Window 1 has one denoising query; class 0 marks the padding rows.
    denoise = torch.tensor([[[1, 0, 2], [3, 4, 4], [2, 5, 8]], [[2, 1, 3], [0, 0, 0], [0, 0, 0]]])
    with torch.no_grad():
        plain = head(words, all_layers=True)
        noised = head(words, all_layers=True, denoise=denoise)
    for a, b in zip(plain[:3], noised[:3]):
        assert b.shape[2] == 6 + 3
        assert torch.allclose(a, b[:, :, :6], atol=1e-5)
    # A head built without denoising says so.
    with pytest.raises(ValueError, match="E050"):
        PIQNHead(16, 4, HeadSettings(width=32, n_queries=6, n_heads=4))(words, denoise=denoise)


def test_denoising_trains_round_trips_and_predicts_only_m_queries(tmp_path):
    config = copy.deepcopy(TINY_PIQN)
    config["model"]["denoising"] = True
    nlp, examples = train_tiny(steps=100, config=config)
    pipe = nlp.get_pipe("piqn")
    assert nlp.evaluate(examples)["spans_sc_f"] >= 0.9
    # Nothing of the training-only side channel is left on the model or saved with it.
    assert "denoise" not in pipe.model.attrs and "denoise" not in pipe.model.get_ref("head").attrs
    scores = pipe.predict([eg.predicted for eg in examples])
    assert scores.left.shape[2] == TINY_PIQN["model"]["n_queries"] and scores.denoise is None
    texts = [eg.reference.text for eg in examples]
    before = [[(s.start, s.end, s.label_) for s in d.spans["sc"]] for d in nlp.pipe(texts)]
    nlp.to_disk(tmp_path / "p")
    after = [[(s.start, s.end, s.label_) for s in d.spans["sc"]] for d in spacy.load(tmp_path / "p").pipe(texts)]
    assert before == after and any(before)


def test_denoising_on_an_entity_free_batch_gives_a_finite_loss():
    from spacy.training import Example

    config = copy.deepcopy(TINY_PIQN)
    config["model"]["denoising"] = True
    nlp, examples = train_tiny(steps=1, config=config)
    empty = [Example(eg.predicted.copy(), eg.predicted.copy()) for eg in examples]
    losses = nlp.update(empty, sgd=nlp.create_optimizer())
    assert np.isfinite(losses["piqn"])


def test_invalid_denoising_settings_are_clear_errors():
    with pytest.raises(ValueError, match="E048"):
        HeadSettings(denoising_prior=-1.0)
    with pytest.raises(ValueError, match="E049"):
        LossSettings(denoising_label_noise=1.5)
