"""Turn pre-tokenized nested-NER corpora into spaCy ``DocBin`` files, one Doc per document.

``spacy convert`` only writes flat ``doc.ents``, so nested gold would be lost there. The readers here keep
every mention in ``doc.spans[spans_key]`` and keep the gold tokens exactly (``Doc(vocab, words=...)``, never
the tokenizer), because the gold offsets are token offsets and a retokenized doc would misalign them.

Input formats
-------------
* **JSONL**: one sentence per line, ``{"tokens": [...], "entities": [{"start": 0, "end": 2, "label": "DNA"}]}``
  with ``end`` exclusive, and optionally ``"doc_id": "..."``. Other keys are ignored; blank lines are ignored.
* **Column files** (CoNLL-like): whitespace-separated columns, the token in the first column and one or more tag
  columns at the end, one column per nesting level (GENIA/GermEval-style multi-level IOB). A blank line ends a
  sentence; a line whose first column is ``-DOCSTART-`` starts a new document and is not a token.

  - Token column: the first, unless the first column is a per-sentence index (CoNLL-U style: on every line an
    integer counting up from 1 in each sentence, with at least one more column before the tags); then the
    second. ``token_col=N`` names it.
  - Tag columns: ``tag_cols=N`` takes the last N. ``tag_cols=None`` (auto) takes the trailing run of columns,
    after the first, in which more than half of the values look like tags (``O``, or ``B-``/``I-``/``E-``/
    ``S-``/``L-``/``U-`` and a label). Columns between the token and the tags (POS, lemma) are ignored. A chunk
    column with IOB chunk tags, as in CoNLL-2003, also looks like tags: pass ``tag_cols=1`` for such files.
  - Tag schemes: IOB2/BIO, BIOES and BILOU, where an entity starts with ``B-``, ``S-`` or ``U-`` (``scheme=
    "iob2"``, the default), or IOB1 (``scheme="iob1"``), where ``I-`` after ``O`` or after another type starts
    one. Under ``"iob2"`` such an ``I-`` (and any ``E-``/``L-`` that starts an entity) is still read as the
    start of a new entity, as conlleval and ``spacy convert`` read it, but each one is counted in the report as
    ``continuation_starts`` and the first few are logged with FILE:LINE: in an IOB2 file it is a mistake.

Documents
---------
Consecutive sentences of one document become one Doc, with a sentence start on each sentence's first token and
the document's id in ``doc.user_data["doc_id"]``. The document of each sentence comes from

* a doc-id file (JSONL only): line *i* names the document of the *i*-th non-blank record. ``convert`` uses
  ``<stem>.doc_ids.txt`` beside the input when it exists;
* a ``doc_id`` string in the JSONL records (every record has one, or none does);
* ``-DOCSTART-`` lines in column files (ids ``<stem>-doc0000``, ``<stem>-doc0001``, ... in file order).

``n_sents=None`` gives whole documents when the input has document information and one sentence per Doc
otherwise; ``n_sents=0`` asks for whole documents; ``n_sents=N`` puts at most N consecutive sentences of one
document in a Doc. ``documents=False`` ignores all document information (sentence-level baselines). An id that
comes back after other documents starts a new Doc and is logged and counted (``reappeared_documents``).

Policies
--------
* Every doc gets ``doc.spans[spans_key]``, even when empty, so "no entities" is gold and not "unannotated".
  ``doc.ents`` is set as well (empty included) when the doc's entities do not overlap.
* A repeated ``(start, end, label)`` in one sentence is dropped with a warning and counted in the report as
  ``duplicates_removed``; it would otherwise be a second gold target for the same mention. The same span with
  two different labels is kept (GermEval has such cases).
* Crossing entities (they overlap, neither contains the other) are kept, since gold is gold, but nested decoding
  can predict at most one of each pair: they are counted (``crossing_pairs``) and the first few logged.
* In a file with at least 100 entities, a label seen only once or twice is logged as a likely typo.
* A token containing whitespace is an error: the doc's text could not be split back into the same tokens.
* Any invalid record raises `ConversionError` naming FILE:LINE, unless ``skip_invalid`` is set, in which case
  the record (a JSONL line, or a whole column-file sentence) is skipped, logged on the ``spacy_piqn`` logger
  and counted. Nothing is written when an error is raised.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import spacy
from spacy.language import Language
from spacy.tokens import Doc, DocBin, Span, SpanGroup
from spacy.vocab import Vocab

from .errors import Errors, Warnings

logger = logging.getLogger("spacy_piqn")

DOCSTART = "-DOCSTART-"
TAG_PATTERN = re.compile(r"O|[BIESLU]-\S+")
JSONL_SUFFIXES = (".jsonl",)
COLUMN_SUFFIXES = (".iob", ".iob1", ".iob2", ".bio", ".bioes", ".bilou", ".conll", ".tsv", ".txt")
FORMATS = ("jsonl", "conll")
SCHEMES = ("iob2", "iob1")
DOC_IDS_SUFFIX = ".doc_ids.txt"
MAX_LOGGED = 5  # warnings of one kind logged per file; the report counts every case
RARE_LABEL_MAX = 2  # at most this many mentions ...
RARE_LABEL_MIN_ENTITIES = 100  # ... in a file with at least this many entities: a likely typo

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
    doc_id: str | None = None  # its document; None: the input has no document information


@dataclass
class ReadStats:
    """Counts the readers keep while streaming, so `convert` can report and check them."""

    records: int = 0  # sentences read, skipped ones included
    skipped: int = 0
    entities: int = 0  # entity entries in the kept records, before duplicates are dropped
    duplicates: int = 0
    labels: Counter[str] = field(default_factory=Counter)  # kept entities (after duplicates) per label
    label_lines: dict[str, int] = field(default_factory=dict)  # the first line of each label
    crossing: int = 0  # pairs of crossing entities in kept sentences
    continuation_starts: int = 0  # I-/E-/L- tags that start an entity where the scheme says they continue one
    documents_from: str | None = None  # where the document ids come from; None: no document information
    documents: int = 0  # runs of consecutive sentences with one id (kept sentences)
    reappeared: int = 0  # runs whose id was seen before, after other documents
    token_column: int | None = None  # column files: the 1-based column read as the token
    warned: Counter[str] = field(default_factory=Counter)  # warnings per code, for the logging cap


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


def _warn(stats: ReadStats, code: str, path: Path, line: int, *, cap: bool = True, **fields: Any) -> None:
    """Log ``Warnings.<code>`` as FILE:LINE; past MAX_LOGGED cases of one code, only the report counts them."""
    stats.warned[code] += 1
    if not cap or stats.warned[code] <= MAX_LOGGED:
        logger.warning("%s:%d: %s", path, line, getattr(Warnings, code).format(**fields))
    elif stats.warned[code] == MAX_LOGGED + 1:
        logger.warning("%s", Warnings.W104.format(path=path, code=code, n=MAX_LOGGED))


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


def crossing_pairs(spans: Sequence[SpanTuple]) -> list[tuple[SpanTuple, SpanTuple]]:
    """Pairs of spans that overlap without either containing the other; ``spans`` sorted by (start, end)."""
    pairs = []
    for i, first in enumerate(spans):
        for second in spans[i + 1 :]:
            if second[0] >= first[1]:
                break
            if first[0] < second[0] and first[1] < second[1]:
                pairs.append((first, second))
    return pairs


def _sentence(
    tokens: list[str],
    spans: list[SpanTuple],
    token_lines: Sequence[int],
    doc_id: str | None,
    path: Path,
    stats: ReadStats,
) -> Sentence:
    """A kept sentence: duplicates dropped, labels and crossing pairs counted, warnings logged."""
    stats.entities += len(spans)
    unique = _dedupe(spans, token_lines, path, stats)
    for start, _, label in unique:
        stats.labels[label] += 1
        stats.label_lines.setdefault(label, token_lines[start])
    for first, second in crossing_pairs(unique):
        stats.crossing += 1
        _warn(stats, "W101", path, token_lines[second[0]], first=_show(first), second=_show(second))
    return Sentence(tokens, unique, token_lines[0], doc_id)


def _show(span: SpanTuple) -> str:
    return f"{span[2]} [{span[0]}, {span[1]})"


class _Documents:
    """Counts the documents of the kept sentences and warns when an id comes back after other documents."""

    def __init__(self, path: Path, stats: ReadStats) -> None:
        self.path, self.stats = path, stats
        self.current: str | None = None
        self.first_line: dict[str, int] = {}

    def enter(self, doc_id: str | None, line: int) -> None:
        if doc_id is None or doc_id == self.current:
            return
        self.current = doc_id
        self.stats.documents += 1
        if doc_id in self.first_line:
            self.stats.reappeared += 1
            _warn(self.stats, "W102", self.path, line, cap=False, doc_id=doc_id, first=self.first_line[doc_id])
        else:
            self.first_line[doc_id] = line


def rare_labels(labels: Counter[str]) -> list[str]:
    """Labels seen at most RARE_LABEL_MAX times in a file with at least RARE_LABEL_MIN_ENTITIES entities."""
    if sum(labels.values()) < RARE_LABEL_MIN_ENTITIES:
        return []
    return sorted(label for label, count in labels.items() if count <= RARE_LABEL_MAX)


def _warn_rare_labels(path: Path, stats: ReadStats) -> None:
    rare = rare_labels(stats.labels)
    if rare:
        first = min(stats.label_lines[label] for label in rare)
        shown = ", ".join(f"{label!r} ({stats.labels[label]}x, {path}:{stats.label_lines[label]})" for label in rare)
        _warn(stats, "W103", path, first, cap=False, labels=shown, most=stats.labels.most_common(1)[0][1])


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


def _parse_json_record(text: str, allowed: frozenset[str] | None) -> tuple[list[str], list[SpanTuple], Any]:
    """Tokens, spans and the record's ``doc_id`` (None when it has none, unchecked)."""
    try:
        # Without its line break: an error at the end of the line would otherwise be reported as column 1 of the
        # (empty) next line.
        record = json.loads(text.rstrip("\r\n"))
    except json.JSONDecodeError as error:
        raise _Invalid(Errors.E116.format(reason=error.msg, column=error.colno)) from None
    if not isinstance(record, dict):
        raise _Invalid(Errors.E117.format(type=_json_type(record)))
    for key in ("tokens", "entities"):
        if key not in record:
            raise _Invalid(Errors.E118.format(key=key))
    tokens = _check_tokens(record["tokens"])
    return tokens, _check_entities(record["entities"], len(tokens), allowed), record.get("doc_id")


def find_doc_ids(path: PathLike) -> Path | None:
    """The doc-id file ``<stem>.doc_ids.txt`` beside ``path``, if there is one."""
    candidate = Path(path).with_name(Path(path).stem + DOC_IDS_SUFFIX)
    return candidate if candidate.is_file() else None


def read_doc_ids(path: PathLike) -> list[str]:
    """The ids of a doc-id file, one per line (surrounding whitespace stripped; a blank line is an error)."""
    path = Path(path)
    ids = []
    with path.open("rb") as file:
        for line, raw in enumerate(file, start=1):
            doc_id = _decode(raw, path, line).strip()
            if not doc_id:
                raise ConversionError(path, line, Errors.E131)
            ids.append(doc_id)
    return ids


def _count_records(path: Path) -> int:
    with path.open("rb") as file:
        return sum(1 for raw in file if raw.strip())


class _DocIdField:
    """The all-or-none rule for ``doc_id`` in records, and its agreement with a doc-id file."""

    def __init__(self, doc_ids: PathLike | None) -> None:
        self.doc_ids = doc_ids
        self.first: tuple[bool, int] | None = None  # (has a doc_id, line) of the first valid record

    def resolve(self, value: Any, from_file: str | None, file_line: int, line: int) -> str | None:
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise _Invalid(Errors.E132.format(value=value))
        if from_file is not None:
            if value is not None and value != from_file:
                raise _Invalid(Errors.E134.format(value=value, expected=from_file, line=file_line, path=self.doc_ids))
            return from_file
        has = value is not None
        if self.first is None:
            self.first = (has, line)
        elif self.first[0] != has:
            here, there = ("present", "missing") if has else ("missing", "present")
            raise _Invalid(Errors.E133.format(here=here, there=there, line=self.first[1]))
        return value


def read_jsonl(
    path: PathLike,
    *,
    doc_ids: PathLike | None = None,
    documents: bool = True,
    labels: Iterable[str] | None = None,
    skip_invalid: bool = False,
    stats: ReadStats | None = None,
) -> Iterator[Sentence]:
    """Stream validated sentences from a JSONL file, one record per non-blank line.

    ``doc_ids`` names a doc-id file (line i: the document of record i); without one, the records' ``doc_id``
    fields (if any) give the documents. ``documents=False`` ignores both.
    """
    path = Path(path)
    stats = stats if stats is not None else ReadStats()
    allowed = _label_set(labels)
    ids = None
    if documents and doc_ids is not None:
        ids = read_doc_ids(doc_ids)
        n_records = _count_records(path)
        if n_records != len(ids):
            raise ValueError(Errors.E130.format(path=path, n_records=n_records, doc_ids=doc_ids, n_ids=len(ids)))
        stats.documents_from = f"doc-id file {doc_ids}"
    id_field = _DocIdField(doc_ids)
    tracker = _Documents(path, stats)
    index = 0
    with path.open("rb") as file:
        for line, raw in enumerate(file, start=1):
            if not raw.strip():
                continue
            stats.records += 1
            index += 1
            try:
                tokens, spans, value = _parse_json_record(_decode(raw, path, line), allowed)
                doc_id = None
                if documents:
                    doc_id = id_field.resolve(value, ids[index - 1] if ids else None, index, line)
            except _Invalid as error:
                _reject(ConversionError(path, line, str(error)), skip_invalid, stats)
                continue
            except ConversionError as error:
                _reject(error, skip_invalid, stats)
                continue
            if doc_id is not None and stats.documents_from is None:
                stats.documents_from = "doc_id fields"
            tracker.enter(doc_id, line)
            yield _sentence(tokens, spans, [line] * len(tokens), doc_id, path, stats)
    _warn_rare_labels(path, stats)


# ---------------------------------------------------------------------------------------------------------
# Column (CoNLL-like) files


def decode_tags(tags: Sequence[str]) -> tuple[list[SpanTuple], list[int]]:
    """Decode one tag column into (start, end, label) spans, and the positions where I-/E-/L- starts a span.

    One decoder serves every scheme because it follows conlleval's chunk rules: a chunk starts at ``B-``,
    ``S-``/``U-``, and at ``I-``/``E-``/``L-`` whose label differs from the open chunk (IOB1's way to start
    one, and the lenient reading of a broken BIOES sequence); a chunk ends after ``E-``/``L-``/``S-``/``U-`` and
    before ``O`` or any tag that starts a new chunk. The second list says where the lenient reading was needed.
    """
    spans: list[SpanTuple] = []
    starts: list[int] = []
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
            if prefix in "IEL":
                starts.append(i)
        if prefix in "ESLU":
            spans.append((open_start, i + 1, label))
            open_label = None
    if open_label is not None:
        spans.append((open_start, len(tags), open_label))
    return spans, starts


def tags_to_spans(tags: Sequence[str]) -> list[SpanTuple]:
    """Decode one tag column (IOB1, IOB2/BIO, BIOES/BILOU or a mix) into (start, end, label) spans."""
    return decode_tags(tags)[0]


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


def _token_rows(lines: list[_Line]) -> Iterator[list[str] | None]:
    """The fields of every decodable token line, and None at each sentence boundary."""
    for _, text in lines:
        if isinstance(text, str):
            yield text.split() if text.strip() and not _is_docstart(text) else None


def _detect_tag_cols(lines: list[_Line], path: Path) -> int:
    """The auto rule: the trailing run of columns (after the first) whose values are mostly tag-shaped."""
    rows = [row for row in _token_rows(lines) if row]
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


def _detect_token_col(lines: list[_Line], n_tag_cols: int) -> int:
    """2 when the first column is a per-sentence index (1, 2, 3, ... on every line, another column before the
    tags, and some sentence with two tokens, so a file of one-token sentences "1" is not taken for one), else 1."""
    expected, counted = 1, False
    for row in _token_rows(lines):
        if row is None:
            expected = 1
            continue
        if row[0] != str(expected) or len(row) < 2 + n_tag_cols:
            return 1
        counted = counted or expected > 1
        expected += 1
    return 2 if counted else 1


def _parse_column_block(
    block: list[_Line],
    path: Path,
    n_tag_cols: int,
    token_col: int,
    allowed: frozenset[str] | None,
) -> tuple[list[str], list[SpanTuple], list[int], list[tuple[int, int, list[str]]]]:
    """Tokens, spans and token lines of one sentence, and where an I-/E-/L- tag started a span: (position,
    tag column, that column's tags)."""
    tokens: list[str] = []
    token_lines: list[int] = []
    levels: list[list[str]] = [[] for _ in range(n_tag_cols)]
    for line, text in block:
        if isinstance(text, ConversionError):
            raise text
        fields = text.split()
        if len(fields) < token_col + n_tag_cols:
            raise ConversionError(
                path,
                line,
                Errors.E120.format(
                    n_needed=token_col + n_tag_cols, token_col=token_col, n_tag_cols=n_tag_cols, n_columns=len(fields)
                ),
            )
        for level, tag in enumerate(fields[-n_tag_cols:]):
            if not TAG_PATTERN.fullmatch(tag):
                raise ConversionError(path, line, Errors.E121.format(tag=tag, column=level + 1))
            if tag != "O":
                try:
                    _check_label(tag[2:], allowed, f"tag {tag!r}")
                except _Invalid as error:
                    raise ConversionError(path, line, str(error)) from None
            levels[level].append(tag)
        tokens.append(fields[token_col - 1])
        token_lines.append(line)
    spans: list[SpanTuple] = []
    starts = []
    for level, tags in enumerate(levels):
        level_spans, level_starts = decode_tags(tags)
        spans.extend(level_spans)
        starts.extend((position, level + 1, tags) for position in level_starts)
    return tokens, spans, token_lines, starts


def read_columns(
    path: PathLike,
    *,
    tag_cols: int | None = None,
    token_col: int | None = None,
    scheme: str = "iob2",
    documents: bool = True,
    labels: Iterable[str] | None = None,
    skip_invalid: bool = False,
    stats: ReadStats | None = None,
) -> Iterator[Sentence]:
    """Stream validated sentences from a column file; every tag column is one nesting level.

    ``-DOCSTART-`` lines give the documents unless ``documents=False``.
    """
    path = Path(path)
    stats = stats if stats is not None else ReadStats()
    allowed = _label_set(labels)
    if tag_cols is not None and tag_cols < 1:
        raise ValueError(Errors.E123.format(tag_cols=tag_cols))
    if token_col is not None and token_col < 1:
        raise ValueError(Errors.E139.format(token_col=token_col))
    if scheme not in SCHEMES:
        raise ValueError(Errors.E138.format(scheme=scheme, schemes=", ".join(SCHEMES)))
    lines = _column_lines(path)
    n_tag_cols = tag_cols if tag_cols is not None else _detect_tag_cols(lines, path)
    stats.token_column = token_col if token_col is not None else _detect_token_col(lines, n_tag_cols)
    has_documents = documents and any(isinstance(text, str) and _is_docstart(text) for _, text in lines)
    if has_documents:
        stats.documents_from = f"{DOCSTART} lines"
    tracker = _Documents(path, stats)
    n_documents = 0
    for block, new_document in _column_blocks(lines):
        if new_document or n_documents == 0:
            n_documents += 1
        doc_id = f"{path.stem}-doc{n_documents - 1:04d}" if has_documents else None
        stats.records += 1
        try:
            tokens, spans, token_lines, starts = _parse_column_block(
                block, path, n_tag_cols, stats.token_column, allowed
            )
        except ConversionError as error:
            _reject(error, skip_invalid, stats)
            continue
        for position, column, tags in starts:
            if scheme == "iob1" and tags[position][0] == "I":
                continue
            stats.continuation_starts += 1
            previous = repr(tags[position - 1]) if position else "the sentence start"
            _warn(stats, "W100", path, token_lines[position], tag=tags[position], column=column, previous=previous)
        tracker.enter(doc_id, token_lines[0])
        yield _sentence(tokens, spans, token_lines, doc_id, path, stats)
    _warn_rare_labels(path, stats)


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
    if group[0].doc_id is not None:
        doc.user_data["doc_id"] = group[0].doc_id
    return doc


def sentences_to_docs(
    sentences: Iterable[Sentence],
    nlp_or_vocab: Language | Vocab,
    spans_key: str = "sc",
    n_sents: int | None = None,
) -> Iterator[Doc]:
    """Build docs of consecutive sentences of one document each (see the module docstring for ``n_sents``).

    A doc ends where the document id changes, so a document whose id comes back after others starts a new doc.
    """
    if n_sents is not None and n_sents < 0:
        raise ValueError(Errors.E124.format(n_sents=n_sents))
    vocab = _vocab_of(nlp_or_vocab)
    group: list[Sentence] = []
    for sentence in sentences:
        if sentence.doc_id is None and n_sents == 0:
            raise ValueError(Errors.E135)
        limit = n_sents or (None if sentence.doc_id is not None else 1)
        if group and (sentence.doc_id != group[0].doc_id or len(group) == limit):
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
    n_sents: int | None = None,
    doc_ids: PathLike | None = None,
    documents: bool = True,
    labels: Iterable[str] | None = None,
    skip_invalid: bool = False,
    stats: ReadStats | None = None,
) -> Iterator[Doc]:
    """Docs with gold spans from a JSONL file (see the module docstring for format and policies).

    The doc-id file is used only when ``doc_ids`` names it; `convert` also finds it beside the input.
    """
    sentences = read_jsonl(
        path, doc_ids=doc_ids, documents=documents, labels=labels, skip_invalid=skip_invalid, stats=stats
    )
    return sentences_to_docs(sentences, nlp_or_vocab, spans_key, n_sents)


def conll_to_docs(
    path: PathLike,
    nlp_or_vocab: Language | Vocab,
    spans_key: str = "sc",
    *,
    n_sents: int | None = None,
    tag_cols: int | None = None,
    token_col: int | None = None,
    scheme: str = "iob2",
    documents: bool = True,
    labels: Iterable[str] | None = None,
    skip_invalid: bool = False,
    stats: ReadStats | None = None,
) -> Iterator[Doc]:
    """Docs with gold spans from a (multi-level) IOB column file (see the module docstring)."""
    sentences = read_columns(
        path,
        tag_cols=tag_cols,
        token_col=token_col,
        scheme=scheme,
        documents=documents,
        labels=labels,
        skip_invalid=skip_invalid,
        stats=stats,
    )
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


def _count_written(path: Path, vocab: Vocab, spans_key: str) -> dict[str, Any]:
    """Count what the DocBin file really holds, read back from disk, so the report cannot overstate it."""
    counts: dict[str, Any] = {"docs": 0, "sentences": 0, "entities": 0, "labels": Counter()}
    for doc in DocBin().from_disk(path).get_docs(vocab):
        counts["docs"] += 1
        counts["sentences"] += sum(1 for token in doc if token.is_sent_start)
        spans = doc.spans[spans_key] if spans_key in doc.spans else []
        counts["entities"] += len(spans)
        counts["labels"].update(span.label_ for span in spans)
    return counts


def _documents_from(source: str | None, documents: bool, found: bool) -> str | None:
    """Where the documents came from, for the report: None when the input has no document information."""
    if not documents:
        return "ignored (sentences only)"
    return f"{source} (found beside the input)" if found else source


def _grouping(n_sents: int | None, has_documents: bool) -> str:
    """How sentences were grouped into docs, for the report."""
    if has_documents and not n_sents:
        return "whole documents"
    if not n_sents or n_sents == 1:
        return "one sentence per doc"
    return f"up to {n_sents} sentences{' of one document' if has_documents else ''} per doc"


def convert(
    input_path: PathLike,
    output_path: PathLike,
    *,
    file_format: str | None = None,
    spans_key: str = "sc",
    lang: str = "en",
    n_sents: int | None = None,
    documents: bool = True,
    doc_ids: PathLike | None = None,
    tag_cols: int | None = None,
    token_col: int | None = None,
    scheme: str = "iob2",
    labels: Iterable[str] | None = None,
    skip_invalid: bool = False,
) -> dict[str, Any]:
    """Convert one JSONL or column file to a ``.spacy`` DocBin and return the checked report.

    ``output_path`` may be an existing directory, in which case the file is named after the input. A JSONL
    input's doc-id file is ``doc_ids``, else ``<stem>.doc_ids.txt`` beside the input if it exists;
    ``documents=False`` ignores all document information. The report counts ``sentences_read`` (input records,
    skipped ones included), ``skipped``, ``documents`` (None without document information),
    ``reappeared_documents``, ``entities_read`` (in kept records), ``duplicates_removed``, ``crossing_pairs``,
    ``continuation_starts``, ``labels`` and ``rare_labels``, and what was read back from the written file:
    ``docs_written``, ``sentences_written``, ``entities_written`` and the per-label counts. Raises
    `ConversionError` for invalid input and RuntimeError if the written counts disagree with the read counts.
    """
    input_path, output_path = Path(input_path), Path(output_path)
    file_format = file_format or guess_format(input_path)
    if file_format not in FORMATS:
        raise ValueError(Errors.E126.format(format=file_format, formats=", ".join(FORMATS)))
    if not input_path.is_file():
        raise FileNotFoundError(Errors.E127.format(path=input_path))
    if n_sents is not None and n_sents < 0:
        raise ValueError(Errors.E124.format(n_sents=n_sents))
    found = False  # the doc-id file was found beside the input, not named
    if doc_ids is not None:
        if not documents:
            raise ValueError(Errors.E136)
        if file_format != "jsonl":
            raise ValueError(Errors.E137)
        if not Path(doc_ids).is_file():
            raise FileNotFoundError(Errors.E127.format(path=doc_ids))
    elif documents and file_format == "jsonl":
        doc_ids = find_doc_ids(input_path)
        found = doc_ids is not None
    if output_path.is_dir():
        output_path = output_path / f"{input_path.stem}.spacy"
    try:
        nlp = spacy.blank(lang)
    except ImportError:
        raise ValueError(Errors.E128.format(lang=lang)) from None

    stats = ReadStats()
    if file_format == "jsonl":
        docs = jsonl_to_docs(
            input_path,
            nlp,
            spans_key,
            n_sents=n_sents,
            doc_ids=doc_ids,
            documents=documents,
            labels=labels,
            skip_invalid=skip_invalid,
            stats=stats,
        )
    else:
        docs = conll_to_docs(
            input_path,
            nlp,
            spans_key,
            n_sents=n_sents,
            tag_cols=tag_cols,
            token_col=token_col,
            scheme=scheme,
            documents=documents,
            labels=labels,
            skip_invalid=skip_invalid,
            stats=stats,
        )
    doc_bin = DocBin(store_user_data=True)
    n_docs = 0
    for doc in docs:
        doc_bin.add(doc)
        n_docs += 1
    output_path.parent.mkdir(parents=True, exist_ok=True)
    doc_bin.to_disk(output_path)
    written = _count_written(output_path, nlp.vocab, spans_key)

    has_documents = stats.documents_from is not None
    whole = has_documents and not n_sents
    report = {
        "input": str(input_path),
        "output": str(output_path),
        "format": file_format,
        "spans_key": spans_key,
        "documents_from": _documents_from(stats.documents_from, documents, found),
        "grouping": _grouping(n_sents, has_documents),
        "token_column": stats.token_column,
        "scheme": scheme if file_format == "conll" else None,
        "sentences_read": stats.records,
        "skipped": stats.skipped,
        "documents": stats.documents if has_documents else None,
        "reappeared_documents": stats.reappeared,
        "docs_written": written["docs"],
        "sentences_written": written["sentences"],
        "entities_read": stats.entities,
        "duplicates_removed": stats.duplicates,
        "entities_written": written["entities"],
        "crossing_pairs": stats.crossing,
        "continuation_starts": stats.continuation_starts,
        "labels": dict(sorted(written["labels"].items())),
        "rare_labels": {label: f"{input_path}:{stats.label_lines[label]}" for label in rare_labels(stats.labels)},
    }
    expected: dict[str, Any] = {
        "docs_written": n_docs,
        "sentences_written": stats.records - stats.skipped,
        "entities_written": stats.entities - stats.duplicates,
        "labels": dict(sorted(stats.labels.items())),
    }
    if whole:
        expected["docs_written"] = stats.documents
    wrong = [f"{key} = {report[key]} but expected {value}" for key, value in expected.items() if report[key] != value]
    if n_docs != written["docs"]:
        wrong.append(f"docs_written = {written['docs']} but {n_docs} docs were added")
    if wrong:
        raise RuntimeError(Errors.E129.format(path=output_path, problems="; ".join(wrong)))
    return report
