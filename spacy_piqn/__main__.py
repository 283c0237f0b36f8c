"""Entry point for ``python -m spacy_piqn``."""

from spacy_piqn.cli import app

if __name__ == "__main__":
    app(prog_name="python -m spacy_piqn")
