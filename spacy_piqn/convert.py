"""Turn pre-tokenized nested-NER corpora into spaCy ``DocBin`` files.

``spacy convert`` only writes flat ``doc.ents``, so nested gold would be lost there. The readers here keep
every mention in ``doc.spans[spans_key]`` and keep the gold tokens exactly (``Doc(vocab, words=...)``, never
the tokenizer), because the gold offsets are token offsets and a retokenized doc would misalign them.

Input formats
-------------
* **JSONL**: one object per line, ``{"tokens": [...], "entities": [{"start": 0, "end": 2, "label": "DNA"}]}``
  with ``end`` exclusive. Other keys are ignored; blank lines are ignored.
* **Column files** (CoNLL-like): whitespace-separated columns, the token in the first column and one or more tag
  columns at the end, one column per nesting level (GENIA/GermEval-style multi-level IOB). A blank line ends a
  sentence; a line whose first column is ``-DOCSTART-`` starts a new document and is not a token. The tags may
  be IOB1, IOB2/BIO, BIOES or BILOU (see `tags_to_spans`). Which columns hold tags:

  - ``tag_cols=N``: the last N columns.
  - ``tag_cols=None`` (auto): the trailing run of columns, after the first, in which more than half of the
    values look like tags (``O``, or ``B-``/``I-``/``E-``/``S-``/``L-``/``U-`` and a label). Columns between
    the token and the tags (POS, lemma) are ignored. A chunk column with IOB chunk tags, as in CoNLL-2003,
    also looks like tags: pass ``tag_cols=1`` for such files.

Policies
--------
* Every doc gets ``doc.spans[spans_key]``, even when empty, so "no entities" is gold and not "unannotated".
  ``doc.ents`` is set as well (empty included) when the doc's entities do not overlap.
* Each input record is one sentence and sentence starts are always set; ``n_sents`` puts that many consecutive
  sentences in one doc (never across a ``-DOCSTART-``).
* A repeated ``(start, end, label)`` in one sentence is dropped with a warning and counted in the report as
  ``duplicates_removed``; it would otherwise be a second gold target for the same mention. The same span with
  two different labels is kept (GermEval has such cases).
* A token containing whitespace is an error: the doc's text could not be split back into the same tokens.
* Any invalid record raises `ConversionError` naming FILE:LINE, unless ``skip_invalid`` is set, in which case
  the record (a JSONL line, or a whole column-file sentence) is skipped, logged on the ``spacy_piqn`` logger
  and counted. Nothing is written when an error is raised.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import spacy
from spacy.language import Language
from spacy.tokens import Doc, DocBin, Span, SpanGroup
from spacy.vocab import Vocab

from .errors import Errors

logger = logging.getLogger("spacy_piqn")

DOCSTART = "-DOCSTART-"
TAG_PATTERN = re.compile(r"O|[BIESLU]-\S+")
JSONL_SUFFIXES = (".jsonl",)
COLUMN_SUFFIXES = (".iob", ".iob1", ".iob2", ".bio", ".bioes", ".bilou", ".conll", ".tsv", ".txt")
FORMATS = ("jsonl", "conll")

PathLike = str | Path
SpanTuple = tuple[int, int, str]


class ConversionError(ValueError):
    """An input record that cannot be converted, located by file and 1-based line number.

    ``reason`` is a catalogued message (``Errors.E1xx``), so the error reads ``FILE:LINE: [E1xx] ...``.
    """

    def __init__(self, file: PathLike, line: int, reason: str) -> None:
        self.file = str(file)
        self.line = line
        self.reason = reason
        super().__init__(f"{self.file}:{line}: {reason}")


# A decoded line of a column file, or the decoding error that only its own sentence should pay for.
_Line = tuple[int, str | ConversionError]


class _Invalid(Exception):
    """A reason without a location; the reader that knows the line turns it into a ConversionError."""


@dataclass
class Sentence:
    """One gold sentence as read from the input, before it becomes (part of) a Doc."""

    tokens: list[str]
    spans: list[SpanTuple]  # (start, end exclusive, label), sorted and unique
    line: int  # where the record starts, for messages
    new_document: bool = False  # first sentence after a -DOCSTART- line


@dataclass
class ReadStats:
    """Counts the readers keep while streaming, so `convert` can report and check them."""

    records: int = 0  # sentences read, skipped ones included
    skipped: int = 0
    entities: int = 0  # entity entries in the kept records, before duplicates are dropped
    duplicates: int = 0


# ---------------------------------------------------------------------------------------------------------
# Shared helpers


def _vocab_of(nlp_or_vocab: Language | Vocab) -> Vocab:
    if isinstance(nlp_or_vocab, Language):
        return nlp_or_vocab.vocab
    if isinstance(nlp_or_vocab, Vocab):
        return nlp_or_vocab
    raise TypeError(Errors.E100.format(type=type(nlp_or_vocab).__name__))


def _label_set(labels: Iterable[str] | None) -> frozenset[str] | None:
    return None if labels is None else frozenset(labels)


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _decode(raw: bytes, path: Path, line: int) -> str:
    """Decode one line strictly, so a mixed-encoding file fails at the line that is not UTF-8."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConversionError(path, line, Errors.E101.format(byte=raw[error.start], column=error.start + 1)) from None
    return text.removeprefix("\ufeff") if line == 1 else text


def _check_label(label: Any, allowed: frozenset[str] | None, where: str) -> str:
    if not isinstance(label, str) or not label:
        raise _Invalid(Errors.E102.format(where=where, label=label))
    if allowed is not None and label not in allowed:
        raise _Invalid(Errors.E103.format(where=where, label=label, allowed=", ".join(sorted(allowed))))
    return label


def _dedupe(spans: list[SpanTuple], lines: Sequence[int], path: Path, stats: ReadStats) -> list[SpanTuple]:
    """Sort spans and drop repeated (start, end, label), logging each with the line of its first token."""
    unique = sorted(set(spans))
    removed = len(spans) - len(unique)
    if removed:
        seen: set[SpanTuple] = set()
        for span in spans:
            if span in seen:
                logger.warning(
                    "%s:%d: dropped duplicate entity %s [%d, %d)", path, lines[span[0]], span[2], span[0], span[1]
                )
            seen.add(span)
        stats.duplicates += removed
    return unique


def _reject(error: ConversionError, skip_invalid: bool, stats: ReadStats) -> None:
    if not skip_invalid:
        raise error
    stats.skipped += 1
    logger.warning("skipped %s:%d: %s", error.file, error.line, error.reason)


# ---------------------------------------------------------------------------------------------------------
# JSONL


def _check_tokens(tokens: Any) -> list[str]:
    if not isinstance(tokens, list):
        raise _Invalid(Errors.E104.format(type=_json_type(tokens)))
    if not tokens:
        raise _Invalid(Errors.E105)
    for i, token in enumerate(tokens):
        if not isinstance(token, str):
            raise _Invalid(Errors.E106.format(i=i, type=_json_type(token)))
        if not token:
            raise _Invalid(Errors.E107.format(i=i))
        if any(char.isspace() for char in token):
            raise _Invalid(Errors.E108.format(i=i, token=token))
    return tokens


def _check_entities(entities: Any, n_tokens: int, allowed: frozenset[str] | None) -> list[SpanTuple]:
    if not isinstance(entities, list):
        raise _Invalid(Errors.E109.format(type=_json_type(entities)))
    spans = []
    for i, entity in enumerate(entities):
        where = f"entity {i}"
        if not isinstance(entity, dict):
            raise _Invalid(Errors.E110.format(where=where, type=_json_type(entity)))
        for key in ("start", "end", "label"):
            if key not in entity:
                raise _Invalid(Errors.E111.format(where=where, key=key))
        start, end = entity["start"], entity["end"]
        for name, value in (("start", start), ("end", end)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise _Invalid(Errors.E112.format(where=where, name=name, value=value))
            if value < 0:
                raise _Invalid(Errors.E113.format(where=where, name=name, value=value))
        if end > n_tokens:
            raise _Invalid(Errors.E114.format(where=where, end=end, n_tokens=n_tokens))
        if start >= end:
            raise _Invalid(Errors.E115.format(where=where, start=start, end=end))
        spans.append((start, end, _check_label(entity["label"], allowed, where)))
    return spans


def _parse_json_record(text: str, allowed: frozenset[str] | None) -> tuple[list[str], list[SpanTuple]]:
    try:
        record = json.loads(text)
    except json.JSONDecodeError as error:
        raise _Invalid(Errors.E116.format(reason=error.msg, column=error.colno)) from None
    if not isinstance(record, dict):
        raise _Invalid(Errors.E117.format(type=_json_type(record)))
    for key in ("tokens", "entities"):
        if key not in record:
            raise _Invalid(Errors.E118.format(key=key))
    tokens = _check_tokens(record["tokens"])
    return tokens, _check_entities(record["entities"], len(tokens), allowed)


def read_jsonl(
    path: PathLike,
    *,
    labels: Iterable[str] | None = None,
    skip_invalid: bool = False,
    stats: ReadStats | None = None,
) -> Iterator[Sentence]:
    """Stream validated sentences from a JSONL file, one record per non-blank line."""
    path = Path(path)
    stats = stats if stats is not None else ReadStats()
    allowed = _label_set(labels)
    with path.open("rb") as file:
        for line, raw in enumerate(file, start=1):
            if not raw.strip():
                continue
            stats.records += 1
            try:
                tokens, spans = _parse_json_record(_decode(raw, path, line), allowed)
            except _Invalid as error:
                _reject(ConversionError(path, line, str(error)), skip_invalid, stats)
                continue
            except ConversionError as error:
                _reject(error, skip_invalid, stats)
                continue
            stats.entities += len(spans)
            yield Sentence(tokens, _dedupe(spans, [line] * len(tokens), path, stats), line)


# ---------------------------------------------------------------------------------------------------------
# Column (CoNLL-like) files


def tags_to_spans(tags: Sequence[str]) -> list[SpanTuple]:
    """Decode one tag column (IOB1, IOB2/BIO, BIOES/BILOU or a mix) into (start, end, label) spans.

    One decoder serves every scheme because it follows conlleval's chunk rules: a chunk starts at ``B-``,
    ``S-``/``U-``, and at ``I-``/``E-``/``L-`` whose label differs from the open chunk (IOB1's way to start
    one, and the lenient reading of a broken BIOES sequence); a chunk ends after ``E-``/``L-``/``S-``/``U-`` and
    before ``O`` or any tag that starts a new chunk.
    """
    spans: list[SpanTuple] = []
    open_start, open_label = 0, None
    for i, tag in enumerate(tags):
        if not TAG_PATTERN.fullmatch(tag):
            raise ValueError(Errors.E122.format(tag=tag, position=i))
        prefix, label = tag[0], tag[2:]
        continues = prefix in "IEL" and label == open_label
        if open_label is not None and not continues:
            spans.append((open_start, i, open_label))
            open_label = None
        if prefix != "O" and not continues:
            open_start, open_label = i, label
        if prefix in "ESLU":
            spans.append((open_start, i + 1, label))
            open_label = None
    if open_label is not None:
        spans.append((open_start, len(tags), open_label))
    return spans


def _column_lines(path: Path) -> list[_Line]:
    """All lines, decoded; a line that is not UTF-8 carries its error so only its sentence is affected."""
    lines: list[_Line] = []
    with path.open("rb") as file:
        for number, raw in enumerate(file, start=1):
            try:
                lines.append((number, _decode(raw, path, number)))
            except ConversionError as error:
                lines.append((number, error))
    return lines


def _is_docstart(text: str) -> bool:
    fields = text.split()
    return bool(fields) and fields[0] == DOCSTART


def _detect_tag_cols(lines: list[_Line], path: Path) -> int:
    """The auto rule: the trailing run of columns (after the first) whose values are mostly tag-shaped."""
    rows = [text.split() for _, text in lines if isinstance(text, str) and text.strip() and not _is_docstart(text)]
    if not rows:
        return 1  # nothing to convert; any count gives the same empty result
    n_columns = len(rows[0])
    same_width = [row for row in rows if len(row) == n_columns]
    n_tag_cols = 0
    for column in range(n_columns - 1, 0, -1):
        n_tags = sum(1 for row in same_width if TAG_PATTERN.fullmatch(row[column]))
        if 2 * n_tags <= len(same_width):
            break
        n_tag_cols += 1
    if n_tag_cols == 0:
        first_line = next(n for n, t in lines if isinstance(t, str) and t.strip() and not _is_docstart(t))
        raise ConversionError(path, first_line, Errors.E119)
    return n_tag_cols


def _parse_column_block(
    block: list[_Line],
    path: Path,
    n_tag_cols: int,
    allowed: frozenset[str] | None,
) -> tuple[list[str], list[SpanTuple], list[int]]:
    tokens: list[str] = []
    token_lines: list[int] = []
    levels: list[list[str]] = [[] for _ in range(n_tag_cols)]
    for line, text in block:
        if isinstance(text, ConversionError):
            raise text
        fields = text.split()
        if len(fields) < 1 + n_tag_cols:
            raise ConversionError(path, line, Errors.E120.format(n_tag_cols=n_tag_cols, n_columns=len(fields)))
        for level, tag in enumerate(fields[-n_tag_cols:]):
            if not TAG_PATTERN.fullmatch(tag):
                raise ConversionError(path, line, Errors.E121.format(tag=tag, column=level + 1))
            if tag != "O":
                try:
                    _check_label(tag[2:], allowed, f"tag {tag!r}")
                except _Invalid as error:
                    raise ConversionError(path, line, str(error)) from None
            levels[level].append(tag)
        tokens.append(fields[0])
        token_lines.append(line)
    spans = [span for tags in levels for span in tags_to_spans(tags)]
    return tokens, spans, token_lines


def read_columns(
    path: PathLike,
    *,
    tag_cols: int | None = None,
    labels: Iterable[str] | None = None,
    skip_invalid: bool = False,
    stats: ReadStats | None = None,
) -> Iterator[Sentence]:
    """Stream validated sentences from a column file; every tag column is one nesting level."""
    path = Path(path)
    stats = stats if stats is not None else ReadStats()
    allowed = _label_set(labels)
    if tag_cols is not None and tag_cols < 1:
        raise ValueError(Errors.E123.format(tag_cols=tag_cols))
    lines = _column_lines(path)
    n_tag_cols = tag_cols if tag_cols is not None else _detect_tag_cols(lines, path)

    for block, new_document in _column_blocks(lines):
        stats.records += 1
        try:
            tokens, spans, token_lines = _parse_column_block(block, path, n_tag_cols, allowed)
        except ConversionError as error:
            _reject(error, skip_invalid, stats)
            continue
        stats.entities += len(spans)
        yield Sentence(tokens, _dedupe(spans, token_lines, path, stats), block[0][0], new_document)


def _column_blocks(
    lines: list[_Line],
) -> Iterator[tuple[list[_Line], bool]]:
    """Split lines into sentences at blank lines; each comes with whether it opens a -DOCSTART- document."""
    block: list[_Line] = []
    new_document = False
    for line, text in lines:
        boundary = isinstance(text, str) and (not text.strip() or _is_docstart(text))
        if boundary and block:
            yield block, new_document
            block, new_document = [], False
        if isinstance(text, str) and _is_docstart(text):
            new_document = True
        elif not boundary:
            block.append((line, text))
    if block:
        yield block, new_document


# ---------------------------------------------------------------------------------------------------------
# Docs


def _overlapping(spans: list[SpanTuple]) -> bool:
    """Whether any two spans share a token (same-span pairs included); spans must be sorted by start."""
    last_end = 0
    for start, end, _ in spans:
        if start < last_end:
            return True
        last_end = max(last_end, end)
    return False


def _make_doc(group: list[Sentence], vocab: Vocab, spans_key: str) -> Doc:
    words: list[str] = []
    sent_starts: list[bool] = []
    spans: list[SpanTuple] = []
    for sentence in group:
        offset = len(words)
        words.extend(sentence.tokens)
        sent_starts.extend([True] + [False] * (len(sentence.tokens) - 1))
        spans.extend((offset + start, offset + end, label) for start, end, label in sentence.spans)
    doc = Doc(vocab, words=words, sent_starts=sent_starts)
    doc_spans = [Span(doc, start, end, label=label) for start, end, label in spans]
    doc.spans[spans_key] = SpanGroup(doc, name=spans_key, spans=doc_spans)
    if not _overlapping(spans):
        doc.ents = doc_spans
    return doc


def sentences_to_docs(
    sentences: Iterable[Sentence], nlp_or_vocab: Language | Vocab, spans_key: str = "sc", n_sents: int = 1
) -> Iterator[Doc]:
    """Build docs of up to ``n_sents`` consecutive sentences each, starting a new doc at every new document."""
    if n_sents < 1:
        raise ValueError(Errors.E124.format(n_sents=n_sents))
    vocab = _vocab_of(nlp_or_vocab)
    group: list[Sentence] = []
    for sentence in sentences:
        if group and (len(group) == n_sents or sentence.new_document):
            yield _make_doc(group, vocab, spans_key)
            group = []
        group.append(sentence)
    if group:
        yield _make_doc(group, vocab, spans_key)


def jsonl_to_docs(
    path: PathLike,
    nlp_or_vocab: Language | Vocab,
    spans_key: str = "sc",
    *,
    n_sents: int = 1,
    labels: Iterable[str] | None = None,
    skip_invalid: bool = False,
    stats: ReadStats | None = None,
) -> Iterator[Doc]:
    """Docs with gold spans from a JSONL file (see the module docstring for format and policies)."""
    sentences = read_jsonl(path, labels=labels, skip_invalid=skip_invalid, stats=stats)
    return sentences_to_docs(sentences, nlp_or_vocab, spans_key, n_sents)


def conll_to_docs(
    path: PathLike,
    nlp_or_vocab: Language | Vocab,
    spans_key: str = "sc",
    *,
    n_sents: int = 1,
    tag_cols: int | None = None,
    labels: Iterable[str] | None = None,
    skip_invalid: bool = False,
    stats: ReadStats | None = None,
) -> Iterator[Doc]:
    """Docs with gold spans from a (multi-level) IOB column file (see the module docstring)."""
    sentences = read_columns(path, tag_cols=tag_cols, labels=labels, skip_invalid=skip_invalid, stats=stats)
    return sentences_to_docs(sentences, nlp_or_vocab, spans_key, n_sents)


# ---------------------------------------------------------------------------------------------------------
# Files


def guess_format(path: PathLike) -> str:
    """The input format from the file suffix, so the CLI needs ``--format`` only for unusual names."""
    suffix = Path(path).suffix.lower()
    if suffix in JSONL_SUFFIXES:
        return "jsonl"
    if suffix in COLUMN_SUFFIXES:
        return "conll"
    raise ValueError(Errors.E125.format(path=path, suffix=suffix))


def _count_written(path: Path, vocab: Vocab, spans_key: str) -> dict[str, int]:
    """Count what the DocBin file really holds, read back from disk, so the report cannot overstate it."""
    counts = {"docs": 0, "sentences": 0, "entities": 0}
    for doc in DocBin().from_disk(path).get_docs(vocab):
        counts["docs"] += 1
        counts["sentences"] += sum(1 for token in doc if token.is_sent_start)
        counts["entities"] += len(doc.spans[spans_key]) if spans_key in doc.spans else 0
    return counts


def convert(
    input_path: PathLike,
    output_path: PathLike,
    *,
    file_format: str | None = None,
    spans_key: str = "sc",
    lang: str = "en",
    n_sents: int = 1,
    tag_cols: int | None = None,
    labels: Iterable[str] | None = None,
    skip_invalid: bool = False,
) -> dict[str, Any]:
    """Convert one JSONL or column file to a ``.spacy`` DocBin and return the checked report.

    ``output_path`` may be an existing directory, in which case the file is named after the input. The report
    counts ``docs_read`` (input records, one sentence each, skipped ones included), ``skipped``,
    ``entities_read`` (in kept records), ``duplicates_removed``, and what was read back from the written file:
    ``docs_written``, ``sentences_written`` and ``entities_written``. Raises `ConversionError` for invalid
    input and RuntimeError if the written counts disagree with the read counts.
    """
    input_path, output_path = Path(input_path), Path(output_path)
    file_format = file_format or guess_format(input_path)
    if file_format not in FORMATS:
        raise ValueError(Errors.E126.format(format=file_format, formats=", ".join(FORMATS)))
    if not input_path.is_file():
        raise FileNotFoundError(Errors.E127.format(path=input_path))
    if output_path.is_dir():
        output_path = output_path / f"{input_path.stem}.spacy"
    try:
        nlp = spacy.blank(lang)
    except ImportError:
        raise ValueError(Errors.E128.format(lang=lang)) from None

    stats = ReadStats()
    if file_format == "jsonl":
        docs = jsonl_to_docs(
            input_path, nlp, spans_key, n_sents=n_sents, labels=labels, skip_invalid=skip_invalid, stats=stats
        )
    else:
        docs = conll_to_docs(
            input_path,
            nlp,
            spans_key,
            n_sents=n_sents,
            tag_cols=tag_cols,
            labels=labels,
            skip_invalid=skip_invalid,
            stats=stats,
        )
    doc_bin = DocBin(store_user_data=False)
    n_docs = 0
    for doc in docs:
        doc_bin.add(doc)
        n_docs += 1
    output_path.parent.mkdir(parents=True, exist_ok=True)
    doc_bin.to_disk(output_path)
    written = _count_written(output_path, nlp.vocab, spans_key)

    report = {
        "input": str(input_path),
        "output": str(output_path),
        "format": file_format,
        "spans_key": spans_key,
        "docs_read": stats.records,
        "skipped": stats.skipped,
        "docs_written": written["docs"],
        "sentences_written": written["sentences"],
        "entities_read": stats.entities,
        "duplicates_removed": stats.duplicates,
        "entities_written": written["entities"],
    }
    expected = {
        "docs_written": n_docs,
        "sentences_written": stats.records - stats.skipped,
        "entities_written": stats.entities - stats.duplicates,
    }
    wrong = [f"{key} = {report[key]} but expected {value}" for key, value in expected.items() if report[key] != value]
    if wrong:
        raise RuntimeError(Errors.E129.format(path=output_path, problems="; ".join(wrong)))
    return report
