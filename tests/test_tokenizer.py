"""spacy-piqn.Tokenizer.v1 (hyphenated and slashed words kept whole, full stops split off capitals) and the W005 /
W006 checks of the training data."""

import logging

import pytest
import spacy
import srsly
from spacy.tokens import Doc
from spacy.util import load_config, registry

from spacy_piqn.tokenizer import MIN_EVIDENCE, create_piqn_tokenizer, tokenizer_mismatch

from .conftest import REPO, TINY_PIQN, make_examples, spans_of

TEXT = "(NF-kappa B). A well-known c-fos/c-jun 1996-08-30 T-cell's 3-4, e.g. U.S. don't"


def tokens(nlp, text=TEXT):
    return [t.text for t in nlp(text)]


def test_split_hyphens_false_keeps_hyphenated_words_and_every_other_rule():
    nlp = spacy.blank("en")
    default = tokens(nlp)
    assert create_piqn_tokenizer()(nlp).infix_finditer is not None
    nlp.tokenizer = create_piqn_tokenizer(split_hyphens=True)(nlp)
    assert tokens(nlp) == default
    nlp.tokenizer = create_piqn_tokenizer(split_hyphens=False)(nlp)
    kept = tokens(nlp)
    assert kept == [
        "(", "NF-kappa", "B", ")", ".", "A", "well-known", "c-fos", "/", "c-jun", "1996-08-30", "T-cell", "'s",
        "3-4", ",", "e.g.", "U.S.", "do", "n't",
    ]  # fmt: skip
    # Only the hyphenated words and numbers differ from spaCy's rules; other operators between digits still split.
    split_only = [
        "NF",
        "-",
        "kappa",
        "well",
        "-",
        "known",
        "c",
        "-",
        "fos",
        "c",
        "-",
        "jun",
        "1996",
        "-",
        "08",
        "-",
        "30",
    ]
    split_only += ["T", "-", "cell", "3", "-", "4"]
    assert [t for t in default if t not in kept] == split_only
    assert tokens(nlp, "5+3 2*4") == ["5", "+", "3", "2", "*", "4"]


PERIODS = "NF-kappa B. JunD. IL-2R. v-erbA. DNA. J. Smith and J.R.R. Tolkien, U.S. Ph.D. Jun. Inc. cells."


def test_split_capital_periods_splits_the_period_off_words_that_end_in_a_capital():
    nlp = spacy.blank("en")
    nlp.tokenizer = create_piqn_tokenizer(split_hyphens=False)(nlp)
    kept, kept_text = tokens(nlp, PERIODS), tokens(nlp)
    nlp.tokenizer = create_piqn_tokenizer(split_hyphens=False, split_capital_periods=True)(nlp)
    split = tokens(nlp, PERIODS)
    assert split == [
        "NF-kappa", "B", ".", "JunD", ".", "IL-2R", ".", "v-erbA", ".", "DNA", ".", "J", ".", "Smith", "and",
        "J.R.R.", "Tolkien", ",", "U.S.", "Ph.D.", "Jun.", "Inc.", "cells", ".",
    ]  # fmt: skip
    # spaCy's rules keep these five periods on the word (as initials); everything else is as before.
    assert [t for t in kept if t not in split] == ["B.", "JunD.", "IL-2R.", "v-erbA.", "J."]
    assert tokens(nlp) == kept_text


@pytest.mark.parametrize("lang,numbers", [("en", ["3/4"]), ("de", ["3", "/", "4"])])
def test_split_slashes_false_keeps_words_joined_by_a_slash(lang, numbers):
    """spaCy's rules split a slash before a letter (German also between digits); split_slashes = false keeps them."""
    nlp = spacy.blank(lang)
    text = "p50/p65 and km/h, 3/4 (IkB/MAD-3)."
    nlp.tokenizer = create_piqn_tokenizer(split_hyphens=False)(nlp)
    assert tokens(nlp, text) == [
        "p50",
        "/",
        "p65",
        "and",
        "km",
        "/",
        "h",
        ",",
        *numbers,
        "(",
        "IkB",
        "/",
        "MAD-3",
        ")",
        ".",
    ]
    nlp.tokenizer = create_piqn_tokenizer(split_hyphens=False, split_slashes=False)(nlp)
    assert tokens(nlp, text) == ["p50/p65", "and", "km/h", ",", "3/4", "(", "IkB/MAD-3", ")", "."]


def test_languages_that_keep_hyphenated_words_change_only_in_numbers():
    nlp = spacy.blank("de")
    text = "Baden-Württemberg und die SPD-Fraktion (Berlin-Mitte) 1914-1918 in Bonn"
    default = tokens(nlp, text)
    assert default[-5:] == ["1914", "-", "1918", "in", "Bonn"]
    nlp.tokenizer = create_piqn_tokenizer(split_hyphens=False)(nlp)
    assert tokens(nlp, text) == default[:-5] + ["1914-1918", "in", "Bonn"]


def test_the_rules_round_trip_through_disk_and_config(tmp_path):
    config = spacy.blank("en").config
    config["nlp"]["tokenizer"] = {
        "@tokenizers": "spacy-piqn.Tokenizer.v1",
        "split_hyphens": False,
        "split_capital_periods": True,
    }
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    assert tokens(nlp, "NF-kappa B.") == ["NF-kappa", "B", "."]
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    assert loaded.config["nlp"]["tokenizer"]["split_hyphens"] is False
    assert loaded.config["nlp"]["tokenizer"]["split_capital_periods"] is True
    assert tokens(loaded) == tokens(nlp) and tokens(loaded, PERIODS) == tokens(nlp, PERIODS)


@pytest.mark.parametrize("name", ["piqn_tok2vec", "piqn_trf_listener", "piqn_trf", "piqn_paper"])
def test_shipped_configs_keep_hyphenated_words_whole_and_the_project_sets_genias_rules(name):
    """The configs keep spaCy's initials and slashes; the project's GENIA training splits the full stop off
    capitals and keeps slashed words whole through the overrides its train steps pass."""
    genia = {"nlp.tokenizer.split_capital_periods": True, "nlp.tokenizer.split_slashes": False}
    for overrides, slashed, period in [({}, ["p50", "/", "p65"], ["B."]), (genia, ["p50/p65"], ["B", "."])]:
        config = load_config(REPO / "configs" / f"{name}.cfg", overrides=overrides, interpolate=False)
        make = registry.resolve({"tokenizer": config["nlp"]["tokenizer"]})["tokenizer"]
        words = [t.text for t in make(spacy.blank("en"))("T-cell lines bind p50/p65 NF-kappa B.")]
        assert words == ["T-cell", "lines", "bind", *slashed, "NF-kappa", *period]
    project = srsly.read_yaml(REPO / "project.yml")
    assert project["vars"]["split_capital_periods"] == "true" and project["vars"]["split_slashes"] == "false"
    train = {command["name"]: command["script"][0] for command in project["commands"]}
    for step in ("train", "train-trf"):
        for setting in genia:
            assert f"--{setting} ${{vars.{setting.split('.')[-1]}}}" in train[step]


def corpus(nlp, sentence: str, n: int):
    return [Doc(nlp.vocab, words=sentence.split()) for _ in range(n)]


# Per setting: how the tokenizer keeps the words whole and how it splits them, a corpus sentence that keeps two of
# them whole and one that splits two.
CONVENTIONS = [
    ("split_hyphens", {"split_hyphens": False}, {},
     "NF-kappa B binds T-cell DNA .", "a well - known German - born actor"),
    ("split_capital_periods", {}, {"split_capital_periods": True},
     "J. Smith and A. Jones met .", "binds NF-kappa B . JunD ."),
    ("split_slashes", {"split_slashes": False}, {},
     "p50/p65 and Rel/NF-kappa bind .", "US / UK and Rel / RelA talks"),
]  # fmt: skip


@pytest.mark.parametrize("setting,keep,split,whole_sentence,split_sentence", CONVENTIONS)
def test_tokenizer_mismatch_names_the_setting_that_matches_the_corpus(
    setting, keep, split, whole_sentence, split_sentence
):
    def warnings(settings, docs):
        nlp.tokenizer = create_piqn_tokenizer(**settings)(nlp)
        return [warning for warning in tokenizer_mismatch(nlp, docs) if setting in warning]

    nlp = spacy.blank("en")
    n = MIN_EVIDENCE // 2  # two words per sentence
    whole, apart = corpus(nlp, whole_sentence, n), corpus(nlp, split_sentence, n)
    [message] = warnings(split, whole)
    assert message.startswith("[W005]") and f"splits {2 * n} of them" in message and f"{setting} = false" in message
    [message] = warnings(keep, apart)
    assert message.startswith("[W006]") and f"({2 * n} times" in message and f"{setting} = true" in message
    assert warnings(keep, whole) == warnings(split, apart) == []
    # Too little evidence, or as many words of each kind (dashes between words in a corpus that keeps hyphenated
    # words whole): silence.
    assert warnings(split, whole[1:]) == warnings(keep, apart[1:]) == warnings(keep, whole + apart) == []


def test_only_splits_at_the_mark_count():
    """Punctuation the gold tokens keep attached is split either way (a gold token "T-cell," is two tokens)."""
    nlp = spacy.blank("en")
    nlp.tokenizer = create_piqn_tokenizer(split_hyphens=False)(nlp)
    assert tokenizer_mismatch(nlp, corpus(nlp, "in T-cell, c-fos. and IL-2-induced;", MIN_EVIDENCE)) == []


def test_initialize_warns_when_the_tokenizer_splits_the_corpus_words(caplog):
    nlp = spacy.blank("en")
    nlp.add_pipe("piqn", config=TINY_PIQN)
    examples = make_examples(nlp, [("NF-kappa B binds the IL-2 gene in T-cell lines .", [(0, 2, "protein")])] * 10)
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        nlp.initialize(lambda: examples)
    assert "[W005]" in caplog.text and "'NF-kappa' → NF - kappa" in caplog.text
    caplog.clear()
    nlp.tokenizer = create_piqn_tokenizer(split_hyphens=False)(nlp)
    with caplog.at_level(logging.WARNING, logger="spacy_piqn"):
        nlp.initialize(lambda: examples)
    assert "W005" not in caplog.text


def test_text_finds_what_the_gold_tokens_find_when_the_tokenizer_matches_them(trained_tiny):
    """The tiny pipeline learned "NF-kappa" and "IL-2" as one token each: nlp(text) with hyphenated words kept whole
    finds the spans it finds on the gold tokens, at the same characters."""
    nlp, examples = trained_tiny
    shared = nlp.tokenizer
    nlp.tokenizer = create_piqn_tokenizer(split_hyphens=False)(nlp)
    try:
        for eg in examples:
            words = [t.text for t in eg.reference]
            gold_doc = nlp(Doc(nlp.vocab, words=words))
            # As written: no space before the full stop ("... in human T cells.").
            written = Doc(nlp.vocab, words=words, spaces=[True] * (len(words) - 2) + [False, False])
            for text in (gold_doc.text, written.text):
                text_doc = nlp(text)
                assert [t.text for t in text_doc] == words
                assert [(s.label_, s.text) for s in text_doc.spans["sc"]] == [
                    (s.label_, s.text) for s in gold_doc.spans["sc"]
                ]
            assert spans_of(gold_doc) == spans_of(eg.reference)
    finally:
        nlp.tokenizer = shared
