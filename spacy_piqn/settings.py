"""The PIQN head's settings: one frozen, torch-free object with the defaults defined once.

The registered builders (``architectures.py``) take these as config arguments and build one
``HeadSettings``; the thinc wrapper saves it in its attrs and the torch module reads it. The
component reads the pointer type from it too, since the loss and the decoding depend on it.
"""

from dataclasses import asdict, dataclass
from typing import Any, Dict

POINTERS = ("softmax", "sigmoid")
FUSIONS = ("additive", "bilinear")


@dataclass(frozen=True)
class HeadSettings:
    """What the word-level part of PIQN looks like (see ``spacy-piqn.PIQN.v1`` for each)."""

    width: int = 192
    n_queries: int = 30
    n_layers: int = 2
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

    def __post_init__(self) -> None:
        if self.pointer not in POINTERS:
            raise ValueError(f"pointer must be one of {POINTERS}, got {self.pointer!r}")
        if self.pointer_fusion not in FUSIONS:
            raise ValueError(f"pointer_fusion must be one of {FUSIONS}, got {self.pointer_fusion!r}")
        if self.anchor_strength < 0:
            raise ValueError(f"anchor_strength must be >= 0, got {self.anchor_strength}")
        if self.width % 2:
            raise ValueError(f"hidden_width must be even for the BiLSTM, got {self.width}")
        if self.width % self.n_heads:
            raise ValueError(f"hidden_width {self.width} is not divisible by n_heads {self.n_heads}")
        if self.n_layers < 1:
            raise ValueError("PIQN needs at least one word-level layer (n_layers >= 1)")
        if self.n_queries < 1:
            raise ValueError(f"n_queries must be >= 1, got {self.n_queries}")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "HeadSettings":
        """Settings from saved attrs; keys a newer version added take their defaults."""
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in known})


DEFAULT_HEAD = HeadSettings()
