"""Entry point for ``python -m spacy_piqn``."""

import sys

from spacy_piqn.cli import app, transformers_problem

if __name__ == "__main__":
    problem = transformers_problem()
    if problem:
        print(problem, file=sys.stderr)
        sys.exit(1)
    app(prog_name="python -m spacy_piqn")
