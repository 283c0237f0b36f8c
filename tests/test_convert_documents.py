"""Consecutive sentences of one document become one Doc, whichever way the input says where documents are."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.training import Corpus
from typer.testing import CliRunner

from spacy_piqn.cli import app
from spacy_piqn.convert import ConversionError, convert, jsonl_to_docs
from spacy_piqn.corpus import create_gold_token_corpus


@pytest.fixture(scope="module")
def nlp():
    return spacy.blank("en")


def record(tokens: str, *entities: tuple[int, int, str], **extra) -> dict:
    entities_ = [{"start": s, "end": e, "label": label} for s, e, label in entities]
    return {"tokens": tokens.split(), "entities": entities_, **extra}


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


def write_ids(path: Path, ids: list[str]) -> Path:
    path.write_text("".join(f"{doc_id}\n" for doc_id in ids), encoding="utf-8")
    return path


def read_back(path: Path, nlp) -> list:
    return list(DocBin().from_disk(path).get_docs(nlp.vocab))


def span_tuples(doc, key: str = "sc") -> list[tuple[int, int, str]]:
    return sorted((span.start, span.end, span.label_) for span in doc.spans[key])


def sent_starts(doc) -> list[int]:
    return [token.i for token in doc if token.is_sent_start]


def warnings_of(caplog, code: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "spacy_piqn" and f"[{code}]" in r.getMessage()]


# Two GENIA-like abstracts (a title and sentences each), then a third with a single sentence.
GENIA_LIKE = [
    record("IL-2 gene expression", (0, 1, "protein"), (0, 2, "DNA")),
    record("It requires NF-kappa B .", (2, 4, "protein")),
    record("No entities here ."),
    record("Jurkat cells", (0, 2, "cell_line")),
    record("They express GATA-3 mRNA", (2, 3, "protein"), (2, 4, "RNA")),
    record("T cells respond", (0, 2, "cell_type")),
]
GENIA_IDS = ["MEDLINE:1"] * 3 + ["MEDLINE:2"] * 2 + ["MEDLINE:3"]


@pytest.fixture
def genia_like(tmp_path) -> Path:
    source = write_jsonl(tmp_path / "train.jsonl", GENIA_LIKE)
    write_ids(tmp_path / "train.doc_ids.txt", GENIA_IDS)
    return source


# ---------------------------------------------------------------------------------------------------------
# Doc-id files


def test_doc_id_file_beside_the_input_gives_one_doc_per_document(genia_like, tmp_path, nlp):
    report = convert(genia_like, tmp_path / "out.spacy")
    assert report["documents_from"] == f"doc-id file {tmp_path / 'train.doc_ids.txt'} (found beside the input)"
    assert report["grouping"] == "whole documents"
    assert (report["sentences_read"], report["documents"], report["docs_written"]) == (6, 3, 3)
    assert (report["sentences_written"], report["entities_read"], report["entities_written"]) == (6, 7, 7)
    first, second, third = read_back(tmp_path / "out.spacy", nlp)
    assert [doc.user_data["doc_id"] for doc in (first, second, third)] == ["MEDLINE:1", "MEDLINE:2", "MEDLINE:3"]
    assert [sent_starts(doc) for doc in (first, second, third)] == [[0, 3, 8], [0, 2], [0]]
    # Each sentence's entities are offset by the tokens of the sentences before it in the same document.
    assert span_tuples(first) == [(0, 1, "protein"), (0, 2, "DNA"), (5, 7, "protein")]
    assert [s.text for s in first.spans["sc"]] == ["IL-2", "IL-2 gene", "NF-kappa B"]
    assert span_tuples(second) == [(0, 2, "cell_line"), (4, 5, "protein"), (4, 6, "RNA")]
    assert [s.text for s in second.spans["sc"]] == ["Jurkat cells", "GATA-3", "GATA-3 mRNA"]
    assert not first.has_annotation("ENT_IOB") and [e.text for e in third.ents] == ["T cells"]


def test_doc_level_docbin_round_trips(genia_like, tmp_path, nlp):
    """Spans, sentence starts and the document id survive to_disk -> from_disk unchanged."""
    docs = list(jsonl_to_docs(genia_like, nlp, doc_ids=tmp_path / "train.doc_ids.txt"))
    doc_bin = DocBin(store_user_data=True, docs=docs)
    doc_bin.to_disk(tmp_path / "round.spacy")
    again = read_back(tmp_path / "round.spacy", nlp)
    assert len(again) == len(docs) == 3
    for doc, back in zip(docs, again, strict=True):
        assert [t.text for t in back] == [t.text for t in doc]
        assert span_tuples(back) == span_tuples(doc) and sent_starts(back) == sent_starts(doc)
        assert back.user_data == doc.user_data == {"doc_id": doc.user_data["doc_id"]}
    convert(genia_like, tmp_path / "out.spacy")
    converted = read_back(tmp_path / "out.spacy", nlp)
    assert [(span_tuples(d), sent_starts(d), d.user_data) for d in converted] == [
        (span_tuples(d), sent_starts(d), d.user_data) for d in docs
    ]


def test_spacy_corpora_read_doc_level_files(genia_like, tmp_path, nlp):
    convert(genia_like, tmp_path / "out.spacy")
    for examples in (
        list(Corpus(tmp_path / "out.spacy")(nlp)),
        list(create_gold_token_corpus(tmp_path / "out.spacy")(nlp)),
    ):
        assert len(examples) == 3
        reference = examples[0].reference
        assert reference.user_data["doc_id"] == "MEDLINE:1" and len(list(reference.sents)) == 3
        assert span_tuples(reference) == [(0, 1, "protein"), (0, 2, "DNA"), (5, 7, "protein")]


def test_named_doc_id_file(tmp_path, nlp):
    source = write_jsonl(tmp_path / "dev.jsonl", GENIA_LIKE)
    ids = write_ids(tmp_path / "articles.txt", GENIA_IDS)
    assert convert(source, tmp_path / "out.spacy")["docs_written"] == 6  # no dev.doc_ids.txt beside it
    report = convert(source, tmp_path / "out.spacy", doc_ids=ids)
    assert report["documents_from"] == f"doc-id file {ids}" and report["docs_written"] == 3


@pytest.mark.parametrize("ids", [GENIA_IDS[:-1], GENIA_IDS + ["MEDLINE:4"]])
def test_doc_id_count_mismatch_names_both_files(tmp_path, ids):
    source = write_jsonl(tmp_path / "train.jsonl", [*GENIA_LIKE[:3], "", *GENIA_LIKE[3:]])  # blank lines: no record
    sidecar = write_ids(tmp_path / "train.doc_ids.txt", ids)
    with pytest.raises(ValueError, match=r"\[E130\]") as info:
        convert(source, tmp_path / "out.spacy")
    assert f"{source} has 6 records but its doc-id file {sidecar} has {len(ids)} lines" in str(info.value)
    assert not (tmp_path / "out.spacy").exists()


def test_blank_line_in_doc_id_file(tmp_path):
    source = write_jsonl(tmp_path / "train.jsonl", GENIA_LIKE[:2])
    sidecar = tmp_path / "train.doc_ids.txt"
    sidecar.write_text("MEDLINE:1\n\n", encoding="utf-8")
    with pytest.raises(ConversionError, match=r"\[E131\] empty document id") as info:
        convert(source, tmp_path / "out.spacy")
    assert (info.value.file, info.value.line) == (str(sidecar), 2)


def test_skipped_record_keeps_its_doc_id_line(tmp_path, nlp):
    source = write_jsonl(tmp_path / "train.jsonl", [GENIA_LIKE[0], "{", GENIA_LIKE[3], GENIA_LIKE[4]])
    write_ids(tmp_path / "train.doc_ids.txt", ["A", "A", "B", "B"])
    report = convert(source, tmp_path / "out.spacy", skip_invalid=True)
    assert (report["skipped"], report["documents"], report["docs_written"], report["sentences_written"]) == (1, 2, 2, 3)
    assert [doc.user_data["doc_id"] for doc in read_back(tmp_path / "out.spacy", nlp)] == ["A", "B"]


# ---------------------------------------------------------------------------------------------------------
# doc_id fields


def test_doc_id_field(tmp_path, nlp):
    records = [dict(r, doc_id=doc_id) for r, doc_id in zip(GENIA_LIKE, GENIA_IDS, strict=True)]
    report = convert(write_jsonl(tmp_path / "in.jsonl", records), tmp_path / "out.spacy")
    assert report["documents_from"] == "doc_id fields" and report["docs_written"] == 3
    assert [len(list(doc.sents)) for doc in read_back(tmp_path / "out.spacy", nlp)] == [3, 2, 1]


@pytest.mark.parametrize(
    "second, reason",
    [
        (record("a b"), "[E133] 'doc_id' is missing here but present on line 1"),
        (record("a b", doc_id=""), "[E132] 'doc_id' must be a non-empty string, got ''"),
        (record("a b", doc_id=7), "[E132] 'doc_id' must be a non-empty string, got 7"),
    ],
)
def test_doc_id_field_errors(tmp_path, second, reason):
    source = write_jsonl(tmp_path / "in.jsonl", [record("x", doc_id="A"), second])
    with pytest.raises(ConversionError) as info:
        convert(source, tmp_path / "out.spacy")
    assert info.value.line == 2 and reason in str(info.value)


def test_doc_id_field_present_after_records_without(tmp_path):
    source = write_jsonl(tmp_path / "in.jsonl", [record("x"), record("y", doc_id="A")])
    with pytest.raises(ConversionError, match=r"\[E133\] 'doc_id' is present here but missing on line 1"):
        convert(source, tmp_path / "out.spacy")


def test_doc_id_field_must_agree_with_doc_id_file(tmp_path):
    source = write_jsonl(tmp_path / "in.jsonl", [record("x", doc_id="A"), record("y", doc_id="C")])
    sidecar = write_ids(tmp_path / "in.doc_ids.txt", ["A", "B"])
    with pytest.raises(ConversionError) as info:
        convert(source, tmp_path / "out.spacy")
    assert info.value.line == 2
    assert f"[E134] 'doc_id' 'C' differs from 'B', line 2 of the doc-id file {sidecar}" in str(info.value)


# ---------------------------------------------------------------------------------------------------------
# n_sents and --sentences


def test_n_sents_never_crosses_a_document(genia_like, tmp_path, nlp):
    report = convert(genia_like, tmp_path / "out.spacy", n_sents=2)
    assert report["grouping"] == "up to 2 sentences of one document per doc"
    assert (report["documents"], report["docs_written"]) == (3, 4)
    docs = read_back(tmp_path / "out.spacy", nlp)
    assert [(doc.user_data["doc_id"], len(list(doc.sents))) for doc in docs] == [
        ("MEDLINE:1", 2),
        ("MEDLINE:1", 1),
        ("MEDLINE:2", 2),
        ("MEDLINE:3", 1),
    ]
    assert convert(genia_like, tmp_path / "out.spacy", n_sents=0)["docs_written"] == 3  # whole documents, asked for


def test_sentences_ignores_documents(genia_like, tmp_path, nlp):
    report = convert(genia_like, tmp_path / "out.spacy", documents=False)
    assert report["documents_from"] == "ignored (sentences only)" and report["documents"] is None
    assert report["docs_written"] == 6 and report["grouping"] == "one sentence per doc"
    assert all(doc.user_data == {} for doc in read_back(tmp_path / "out.spacy", nlp))
    assert convert(genia_like, tmp_path / "out.spacy", documents=False, n_sents=4)["docs_written"] == 2
    with pytest.raises(ValueError, match=r"\[E135\] n_sents 0 asks for whole documents"):
        convert(genia_like, tmp_path / "out.spacy", documents=False, n_sents=0)
    with pytest.raises(ValueError, match=r"\[E136\]"):
        convert(genia_like, tmp_path / "out.spacy", documents=False, doc_ids=tmp_path / "train.doc_ids.txt")


def test_without_document_information_one_sentence_per_doc(tmp_path):
    report = convert(write_jsonl(tmp_path / "in.jsonl", GENIA_LIKE), tmp_path / "out.spacy")
    assert report["documents_from"] is None and report["documents"] is None and report["docs_written"] == 6


# ---------------------------------------------------------------------------------------------------------
# An id that comes back


def test_reappearing_id_starts_a_new_doc_and_is_counted(tmp_path, nlp, caplog):
    source = write_jsonl(tmp_path / "in.jsonl", GENIA_LIKE[:5])
    write_ids(tmp_path / "in.doc_ids.txt", ["A", "A", "B", "A", "A"])
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        report = convert(source, tmp_path / "out.spacy")
    assert (report["documents"], report["reappeared_documents"], report["docs_written"]) == (3, 1, 3)
    assert [doc.user_data["doc_id"] for doc in read_back(tmp_path / "out.spacy", nlp)] == ["A", "B", "A"]
    assert warnings_of(caplog, "W102") == [
        f"{source}:4: [W102] document 'A' comes back after other documents (first seen at line 1); these sentences "
        "start a new doc. Check the order of the records (and of the doc-id file)."
    ]


# ---------------------------------------------------------------------------------------------------------
# -DOCSTART- in column files

COLUMNS = """\
-DOCSTART- O

EU B-ORG
rejects O

German B-MISC
call O
-DOCSTART- O

Peter B-PER
Blackburn I-PER
"""


def test_docstart_documents_are_whole_docs_by_default(tmp_path, nlp):
    source = tmp_path / "news.txt"
    source.write_text(COLUMNS, encoding="utf-8")
    report = convert(source, tmp_path / "out.spacy", tag_cols=1)
    assert report["documents_from"] == "-DOCSTART- lines" and report["documents"] == report["docs_written"] == 2
    first, second = read_back(tmp_path / "out.spacy", nlp)
    assert (first.user_data["doc_id"], second.user_data["doc_id"]) == ("news-doc0000", "news-doc0001")
    assert sent_starts(first) == [0, 2] and span_tuples(first) == [(0, 1, "ORG"), (2, 3, "MISC")]
    assert convert(source, tmp_path / "out.spacy", tag_cols=1, documents=False, n_sents=5)["docs_written"] == 1
    with pytest.raises(ValueError, match=r"\[E137\] doc-id files are for JSONL input"):
        convert(source, tmp_path / "out.spacy", doc_ids=write_ids(tmp_path / "ids.txt", ["a", "b", "c"]))


def test_sentences_before_the_first_docstart_are_a_document(tmp_path, nlp):
    source = tmp_path / "news.txt"
    source.write_text("Intro O\n\n" + COLUMNS, encoding="utf-8")
    report = convert(source, tmp_path / "out.spacy", tag_cols=1)
    assert report["docs_written"] == 3
    assert [doc.user_data["doc_id"] for doc in read_back(tmp_path / "out.spacy", nlp)] == [
        "news-doc0000",
        "news-doc0001",
        "news-doc0002",
    ]


# ---------------------------------------------------------------------------------------------------------
# CLI


def test_cli_reports_documents(genia_like, tmp_path):
    out = str(tmp_path / "out.spacy")
    result = CliRunner().invoke(app, ["convert", str(genia_like), out])
    assert result.exit_code == 0, result.output
    assert f"documents: doc-id file {tmp_path / 'train.doc_ids.txt'} (found beside the input); whole documents" in (
        result.stdout
    )
    rows = {line[:24].strip(): line.split()[-1] for line in result.stdout.splitlines() if line.startswith("  ")}
    assert (rows["documents"], rows["docs written"], rows["sentences written"], rows["entities written"]) == (
        "3",
        "3",
        "6",
        "7",
    )
    sentences = CliRunner().invoke(app, ["convert", str(genia_like), out, "--sentences"])
    assert "documents: ignored (sentences only); one sentence per doc" in sentences.stdout
    named = CliRunner().invoke(app, ["convert", str(genia_like), out, "--doc-ids", str(tmp_path / "nope.txt")])
    assert named.exit_code == 1 and "input file not found" in named.stderr
    two = CliRunner().invoke(app, ["convert", str(genia_like), out, "--n-sents", "2"])
    assert "up to 2 sentences of one document per doc" in two.stdout
