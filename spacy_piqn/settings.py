"""PIQN's settings, one frozen, torch-free object per concern, each default defined once here.

``HeadSettings``: what the model looks like. The registered builders (``architectures.py``) take its
fields as config arguments and build one; the thinc wrapper saves it in its attrs and the torch
module reads it. The component reads the pointer type from it too, since the loss and the decoding
depend on it. ``LossSettings`` (assignment and loss) and ``DecodingSettings`` (from probabilities to
spans) are the component's own settings (``[components.piqn]``): the factory takes its defaults from
them and the loss and decoding read them from the component's cfg.
"""

from dataclasses import asdict, dataclass, fields
from typing import Any, Dict, Mapping, Tuple

from .errors import Errors

POINTERS = ("softmax", "sigmoid")
FUSIONS = ("additive", "bilinear")


@dataclass(frozen=True)
class HeadSettings:
    """What the word-level part of PIQN looks like (see ``spacy-piqn.PIQN.v1`` for each)."""

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
    common_embedding: bool = True
    max_padded_words: int = 1024
    dense_boundaries: bool = False
    proposal_strength: float = 0.0
    denoising: bool = False
    denoising_prior: float = 0.25

    def __post_init__(self) -> None:
        if self.pointer not in POINTERS:
            raise ValueError(Errors.E006.format(options=POINTERS, value=self.pointer))
        if self.pointer_fusion not in FUSIONS:
            raise ValueError(Errors.E007.format(options=FUSIONS, value=self.pointer_fusion))
        if self.anchor_strength < 0:
            raise ValueError(Errors.E008.format(value=self.anchor_strength))
        if self.proposal_strength < 0:
            raise ValueError(Errors.E046.format(value=self.proposal_strength))
        if self.denoising_prior < 0:
            raise ValueError(Errors.E048.format(value=self.denoising_prior))
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
    def from_dict(cls, data: Dict[str, Any]) -> "HeadSettings":
        """Settings from saved attrs; keys a newer version added take their defaults."""
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in known})


DEFAULT_HEAD = HeadSettings()


@dataclass(frozen=True)
class LossSettings:
    """One-to-many assignment and loss weights (``[components.piqn]``; see README for each)."""

    n_slots: int = 15
    match_class_weight: float = 2.0
    match_boundary_weight: float = 2.0
    loss_class_weight: float = 8.0
    loss_boundary_weight: float = 2.0
    # Weight of the dense boundary head's loss, where the head has one (HeadSettings.dense_boundaries).
    loss_dense_weight: float = 1.0
    # Slots per gold entity's share on the last word-level layer, the one decoding reads (0: n_slots).
    # 1 trains it one-to-one (DETR's matching): its spare queries learn "None" even next to an entity.
    last_layer_n_slots: int = 0
    # How much a matched query's class target follows its localization: the gold class gets
    # 1 − iou_class_target · (1 − IoU of the query's argmax span with its gold), "None" the rest.
    iou_class_target: float = 0.0
    # Denoising queries (models built with HeadSettings.denoising): each boundary of a gold
    # entity's training-only copy moves by up to ceil(denoising_boundary_noise · its width) words,
    # its label is redrawn with probability denoising_label_noise; their loss has this weight.
    denoising_boundary_noise: float = 0.4
    denoising_label_noise: float = 0.2
    loss_denoising_weight: float = 1.0

    def __post_init__(self) -> None:
        if self.n_slots < 1:
            raise ValueError(Errors.E013.format(n_slots=self.n_slots))
        if self.last_layer_n_slots < 0:
            raise ValueError(Errors.E043.format(value=self.last_layer_n_slots))
        if not 0.0 <= self.iou_class_target <= 1.0:
            raise ValueError(Errors.E045.format(value=self.iou_class_target))
        if self.denoising_boundary_noise < 0 or not 0.0 <= self.denoising_label_noise <= 1.0:
            raise ValueError(
                Errors.E049.format(boundary=self.denoising_boundary_noise, label=self.denoising_label_noise)
            )

    @classmethod
    def from_cfg(cls, cfg: Mapping[str, Any]) -> "LossSettings":
        """The settings held in a component's cfg (keys it lacks take their defaults)."""
        return cls(**_fields_of(cls, cfg))


@dataclass(frozen=True)
class DecodingSettings:
    """From probabilities to spans (``[components.piqn]``; see README for each)."""

    class_threshold: float = 0.0
    boundary_threshold: float = 0.0
    decoding: str = "nested"
    merge_nested_duplicates: bool = True
    merge_keep_ratio: float = 0.9
    set_ents: bool = False


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
    return LossSettings.from_cfg(values), DecodingSettings(**_fields_of(DecodingSettings, values))


def _fields_of(cls: type, values: Mapping[str, Any]) -> Dict[str, Any]:
    """The entries of ``values`` that are fields of the dataclass ``cls``."""
    return {f.name: values[f.name] for f in fields(cls) if f.name in values}
