"""PIQN (Parallel Instance Query Network) nested and flat NER as a spaCy v3 component.

Importing the package registers the ``piqn`` factory, the ``spacy-piqn.*`` architectures,
windows and scorer (installed packages also expose them through entry points).
"""

from . import architectures, callbacks, corpus, scorer, windows  # noqa: F401  (registrations)
from .pipeline import PIQN, make_piqn

__version__ = "0.1.0"
__all__ = ["PIQN", "make_piqn", "__version__"]
