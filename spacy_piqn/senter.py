"""``piqn_senter``: spaCy's ``senter`` with its own learning-rate scale.

thinc has one learning rate per pipeline. In a transformer pipeline it is the transformer's (5e-5),
at which a senter's fresh CNN learns no sentence boundary in a useful time (sentence F 4–8 after 250
updates), and piqn then reads documents in windows that mix sentences. ``lr_scale`` gives the senter
the rate a freshly initialized model needs, as the head's ``lr_scale`` does for piqn.
"""

from typing import Callable, List, Optional

from spacy.language import Language
from spacy.pipeline.senter import DEFAULT_SENTER_MODEL, SentenceRecognizer, senter_score
from spacy.tokens import Doc
from spacy.vocab import Vocab
from thinc.api import Model, Optimizer
from thinc.types import Floats2d

from .errors import Errors
from .layers.torch_head import scale_learning_rate


class ScaledSentenceRecognizer(SentenceRecognizer):
    """A ``senter`` whose weights learn at ``lr_scale`` × the optimizer's rate."""

    def __init__(
        self,
        vocab: Vocab,
        model: Model,
        name: str = "senter",
        *,
        lr_scale: float = 1.0,
        overwrite: bool = False,
        scorer: Optional[Callable] = senter_score,
    ):
        if not lr_scale > 0:
            raise ValueError(Errors.E058.format(value=lr_scale))
        super().__init__(vocab, model, name, overwrite=overwrite, scorer=scorer)
        self.lr_scale = lr_scale

    def finish_update(self, sgd: Optimizer) -> None:
        self.model.finish_update(scale_learning_rate(sgd, lambda _name: self.lr_scale))


@Language.factory(
    "piqn_senter",
    assigns=["token.is_sent_start"],
    default_config={
        "model": DEFAULT_SENTER_MODEL,
        "lr_scale": 1.0,
        "overwrite": False,
        "scorer": {"@scorers": "spacy.senter_scorer.v1"},
    },
    default_score_weights={"sents_f": 1.0, "sents_p": 0.0, "sents_r": 0.0},
)
def make_piqn_senter(
    nlp: Language,
    name: str,
    model: Model[List[Doc], List[Floats2d]],
    lr_scale: float,
    overwrite: bool,
    scorer: Optional[Callable],
) -> ScaledSentenceRecognizer:
    """spaCy's ``senter`` (same model, labels and scorer) learning at ``lr_scale`` × [training.optimizer]'s rate."""
    return ScaledSentenceRecognizer(nlp.vocab, model, name, lr_scale=lr_scale, overwrite=overwrite, scorer=scorer)
