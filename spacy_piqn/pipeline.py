"""The ``piqn`` component: PIQN entity queries → overlapping spans in ``doc.spans[spans_key]``.

Kept light on purpose: spaCy imports every factory entry point on each ``spacy.blank``, so
torch-only modules (the loss, the nn.Modules) are imported where they are used.
"""

import logging
from dataclasses import asdict
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import srsly
from spacy import util
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc, Span, SpanGroup
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.vocab import Vocab
from thinc.api import Config, Model, Optimizer, set_dropout_rate

from .decoding import decode_windows, filter_candidates, keep_candidates
from .errors import Errors
from .layers.piqn_model import PIQNOutput
from .layers.torch_head import check_finite, head_settings, saved_head_settings
from .settings import DEFAULT_DECODING as DD
from .settings import DEFAULT_LOSS as DL
from .settings import RUNTIME, STRUCTURAL, LossSettings, component_settings
from .targets import gold_spans, window_targets
from .tokenizer import tokenizer_mismatch
from .windows import unseen_context

logger = logging.getLogger("spacy_piqn")

# The head's settings are left out: spaCy fills them from the builder's defaults (settings.py).
DEFAULT_MODEL_CONFIG = """
[model]
@architectures = "spacy-piqn.PIQN.v2"

[model.windows]
@misc = "spacy-piqn.token_windows.v3"
size = 32
stride = 16
context = 16
predict_size = 16
predict_stride = 8

[model.head]
@architectures = "spacy-piqn.PIQNHead.v1"

[model.tok2vec]
@architectures = "spacy.Tok2Vec.v2"

[model.tok2vec.embed]
@architectures = "spacy.MultiHashEmbed.v2"
width = 96
attrs = ["NORM", "PREFIX", "SUFFIX", "SHAPE"]
rows = [5000, 1000, 2500, 2500]
include_static_vectors = false

[model.tok2vec.encode]
@architectures = "spacy.MaxoutWindowEncoder.v2"
width = 96
depth = 4
window_size = 1
maxout_pieces = 3
"""
DEFAULT_MODEL = Config().from_str(DEFAULT_MODEL_CONFIG)["model"]


@Language.factory(
    "piqn",
    assigns=["doc.spans"],
    default_config={
        "model": DEFAULT_MODEL,
        "spans_key": "sc",
        **asdict(DL),
        **asdict(DD),
        "scorer": {"@scorers": "spacy-piqn.piqn_scorer.v1"},
    },
    default_score_weights={
        "spans_sc_f": 1.0,
        "spans_sc_p": 0.0,
        "spans_sc_r": 0.0,
        "spans_sc_loc_f": 0.0,
        "spans_sc_cls_f": 0.0,
    },
)
def make_piqn(
    nlp: Language,
    name: str,
    model: Model[List[Doc], PIQNOutput],
    spans_key: str,
    n_slots: int,
    match_class_weight: float,
    match_boundary_weight: float,
    loss_class_weight: float,
    loss_boundary_weight: float,
    class_threshold: float,
    boundary_threshold: float,
    decoding: str,
    set_ents: bool,
    scorer: Optional[Callable],
    ordered_warmup_updates: int = DL.ordered_warmup_updates,
    static_assignment: bool = DL.static_assignment,
    label_smoothing: float = DL.label_smoothing,
    iou_class_target: float = DL.iou_class_target,
    loss_tag_weight: float = DL.loss_tag_weight,
    merge_nested_duplicates: bool = DD.merge_nested_duplicates,
    merge_keep_ratio: float = DD.merge_keep_ratio,
    tagger_boundary_weight: float = DD.tagger_boundary_weight,
) -> "PIQN":
    """Create a PIQN entity recognizer.

    model (Model[List[Doc], PIQNOutput]): a ``spacy-piqn.PIQN.v2`` (or ``PIQNQueryTransformer.v2``) model.
    spans_key (str): where predictions go: ``doc.spans[spans_key]``; also where gold is read.
    n_slots (int): Q, the slots shared among a window's gold entities in the one-to-many
        assignment (each entity gets about Q/G queries; Q = G when G > Q).
    match_class_weight / match_boundary_weight (float): weights of the type and boundary
        probabilities in the assignment cost.
    loss_class_weight / loss_boundary_weight (float): weights of the class CE and the boundary loss.
    ordered_warmup_updates (int): the first this many updates of a training process assign
        queries to gold statically (queries in index order take the entities in text order)
        instead of by Hungarian matching. 0: Hungarian from the start, as in PIQN.
    static_assignment (bool): never match: query i takes the i-th slot of the entities in text
        order on every update (the paper's "w/o dynamic label assignment" ablation).
    label_smoothing (float): share of each query's class target spread over all classes.
    iou_class_target (float): 0..1, how much a matched query's type target follows the IoU of its
        argmax span with its gold entity (the rest goes to "None").
    loss_tag_weight (float): weight of the word tagger's loss (a head with ``word_tagger = true``).
    class_threshold (float): keep a query's entity only if its class probability is above this.
    boundary_threshold (float): ... and both boundary probabilities are above this.
    decoding (str): "nested" (drop spans crossing a better one, one label per span) or "flat"
        (no overlaps).
    merge_nested_duplicates (bool): with "nested" decoding, also drop a span nested in (or
        around) a better one of the same label with which it shares a boundary: the near misses
        of PIQN's several queries per entity look like that.
    merge_keep_ratio (float): ... unless its score is at least this fraction of the better span's
        (real nests score about as high as their parent, near misses lower); > 1: always drop.
    tagger_boundary_weight (float): with a head that has a word tagger, each query's boundaries
        are the pair among its pointers' best three that scores highest in log P_left + log P_right
        + this weight × the tagger's agreement with the query's type (its mean log probability
        inside the span, log (1 - p) just outside either end); 0: the pointers' argmax.
    set_ents (bool): also write a non-overlapping selection (best score first) to ``doc.ents``,
        replacing what was there.
    scorer (Optional[Callable]): defaults to ``spacy-piqn.piqn_scorer.v1``.
    """
    # Everything but the framework's arguments goes to the component as its settings.
    settings = {key: value for key, value in locals().items() if key not in ("nlp", "name", "model", "scorer")}
    return PIQN(nlp.vocab, model, name, scorer=scorer, **settings)


class PIQN(TrainablePipe):
    """Nested and flat NER with Parallel Instance Queries (Shen et al., 2022).

    Every window of a doc is read by M queries; each query predicts one entity (left and
    right boundary, type or "None") and all of them come out in one pass. Predictions go to
    ``doc.spans[spans_key]`` with ``attrs["scores"]`` (span scores) parallel to them.
    """

    def __init__(
        self,
        vocab: Vocab,
        model: Model[List[Doc], PIQNOutput],
        name: str = "piqn",
        *,
        spans_key: str = "sc",
        scorer: Optional[Callable] = None,
        **settings: Any,
    ) -> None:
        """settings: fields of ``LossSettings`` and ``DecodingSettings`` (validated there); those left
        out take their defaults (the factory passes all of them, from its config)."""
        loss, decoding = component_settings(settings)
        self.vocab = vocab
        self.model = model
        self.name = name
        self.scorer = scorer
        self.cfg: Dict[str, Any] = {"labels": [], "spans_key": spans_key, **asdict(loss), **asdict(decoding)}
        self.cfg["nI"] = None
        # Updates made by this process (not saved): the ordered warm-up counts them.
        self.n_updates = 0

    @property
    def key(self) -> str:
        return str(self.cfg["spans_key"])

    @property
    def labels(self) -> Tuple[str, ...]:
        return tuple(self.cfg["labels"])

    @property
    def label_data(self) -> List[str]:
        return list(self.labels)

    @property
    def _head(self) -> Model:
        return self.model.get_ref("head")

    def add_label(self, label: str) -> int:
        """Add a label before initialization. RETURNS (int): 0 if it was known, else 1."""
        if not isinstance(label, str):
            raise ValueError(Errors.E014.format(label=label, name=self.name))
        if label in self.labels:
            return 0
        if self._head.layers:
            raise ValueError(Errors.E002.format(label=label, name=self.name))
        self.cfg["labels"].append(label)
        self.vocab.strings.add(label)
        return 1

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        labels: Optional[Sequence[str]] = None,
    ) -> None:
        """Collect labels (unless given, e.g. by ``spacy init labels``), size the head and
        initialize the model on a sample of the examples; warn (W005 / W006) if the pipeline's
        tokenizer writes hyphenated words, slashes or full stops after capitals unlike the training data, and
        (W007) if prediction would read context words that training never shows."""
        validate_get_examples(get_examples, "PIQN.initialize")
        sample = [eg.reference for eg in islice(get_examples(), 2000)]
        warnings = tokenizer_mismatch(nlp, sample) if nlp is not None else []
        warnings.append(unseen_context(self.model.attrs["get_windows"], sample))
        for warning in filter(None, warnings):
            logger.warning(warning)
        if labels is None:
            labels = sorted({span.label_ for eg in get_examples() for span in eg.reference.spans.get(self.key, [])})
        for label in labels:
            self.add_label(label)
        if not self.labels:
            raise ValueError(Errors.E003.format(name=self.name, key=self.key))
        self._head.set_dim("nO", len(self.labels) + 1)
        self.model.initialize(X=[eg.predicted for eg in islice(get_examples(), 10)])
        self.cfg["nI"] = self._head.get_dim("nI")

    def predict(self, docs: Iterable[Doc]) -> PIQNOutput:
        """The last layer's probabilities for every window; docs are not modified."""
        return self.model.predict(list(docs))

    def set_annotations(self, docs: Iterable[Doc], scores: PIQNOutput) -> None:
        """Decode each window, merge a doc's windows and write ``doc.spans[spans_key]``."""
        docs = list(docs)
        found = decode_windows(
            *self.probabilities(scores),
            scores.windows,
            len(docs),
            self.cfg["class_threshold"],
            self.cfg["boundary_threshold"],
            self.tag_probabilities(scores),
            self.cfg["tagger_boundary_weight"],
        )
        for doc, (starts, ends, types, probs) in zip(docs, found):
            starts, ends = trim_whitespace(doc, starts, ends)
            real = np.flatnonzero(ends > starts)
            starts, ends, types, probs = starts[real], ends[real], types[real], probs[real]
            keep = keep_candidates(starts, ends, types, probs, self.cfg)
            # Sorted by position, like the gold groups the converter writes.
            keep = keep[np.lexsort((ends[keep], starts[keep]))]
            spans = [Span(doc, int(starts[i]), int(ends[i]), label=self.labels[types[i] - 1]) for i in keep]
            group = SpanGroup(doc, name=self.key, spans=spans)
            group.attrs["scores"] = probs[keep].astype(np.float32)
            doc.spans[self.key] = group
            if self.cfg["set_ents"]:
                flat = filter_candidates(starts[keep], ends[keep], probs[keep], "flat")
                doc.ents = sorted((spans[i] for i in flat), key=lambda s: s.start)

    def probabilities(self, scores: PIQNOutput) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The last layer's class (B, M, C) and left/right boundary (B, M, n) probabilities."""
        if scores.classes is None:  # no windows in the batch
            return (np.zeros((0, 0, 0), dtype=np.float32),) * 3
        to_numpy = self.model.ops.to_numpy
        return to_numpy(scores.classes[-1]), to_numpy(scores.left[-1]), to_numpy(scores.right[-1])

    def tag_probabilities(self, scores: PIQNOutput) -> Optional[np.ndarray]:
        """A word tagger's probabilities (B, n, labels); None for a head without one."""
        if scores.tags is None:
            return None
        return self.model.ops.to_numpy(scores.tags[-1])

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        """Learn from a batch: forward, assignment + loss (``get_loss``), backprop."""
        losses = {} if losses is None else losses
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_examples(examples, "PIQN.update")
        set_dropout_rate(self.model, drop)
        scores, backprop_scores = self.model.begin_update([eg.predicted for eg in examples])
        loss, d_scores = self.get_loss(examples, scores)
        self.n_updates += 1
        backprop_scores(d_scores)
        if sgd is not None:
            self.finish_update(sgd)
        losses[self.name] += loss
        return losses

    def get_loss(self, examples: Iterable[Example], scores: PIQNOutput) -> Tuple[float, PIQNOutput]:
        """Hungarian one-to-many assignment per window and layer, class CE + boundary loss
        (``loss.py``). RETURNS the loss and its gradient with respect to the head's logits."""
        from .loss import loss_and_gradient

        examples = list(examples)
        if not scores.windows:
            return 0.0, scores
        per_doc, n_unaligned = gold_spans(examples, self.key, self.labels, self.name)
        settings = head_settings(self._head)
        gold, report = window_targets(per_doc, scores.windows, settings.n_queries)
        report.n_unaligned = n_unaligned
        report.log(settings.n_queries)
        ordered = self.n_updates < self.cfg["ordered_warmup_updates"]
        weights = LossSettings.from_cfg(self.cfg)
        loss, grads = loss_and_gradient(scores, gold, weights, settings.pointer, ordered)
        return loss, PIQNOutput(scores.windows, *grads)

    def from_bytes(self, bytes_data: bytes, *, exclude: Iterable[str] = tuple()) -> "PIQN":
        """Two-phase load: cfg and vocab, then the torch head sized from cfg, then its weights."""
        self._validate_serialization_attrs()
        data: Dict[str, bytes] = {}
        deserialize = {
            "cfg": lambda b: self._load_cfg(srsly.json_loads(b)),
            "vocab": lambda b: self.vocab.from_bytes(b, exclude=exclude),
            "model": lambda b: data.update(model=b),
        }
        util.from_bytes(bytes_data, deserialize, exclude)
        if "model" in data:
            self._load_weights(data["model"], "<bytes>")
        return self

    def from_disk(self, path: Path, *, exclude: Iterable[str] = tuple()) -> "PIQN":
        """Two-phase load as in ``from_bytes``, with a clear error for a missing or bad file."""
        self._validate_serialization_attrs()

        def load_model(p: Path) -> None:
            try:
                data = Path(p).read_bytes()
            except OSError as err:
                raise ValueError(Errors.E005.format(name=self.name, path=p, reason=err)) from None
            self._load_weights(data, p)

        deserialize = {
            "cfg": lambda p: self._load_cfg(srsly.read_json(p)),
            "vocab": lambda p: self.vocab.from_disk(p, exclude=exclude),
            "model": load_model,
        }
        util.from_disk(path, deserialize, exclude)
        return self

    def _load_cfg(self, saved: Dict[str, Any]) -> None:
        """The saved settings this version knows (a setting a later version removed is left out)."""
        self.cfg.update({key: value for key, value in saved.items() if key in self.cfg})

    def _load_weights(self, data: bytes, path: Any) -> None:
        load_weights(self.model, data, self.cfg, self.name, path)


def load_weights(model: Model, data: bytes, cfg: Dict[str, Any], name: str, path: Any) -> None:
    """The saved weights into a model built from the (load-time) config: the head is sized from the component's cfg
    first. Settings that shape the weights must agree with the saved ones (E051); thinc restores a layer's saved
    attrs, so the config's run-time settings are put back afterwards; the weights must be finite (E056)."""
    from .layers.query_transformer import RUNTIME_ATTRS, STRUCTURAL_ARGS

    head = model.get_ref("head")
    try:
        saved = saved_head_settings(data)
    except Exception as err:  # msgpack errors all mean a bad file
        reason = f"{type(err).__name__}: {err}"
        raise ValueError(Errors.E005.format(name=name, path=path, reason=reason)) from None
    config = head_settings(head).to_dict()
    # With a query-carrying encoder the head's query content comes from it: common_embedding does nothing.
    keys = [k for k in STRUCTURAL if not (k == "common_embedding" and head.attrs["encoder_queries"])]
    check_same_structure(name, config, saved, keys, "model.head", RUNTIME)
    if not head.layers and cfg.get("nI") is not None:
        if not head.has_dim("nI"):
            head.set_dim("nI", cfg["nI"])
        head.set_dim("nO", len(cfg["labels"]) + 1)
        # The head alone: initializing the whole model could reach for a transformer's original weights.
        head.initialize()
    head_runtime = {"lr_scale": head.attrs["lr_scale"], "mixed_precision": head.attrs["mixed_precision"]}
    encoders = [(node, dict(node.attrs)) for node in model.walk() if node.name == "query_transformer"]
    try:
        model.from_bytes(data)
    except Exception as err:  # msgpack, safetensors and shape errors all mean a bad file
        reason = f"{type(err).__name__}: {err}"
        raise ValueError(Errors.E005.format(name=name, path=path, reason=reason)) from None
    head.attrs["settings"] = {**head.attrs["settings"], **{k: config[k] for k in RUNTIME}}
    head.attrs.update(head_runtime)
    for node, attrs in encoders:
        # The encoder was rebuilt from its saved arguments (an argument it lacks had its default).
        saved_args = {**STRUCTURAL_ARGS, **node.shims[0].encoder_args}
        check_same_structure(name, attrs, saved_args, STRUCTURAL_ARGS, "model.encoder", RUNTIME_ATTRS)
        node.attrs.update({k: attrs[k] for k in RUNTIME_ATTRS})
    check_finite(model, name, path)


def check_same_structure(
    name: str,
    config: Dict[str, Any],
    saved: Optional[Dict[str, Any]],
    keys: Iterable[str],
    block: str,
    runtime: Iterable[str],
) -> None:
    """E051 if the config's settings differ from the saved model's in a structural field (``keys``)."""
    if saved is None:
        return
    differ = [key for key in keys if key in saved and key in config and saved[key] != config[key]]
    if differ:
        given = ", ".join(f"{key} = {config[key]!r}" for key in differ)
        was = ", ".join(f"{key} = {saved[key]!r}" for key in differ)
        raise ValueError(Errors.E051.format(name=name, given=given, block=block, saved=was, runtime=", ".join(runtime)))


def trim_whitespace(doc: Doc, starts: np.ndarray, ends: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Candidate spans without leading or trailing whitespace tokens (a span of whitespace only ends up empty):
    spaCy keeps runs of spaces, newlines and tabs as tokens, and no entity starts or ends with one."""
    space = doc.to_array("IS_SPACE").astype(bool)
    if not space.any():
        return starts, ends
    n = len(doc)
    positions = np.arange(n)
    # The first non-space token at or after each position (n if none), the last one at or before it (-1 if none).
    after = np.minimum.accumulate(np.where(space, n, positions)[::-1])[::-1]
    before = np.maximum.accumulate(np.where(space, -1, positions))
    new_starts = after[starts]
    new_ends = before[ends - 1] + 1
    return new_starts, np.maximum(new_ends, new_starts)
