"""PIQN (Parallel Instance Query Network) nested and flat NER as a spaCy v3 component.

``import spacy_piqn`` is cheap: it imports neither spaCy nor torch, so ``python -m spacy_piqn --help`` answers at
once. spaCy finds the ``piqn`` factory and every ``spacy-piqn.*`` function through the entry points in setup.cfg,
and `register` imports the modules that register them, which happens by itself when spaCy is already imported
(the entry points import this package from spaCy) and when ``PIQN`` or ``make_piqn`` is used.
"""

import importlib
import sys
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"
__all__ = ["PIQN", "make_piqn", "register", "__version__"]

# The modules whose import registers spacy-piqn's names with spaCy's registries (decorators), in setup.cfg's order.
REGISTERING_MODULES = (
    "pipeline",
    "senter",
    "architectures",
    "legacy",
    "scorer",
    "corpus",
    "windows",
    "layers.query_transformer",
    "tokenizer",
    "callbacks",
    "schedules",
)

if TYPE_CHECKING:
    from .pipeline import PIQN, make_piqn


def register() -> None:
    """Register the ``piqn`` factory and the ``spacy-piqn.*`` functions with spaCy's registries now.

    Installed packages need not call it (spaCy resolves the names through the entry points), but a config run from
    a source checkout on ``sys.path``, or from an install whose entry points predate a name, does.
    """
    for name in REGISTERING_MODULES:
        importlib.import_module(f"{__name__}.{name}")


def __getattr__(name: str) -> Any:
    """``PIQN``, ``make_piqn`` and the submodules, imported on first use."""
    if name in ("PIQN", "make_piqn"):
        register()
        return getattr(importlib.import_module(f"{__name__}.pipeline"), name)
    if name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as error:
        if error.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


# Once spaCy is imported the registrations cost a fraction of a second, and a config may name them next.
if "spacy" in sys.modules:
    register()
