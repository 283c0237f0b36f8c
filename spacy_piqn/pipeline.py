"""The ``piqn`` component: PIQN entity queries → overlapping spans in ``doc.spans[spans_key]``.

Kept light on purpose: spaCy imports every factory entry point on each ``spacy.blank``, so
torch-only modules (the loss, the nn.Modules) are imported where they are used.
"""

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

from .decoding import DECODING_MODES, decode_windows, filter_candidates, keep_candidates
from .errors import Errors
from .layers.piqn_model import PIQNOutput
from .layers.torch_head import head_settings
from .settings import DEFAULT_DECODING as DD
from .settings import DEFAULT_LOSS as DL
from .settings import LossSettings, component_settings
from .targets import gold_spans, window_targets
from .windows import Window

# The head's settings are left out: spaCy fills them from the builder's defaults (settings.py).
DEFAULT_MODEL_CONFIG = """
[model]
@architectures = "spacy-piqn.PIQN.v1"

[model.windows]
@misc = "spacy-piqn.token_windows.v1"
size = 128
stride = 96
use_sents = true

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
        "ordered_warmup_updates": 0,
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
    ordered_warmup_updates: int = 0,
    merge_nested_duplicates: bool = DD.merge_nested_duplicates,
    merge_keep_ratio: float = DD.merge_keep_ratio,
    loss_dense_weight: float = DL.loss_dense_weight,
    last_layer_n_slots: int = DL.last_layer_n_slots,
    iou_class_target: float = DL.iou_class_target,
    denoising_boundary_noise: float = DL.denoising_boundary_noise,
    denoising_label_noise: float = DL.denoising_label_noise,
    loss_denoising_weight: float = DL.loss_denoising_weight,
) -> "PIQN":
    """Create a PIQN entity recognizer.

    model (Model[List[Doc], PIQNOutput]): a ``spacy-piqn.PIQN.v1`` model.
    spans_key (str): where predictions go: ``doc.spans[spans_key]``; also where gold is read.
    n_slots (int): Q, the slots shared among a window's gold entities in the one-to-many
        assignment (each entity gets about Q/G queries; Q = G when G > Q).
    match_class_weight / match_boundary_weight (float): weights of the type and boundary
        probabilities in the assignment cost.
    loss_class_weight / loss_boundary_weight (float): weights of the class CE and boundary BCE.
    loss_dense_weight (float): weight of the dense boundary head's BCE (models with ``dense_boundaries``).
    last_layer_n_slots (int): Q of the last word-level layer, the one decoding reads (0: n_slots);
        1 matches it one-to-one, so its spare queries learn "None" next to an entity (it learned
        slower on GENIA, bench/RESULTS.md; off by default).
    iou_class_target (float): 0..1, how much a matched query's class target follows the IoU of its
        argmax span with its gold: the gold class gets 1 − value · (1 − IoU), "None" the rest, so
        class probabilities (and span scores) learn to rank well-placed spans above near misses.
    denoising_boundary_noise (float): with denoising queries (a model built with ``denoising``),
        each boundary of a gold entity's noised copy moves by up to ceil(value · its width) words.
    denoising_label_noise (float): ... and its label is redrawn with this probability.
    loss_denoising_weight (float): weight of the denoising queries' loss.
    class_threshold (float): keep a query's entity only if its class probability is above this.
    boundary_threshold (float): ... and both boundary probabilities are above this.
    decoding (str): "nested" (drop spans crossing a better one, one label per span) or "flat"
        (no overlaps).
    merge_nested_duplicates (bool): with "nested" decoding, also drop a span nested in (or
        around) a better one of the same label with which it shares a boundary: the near misses
        of PIQN's several queries per entity look like that.
    merge_keep_ratio (float): ... unless its score is at least this fraction of the better span's
        (real nests score about as high as their parent, near misses lower); > 1: always drop.
    set_ents (bool): also write a non-overlapping selection (best score first) to ``doc.ents``,
        replacing what was there.
    scorer (Optional[Callable]): defaults to ``spacy-piqn.piqn_scorer.v1``.
    ordered_warmup_updates (int): the first this many updates of a training process assign
        queries to gold statically (queries in index order take the entities in text order,
        ``ordered_assignment``) instead of by Hungarian matching, so fresh queries specialize
        instead of collapsing onto one entity. 0: Hungarian from the start, as in PIQN.
    """
    # Everything but the framework's arguments goes to the component as its settings.
    settings = {key: value for key, value in locals().items() if key not in ("nlp", "name", "model", "scorer")}
    return PIQN(nlp.vocab, model, name, scorer=scorer, **settings)


class PIQN(TrainablePipe):
    """Nested and flat NER with Parallel Instance Queries (Shen et al., 2022).

    Every window of a doc is read by M queries; each query predicts one entity (left and
    right boundary, type or "None") and all of them come out in one pass. Predictions go to
    ``doc.spans[spans_key]`` with ``attrs["scores"]`` (class probabilities) parallel to them.
    """

    def __init__(
        self,
        vocab: Vocab,
        model: Model[List[Doc], PIQNOutput],
        name: str = "piqn",
        *,
        spans_key: str = "sc",
        scorer: Optional[Callable] = None,
        ordered_warmup_updates: int = 0,
        **settings: Any,
    ) -> None:
        """settings: fields of ``LossSettings`` and ``DecodingSettings``; those left out take
        their defaults (the factory passes all of them, from its config)."""
        loss, decoding = component_settings(settings)
        if decoding.decoding not in DECODING_MODES:
            raise ValueError(Errors.E004.format(modes=DECODING_MODES, value=decoding.decoding, name=name))
        self.vocab = vocab
        self.model = model
        self.name = name
        self.scorer = scorer
        self.cfg: Dict[str, Any] = {
            "labels": [],
            "spans_key": spans_key,
            **asdict(loss),
            **asdict(decoding),
            "ordered_warmup_updates": ordered_warmup_updates,
            "nI": None,
        }
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

    @property
    def _pointer(self) -> str:
        """The head's pointer type: the loss and the decoding read boundaries accordingly."""
        return head_settings(self._head).pointer

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
        initialize the model on a sample of the examples."""
        validate_get_examples(get_examples, "PIQN.initialize")
        if labels is None:
            found = {span.label_ for eg in get_examples() for span in eg.reference.spans.get(self.key, [])}
            labels = sorted(found)
        for label in labels:
            self.add_label(label)
        if not self.labels:
            raise ValueError(Errors.E003.format(name=self.name, key=self.key))
        self._head.set_dim("nO", len(self.labels) + 1)
        sample = [eg.predicted for eg in islice(get_examples(), 10)]
        self.model.initialize(X=sample)
        self.cfg["nI"] = self._head.get_dim("nI")

    def predict(self, docs: Iterable[Doc]) -> PIQNOutput:
        """Run the model (last layer's heads only); docs are not modified."""
        return self.model.predict(list(docs))

    def set_annotations(self, docs: Iterable[Doc], scores: PIQNOutput) -> None:
        """Decode each window, merge a doc's windows and write ``doc.spans[spans_key]``."""
        docs = list(docs)
        candidates = decode_windows(
            *self.probabilities(scores),
            scores.windows,
            len(docs),
            self.cfg["class_threshold"],
            self.cfg["boundary_threshold"],
        )
        for doc, found in zip(docs, candidates):
            self._write_spans(doc, *found)

    def probabilities(self, scores: PIQNOutput) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The last layer's class (B, M, C) and left/right boundary (B, M, n) probabilities as
        numpy arrays (softmax, or sigmoid boundaries for the paper's pointer)."""
        ops = self.model.ops
        sigmoid_boundaries = self._pointer == "sigmoid"

        def probs(logits: Any, boundary: bool) -> np.ndarray:
            if logits is None:  # no windows in the batch
                return np.zeros((0, 0, 0), dtype=np.float32)
            if boundary and sigmoid_boundaries:
                return ops.to_numpy(ops.sigmoid(logits[-1]))
            return ops.to_numpy(ops.softmax(logits[-1], axis=-1))

        return probs(scores.classes, False), probs(scores.left, True), probs(scores.right, True)

    def _write_spans(
        self, doc: Doc, starts: np.ndarray, ends: np.ndarray, types: np.ndarray, probs: np.ndarray
    ) -> None:
        keep = keep_candidates(starts, ends, types, probs, self.cfg)
        # Sorted by position, like the gold groups the converter writes.
        keep = keep[np.lexsort((ends[keep], starts[keep]))] if len(keep) else keep
        labels = self.labels
        spans = [Span(doc, int(starts[i]), int(ends[i]), label=labels[types[i] - 1]) for i in keep]
        group = SpanGroup(doc, name=self.key, spans=spans)
        group.attrs["scores"] = probs[keep].astype(np.float32)
        doc.spans[self.key] = group
        if self.cfg["set_ents"]:
            flat = filter_candidates(starts[keep], ends[keep], probs[keep], "flat")
            doc.ents = sorted((spans[i] for i in flat), key=lambda s: s.start)

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        """Learn from a batch: forward, assignment + loss (``get_loss``), backprop."""
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_examples(examples, "PIQN.update")
        if not any(len(eg.predicted) for eg in examples):
            return losses
        set_dropout_rate(self.model, drop)
        if head_settings(self._head).denoising:
            self.model.attrs["denoise"] = self._denoising(examples)
        try:
            scores, backprop_scores = self.model.begin_update([eg.predicted for eg in examples])
        finally:
            self.model.attrs.pop("denoise", None)
        loss, d_scores = self.get_loss(examples, scores)
        self.n_updates += 1
        backprop_scores(d_scores)
        if sgd is not None:
            self.finish_update(sgd)
        losses[self.name] += loss
        return losses

    def _denoising(self, examples: List[Example]) -> Callable[[List[Window]], List[np.ndarray]]:
        """The model's windows → each window's gold entities and their noised copies, which
        enter the head as denoising queries in this update (``denoising``)."""
        from .denoising import noised_copies

        weights = LossSettings.from_cfg(self.cfg)
        settings = head_settings(self._head)

        def make(windows: List[Window]) -> List[np.ndarray]:
            gold = self._window_gold(examples, windows, log=False)
            # Seeded from numpy's global state, which spaCy's fix_random_seed sets.
            rng = np.random.default_rng(np.random.randint(2**31))
            lengths = [w.end - w.start for w in windows]
            return noised_copies(
                gold,
                lengths,
                len(self.labels) + 1,
                weights.denoising_boundary_noise,
                weights.denoising_label_noise,
                settings.n_queries,
                rng,
            )

        return make

    def get_loss(self, examples: Iterable[Example], scores: PIQNOutput) -> Tuple[float, PIQNOutput]:
        """Hungarian one-to-many assignment per window and layer, class CE + boundary BCE.
        RETURNS the loss and its gradient with respect to the head's logits."""
        from thinc.api import torch2xp, xp2torch

        from .loss import denoising_loss, dense_boundary_loss, piqn_loss

        examples = list(examples)
        gold = self._window_gold(examples, scores.windows)
        if not scores.windows:
            return 0.0, scores
        leaves = [xp2torch(a, requires_grad=True) for a in (scores.left, scores.right, scores.classes)]
        # The dense boundary head's logits, where the head has one (HeadSettings.dense_boundaries).
        dense = scores.dense if scores.dense is not None and scores.dense.shape[-1] else None
        if dense is not None:
            leaves.append(xp2torch(dense, requires_grad=True))
        weights = LossSettings.from_cfg(self.cfg)
        ordered = self.n_updates < self.cfg.get("ordered_warmup_updates", 0)
        # Logits of denoising queries, where this update had them, follow the M queries'.
        n_queries = head_settings(self._head).n_queries
        left, right, classes = (t[:, :, :n_queries] for t in leaves[:3])
        loss = piqn_loss(left, right, classes, scores.lengths, gold, weights, ordered=ordered, pointer=self._pointer)
        if scores.denoise is not None:
            left, right, classes = (t[:, :, n_queries:] for t in leaves[:3])
            loss = loss + denoising_loss(left, right, classes, scores.lengths, scores.denoise, weights, self._pointer)
        if dense is not None:
            loss = loss + weights.loss_dense_weight * dense_boundary_loss(leaves[3], scores.lengths, gold)
        loss.backward()
        # Entity-free batches leave the pointer logits without a gradient.
        grads = [torch2xp(t.grad) if t.grad is not None else self.model.ops.alloc(t.shape) for t in leaves]
        if dense is None:
            grads.append(None)
        return float(loss.detach()), PIQNOutput(scores.windows, *grads, scores.denoise)

    def _window_gold(self, examples: List[Example], windows: List[Window], log: bool = True) -> List[np.ndarray]:
        """Gold (class id, left, right) per window, inclusive and window-relative; what the
        windows cannot use is logged once per batch and reason (``targets``), unless ``log`` is
        False (a second reading of the same batch)."""
        per_doc, n_unaligned = gold_spans(examples, self.key, self.labels, self.name)
        n_queries = head_settings(self._head).n_queries
        gold, report = window_targets(per_doc, windows, n_queries)
        report.n_unaligned = n_unaligned
        if log:
            report.log(n_queries)
        return gold

    def from_bytes(self, bytes_data: bytes, *, exclude: Iterable[str] = tuple()) -> "PIQN":
        """Two-phase load: cfg and vocab, then the torch head sized from cfg, then its weights."""
        self._validate_serialization_attrs()
        data: Dict[str, bytes] = {}
        deserialize = {
            "cfg": lambda b: self.cfg.update(srsly.json_loads(b)),
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
            "cfg": lambda p: self.cfg.update(srsly.read_json(p)),
            "vocab": lambda p: self.vocab.from_disk(p, exclude=exclude),
            "model": load_model,
        }
        util.from_disk(path, deserialize, exclude)
        return self

    def _load_weights(self, data: bytes, path: Any) -> None:
        head = self._head
        if not head.layers and self.cfg.get("nI") is not None:
            if not head.has_dim("nI"):
                head.set_dim("nI", self.cfg["nI"])
            head.set_dim("nO", len(self.labels) + 1)
            # The head alone: initializing the whole model could reach for a transformer's
            # original weights directory.
            head.initialize()
        try:
            self.model.from_bytes(data)
        except Exception as err:  # msgpack, safetensors and shape errors all mean a bad file
            reason = f"{type(err).__name__}: {err}"
            raise ValueError(Errors.E005.format(name=self.name, path=path, reason=reason)) from None
