"""Fuzzed converter input: a clear FILE:LINE error or a faithful conversion, nothing else."""

import json
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spacy.tokens import DocBin
from spacy.vocab import Vocab

from spacy_piqn.convert import ConversionError, convert

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 30) | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["start", "end", "label", "x"]), inner, max_size=4)
    ),
    max_leaves=12,
)
ENTITY = st.fixed_dictionaries(
    {
        "start": st.integers(-2, 12),
        "end": st.integers(-2, 12),
        "label": st.one_of(st.sampled_from(["DNA", "protein"]), JSON_VALUES),
    }
)
RECORD = st.fixed_dictionaries(
    {
        "tokens": st.one_of(st.lists(st.text(min_size=0, max_size=5), max_size=10), JSON_VALUES),
        "entities": st.one_of(st.lists(ENTITY, max_size=4), JSON_VALUES),
    }
)
WORD = st.text(alphabet=st.characters(blacklist_categories=("Zs", "Zl", "Zp", "Cc", "Cs")), min_size=1, max_size=5)


@st.composite
def valid_record(draw):
    tokens = draw(st.lists(WORD, min_size=1, max_size=8))
    n = len(tokens)
    spans = draw(
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(1, n)).filter(lambda t: t[0] < t[1]), max_size=4)
    )
    labels = draw(st.lists(st.sampled_from(["DNA", "protein"]), min_size=len(spans), max_size=len(spans)))
    entities = [{"start": s, "end": e, "label": label} for (s, e), label in zip(spans, labels)]
    return json.dumps({"tokens": tokens, "entities": entities})


LINE = st.one_of(
    valid_record(),
    valid_record(),
    RECORD.map(json.dumps),
    st.text(max_size=40),
    st.binary(max_size=30).map(lambda b: b.decode("latin-1")),
)


def expected_entities(line: str):
    """What a faithful conversion must write for one valid line."""
    record = json.loads(line)
    return sorted({(e["start"], e["end"], e["label"]) for e in record["entities"]})


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINE, min_size=1, max_size=5))
def test_fuzzed_jsonl(tmp_path, lines):
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.spacy"
    try:
        report = convert(path, out)
    except ConversionError as err:
        # Always names the file and a line of it.
        match = re.match(rf"{re.escape(str(path))}:(\d+): .+", str(err))
        assert match, str(err)
        assert 1 <= int(match.group(1)) <= len(lines) + 1
        return
    docs = list(DocBin().from_disk(out).get_docs(Vocab()))
    valid = [line for line in lines if line.strip()]
    assert len(docs) == len(valid) == report["docs_written"]
    for doc, line in zip(docs, valid):
        assert [t.text for t in doc] == json.loads(line)["tokens"]
        assert sorted((s.start, s.end, s.label_) for s in doc.spans["sc"]) == expected_entities(line)


@st.composite
def documents(draw):
    """Valid records with doc ids from a small set (so ids come back), and a grouping."""
    ids = draw(st.lists(st.sampled_from(["A", "B", "C"]), min_size=1, max_size=8))
    lines = [draw(valid_record()) for _ in ids]
    return ids, lines, draw(st.sampled_from([None, 0, 1, 2, 3]))


def expected_groups(ids: list[str], n_sents: int | None) -> list[list[int]]:
    """Record indices per doc: runs of one id, cut every n_sents records."""
    groups: list[list[int]] = []
    for i, doc_id in enumerate(ids):
        if not groups or doc_id != ids[groups[-1][0]] or len(groups[-1]) == n_sents:
            groups.append([])
        groups[-1].append(i)
    return groups


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=documents())
def test_fuzzed_documents(tmp_path, case):
    """Whatever the ids and grouping: the docs are the runs of one id, with every sentence and entity in place."""
    ids, lines, n_sents = case
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "in.doc_ids.txt").write_text("\n".join(ids) + "\n", encoding="utf-8")
    report = convert(path, tmp_path / "out.spacy", n_sents=n_sents)
    docs = list(DocBin().from_disk(tmp_path / "out.spacy").get_docs(Vocab()))
    groups = expected_groups(ids, n_sents)
    runs = [group for i, group in enumerate(groups) if i == 0 or ids[group[0]] != ids[groups[i - 1][0]]]
    assert len(docs) == len(groups) == report["docs_written"] and report["documents"] == len(runs)
    assert report["reappeared_documents"] == len(runs) - len({ids[group[0]] for group in runs})
    for doc, group in zip(docs, groups, strict=True):
        assert doc.user_data["doc_id"] == ids[group[0]]
        offset, starts, tokens, spans = 0, [], [], []
        for i in group:
            record_tokens = json.loads(lines[i])["tokens"]
            starts.append(offset)
            tokens.extend(record_tokens)
            spans.extend((offset + s, offset + e, label) for s, e, label in expected_entities(lines[i]))
            offset += len(record_tokens)
        assert [t.text for t in doc] == tokens
        assert [t.i for t in doc if t.is_sent_start] == starts
        assert sorted((s.start, s.end, s.label_) for s in doc.spans["sc"]) == sorted(spans)
