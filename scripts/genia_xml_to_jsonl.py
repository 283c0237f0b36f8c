"""Rebuild the standard GENIA nested-NER split as JSONL from the GENIA term corpus 3.02.

    python scripts/genia_xml_to_jsonl.py assets/genia/GENIAcorpus3.02.tgz assets/data/genia --sha256 HEX

Input: ``GENIAcorpus3.02.tgz`` (the XML is read from inside it) or the extracted ``GENIAcorpus3.02.xml``.
Output: ``train.jsonl``, ``dev.jsonl`` and ``test.jsonl`` in OUTPUT_DIR, one sentence per line,
``{"tokens": [...], "entities": [{"start", "end", "label"}]}`` with ``end`` exclusive, and beside each its
doc-id file ``<split>.doc_ids.txt``: line i is the MEDLINE id of the article of sentence i (``MEDLINE:93136418``),
which ``python -m spacy_piqn convert`` uses to make one Doc per article.

The rules are those of the "GENIA" section of the shared data README (the split of Yu et al. 2020, Shen et al.
2021 and PIQN):

* Sentences: every ``<sentence>`` element (titles and abstracts), in corpus order; the document of each is its
  ``<article>``'s ``<bibliomisc>`` id. The corpus holds MEDLINE:97218353 twice, so that id comes back in train.
* Tokens: the sentence text split on whitespace and, in addition, wherever any ``<cons>`` element starts or
  ends, so ``daltons.`` stays one token unless a term ends before the dot.
* Types: ``G#DNA_*`` -> DNA, ``G#RNA_*`` -> RNA, ``G#protein_*`` -> protein, ``G#cell_line``, ``G#cell_type``.
  Every other type, coordinated terms (``sem="(AND ...)"`` / ``"(OR ...)"``) and their untyped fragments are
  dropped (their boundaries still split tokens). Typed terms inside a fragment are kept.
* One label per span: exact duplicates collapse, and a span with two types keeps one by the priority
  protein > cell_type > cell_line > RNA > DNA.
* Split: the last 1,854 sentences are test; of the rest, the last 1,669 are dev and the first 15,023 train.

With ``--sha256`` the input file is checked before anything is read. When the input is the known 3.02 release,
the result is also checked against the published counts (16,692 train+dev sentences with 50,509 entities,
1,854 test sentences with 5,506 entities) and the script fails if they differ.
"""

from __future__ import annotations

import hashlib
import json
import re
import tarfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

GENIA_302_SHA256 = "85b2aede313308c33783ba508d054d0af0ff9c7e48490f0db5168a9f88d74d1c"
XML_NAME = "GENIAcorpus3.02.xml"
# Published sizes of the standard split: (train+dev sentences, train+dev entities, test sentences, test entities).
PUBLISHED_COUNTS = (16692, 50509, 1854, 5506)
LABEL_PRIORITY = ("protein", "cell_type", "cell_line", "RNA", "DNA")
PREFIX_TYPES = re.compile(r"G#(DNA|RNA|protein)_\S+")
EXACT_TYPES = {"G#cell_line": "cell_line", "G#cell_type": "cell_type"}

Record = dict[str, list]
DOC_IDS_SUFFIX = ".doc_ids.txt"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def genia_label(sem: str | None) -> str | None:
    """The label a ``sem`` attribute maps to, or None for dropped types, coordinations and fragments."""
    if sem is None:
        return None
    match = PREFIX_TYPES.fullmatch(sem)
    if match:
        return match.group(1)
    return EXACT_TYPES.get(sem)


def flatten(sentence: ET.Element) -> tuple[str, list[tuple[int, int, str | None]]]:
    """The sentence text and every ``<cons>`` in it as (start char, end char, sem)."""
    parts: list[str] = []
    terms: list[tuple[int, int, str | None]] = []
    length = 0

    def walk(element: ET.Element) -> None:
        nonlocal length
        if element.text:
            parts.append(element.text)
            length += len(element.text)
        for child in element:
            start = length
            walk(child)
            if child.tag == "cons":
                terms.append((start, length, child.get("sem")))
            if child.tail:
                parts.append(child.tail)
                length += len(child.tail)

    walk(sentence)
    return "".join(parts), terms


def tokenize(text: str, cuts: set[int]) -> list[tuple[int, int]]:
    """Character spans of the tokens: runs of non-space characters, also cut at every offset in ``cuts``."""
    tokens: list[tuple[int, int]] = []
    start: int | None = None
    for i, char in enumerate(text):
        if char.isspace():
            if start is not None:
                tokens.append((start, i))
                start = None
            continue
        if start is not None and i in cuts:
            tokens.append((start, i))
            start = None
        if start is None:
            start = i
    if start is not None:
        tokens.append((start, len(text)))
    return tokens


def sentence_record(sentence: ET.Element) -> Record:
    """One JSONL record: the tokens and the typed terms as token spans, one label per span."""
    text, terms = flatten(sentence)
    cuts = {offset for start, end, _ in terms for offset in (start, end)}
    token_chars = tokenize(text, cuts)
    labels_at: dict[tuple[int, int], set[str]] = {}
    for char_start, char_end, sem in terms:
        label = genia_label(sem)
        if label is None:
            continue
        inside = [i for i, (start, end) in enumerate(token_chars) if start >= char_start and end <= char_end]
        if not inside:
            continue
        labels_at.setdefault((inside[0], inside[-1] + 1), set()).add(label)
    entities = [
        {"start": start, "end": end, "label": next(label for label in LABEL_PRIORITY if label in labels)}
        for (start, end), labels in labels_at.items()
    ]
    entities.sort(key=lambda entity: (entity["start"], entity["end"], entity["label"]))
    return {"tokens": [text[start:end] for start, end in token_chars], "entities": entities}


def read_xml(path: Path) -> bytes:
    """The XML document, read from inside a .tgz or directly (tens of MB: fine in memory)."""
    if not tarfile.is_tarfile(path):
        return path.read_bytes()
    with tarfile.open(path, "r:*") as archive:
        members = [m for m in archive.getmembers() if m.isfile() and Path(m.name).name == XML_NAME]
        if len(members) != 1:
            raise typer.BadParameter(f"{path} holds {len(members)} files named {XML_NAME}, expected exactly one")
        stream = archive.extractfile(members[0])
        assert stream is not None  # a regular file member always has a stream
        with stream:
            return stream.read()


def read_records(path: Path) -> Iterator[tuple[Record, str]]:
    """Every sentence's record with the MEDLINE id of its article, in corpus order."""
    root = ET.fromstring(read_xml(path))
    for article in root.iter("article"):
        doc_id = (article.findtext("articleinfo/bibliomisc") or "").strip()
        if not doc_id:
            raise typer.BadParameter(f"{path}: an <article> without an <articleinfo><bibliomisc> id")
        for sentence in article.iter("sentence"):
            yield sentence_record(sentence), doc_id


def split(records: list, test_size: int, dev_size: int) -> dict[str, list]:
    if test_size + dev_size >= len(records):
        raise typer.BadParameter(f"{len(records)} sentences cannot hold {test_size} test and {dev_size} dev ones")
    n_train = len(records) - test_size - dev_size
    return {
        "train": records[:n_train],
        "dev": records[n_train : n_train + dev_size],
        "test": records[n_train + dev_size :],
    }


def count_entities(records: list[Record]) -> int:
    return sum(len(record["entities"]) for record in records)


def main(
    input_path: Annotated[Path, typer.Argument(help="GENIAcorpus3.02.tgz, or the GENIAcorpus3.02.xml inside it.")],
    output_dir: Annotated[
        Path, typer.Argument(help="Folder for train.jsonl, dev.jsonl and test.jsonl and their .doc_ids.txt.")
    ],
    sha256: Annotated[str, typer.Option(help="Expected sha256 of INPUT_PATH, checked before reading.")] = "",
    test_size: Annotated[int, typer.Option(help="Sentences at the end that form the test split.")] = 1854,
    dev_size: Annotated[int, typer.Option(help="Sentences at the end of train+dev that form dev.")] = 1669,
) -> None:
    """Convert the GENIA term corpus to the standard nested-NER train/dev/test JSONL split."""
    if not input_path.is_file():
        raise typer.BadParameter(f"input not found: {input_path} (run `spacy project assets` first?)")
    digest = file_sha256(input_path)
    if sha256 and digest != sha256.lower():
        typer.echo(f"error: sha256 of {input_path} is {digest}, expected {sha256}", err=True)
        raise typer.Exit(1)
    pairs = split(list(read_records(input_path)), test_size, dev_size)
    parts = {name: [record for record, _ in part] for name, part in pairs.items()}
    output_dir.mkdir(parents=True, exist_ok=True)
    for name, part in pairs.items():
        with (output_dir / f"{name}.jsonl").open("w", encoding="utf-8") as file:
            for record, _ in part:
                file.write(json.dumps(record, ensure_ascii=False) + "\n")
        with (output_dir / f"{name}{DOC_IDS_SUFFIX}").open("w", encoding="utf-8") as file:
            file.writelines(f"{doc_id}\n" for _, doc_id in part)
        n_docs = sum(1 for i, (_, doc_id) in enumerate(part) if i == 0 or doc_id != part[i - 1][1])
        counts = f"{len(part):>6} sentences, {count_entities(parts[name]):>6} entities, {n_docs:>5} documents"
        typer.echo(f"{name:>5}: {counts} -> {output_dir / name}.jsonl, {name}{DOC_IDS_SUFFIX}")
    if digest == GENIA_302_SHA256 and (test_size, dev_size) == (1854, 1669):
        found = (
            len(parts["train"]) + len(parts["dev"]),
            count_entities(parts["train"]) + count_entities(parts["dev"]),
            len(parts["test"]),
            count_entities(parts["test"]),
        )
        if found != PUBLISHED_COUNTS:
            typer.echo(
                f"error: counts (train+dev sentences, entities, test sentences, entities) are {found}, "
                f"the published split has {PUBLISHED_COUNTS}; the conversion does not reproduce it",
                err=True,
            )
            raise typer.Exit(1)
        typer.echo(f"The counts match the published GENIA split {PUBLISHED_COUNTS}.")


if __name__ == "__main__":
    typer.run(main)
