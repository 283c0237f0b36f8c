"""Entry point for ``python -m spacy_piqn``."""

from spacy_piqn.cli import command_line

if __name__ == "__main__":
    command_line()(prog_name="python -m spacy_piqn")
