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
