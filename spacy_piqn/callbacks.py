"""Training callbacks (``[training.before_update]`` and friends)."""

import logging
from typing import Any, Callable, Dict, Iterator

from spacy.language import Language
from spacy.util import registry
from thinc.api import Model

from .errors import Errors

logger = logging.getLogger("spacy_piqn")


@registry.callbacks("spacy-piqn.freeze_transformer.v1")
def create_freeze_transformer(steps: int) -> Callable[[Language, Dict[str, Any]], None]:
    """PIQN's warm-up: for the first ``steps`` updates the pretrained transformer of every
    ``spacy-piqn.QueryTransformer.v1`` in the pipeline is frozen, while the instance queries
    (inside it) and the head learn. PIQN freezes BERT for its first 5 epochs.

    steps (int): updates with the transformer frozen (0: never frozen).

    Use it as ``[training.before_update] @callbacks = "spacy-piqn.freeze_transformer.v1"``.
    The optimizer's state is not reset at unfreezing (PIQN resets its AdamW there), and its
    learning-rate schedule is the one in [training.optimizer].
    """
    if steps < 0:
        raise ValueError(Errors.E017.format(steps=steps))
    state = {"frozen": None}

    def before_update(nlp: Language, info: Dict[str, Any]) -> None:
        frozen = info["step"] < steps
        encoders = list(_query_transformers(nlp))
        if not encoders:
            raise ValueError(Errors.E018)
        for encoder in encoders:
            encoder.freeze_transformer = frozen
        if frozen != state["frozen"]:
            logger.info("Step %d: pretrained transformer %s", info["step"], "frozen" if frozen else "trainable")
            state["frozen"] = frozen

    return before_update


def _query_transformers(nlp: Language) -> Iterator[Any]:
    from .layers.query_transformer import QueryTransformerShim

    for _, component in nlp.components:
        model = getattr(component, "model", None)
        if not isinstance(model, Model):
            continue
        for node in model.walk():
            for shim in node.shims:
                if isinstance(shim, QueryTransformerShim) and shim.encoder is not None:
                    yield shim.encoder
