"""``python -m spacy_piqn ...``: the command line of spacy-piqn.

The app is a typer group (spaCy's own CLI is typer too), so a new command is one more ``@app.command("name")``
function. Module import stays cheap and torch-free: each command imports what it needs when it runs, and
nothing here imports the pipeline, so ``--help`` answers without loading spaCy.
"""

from __future__ import annotations

import functools
import logging
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable

import typer

from .errors import Errors

if TYPE_CHECKING:
    import click
    from spacy.language import Language
    from spacy.training import Example

app = typer.Typer(
    name="spacy_piqn",
    help="Tools for the PIQN nested-NER spaCy component.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# displaCy colours unknown span labels grey; these give each label of a page its own colour.
SPAN_COLORS = (
    "#7aecec",
    "#feca74",
    "#aa9cfc",
    "#bfeeb7",
    "#ff9561",
    "#c887fb",
    "#9cc9cc",
    "#e4e7d2",
    "#ffeb80",
    "#f0b7cd",
    "#a8d8ff",
    "#d0c0a0",
)

REPORT_ROWS = (
    ("sentences read", "sentences_read"),
    ("skipped", "skipped"),
    ("documents", "documents"),
    ("reappeared documents", "reappeared_documents"),
    ("docs written", "docs_written"),
    ("sentences written", "sentences_written"),
    ("entities read", "entities_read"),
    ("duplicates removed", "duplicates_removed"),
    ("entities written", "entities_written"),
    ("crossing pairs", "crossing_pairs"),
)
# Column files only: I-/E-/L- tags that had to start an entity (IOB1 reading).
COLUMN_REPORT_ROWS = (("I-/E-/L- starting entities", "continuation_starts"),)


def transformers_problem() -> str | None:
    """What to do when spacy-transformers is installed but cannot import the installed transformers, else None.

    spaCy imports the factories of every installed package (entry points) whenever it creates a pipeline, so a
    transformers release that spacy-transformers cannot import (5.x: ``cannot import name 'BatchEncoding'``) breaks
    every command, tok2vec pipelines included, with an error from deep inside spacy-transformers (or a misleading
    "unknown language code"). This imports spacy-transformers before a command runs (`command_line`; spaCy would
    import it next anyway) and turns that into a fix to run. The transformers range is spacy-piqn's own requirement
    (its ``trf`` extra), the one spacy-transformers accepts.
    """
    from importlib import metadata

    try:
        import spacy_transformers  # noqa: F401
    except ImportError as error:
        if error.name == "spacy_transformers":  # not installed: spaCy has nothing to import either
            return None
        from packaging.requirements import Requirement

        def version(name: str) -> str:
            try:
                return metadata.version(name)
            except metadata.PackageNotFoundError:
                return "(not installed)"

        def transformers_pin(distribution: str) -> str:
            try:
                requirements = [Requirement(line) for line in metadata.requires(distribution) or []]
            except metadata.PackageNotFoundError:
                return ""
            specifiers = next((r.specifier for r in requirements if r.name == "transformers"), [])
            return ",".join(sorted((str(s) for s in specifiers), key=lambda s: not s.startswith(">")))

        pin = transformers_pin("spacy-piqn") or transformers_pin("spacy-transformers")
        problem = Errors.E210.format(
            spacy_transformers=version("spacy-transformers"),
            transformers=version("transformers"),
            reason=error,
            pin=pin,
        )
        return f"error: {problem}"
    return None


def fail(message: str) -> typer.Exit:
    """Print one line to stderr and give the exit to raise: users get the reason, not a traceback."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=1)


def check_transformers_first(callback: Callable[..., Any]) -> Callable[..., Any]:
    """``callback`` that first stops with `transformers_problem`'s fix, if there is one."""

    @functools.wraps(callback)
    def checked(*args: Any, **kwargs: Any) -> Any:
        problem = transformers_problem()
        if problem:
            typer.echo(problem, err=True)
            raise typer.Exit(code=1)
        return callback(*args, **kwargs)

    return checked


def command_line() -> click.Group:
    """The click group that ``python -m spacy_piqn`` runs: `app`, each command checking `transformers_problem` first.

    Every command creates a pipeline (``convert`` a blank one), so each needs the check; ``--help`` and usage errors
    are answered before a command's body runs, so they skip the 2-4 s import of spacy-transformers it costs.
    """
    group = typer.main.get_command(app)
    for command in group.commands.values():
        if command.callback is not None:
            command.callback = check_transformers_first(command.callback)
    return group


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
    """The conversion report as aligned text lines: where documents came from, the counts, entities per label."""
    header = (
        f"Converted {report['input']} ({report['format']}) -> {report['output']}, spans key {report['spans_key']!r}"
    )
    source = report["documents_from"] or "none in the input (no doc-id file, doc_id or -DOCSTART-)"
    notes = [f"  documents: {source}; {report['grouping']}"]
    if report["format"] == "conll":
        index = " (column 1 is a token index)" if report["token_column"] == 2 else ""
        notes.append(f"  token column {report['token_column']}{index}, tag scheme {report['scheme']}")
    rows = REPORT_ROWS + (COLUMN_REPORT_ROWS if report["format"] == "conll" else ())
    width = max(len(name) for name, _ in rows)
    lines = [f"  {name:<{width}}  {'-' if report[key] is None else report[key]:>8}" for name, key in rows]
    labels = sorted(report["labels"].items(), key=lambda item: (-item[1], item[0]))
    label_width = max((len(label) for label, _ in labels), default=0)
    table = ["  entities written per label:"] if labels else []
    for label, count in labels:
        rare = report["rare_labels"].get(label)
        table.append(f"    {label:<{label_width}}  {count:>8}" + (f"  rare: typo? first at {rare}" if rare else ""))
    return "\n".join([header, *notes, *lines, *table])


@app.command("convert")
def convert_command(
    input_path: Annotated[Path, typer.Argument(help="JSONL or column (IOB/BIOES) file to convert.")],
    output_path: Annotated[Path, typer.Argument(help="Output .spacy file, or an existing directory.")],
    file_format: Annotated[
        str | None, typer.Option("--format", "-f", help="jsonl or conll. Default: from the input's suffix.")
    ] = None,
    spans_key: Annotated[str, typer.Option("--spans-key", "-k", help="doc.spans key for the gold spans.")] = "sc",
    lang: Annotated[str, typer.Option("--lang", "-l", help="Language code for the vocab (spacy.blank).")] = "en",
    n_sents: Annotated[
        int | None,
        typer.Option(
            "--n-sents",
            "-n",
            help="At most N consecutive sentences of one document per output doc; 0: whole documents. Default: "
            "whole documents when the input has document information (doc-id file, doc_id fields, -DOCSTART-), "
            "else 1.",
        ),
    ] = None,
    doc_ids: Annotated[
        Path | None,
        typer.Option(
            "--doc-ids",
            help="jsonl: file with the document id of each record, one per line. "
            "Default: <stem>.doc_ids.txt beside the input, if it exists.",
        ),
    ] = None,
    sentences: Annotated[
        bool,
        typer.Option("--sentences", help="Ignore all document information: one sentence per doc (or --n-sents)."),
    ] = False,
    tag_cols: Annotated[
        int | None,
        typer.Option(
            "--tag-cols",
            help="conll: number of trailing tag columns, one per nesting level. "
            "Default: the trailing columns whose values are mostly tags.",
        ),
    ] = None,
    token_col: Annotated[
        int | None,
        typer.Option(
            "--token-col",
            help="conll: the column (from 1) that holds the token. "
            "Default: 2 when column 1 is a per-sentence index (1, 2, 3, ...), else 1.",
        ),
    ] = None,
    scheme: Annotated[
        str,
        typer.Option(
            "--scheme",
            help="conll: iob2 (also BIO, BIOES, BILOU: entities start with B-, S- or U-; an I- that starts one is "
            "read as IOB1 but counted and logged) or iob1 (I- after O or another type starts an entity).",
        ),
    ] = "iob2",
    skip_invalid: Annotated[
        bool, typer.Option("--skip-invalid", help="Skip and log invalid records instead of stopping.")
    ] = False,
    labels: Annotated[
        str | None, typer.Option("--labels", help="Comma-separated allowed labels; any other label is an error.")
    ] = None,
) -> None:
    """Convert a pre-tokenized nested-NER corpus to a .spacy DocBin with every entity in doc.spans.

    Consecutive sentences of one document become one doc (docs/data.md describes the formats and the report).
    """
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
                documents=not sentences,
                doc_ids=doc_ids,
                tag_cols=tag_cols,
                token_col=token_col,
                scheme=scheme,
                labels=allowed,
                skip_invalid=skip_invalid,
            )
    except (ConversionError, ValueError, OSError, RuntimeError) as error:
        raise fail(str(error)) from None
    typer.echo(format_report(report))


# The modules a transformer config needs that spacy-piqn's `trf` extra installs.
TRF_MODULES = ("spacy_transformers", "transformers")


def missing_trf_module(error: BaseException) -> str | None:
    """The trf module whose absence caused ``error`` (the component re-raises load errors as E005), else None."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ImportError) and (seen.name or "").split(".")[0] in TRF_MODULES:
            return seen.name
        if isinstance(seen, ValueError) and "[E002]" in str(seen) and "'transformer'" in str(seen):
            return "spacy_transformers"  # spaCy's "no factory 'transformer'"
        seen = seen.__cause__ or seen.__context__
    return None


def use_gpu(gpu_id: int) -> None:
    """Put spaCy on GPU ``gpu_id`` (nothing for -1), or stop with one line that says what is missing."""
    if gpu_id < 0:
        return
    import spacy

    try:
        spacy.require_gpu(gpu_id)
    except (ValueError, ImportError, RuntimeError) as error:  # no CuPy, no CUDA device, or a bad device id
        raise fail(Errors.E211.format(gpu_id=gpu_id, reason=error)) from None


def load_pipeline(model: str, gpu_id: int) -> Language:
    """Load a trained pipeline (directory or installed package) on CPU, or on GPU ``gpu_id`` if it is >= 0."""
    import spacy

    import spacy_piqn

    use_gpu(gpu_id)
    spacy_piqn.register()  # the names resolve even where the entry points are stale or missing
    try:
        return spacy.load(model)
    except OSError as error:
        raise fail(Errors.E200.format(model=model, reason=error)) from None
    except (ImportError, ValueError) as error:
        module = missing_trf_module(error)  # a transformer pipeline without the trf extra
        if module is None:
            raise
        raise fail(Errors.E212.format(model=model, module=module)) from None


def gold_token_examples(nlp: Language, data_path: Path, limit: int = 0) -> list[Example]:
    """Examples from a DocBin whose predicted docs have exactly the gold tokens.

    ``spacy evaluate`` re-tokenizes the text of every doc whose spaces are known (``Doc(words, spaces)``, docs made
    from text) with the pipeline's tokenizer; it keeps the words only of docs with unknown spaces (``Doc(words)``).
    A model trained on gold tokens (``spacy-piqn.Corpus.v1``) would then be scored on other tokens than it was
    trained and validated on. These are the examples ``spacy train`` scores on, whatever the DocBin's spaces, so the
    numbers agree with the training log.
    """
    from .corpus import create_gold_token_corpus

    if not data_path.exists():
        raise fail(Errors.E201.format(path=data_path))
    return list(create_gold_token_corpus(data_path, gold_tokens=True, limit=limit)(nlp))


def format_scores(scores: dict[str, Any]) -> str:
    """``nlp.evaluate``'s scores as text: one line per score in %, speed in words/s, then a P/R/F table per type.

    token_* are left out: they score the tokenizer, and the predicted docs here have the gold tokens.
    """
    rows = [
        (key, value)
        for key, value in scores.items()
        if not key.startswith("token_") and (isinstance(value, float | int) or value is None)
    ]
    width = max((len(key) for key, _ in rows), default=0)
    lines = []
    for key, value in rows:
        shown = f"{'-':>8}" if value is None else (f"{value:8.0f} words/s" if key == "speed" else f"{value * 100:8.2f}")
        lines.append(f"  {key:<{width}}  {shown}")
    for key, counts in scores.items():
        if key.endswith("_errors") and isinstance(counts, dict):
            lines.append(f"{key}: " + ", ".join(f"{name} {n:,}" for name, n in counts.items()))
    for key, per_type in scores.items():
        if not key.endswith("_per_type") or not isinstance(per_type, dict) or not per_type:
            continue
        label_width = max(len("type"), *(len(label) for label in per_type))
        lines.append(f"{key} (%):")
        lines.append(f"  {'type':<{label_width}}  {'P':>6}  {'R':>6}  {'F':>6}")
        for label in sorted(per_type):
            prf = per_type[label]
            cells = "  ".join("     -" if prf.get(m) is None else f"{prf[m] * 100:6.2f}" for m in ("p", "r", "f"))
            lines.append(f"  {label:<{label_width}}  {cells}")
    return "\n".join(lines)


@app.command("evaluate")
def evaluate_command(
    model: Annotated[str, typer.Argument(help="Pipeline directory or installed package name.")],
    data_path: Annotated[Path, typer.Argument(help="A .spacy DocBin (or a directory of them) with gold spans.")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write all scores to this JSON file.")] = None,
    gpu_id: Annotated[int, typer.Option("--gpu-id", "-g", help="GPU id, or -1 for CPU.")] = -1,
) -> None:
    """Score a pipeline on gold-tokenized docs: strict, localization and classification P/R/F, and P/R/F per type.

    Like ``spacy evaluate``, but the predicted docs always keep the gold tokens (see `gold_token_examples`), and
    the report shows the localization and classification scores that ``spacy evaluate`` writes only to its JSON.
    """
    import srsly

    nlp = load_pipeline(model, gpu_id)
    examples = gold_token_examples(nlp, data_path)
    if not examples:
        raise fail(Errors.E202.format(path=data_path))
    scores = nlp.evaluate(examples)
    typer.echo(f"Evaluated {model} on {len(examples)} docs from {data_path}")
    typer.echo(format_scores(scores))
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        srsly.write_json(output, scores)
        typer.echo(f"Saved scores to {output}")


@app.command("visualize")
def visualize_command(
    model: Annotated[str, typer.Argument(help="Pipeline directory or installed package name.")],
    data_path: Annotated[Path, typer.Argument(help="A .spacy DocBin (or a directory of them) to predict on.")],
    output: Annotated[Path, typer.Argument(help="HTML file to write.")],
    spans_key: Annotated[str, typer.Option("--spans-key", "-k", help="doc.spans key to render.")] = "sc",
    limit: Annotated[int, typer.Option("--limit", "-n", help="Render the first N docs (0: all).")] = 25,
    gold: Annotated[
        bool, typer.Option("--gold/--no-gold", help="Also render each doc's gold spans under its prediction.")
    ] = False,
    gpu_id: Annotated[int, typer.Option("--gpu-id", "-g", help="GPU id, or -1 for CPU.")] = -1,
) -> None:
    """Render predicted nested spans with displaCy's span style to a standalone HTML page.

    The docs are predicted on their gold tokens. Overlapping spans are stacked, one line per nesting level.
    """
    from spacy import displacy

    if limit < 0:
        raise fail(Errors.E203.format(limit=limit))
    nlp = load_pipeline(model, gpu_id)
    examples = gold_token_examples(nlp, data_path, limit=limit)
    predicted = list(nlp.pipe(eg.predicted for eg in examples))
    docs = []
    for i, (doc, eg) in enumerate(zip(predicted, examples)):
        doc.user_data["title"] = f"doc {i}: predicted ({len(doc.spans.get(spans_key, []))} spans)"
        docs.append(doc)
        if gold:
            reference = eg.reference
            reference.user_data["title"] = f"doc {i}: gold ({len(reference.spans.get(spans_key, []))} spans)"
            docs.append(reference)
    labels = sorted({span.label_ for doc in docs for span in doc.spans.get(spans_key, [])})
    colors = {label: SPAN_COLORS[i % len(SPAN_COLORS)] for i, label in enumerate(labels)}
    with warnings.catch_warnings():
        # W117 (a doc without spans) is expected for sentences without entities.
        warnings.filterwarnings("ignore", message=r"\[W117\]")
        html = displacy.render(docs, style="span", options={"spans_key": spans_key, "colors": colors}, page=True)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(html, encoding="utf-8")
    n_spans = sum(len(doc.spans.get(spans_key, [])) for doc in predicted)
    typer.echo(f"Rendered {len(predicted)} docs ({n_spans} predicted spans under {spans_key!r}) to {output}")


# The range find-threshold searches per key. Thresholds are probabilities (1 would drop every span); a
# merge_keep_ratio above 1 drops every nest that shares a boundary and label with a better span; the
# word tagger's boundary weight is a log-probability weight (0: the pointers' argmax).
THRESHOLD_RANGES = {
    "class_threshold": (0.0, 0.95),
    "boundary_threshold": (0.0, 0.95),
    "merge_keep_ratio": (0.0, 1.5),
    "tagger_boundary_weight": (0.0, 4.0),
}
THRESHOLD_KEYS = tuple(THRESHOLD_RANGES)


def threshold_grid(key: str, n_trials: int, current: float) -> list[float]:
    """``n_trials`` values evenly over the key's range (2 decimals), plus the current value, in order."""
    import numpy as np

    low, high = THRESHOLD_RANGES[key]
    values = {round(float(value), 2) for value in np.linspace(low, high, n_trials)}
    return sorted(values | {float(current)})


def best_threshold(results: dict[float, float], current: float) -> float:
    """The value with the highest score; on a tie the current value, then the value nearest to it.

    The current value competes like any other, so a search never saves a setting that scores below it.
    """
    return max(results, key=lambda v: (results[v], v == current, -abs(v - current)))


@app.command("find-threshold")
def find_threshold_command(
    model: Annotated[str, typer.Argument(help="Pipeline directory or installed package name.")],
    data_path: Annotated[Path, typer.Argument(help="A .spacy DocBin (or a directory of them) with gold spans.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Save the pipeline with the best value here.")
    ] = None,
    threshold_key: Annotated[
        str,
        typer.Option(
            "--key", "-k", help="class_threshold, boundary_threshold, merge_keep_ratio or tagger_boundary_weight."
        ),
    ] = "class_threshold",
    n_trials: Annotated[
        int,
        typer.Option(
            "--n-trials",
            "-n",
            help="Values tried evenly over the key's range (thresholds 0-0.95, merge_keep_ratio 0-1.5, "
            "tagger_boundary_weight 0-4), "
            "plus the pipeline's current value.",
        ),
    ] = 20,
    pipe_name: Annotated[str, typer.Option("--pipe", help="Name of the piqn component.")] = "piqn",
    gpu_id: Annotated[int, typer.Option("--gpu-id", "-g", help="GPU id, or -1 for CPU.")] = -1,
) -> None:
    """Pick the value of a decoding setting that maximises span F on gold-tokenized docs, and save the pipeline.

    ``spacy find-threshold`` re-tokenizes docs whose spaces are known (and its ``--gold-preproc`` drops
    ``doc.spans``), so it can score a gold-token PIQN on other tokens than it was trained on; this scores the same
    examples as ``evaluate``. The model runs once; each value only re-decodes. The current value is always tried
    and kept on a tie. Tune on a dev set, never on the test set you report.
    """
    from .analysis import annotate_before
    from .scorer import piqn_score

    if threshold_key not in THRESHOLD_RANGES:
        raise fail(Errors.E204.format(keys=", ".join(THRESHOLD_KEYS), key=threshold_key))
    if n_trials < 2:
        raise fail(Errors.E205.format(n_trials=n_trials))
    nlp = load_pipeline(model, gpu_id)
    if pipe_name not in nlp.pipe_names or threshold_key not in getattr(nlp.get_pipe(pipe_name), "cfg", {}):
        raise fail(Errors.E206.format(model=model, pipe=pipe_name, pipes=", ".join(nlp.pipe_names)))
    pipe = nlp.get_pipe(pipe_name)
    examples = gold_token_examples(nlp, data_path)
    if not examples:
        raise fail(Errors.E202.format(path=data_path))
    docs = annotate_before(nlp, [eg.predicted for eg in examples], pipe_name)
    batch = 256
    outputs = [(i, pipe.predict(docs[i : i + batch])) for i in range(0, len(docs), batch)]
    scores_key = f"spans_{pipe.key}_f"
    current = float(pipe.cfg[threshold_key])
    grid = threshold_grid(threshold_key, n_trials, current)
    results: dict[float, float] = {}
    for value in grid:
        pipe.cfg[threshold_key] = value
        for i, out in outputs:
            pipe.set_annotations(docs[i : i + batch], out)
        results[value] = float(piqn_score(examples, spans_key=pipe.key)[scores_key] or 0.0)
    best = best_threshold(results, current)
    low, high = THRESHOLD_RANGES[threshold_key]
    typer.echo(
        f"{threshold_key} on {len(examples)} docs from {data_path} ({scores_key}): {n_trials} values from {low} to "
        f"{high} and the current {current}"
    )
    for value, score in results.items():
        marks = ("  (current)" if value == current else "") + ("  <- best" if value == best else "")
        typer.echo(f"  {value:>5.2f}  {score * 100:6.2f}{marks}")
    typer.echo(
        f"Best {threshold_key}: {best} ({scores_key} {results[best] * 100:.2f}; current {current}, "
        f"{results[current] * 100:.2f})"
    )
    if output is not None:
        pipe.cfg[threshold_key] = best
        # get_pipe_config is the stored config; nlp.config["components"] is rebuilt on each access.
        nlp.get_pipe_config(pipe_name)[threshold_key] = best
        nlp.to_disk(output)
        typer.echo(f"Saved the pipeline with {threshold_key} = {best} to {output}")


@app.command("analyze")
def analyze_command(
    model: Annotated[str, typer.Argument(help="Pipeline directory or installed package name.")],
    data_path: Annotated[Path, typer.Argument(help="A .spacy DocBin (or a directory of them) to predict on.")],
    output: Annotated[Path, typer.Argument(help="Folder for queries.json and the PNG plots.")],
    pipe_name: Annotated[str, typer.Option("--pipe", help="Name of the piqn component.")] = "piqn",
    limit: Annotated[int, typer.Option("--limit", "-n", help="Read the first N docs (0: all).")] = 0,
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Draw the PNG heatmaps (needs matplotlib).")] = True,
    gpu_id: Annotated[int, typer.Option("--gpu-id", "-g", help="GPU id, or -1 for CPU.")] = -1,
) -> None:
    """What each instance query learned: where its entities start, their length and type, how often it wins.

    Predicts on the docs' gold tokens, records every query's own entity per window (before decoding filters
    duplicates), and writes queries.json plus three heatmaps (query x relative start position, query x type, query x
    span length), each row normalised to that query's entities.
    """
    import srsly

    from .analysis import plot_queries, query_predictions, summarize_queries
    from .layers.torch_head import head_settings

    if limit < 0:
        raise fail(Errors.E203.format(limit=limit))
    nlp = load_pipeline(model, gpu_id)
    if pipe_name not in nlp.pipe_names or not hasattr(nlp.get_pipe(pipe_name), "probabilities"):
        raise fail(Errors.E206.format(model=model, pipe=pipe_name, pipes=", ".join(nlp.pipe_names)))
    pipe = nlp.get_pipe(pipe_name)
    examples = gold_token_examples(nlp, data_path, limit=limit)
    if not examples:
        raise fail(Errors.E202.format(path=data_path))
    records = query_predictions(nlp, [eg.predicted for eg in examples], pipe_name)
    n_queries = head_settings(pipe.model.get_ref("head")).n_queries
    summary = summarize_queries(records, n_queries, pipe.labels)
    output.mkdir(parents=True, exist_ok=True)
    srsly.write_json(output / "queries.json", summary)
    typer.echo(f"{summary['predicted']} query entities ({summary['kept']} kept by decoding) on {len(examples)} docs")
    typer.echo(f"Saved {output / 'queries.json'}")
    if plots:
        try:
            paths = plot_queries(summary, output)
        except ImportError:
            raise fail(Errors.E207) from None
        for path in paths:
            typer.echo(f"Saved {path}")


@app.command("predict-ray")
def predict_ray_command(
    model: Annotated[str, typer.Argument(help="Pipeline directory or installed package name (on every worker).")],
    input_path: Annotated[Path, typer.Argument(help="JSONL: one doc per line with a 'tokens' list or a 'text'.")],
    output: Annotated[Path, typer.Argument(help="Folder for the JSONL shards part-00000.jsonl, ...")],
    workers: Annotated[int, typer.Option("--workers", "-w", help="Pipeline actors (one process each).")] = 2,
    batch_size: Annotated[int, typer.Option("--batch-size", "-b", help="Docs per batch.")] = 64,
    threads: Annotated[int, typer.Option("--threads", help="torch threads (and Ray CPUs) per worker.")] = 1,
    address: Annotated[
        str | None, typer.Option("--address", help="Ray cluster address ('auto' on a node of a running cluster).")
    ] = None,
    spans_key: Annotated[str, typer.Option("--spans-key", "-k", help="doc.spans key to export.")] = "sc",
) -> None:
    """Predict a large JSONL corpus with Ray Data (`pip install 'spacy-piqn\\[ray]'`), output in input order.

    Without --address Ray starts a local cluster on this machine; on a cluster, run `ray start --head` on one node,
    `ray start --address HEAD:6379` on the others, and this command with --address auto on any of them.
    """
    try:
        import ray  # noqa: F401
    except ImportError:
        raise fail(Errors.E208) from None
    from .scale import predict_jsonl_with_ray

    if not input_path.exists():
        raise fail(Errors.E209.format(path=input_path))
    try:
        n = predict_jsonl_with_ray(
            model,
            input_path,
            output,
            workers=workers,
            batch_size=batch_size,
            threads_per_worker=threads,
            spans_key=spans_key,
            address=address,
        )
    except ValueError as error:
        raise fail(str(error)) from None
    typer.echo(f"Predicted {n} docs with {workers} worker(s); spans in {output}/part-*.jsonl")
