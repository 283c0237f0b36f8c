"""PIQN (Parallel Instance Query Network) nested and flat NER as a spaCy v3 component.

Importing the package registers the ``piqn`` factory and the ``spacy-piqn.*`` architectures,
windows, scorer, callbacks and learning-rate schedule (the factory and architectures also have entry
points, so an installed package is imported as soon as a config names them).
"""

from . import architectures, callbacks, corpus, legacy, schedules, scorer, windows  # noqa: F401  (registrations)
from .pipeline import PIQN, make_piqn

__version__ = "0.1.0"
__all__ = ["PIQN", "make_piqn", "__version__"]
