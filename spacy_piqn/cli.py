"""``python -m spacy_piqn ...``: the command line of spacy-piqn.

The app is a typer group (spaCy's own CLI is typer too), so a new command is one more ``@app.command("name")``
function. Module import stays cheap and torch-free: each command imports what it needs when it runs, and
nothing here imports the pipeline.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(
    name="spacy_piqn",
    help="Tools for the PIQN nested-NER spaCy component.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

REPORT_ROWS = (
    ("docs read", "docs_read"),
    ("skipped", "skipped"),
    ("docs written", "docs_written"),
    ("sentences written", "sentences_written"),
    ("entities read", "entities_read"),
    ("duplicates removed", "duplicates_removed"),
    ("entities written", "entities_written"),
)


def fail(message: str) -> typer.Exit:
    """Print one line to stderr and give the exit to raise: users get the reason, not a traceback."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=1)


@app.callback()
def main() -> None:
    """Tools for the PIQN nested-NER spaCy component."""
    # A callback keeps the app a command group, so `python -m spacy_piqn convert ...` keeps its subcommand
    # even while `convert` is the only command.


@contextmanager
def log_to_stderr(level: int = logging.INFO) -> Iterator[None]:
    """Show the "spacy_piqn" logger (skipped records, dropped duplicates) on stderr while a command runs.

    The handler is removed afterwards so that library users and test runners keep their own logging setup.
    """
    logger = logging.getLogger("spacy_piqn")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    previous_level = logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > level:
        logger.setLevel(level)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)


def format_report(report: dict[str, Any]) -> str:
    """The conversion report as aligned text lines."""
    header = (
        f"Converted {report['input']} ({report['format']}) -> {report['output']}, spans key {report['spans_key']!r}"
    )
    width = max(len(name) for name, _ in REPORT_ROWS)
    rows = [f"  {name:<{width}}  {report[key]:>8}" for name, key in REPORT_ROWS]
    return "\n".join([header, *rows])


@app.command("convert")
def convert_command(
    input_path: Annotated[Path, typer.Argument(help="JSONL or column (IOB/BIOES) file to convert.")],
    output_path: Annotated[Path, typer.Argument(help="Output .spacy file, or an existing directory.")],
    file_format: Annotated[
        str | None, typer.Option("--format", "-f", help="jsonl or conll. Default: from the input's suffix.")
    ] = None,
    spans_key: Annotated[str, typer.Option("--spans-key", "-k", help="doc.spans key for the gold spans.")] = "sc",
    lang: Annotated[str, typer.Option("--lang", "-l", help="Language code for the vocab (spacy.blank).")] = "en",
    n_sents: Annotated[int, typer.Option("--n-sents", "-n", help="Sentences per output doc.")] = 1,
    tag_cols: Annotated[
        int | None,
        typer.Option(
            "--tag-cols",
            help="conll: number of trailing tag columns, one per nesting level. "
            "Default: the trailing columns whose values are mostly tags.",
        ),
    ] = None,
    skip_invalid: Annotated[
        bool, typer.Option("--skip-invalid", help="Skip and log invalid records instead of stopping.")
    ] = False,
    labels: Annotated[
        str | None, typer.Option("--labels", help="Comma-separated allowed labels; any other label is an error.")
    ] = None,
) -> None:
    """Convert a pre-tokenized nested-NER corpus to a .spacy DocBin with every entity in doc.spans."""
    from .convert import ConversionError, convert

    allowed = None if labels is None else [label.strip() for label in labels.split(",") if label.strip()]
    try:
        with log_to_stderr():
            report = convert(
                input_path,
                output_path,
                file_format=file_format,
                spans_key=spans_key,
                lang=lang,
                n_sents=n_sents,
                tag_cols=tag_cols,
                labels=allowed,
                skip_invalid=skip_invalid,
            )
    except (ConversionError, ValueError, OSError, RuntimeError) as error:
        raise fail(str(error)) from None
    typer.echo(format_report(report))
