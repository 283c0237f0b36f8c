"""PIQN's settings, one frozen, torch-free object per concern, each default defined once here.

``HeadSettings``: what the model looks like. ``spacy-piqn.PIQNHead.v1`` (``architectures.py``) takes its
fields as config arguments and builds one; the thinc wrapper keeps it in its attrs and the torch module
reads it. Most fields shape the weights or what they learned (``STRUCTURAL``): a saved pipeline keeps
them, and a load-time config that contradicts them is an error. The rest may change at load time.
``LossSettings`` (assignment and loss) and ``DecodingSettings`` (from probabilities to spans) are the
component's own settings (``[components.piqn]``): the factory takes its defaults from them and the loss
and decoding read them from the component's cfg.
"""

from dataclasses import asdict, dataclass, fields
from typing import Any, Dict, Mapping, Tuple

from .errors import Errors

POINTERS = ("softmax", "sigmoid")
FUSIONS = ("additive", "bilinear")
DECODING_MODES = ("nested", "flat")


@dataclass(frozen=True)
class HeadSettings:
    """What the word-level part of PIQN looks like (see ``spacy-piqn.PIQNHead.v1`` for each)."""

    width: int = 192
    n_queries: int = 30
    n_layers: int = 1
    n_heads: int = 8
    pointer: str = "softmax"
    anchor_strength: float = 8.0
    pointer_fusion: str = "bilinear"
    pointer_width: int = 64
    lstm_layers: int = 1
    dropout: float = 0.0
    classifier_dropout: float = 0.5
    query_interaction: bool = True
    one_way: bool = True
    common_embedding: bool = True
    max_padded_words: int = 1024
    word_tagger: bool = False

    def __post_init__(self) -> None:
        if self.pointer not in POINTERS:
            raise ValueError(Errors.E006.format(options=POINTERS, value=self.pointer))
        if self.pointer_fusion not in FUSIONS:
            raise ValueError(Errors.E007.format(options=FUSIONS, value=self.pointer_fusion))
        if self.anchor_strength < 0:
            raise ValueError(Errors.E008.format(value=self.anchor_strength))
        if self.width % 2:
            raise ValueError(Errors.E009.format(width=self.width))
        if self.width % self.n_heads:
            raise ValueError(Errors.E010.format(width=self.width, n_heads=self.n_heads))
        if self.n_layers < 1:
            raise ValueError(Errors.E011.format(n_layers=self.n_layers))
        if self.n_queries < 1:
            raise ValueError(Errors.E012.format(n_queries=self.n_queries))

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "HeadSettings":
        """Settings from saved attrs; keys this version does not know are ignored, keys it added
        take their defaults."""
        return cls(**_fields_of(cls, data))


# Settings that only change how the head runs, not what it learned: a load-time config may set them.
RUNTIME = ("dropout", "classifier_dropout", "max_padded_words")
STRUCTURAL = tuple(f.name for f in fields(HeadSettings) if f.name not in RUNTIME)

DEFAULT_HEAD = HeadSettings()


@dataclass(frozen=True)
class LossSettings:
    """One-to-many assignment and loss weights (``[components.piqn]``; docs/configuration.md has each)."""

    n_slots: int = 15
    match_class_weight: float = 2.0
    match_boundary_weight: float = 2.0
    loss_class_weight: float = 8.0
    loss_boundary_weight: float = 2.0
    # The first this many updates of a training process assign queries statically (in text order)
    # instead of by Hungarian matching, to break the symmetry of fresh queries.
    ordered_warmup_updates: int = 0
    # Never match: query i always takes the i-th slot (the paper's "w/o dynamic LA" ablation).
    static_assignment: bool = False
    # Share of the class target spread over all classes ("None" included): softer types.
    label_smoothing: float = 0.0
    # How much a matched query's type target follows the IoU of its argmax span with its gold
    # entity: 1 − w·(1 − IoU) on the type, the rest on "None". A query whose pointers miss learns
    # to doubt its type, so decoding prefers the queries that point right.
    iou_class_target: float = 0.0
    # Weight of the word tagger's loss (a head built with word_tagger = true): every word learns
    # which labels' entities cover it, so every word of the window is a typed example.
    loss_tag_weight: float = 1.0

    def __post_init__(self) -> None:
        if self.n_slots < 1:
            raise ValueError(Errors.E013.format(n_slots=self.n_slots))
        if self.ordered_warmup_updates < 0:
            raise ValueError(Errors.E052.format(name="ordered_warmup_updates", value=self.ordered_warmup_updates))
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(Errors.E053.format(name="label_smoothing", value=self.label_smoothing))
        if not 0.0 <= self.iou_class_target <= 1.0:
            raise ValueError(Errors.E053.format(name="iou_class_target", value=self.iou_class_target))

    @classmethod
    def from_cfg(cls, cfg: Mapping[str, Any]) -> "LossSettings":
        """The settings held in a component's cfg (keys it lacks take their defaults)."""
        return cls(**_fields_of(cls, cfg))


def check_decoding_mode(mode: str) -> None:
    """The one check of a decoding mode, for the settings and for ``decoding.filter_candidates``."""
    if mode not in DECODING_MODES:
        raise ValueError(Errors.E015.format(modes=DECODING_MODES, value=mode))


@dataclass(frozen=True)
class DecodingSettings:
    """From probabilities to spans (``[components.piqn]``; docs/configuration.md has each)."""

    class_threshold: float = 0.5
    boundary_threshold: float = 0.0
    decoding: str = "nested"
    merge_nested_duplicates: bool = True
    merge_keep_ratio: float = 0.9
    # With a word tagger (head word_tagger = true): weight of its agreement when each query's
    # boundaries are chosen among its pointers' best three (decoding.tagged_boundaries); 0: argmax.
    tagger_boundary_weight: float = 1.0
    set_ents: bool = False

    def __post_init__(self) -> None:
        check_decoding_mode(self.decoding)
        for name in ("class_threshold", "boundary_threshold"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(Errors.E053.format(name=name, value=getattr(self, name)))
        for name in ("merge_keep_ratio", "tagger_boundary_weight"):
            if getattr(self, name) < 0:
                raise ValueError(Errors.E052.format(name=name, value=getattr(self, name)))

    @classmethod
    def from_cfg(cls, cfg: Mapping[str, Any]) -> "DecodingSettings":
        return cls(**_fields_of(cls, cfg))


DEFAULT_LOSS = LossSettings()
DEFAULT_DECODING = DecodingSettings()


def component_settings(values: Mapping[str, Any]) -> Tuple[LossSettings, DecodingSettings]:
    """The component's settings from keyword arguments (missing ones take their defaults); a
    name that is neither a loss nor a decoding setting is an error."""
    loss_names = {f.name for f in fields(LossSettings)}
    decoding_names = {f.name for f in fields(DecodingSettings)}
    unknown = sorted(set(values) - loss_names - decoding_names)
    if unknown:
        raise TypeError(Errors.E044.format(names=unknown, known=sorted(loss_names | decoding_names)))
    return LossSettings.from_cfg(values), DecodingSettings.from_cfg(values)


def _fields_of(cls: type, values: Mapping[str, Any]) -> Dict[str, Any]:
    """The entries of ``values`` that are fields of the dataclass ``cls``."""
    return {f.name: values[f.name] for f in fields(cls) if f.name in values}
