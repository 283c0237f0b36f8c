"""The converter keeps nested gold exactly, rejects bad input with FILE:LINE, and reports honest counts."""

from __future__ import annotations

import json
import logging
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin
from typer.testing import CliRunner

from spacy_piqn import convert as convert_module
from spacy_piqn.cli import app
from spacy_piqn.convert import (
    ConversionError,
    ReadStats,
    conll_to_docs,
    convert,
    crossing_pairs,
    decode_tags,
    jsonl_to_docs,
    tags_to_spans,
)

REPO = Path(__file__).parents[1]
SAMPLE = REPO / "assets" / "sample"
# The shared datasets lie beside the repository (or beside the folder of its worktrees).
SHARED_DATA = next((p / "shared" / "data" for p in REPO.parents if (p / "shared" / "data").is_dir()), REPO / "none")


@pytest.fixture(scope="module")
def nlp():
    return spacy.blank("en")


def write_jsonl(path: Path, records: list) -> Path:
    """Records may be dicts (dumped as JSON) or raw strings (written as-is, for malformed lines)."""
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def record(tokens: str, *entities: tuple[int, int, str]) -> dict:
    return {"tokens": tokens.split(), "entities": [{"start": s, "end": e, "label": label} for s, e, label in entities]}


def read_back(path: Path, nlp) -> list:
    return list(DocBin().from_disk(path).get_docs(nlp.vocab))


def span_tuples(doc, key: str = "sc") -> list[tuple[int, int, str]]:
    return sorted((span.start, span.end, span.label_) for span in doc.spans[key])


NESTED = record(
    "The IL-2 gene promoter binds NF-kappa B", (1, 2, "protein"), (1, 3, "DNA"), (1, 4, "DNA"), (5, 7, "protein")
)
FLAT = record("IL-4 acts on human T cells", (0, 1, "protein"), (3, 6, "cell_type"))
EMPTY = record("No entities here .")


# ---------------------------------------------------------------------------------------------------------
# Gold survives the round trip


def test_nested_gold_survives_docbin(tmp_path, nlp):
    source = write_jsonl(tmp_path / "in.jsonl", [NESTED, FLAT, EMPTY])
    report = convert(source, tmp_path / "out.spacy")
    docs = read_back(tmp_path / "out.spacy", nlp)
    assert [[t.text for t in doc] for doc in docs] == [r["tokens"] for r in (NESTED, FLAT, EMPTY)]
    assert span_tuples(docs[0]) == [(1, 2, "protein"), (1, 3, "DNA"), (1, 4, "DNA"), (5, 7, "protein")]
    assert span_tuples(docs[1]) == [(0, 1, "protein"), (3, 6, "cell_type")]
    assert report["entities_read"] == report["entities_written"] == 6
    assert report["sentences_read"] == report["docs_written"] == 3


def test_gold_tokens_are_never_retokenized(tmp_path, nlp):
    # The default English tokenizer would split "NF-kappa" and "(IL-2)"; the converter must not.
    source = write_jsonl(
        tmp_path / "in.jsonl", [record("NF-kappa (IL-2) U.S.A.", (0, 1, "protein"), (1, 2, "protein"))]
    )
    convert(source, tmp_path / "out.spacy")
    (doc,) = read_back(tmp_path / "out.spacy", nlp)
    assert [t.text for t in doc] == ["NF-kappa", "(IL-2)", "U.S.A."]
    assert [s.text for s in doc.spans["sc"]] == ["NF-kappa", "(IL-2)"]


def test_empty_doc_keeps_empty_group_and_outside_ents(tmp_path, nlp):
    source = write_jsonl(tmp_path / "in.jsonl", [EMPTY])
    convert(source, tmp_path / "out.spacy", spans_key="gold")
    (doc,) = read_back(tmp_path / "out.spacy", nlp)
    assert "gold" in doc.spans and len(doc.spans["gold"]) == 0
    assert doc.has_annotation("ENT_IOB") and all(t.ent_iob_ == "O" for t in doc)


def test_ents_set_only_without_overlap(tmp_path, nlp):
    same_span_two_labels = record("ORG Darmstadt", (0, 2, "ORG"), (0, 2, "ORGpart"))
    source = write_jsonl(tmp_path / "in.jsonl", [NESTED, FLAT, same_span_two_labels])
    convert(source, tmp_path / "out.spacy")
    nested, flat, two_labels = read_back(tmp_path / "out.spacy", nlp)
    assert not nested.has_annotation("ENT_IOB") and nested.ents == ()
    assert [(e.start, e.end, e.label_) for e in flat.ents] == [(0, 1, "protein"), (3, 6, "cell_type")]
    assert not two_labels.has_annotation("ENT_IOB")
    assert span_tuples(two_labels) == [(0, 2, "ORG"), (0, 2, "ORGpart")]


def test_sentence_starts_always_set(tmp_path, nlp):
    source = write_jsonl(tmp_path / "in.jsonl", [FLAT])
    (doc,) = jsonl_to_docs(source, nlp)
    assert [t.is_sent_start for t in doc] == [True] + [False] * (len(doc) - 1)


def test_n_sents_groups_with_offsets_and_sent_starts(tmp_path, nlp):
    source = write_jsonl(tmp_path / "in.jsonl", [NESTED, EMPTY, FLAT, FLAT, NESTED])
    report = convert(source, tmp_path / "out.spacy", n_sents=2)
    assert (report["sentences_read"], report["docs_written"], report["sentences_written"]) == (5, 3, 5)
    first, second, third = read_back(tmp_path / "out.spacy", nlp)
    assert [len(list(doc.sents)) for doc in (first, second, third)] == [2, 2, 1]
    assert [s.start for s in first.sents] == [0, 7]
    assert span_tuples(first) == [(1, 2, "protein"), (1, 3, "DNA"), (1, 4, "DNA"), (5, 7, "protein")]
    assert span_tuples(second) == [(0, 1, "protein"), (3, 6, "cell_type"), (6, 7, "protein"), (9, 12, "cell_type")]
    assert [s.text for s in second.spans["sc"]] == ["IL-4", "human T cells", "IL-4", "human T cells"]
    assert second.has_annotation("ENT_IOB") and len(second.ents) == 4
    assert not first.has_annotation("ENT_IOB")


def test_output_directory_names_file_after_input(tmp_path):
    source = write_jsonl(tmp_path / "train.jsonl", [FLAT])
    out_dir = tmp_path / "corpus"
    out_dir.mkdir()
    report = convert(source, out_dir)
    assert report["output"] == str(out_dir / "train.spacy") and (out_dir / "train.spacy").exists()


# ---------------------------------------------------------------------------------------------------------
# Tag schemes and column files


@pytest.mark.parametrize(
    "tags, expected",
    [
        ("B-A I-A O B-B B-B I-B", [(0, 2, "A"), (3, 4, "B"), (4, 6, "B")]),  # IOB2
        ("I-A I-A B-A O I-B I-A", [(0, 2, "A"), (2, 3, "A"), (4, 5, "B"), (5, 6, "A")]),  # IOB1
        ("S-A B-B I-B E-B O U-C B-A L-A", [(0, 1, "A"), (1, 4, "B"), (5, 6, "C"), (6, 8, "A")]),  # BIOES / BILOU
        ("B-A E-A I-A", [(0, 2, "A"), (2, 3, "A")]),  # I after E starts a new chunk
        ("O O", []),
        ("B-cell-type I-cell-type", [(0, 2, "cell-type")]),  # label keeps its hyphen
    ],
)
def test_tags_to_spans(tags, expected):
    assert tags_to_spans(tags.split()) == expected


def test_tags_to_spans_rejects_unknown_tag():
    with pytest.raises(ValueError, match="X-A"):
        tags_to_spans(["O", "X-A"])


MULTI_LEVEL = """\
-DOCSTART- -X- O O

The DT O O
IL-2 NN B-DNA B-protein
gene NN I-DNA O
promoter NN I-DNA O
binds VBZ O O
NF-kappa NN B-protein O
B NN I-protein O

Jurkat NN B-cell_line O
cells NNS I-cell_line O
-DOCSTART- -X- O O

IL-4 NN S-protein O
"""


def test_multi_column_iob_nested(tmp_path, nlp):
    source = tmp_path / "nested.iob"
    source.write_text(MULTI_LEVEL, encoding="utf-8")
    docs = list(conll_to_docs(source, nlp, n_sents=1))  # auto: the POS column is skipped, two tag columns found
    assert [[t.text for t in doc] for doc in docs] == [
        ["The", "IL-2", "gene", "promoter", "binds", "NF-kappa", "B"],
        ["Jurkat", "cells"],
        ["IL-4"],
    ]
    assert span_tuples(docs[0]) == [(1, 2, "protein"), (1, 4, "DNA"), (5, 7, "protein")]
    assert span_tuples(docs[1]) == [(0, 2, "cell_line")]
    assert span_tuples(docs[2]) == [(0, 1, "protein")]


def test_explicit_tag_cols(tmp_path, nlp):
    source = tmp_path / "nested.iob"
    source.write_text(MULTI_LEVEL, encoding="utf-8")
    (first, *_) = conll_to_docs(source, nlp, tag_cols=1)  # the last column only: the inner level
    assert span_tuples(first) == [(1, 2, "protein")]


def test_docstart_starts_a_new_doc_when_grouping(tmp_path, nlp):
    source = tmp_path / "nested.iob"
    source.write_text(MULTI_LEVEL, encoding="utf-8")
    report = convert(source, tmp_path / "out.spacy", n_sents=5)
    assert (report["sentences_read"], report["docs_written"]) == (3, 2)
    first, second = read_back(tmp_path / "out.spacy", nlp)
    assert "-DOCSTART-" not in first.text
    assert [s.start for s in first.sents] == [0, 7]
    assert span_tuples(first) == [(1, 2, "protein"), (1, 4, "DNA"), (5, 7, "protein"), (7, 9, "cell_line")]
    assert [t.text for t in second] == ["IL-4"]


def test_iob1_and_bioes_files(tmp_path, nlp):
    iob1 = tmp_path / "flat.iob1"
    iob1.write_text("IL-2 I-protein\nIL-4 B-protein\nbinds O\nDNA I-DNA\n", encoding="utf-8")
    bioes = tmp_path / "flat.bioes"
    bioes.write_text("IL-2 S-protein\nIL-4 B-protein\nR E-protein\nbinds O\n", encoding="utf-8")
    (doc1,) = conll_to_docs(iob1, nlp, scheme="iob1")
    (doc2,) = conll_to_docs(bioes, nlp)
    assert span_tuples(doc1) == [(0, 1, "protein"), (1, 2, "protein"), (3, 4, "DNA")]
    assert span_tuples(doc2) == [(0, 1, "protein"), (1, 3, "protein")]


def test_same_span_on_two_levels_is_a_counted_duplicate(tmp_path, nlp, caplog):
    source = tmp_path / "dup.iob"
    source.write_text("x O O\nIL-2 B-protein B-protein\n", encoding="utf-8")
    stats = ReadStats()
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        (doc,) = conll_to_docs(source, nlp, stats=stats)
    assert span_tuples(doc) == [(1, 2, "protein")]
    assert (stats.entities, stats.duplicates) == (2, 1)
    assert f"{source}:2: dropped duplicate entity protein" in caplog.text


# ---------------------------------------------------------------------------------------------------------
# Validation: every malformed class names FILE:LINE


GOOD = json.dumps(FLAT)
JSONL_ERRORS = [
    ('{"tokens": ["a"], "entities": [}', "invalid JSON"),
    ('["a", "b"]', "expected a JSON object"),
    ('{"entities": []}', "missing key 'tokens'"),
    ('{"tokens": ["a"]}', "missing key 'entities'"),
    ('{"tokens": "a b", "entities": []}', "'tokens' must be an array"),
    ('{"tokens": [], "entities": []}', "'tokens' is empty"),
    ('{"tokens": ["a", 3], "entities": []}', "token 1 must be a string"),
    ('{"tokens": ["a", ""], "entities": []}', "token 1 is an empty string"),
    ('{"tokens": ["a", "b c"], "entities": []}', "contains whitespace"),
    ('{"tokens": ["a\\u00a0b"], "entities": []}', "contains whitespace"),
    ('{"tokens": ["a"], "entities": {}}', "'entities' must be an array"),
    ('{"tokens": ["a"], "entities": [[0, 1, "X"]]}', "entity 0 must be an object"),
    ('{"tokens": ["a"], "entities": [{"start": 0, "label": "X"}]}', "missing key 'end'"),
    ('{"tokens": ["a"], "entities": [{"start": "0", "end": 1, "label": "X"}]}', "start must be an integer"),
    ('{"tokens": ["a"], "entities": [{"start": 0, "end": 1.0, "label": "X"}]}', "end must be an integer"),
    ('{"tokens": ["a"], "entities": [{"start": false, "end": 1, "label": "X"}]}', "start must be an integer"),
    ('{"tokens": ["a"], "entities": [{"start": -1, "end": 1, "label": "X"}]}', "start is negative"),
    ('{"tokens": ["a"], "entities": [{"start": 0, "end": 2, "label": "X"}]}', "out of range"),
    ('{"tokens": ["a", "b"], "entities": [{"start": 1, "end": 1, "label": "X"}]}', "empty span"),
    ('{"tokens": ["a", "b"], "entities": [{"start": 1, "end": 0, "label": "X"}]}', "empty span"),
    ('{"tokens": ["a"], "entities": [{"start": 0, "end": 1, "label": 7}]}', "label must be a non-empty string"),
    ('{"tokens": ["a"], "entities": [{"start": 0, "end": 1, "label": ""}]}', "label must be a non-empty string"),
]


@pytest.mark.parametrize(
    "bad, column",
    [
        ('{"tokens": ["a"], "entities": [}', 32),
        ('{"tokens": ["a"], "entities": [', 32),  # the end of the line, not column 1 of the next one
        ('{"tokens": ["a"], "entities": []', 33),
        ('{"tokens": ["a"], "entities": []}}', 34),
    ],
)
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_invalid_json_names_its_column(tmp_path, nlp, bad, column, newline):
    source = tmp_path / "bad.jsonl"
    source.write_bytes((GOOD + newline + bad + newline).encode())
    with pytest.raises(
        ConversionError, match=rf"^{re.escape(str(source))}:2: \[E116\] invalid JSON: .*\(column {column}\)"
    ):
        list(jsonl_to_docs(source, nlp))


@pytest.mark.parametrize("bad, reason", JSONL_ERRORS)
def test_jsonl_errors_name_file_and_line(tmp_path, nlp, bad, reason):
    source = write_jsonl(tmp_path / "bad.jsonl", [GOOD, "", bad, GOOD])  # the blank line 2 still counts
    with pytest.raises(ConversionError, match=reason) as info:
        list(jsonl_to_docs(source, nlp))
    assert (info.value.file, info.value.line) == (str(source), 3)
    assert str(info.value).startswith(f"{source}:3: ")


def test_label_outside_allowed_set(tmp_path, nlp):
    source = write_jsonl(tmp_path / "in.jsonl", [FLAT, NESTED])
    with pytest.raises(ConversionError, match=r"label 'DNA' is not one of the allowed labels") as info:
        list(jsonl_to_docs(source, nlp, labels=["protein", "cell_type"]))
    assert info.value.line == 2


def test_invalid_utf8_names_line(tmp_path, nlp):
    source = tmp_path / "latin1.jsonl"
    source.write_bytes(
        GOOD.encode() + b"\n" + json.dumps(record("caf\u00e9"), ensure_ascii=False).encode("latin-1") + b"\n"
    )
    with pytest.raises(ConversionError, match="not valid UTF-8 .*byte 0xe9") as info:
        list(jsonl_to_docs(source, nlp))
    assert info.value.line == 2


def test_utf8_bom_is_accepted(tmp_path, nlp):
    source = tmp_path / "bom.jsonl"
    source.write_bytes(b"\xef\xbb\xbf" + GOOD.encode() + b"\n")
    assert len(list(jsonl_to_docs(source, nlp))) == 1


def test_duplicate_entity_dropped_and_counted(tmp_path, caplog):
    duplicate = record("IL-2 gene", (0, 1, "protein"), (0, 2, "DNA"), (0, 1, "protein"))
    source = write_jsonl(tmp_path / "in.jsonl", [FLAT, duplicate])
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        report = convert(source, tmp_path / "out.spacy")
    assert (report["entities_read"], report["duplicates_removed"], report["entities_written"]) == (5, 1, 4)
    assert f"{source}:2: dropped duplicate entity protein [0, 1)" in caplog.text


COLUMN_ERRORS = [
    ("a O O\nb B_DNA O\n", 2, "unknown tag 'B_DNA' in tag column 1"),
    ("a O O\nb O X-DNA\n", 2, "unknown tag 'X-DNA' in tag column 2"),
    ("a O O\n\nb O\n", 3, r"expected at least 3 columns \(the token in column 1, then 2 tag column"),
]


@pytest.mark.parametrize("text, line, reason", COLUMN_ERRORS)
def test_column_errors_name_file_and_line(tmp_path, nlp, text, line, reason):
    source = tmp_path / "bad.iob"
    source.write_text(text, encoding="utf-8")
    with pytest.raises(ConversionError, match=reason) as info:
        list(conll_to_docs(source, nlp, tag_cols=2))
    assert (info.value.file, info.value.line) == (str(source), line)


def test_column_label_and_encoding_errors(tmp_path, nlp):
    source = tmp_path / "bad.iob"
    source.write_text("IL-2 B-protein\n\nT B-cell\n", encoding="utf-8")
    with pytest.raises(ConversionError, match="label 'cell' is not one of") as info:
        list(conll_to_docs(source, nlp, labels=["protein"]))
    assert info.value.line == 3
    source.write_bytes(b"IL-2 B-protein\n\ncaf\xe9 O\n")
    with pytest.raises(ConversionError, match="not valid UTF-8") as info:
        list(conll_to_docs(source, nlp))
    assert info.value.line == 3


def test_column_file_without_tags(tmp_path, nlp):
    source = tmp_path / "plain.conll"
    source.write_text("IL-2 NN\ngene NN\n", encoding="utf-8")
    with pytest.raises(ConversionError, match="found no tag column.*--tag-cols") as info:
        list(conll_to_docs(source, nlp))
    assert info.value.line == 1


def test_nothing_written_on_error(tmp_path):
    source = write_jsonl(tmp_path / "bad.jsonl", [GOOD, "{"])
    with pytest.raises(ConversionError):
        convert(source, tmp_path / "out.spacy")
    assert not (tmp_path / "out.spacy").exists()


# ---------------------------------------------------------------------------------------------------------
# Input that is read, but counted in the report and logged with FILE:LINE


def warnings_of(caplog, code: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "spacy_piqn" and f"[{code}]" in r.getMessage()]


@pytest.mark.parametrize(
    "tags, spans, starts",
    [
        ("B-A I-A O B-B", [(0, 2, "A"), (3, 4, "B")], []),
        ("I-A I-A O I-B I-A", [(0, 2, "A"), (3, 4, "B"), (4, 5, "A")], [0, 3, 4]),
        ("S-A E-B B-A E-A I-A", [(0, 1, "A"), (1, 2, "B"), (2, 4, "A"), (4, 5, "A")], [1, 4]),
    ],
)
def test_decode_tags_says_where_a_continuation_tag_starts_an_entity(tags, spans, starts):
    assert decode_tags(tags.split()) == (spans, starts)


IOB1_TEXT = "John I-PER\nSmith I-PER\nsaid O\nParis I-LOC\n\nBerlin B-LOC\n"


def test_iob1_tags_in_an_iob2_file_are_counted_and_logged(tmp_path, nlp, caplog):
    source = tmp_path / "news.iob"
    source.write_text(IOB1_TEXT, encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        report = convert(source, tmp_path / "out.spacy", tag_cols=1)
    assert report["continuation_starts"] == 2 and report["scheme"] == "iob2"
    assert warnings_of(caplog, "W100") == [
        f"{source}:1: [W100] 'I-PER' in tag column 1 starts an entity after the sentence start (IOB1 style); it is "
        "read as a new entity. In IOB2, BIOES and BILOU an entity starts with B-, S- or U-: fix the tag, or pass "
        "--scheme iob1 if the file is IOB1.",
        f"{source}:4: [W100] 'I-LOC' in tag column 1 starts an entity after 'O' (IOB1 style); it is "
        "read as a new entity. In IOB2, BIOES and BILOU an entity starts with B-, S- or U-: fix the tag, or pass "
        "--scheme iob1 if the file is IOB1.",
    ]
    first, second = read_back(tmp_path / "out.spacy", nlp)
    assert span_tuples(first) == [(0, 2, "PER"), (3, 4, "LOC")]  # read the IOB1 way all the same

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        report = convert(source, tmp_path / "iob1.spacy", tag_cols=1, scheme="iob1")
    assert report["continuation_starts"] == 0 and not warnings_of(caplog, "W100")
    assert report["entities_written"] == 3


def test_bioes_end_without_begin_is_counted_even_in_iob1(tmp_path, caplog):
    source = tmp_path / "broken.bioes"
    source.write_text("IL-2 O\ngene E-DNA\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        report = convert(source, tmp_path / "out.spacy", scheme="iob1")
    assert report["continuation_starts"] == 1
    assert warnings_of(caplog, "W100")[0].startswith(f"{source}:2: [W100] 'E-DNA' in tag column 1 starts an entity")


def test_many_warnings_of_one_kind_are_logged_a_few_times_and_all_counted(tmp_path, caplog):
    source = tmp_path / "iob1.iob"
    source.write_text("".join(f"w{i} I-PER\n\n" for i in range(8)), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        report = convert(source, tmp_path / "out.spacy")
    assert report["continuation_starts"] == 8
    assert len(warnings_of(caplog, "W100")) == 5
    assert warnings_of(caplog, "W104") == [
        f"[W104] {source}: W100 logged 5 times; later cases are counted in the report, not logged."
    ]


def test_cli_shows_iob1_starts_and_scheme(tmp_path):
    source = tmp_path / "news.iob"
    source.write_text(IOB1_TEXT, encoding="utf-8")
    out = tmp_path / "out.spacy"
    result = CliRunner().invoke(app, ["convert", str(source), str(out), "--tag-cols", "1"])
    assert result.exit_code == 0, result.output
    assert report_row(result.stdout, "I-/E-/L- starting entities") == "2"
    assert "tag scheme iob2" in result.stdout and f"{source}:1: [W100]" in result.stderr
    result = CliRunner().invoke(app, ["convert", str(source), str(out), "--tag-cols", "1", "--scheme", "iob1"])
    assert result.exit_code == 0 and report_row(result.stdout, "I-/E-/L- starting entities") == "0"
    assert "W100" not in result.stderr
    result = CliRunner().invoke(app, ["convert", str(source), str(out), "--scheme", "iob3"])
    assert result.exit_code == 1 and "[E138] unknown tag scheme 'iob3'" in result.stderr


def report_row(stdout: str, name: str) -> str:
    """The value of one row of the printed report."""
    (row,) = [line for line in stdout.splitlines() if line.strip().startswith(name + "  ")]
    return row.split()[-1]


def labelled(n: int, label: str) -> list[dict]:
    return [record("IL-2 binds", (0, 1, label)) for _ in range(n)]


def test_report_counts_entities_per_label_and_flags_rare_labels(tmp_path, caplog):
    records = labelled(60, "protein") + labelled(45, "DNA") + [record("x y", (0, 2, "PRE"))] + labelled(2, "RNA")
    source = write_jsonl(tmp_path / "in.jsonl", records)
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        report = convert(source, tmp_path / "out.spacy")
    assert report["labels"] == {"DNA": 45, "PRE": 1, "RNA": 2, "protein": 60}
    assert report["rare_labels"] == {"PRE": f"{source}:106", "RNA": f"{source}:107"}
    assert warnings_of(caplog, "W103") == [
        f"{source}:106: [W103] rare label(s), typo? 'PRE' (1x, {source}:106), 'RNA' (2x, {source}:107); the most "
        "frequent label has 60 entities. Fix the label, or pass --labels to make unknown labels an error."
    ]


def test_small_files_have_no_rare_labels(tmp_path, caplog):
    source = write_jsonl(tmp_path / "in.jsonl", [NESTED, FLAT])
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        report = convert(source, tmp_path / "out.spacy")
    assert report["labels"] == {"DNA": 2, "cell_type": 1, "protein": 3} and report["rare_labels"] == {}
    assert not warnings_of(caplog, "W103")


def test_column_typo_label_is_flagged_with_its_line(tmp_path):
    lines = "".join("IL-2 B-protein\ngene O\n\n" for _ in range(100)) + "T B-PRE\n"
    source = tmp_path / "typo.iob"
    source.write_text(lines, encoding="utf-8")
    result = CliRunner().invoke(app, ["convert", str(source), str(tmp_path / "out.spacy")])
    assert result.exit_code == 0, result.output
    assert f"{source}:301: [W103] rare label(s), typo? 'PRE' (1x, {source}:301)" in result.stderr
    table = result.stdout[result.stdout.index("entities written per label:") :].splitlines()[1:]
    assert [line.split()[:2] for line in table] == [["protein", "100"], ["PRE", "1"]]
    assert table[1].endswith(f"rare: typo? first at {source}:301")


def test_crossing_entities_are_kept_counted_and_logged(tmp_path, nlp, caplog):
    crossing = record("a b c d", (0, 2, "A"), (1, 3, "B"), (2, 4, "C"), (0, 4, "D"))
    source = write_jsonl(tmp_path / "in.jsonl", [FLAT, crossing])
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        report = convert(source, tmp_path / "out.spacy")
    assert report["crossing_pairs"] == 2 and report["entities_written"] == 6
    assert warnings_of(caplog, "W101") == [
        f"{source}:2: [W101] the entities A [0, 2) and B [1, 3) cross (they overlap, neither contains the other). "
        "Both are kept, but nested decoding can predict at most one of them.",
        f"{source}:2: [W101] the entities B [1, 3) and C [2, 4) cross (they overlap, neither contains the other). "
        "Both are kept, but nested decoding can predict at most one of them.",
    ]
    assert span_tuples(read_back(tmp_path / "out.spacy", nlp)[1]) == [
        (0, 2, "A"),
        (0, 4, "D"),
        (1, 3, "B"),
        (2, 4, "C"),
    ]


def test_crossing_levels_of_a_column_file(tmp_path, caplog):
    source = tmp_path / "cross.iob"
    source.write_text("a B-ORG O\nb I-ORG B-LOC\nc O I-LOC\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        report = convert(source, tmp_path / "out.spacy")
    assert report["crossing_pairs"] == 1
    assert warnings_of(caplog, "W101")[0].startswith(f"{source}:2: [W101] the entities ORG [0, 2) and LOC [1, 3)")
    result = CliRunner().invoke(app, ["convert", str(source), str(tmp_path / "out.spacy")])
    assert report_row(result.stdout, "crossing pairs") == "1"


@pytest.mark.parametrize(
    "spans, pairs",
    [
        ([(0, 2, "A"), (1, 3, "B")], 1),
        ([(0, 3, "A"), (1, 2, "B"), (1, 3, "C")], 0),  # nested, sharing a boundary
        ([(0, 2, "A"), (0, 2, "B"), (2, 4, "C")], 0),  # same span, adjacent
        ([(0, 2, "A"), (1, 3, "B"), (1, 3, "C"), (2, 5, "D")], 4),
    ],
)
def test_crossing_pairs(spans, pairs):
    assert len(crossing_pairs(spans)) == pairs


INDEXED = """\
1 John NNP B-PER
2 Smith NNP I-PER
3 said VBD O

1 Paris NNP B-LOC
"""


def test_index_column_is_detected(tmp_path, nlp):
    source = tmp_path / "indexed.conll"
    source.write_text(INDEXED, encoding="utf-8")
    report = convert(source, tmp_path / "out.spacy")
    assert report["token_column"] == 2
    first, second = read_back(tmp_path / "out.spacy", nlp)
    assert [t.text for t in first] == ["John", "Smith", "said"] and [t.text for t in second] == ["Paris"]
    assert span_tuples(first) == [(0, 2, "PER")]
    result = CliRunner().invoke(app, ["convert", str(source), str(tmp_path / "out.spacy")])
    assert "token column 2 (column 1 is a token index), tag scheme iob2" in result.stdout


def test_token_column_option(tmp_path, nlp):
    source = tmp_path / "indexed.conll"
    source.write_text(INDEXED, encoding="utf-8")
    report = convert(source, tmp_path / "out.spacy", token_col=1)  # the index itself, if that is what is wanted
    assert report["token_column"] == 1
    assert [t.text for t in read_back(tmp_path / "out.spacy", nlp)[0]] == ["1", "2", "3"]
    other = tmp_path / "pos_first.conll"
    other.write_text("NNP John B-PER\nVBD said O\n", encoding="utf-8")
    convert(other, tmp_path / "pos.spacy", token_col=2)
    assert [t.text for t in read_back(tmp_path / "pos.spacy", nlp)[0]] == ["John", "said"]
    with pytest.raises(ValueError, match=r"\[E139\] token_col must be at least 1"):
        convert(other, tmp_path / "pos.spacy", token_col=0)
    with pytest.raises(ConversionError, match=r"\[E120\] expected at least 4 columns \(the token in column 3"):
        convert(other, tmp_path / "pos.spacy", token_col=3)


@pytest.mark.parametrize(
    "text",
    [
        "1 O\n2 O\n",  # no column between the index and the tags: the numbers are the tokens
        "1 a O\n3 b O\n",  # not counting up
        "1 a O\n\n1 b O\n",  # never past 1
        "2 a O\n3 b O\n",  # not from 1
        "1 a O\n2 b O\n\n1 c O\nx d O\n",  # one line without an index
    ],
)
def test_numbers_that_are_not_an_index_stay_tokens(tmp_path, text):
    source = tmp_path / "numbers.conll"
    source.write_text(text, encoding="utf-8")
    assert convert(source, tmp_path / "out.spacy", tag_cols=1)["token_column"] == 1


# ---------------------------------------------------------------------------------------------------------
# --skip-invalid and the report


def test_skip_invalid_logs_each_skip_and_counts(tmp_path, nlp, caplog):
    source = write_jsonl(tmp_path / "mixed.jsonl", [GOOD, "{", json.dumps(NESTED), '{"tokens": []}', GOOD])
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        report = convert(source, tmp_path / "out.spacy", skip_invalid=True)
    skips = [r for r in caplog.records if r.name == "spacy_piqn" and r.getMessage().startswith("skipped")]
    assert [r.getMessage().split(": ")[0] for r in skips] == [f"skipped {source}:2", f"skipped {source}:4"]
    assert "invalid JSON" in skips[0].getMessage() and "missing key 'entities'" in skips[1].getMessage()
    assert report["sentences_read"] == 5 and report["skipped"] == 2
    assert report["docs_written"] == report["sentences_written"] == 3
    assert report["entities_read"] == report["entities_written"] == 8
    assert len(read_back(tmp_path / "out.spacy", nlp)) == 3


def test_skip_invalid_column_sentence(tmp_path, caplog):
    source = tmp_path / "mixed.iob"
    source.write_text("IL-2 B-protein\n\nbad X-DNA\nok O\n\nT B-cell_type\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        report = convert(source, tmp_path / "out.spacy", tag_cols=1, skip_invalid=True)
    assert (report["sentences_read"], report["skipped"], report["docs_written"], report["entities_written"]) == (
        3,
        1,
        2,
        2,
    )
    assert f"skipped {source}:3: [E121] unknown tag 'X-DNA'" in caplog.text


def test_consistency_check_raises_on_mismatch(tmp_path, monkeypatch):
    source = write_jsonl(tmp_path / "in.jsonl", [FLAT])
    written = {"docs": 1, "sentences": 1, "entities": 1, "labels": {"protein": 1}}
    monkeypatch.setattr(convert_module, "_count_written", lambda *args: written)
    problems = r"entities_written = 1 but expected 2; labels = \{.protein.: 1\} but expected"
    with pytest.raises(RuntimeError, match=problems):
        convert(source, tmp_path / "out.spacy")


# ---------------------------------------------------------------------------------------------------------
# CLI


def test_cli_convert_prints_report(tmp_path):
    source = write_jsonl(tmp_path / "in.jsonl", [NESTED, EMPTY])
    result = CliRunner().invoke(app, ["convert", str(source), str(tmp_path / "out.spacy"), "--spans-key", "gold"])
    assert result.exit_code == 0, result.output
    assert "entities written" in result.stdout and "spans key 'gold'" in result.stdout


@pytest.mark.parametrize(
    "lines, extra, message",
    [
        ([GOOD, "{"], [], "bad.jsonl:2: [E116] invalid JSON"),
        ([json.dumps(NESTED)], ["--labels", "protein"], "bad.jsonl:1: [E103] entity 1: label 'DNA' is not one of"),
        ([GOOD], ["--format", "xml"], "unknown format 'xml'"),
        ([GOOD], ["--n-sents", "-1"], "[E124] n_sents must be 0 (whole documents) or more"),
        ([GOOD], ["--n-sents", "0"], "[E135] n_sents 0 asks for whole documents, but the input has no document"),
        ([GOOD], ["--lang", "zz-nope"], "unknown language code 'zz-nope'"),
    ],
)
def test_cli_errors_exit_1_with_one_line(tmp_path, lines, extra, message):
    source = write_jsonl(tmp_path / "bad.jsonl", lines)
    result = CliRunner().invoke(app, ["convert", str(source), str(tmp_path / "out.spacy"), *extra])
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_cli_skip_invalid_reports_skips(tmp_path):
    source = write_jsonl(tmp_path / "in.jsonl", [GOOD, "{", GOOD])
    result = CliRunner().invoke(app, ["convert", str(source), str(tmp_path / "out.spacy"), "--skip-invalid"])
    assert result.exit_code == 0, result.output
    assert [line.split() for line in result.stdout.splitlines() if line.strip().startswith("skipped")] == [
        ["skipped", "1"]
    ]
    assert f"WARNING: skipped {source}:2: [E116] invalid JSON" in result.stderr


def test_cli_missing_input(tmp_path):
    result = CliRunner().invoke(app, ["convert", str(tmp_path / "nope.jsonl"), str(tmp_path / "out.spacy")])
    assert result.exit_code == 1 and "input file not found" in result.stderr


def test_python_m_entry_point_and_no_pipeline_import(tmp_path, monkeypatch, capsys):
    """`python -m spacy_piqn convert` works as a subcommand, and the CLI module itself loads no model code.

    The import probe bypasses the package ``__init__`` (which registers the component), so it checks what
    ``cli.py`` and ``convert.py`` pull in themselves.
    """
    probe = (
        "import sys, types; pkg = types.ModuleType('spacy_piqn'); pkg.__path__ = ['spacy_piqn']; "
        "sys.modules['spacy_piqn'] = pkg; import spacy_piqn.cli; "
        "print(sorted(m for m in sys.modules if m.startswith('spacy_piqn')), 'torch' in sys.modules); "
        "import spacy_piqn.convert; print(sorted(m for m in sys.modules if m.startswith('spacy_piqn')))"
    )
    imported = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    assert imported.stdout.splitlines() == [  # errors.py is the message catalogue, which imports nothing
        "['spacy_piqn', 'spacy_piqn.cli', 'spacy_piqn.errors'] False",
        "['spacy_piqn', 'spacy_piqn.cli', 'spacy_piqn.convert', 'spacy_piqn.errors']",
    ]
    # The `-m` entry point, run in-process (a fresh interpreter would spend seconds importing spaCy again).
    out = tmp_path / "dev.spacy"
    monkeypatch.setattr(sys, "argv", ["python -m spacy_piqn", "convert", str(SAMPLE / "dev.jsonl"), str(out)])
    with pytest.raises(SystemExit) as info:
        runpy.run_module("spacy_piqn", run_name="__main__")
    assert info.value.code == 0
    assert "docs written" in capsys.readouterr().out and out.exists()


# ---------------------------------------------------------------------------------------------------------
# Bundled sample and real data


def _depth(entities: list[dict]) -> int:
    """Nesting levels: 1 + the most mentions that strictly contain one mention."""

    def contains(a, b):
        return a["start"] <= b["start"] and b["end"] <= a["end"] and (a["start"], a["end"]) != (b["start"], b["end"])

    return 1 + max((sum(contains(a, b) for a in entities) for b in entities), default=0)


def test_sample_iob_matches_sample_jsonl(nlp):
    records = [json.loads(line) for line in (SAMPLE / "train.jsonl").read_text(encoding="utf-8").splitlines()]
    from_jsonl = list(jsonl_to_docs(SAMPLE / "train.jsonl", nlp))
    from_iob = list(conll_to_docs(SAMPLE / "train.iob", nlp))
    assert len(records) == len(from_jsonl) == len(from_iob) == 40
    shallow = 0
    for rec, doc_j, doc_i in zip(records, from_jsonl, from_iob, strict=True):
        assert [t.text for t in doc_j] == [t.text for t in doc_i] == rec["tokens"]
        if _depth(rec["entities"]) <= 2:
            assert span_tuples(doc_i) == span_tuples(doc_j)
            shallow += 1
        else:  # two tag columns hold the two outer levels only
            assert set(span_tuples(doc_i)) < set(span_tuples(doc_j))
    assert shallow == 34


def test_sample_corpus_is_nested_and_valid(tmp_path):
    for name, n_docs in (("train", 40), ("dev", 12)):
        report = convert(
            SAMPLE / f"{name}.jsonl",
            tmp_path / f"{name}.spacy",
            labels=["DNA", "RNA", "protein", "cell_line", "cell_type"],
        )
        assert report["docs_written"] == n_docs and report["duplicates_removed"] == 0
    records = [json.loads(line) for line in (SAMPLE / "train.jsonl").read_text(encoding="utf-8").splitlines()]
    depths = [_depth(r["entities"]) for r in records if r["entities"]]
    assert sum(not r["entities"] for r in records) >= 3 and depths.count(3) >= 3 and depths.count(2) >= 10


def test_genia_dev_converts_to_one_doc_per_abstract(tmp_path, nlp):
    """The shared GENIA dev set with its doc-id file: one doc per run of one MEDLINE id, nothing lost."""
    source = SHARED_DATA / "genia" / "dev.jsonl"
    if not source.exists():
        pytest.skip(f"{source} not available")
    ids = (SHARED_DATA / "genia" / "dev.doc_ids.txt").read_text(encoding="utf-8").splitlines()
    runs = [doc_id for i, doc_id in enumerate(ids) if i == 0 or doc_id != ids[i - 1]]
    report = convert(source, tmp_path / "dev.spacy")
    assert report["documents_from"].endswith("dev.doc_ids.txt (found beside the input)")
    assert report["docs_written"] == report["documents"] == len(runs) == 190
    assert (report["sentences_read"], report["sentences_written"], report["entities_written"]) == (1669, 1669, 4367)
    assert report["labels"] == {"DNA": 1030, "RNA": 133, "cell_line": 330, "cell_type": 558, "protein": 2316}
    assert report["skipped"] == report["duplicates_removed"] == report["crossing_pairs"] == 0
    assert report["reappeared_documents"] == 0 and report["rare_labels"] == {}
    assert [doc.user_data["doc_id"] for doc in read_back(tmp_path / "dev.spacy", nlp)] == runs
