"""The pipeline's tokenizer for raw text: spaCy's, following the training corpus's conventions where they differ.

A model trained on a corpus's own tokens finds most when ``nlp(text)`` makes the same tokens. Three of spaCy's
English rules disagree with the corpora here (docs/configuration.md, "Tokens"): it splits a hyphen between letters
or digits (``NF-kappa`` → ``NF``, ``-``, ``kappa``: OntoNotes' style), which GENIA, CoNLL-03 and GermEval keep whole
(on GENIA dev as text, models trained on the gold tokens score 67.7 / 68.1 F through spaCy's rules and 76.7 / 76.6
with hyphenated words whole); it splits a slash before a letter (``p50/p65``), which GENIA keeps whole and CoNLL-03
splits; and it keeps a full stop after a capital letter on the word, as an initial (``J.``), where GENIA ends a
sentence with ``NF-kappa B`` ``.`` and CoNLL-03 keeps its initials. ``tokenizer_mismatch`` tells a user whose corpus
and tokenizer disagree.
"""

import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, List, Optional, Sequence, Tuple

from spacy.lang.char_classes import ALPHA_UPPER, HYPHENS
from spacy.language import Language, create_tokenizer
from spacy.tokenizer import Tokenizer
from spacy.tokens import Doc, Token
from spacy.util import compile_infix_regex, compile_suffix_regex, registry

from .errors import Warnings

# Rewrites of spaCy's infix rules (English, French and multi-language; German), applied to each rule that contains
# the first string; None leaves the rule out. Hyphens: the rule between letters, and between digits (ranges, scores
# and dates, 3-4, 2-1, 1996-08-30: GENIA, CoNLL-03 and GermEval 2014 keep 101 / 2,655 / 180 such training tokens
# whole against 1 / 61 / 14 split); other operators between digits (5+3) still split.
KEEP_HYPHENATED: Sequence[Tuple[str, Optional[str]]] = (
    (HYPHENS, None),
    (r"[+\-\*^]", r"[+\*^]"),
    (r"(?<=[0-9])-(?=[0-9])", None),
)
# Slashes before a letter (p50/p65; German also between digits).
KEEP_SLASHED: Sequence[Tuple[str, Optional[str]]] = ((r"[:<>=/]", r"[:<>=]"), (r"\/", None))
# A full stop after a capital letter, unless the capital follows a full stop (U.S., Ph.D.: chains of initials).
PERIOD_AFTER_CAPITAL = rf"(?<=[{ALPHA_UPPER}])(?<!\.[{ALPHA_UPPER}])\."
# Fewer corpus words of a kind than this say nothing either way.
MIN_EVIDENCE = 20


@registry.tokenizers("spacy-piqn.Tokenizer.v1")
def create_piqn_tokenizer(
    split_hyphens: bool = True, split_capital_periods: bool = False, split_slashes: bool = True
) -> Callable[[Language], Tokenizer]:
    """spaCy's tokenizer for the pipeline's language (``spacy.Tokenizer.v1``); the defaults are spaCy's rules.
    ``split_hyphens = false`` leaves out the infix rules that split at a hyphen between letters or digits, so
    ``T-cell`` and ``3-4`` stay one token (prefixes, suffixes, exceptions and the other infixes are unchanged:
    ``(NF-kappa B).`` → ``(``, ``NF-kappa``, ``B``, ``)``, ``.``). ``split_slashes = false`` keeps ``p50/p65``
    whole. ``split_capital_periods = true`` splits the full stop off a word that ends in a capital letter (``NF-kappa
    B.``, ``JunD.``), which spaCy keeps as an initial: ``J. Smith`` becomes ``J``, ``.``, ``Smith``, whose entity still
    aligns, while a kept ``B.`` puts the end of ``NF-kappa B`` inside a token; the language's exceptions and chains
    of initials (``U.S.``, ``Ph.D.``, ``Jun.``) stay whole. The rules are saved with the pipeline, as spaCy's own
    tokenizer's are."""
    make_default = create_tokenizer()

    def make(nlp: Language) -> Tokenizer:
        tokenizer = make_default(nlp)
        rewrites = [*(() if split_hyphens else KEEP_HYPHENATED), *(() if split_slashes else KEEP_SLASHED)]
        if rewrites:
            infixes = rewrite_rules(nlp.Defaults.infixes or [], rewrites)
            tokenizer.infix_finditer = compile_infix_regex(infixes).finditer if infixes else None
        if split_capital_periods:
            suffixes = [*(nlp.Defaults.suffixes or []), PERIOD_AFTER_CAPITAL]
            tokenizer.suffix_search = compile_suffix_regex(suffixes).search
        return tokenizer

    return make


def rewrite_rules(rules: Iterable[str], rewrites: Sequence[Tuple[str, Optional[str]]]) -> List[str]:
    """``rules`` with each rewrite applied to the rules that contain its first string (None: the rule is left out)."""
    kept = []
    for rule in rules:
        for old, new in rewrites:
            if old in rule:
                if new is None:
                    break
                rule = rule.replace(old, new)
        else:
            kept.append(rule)
    return kept


@dataclass(frozen=True)
class Convention:
    """How a corpus writes one kind of word, found in its tokens: whole (``T-cell``, ``J.``, ``p50/p65``) or with
    a mark as a token of its own between a word ``before`` and, where given, a word ``after`` it."""

    setting: str  # the spacy-piqn.Tokenizer.v1 setting that follows it: true splits, false keeps whole
    what: str  # the words, in messages
    whole: "re.Pattern[str]"
    mark: str
    before: "re.Pattern[str]"
    after: Optional["re.Pattern[str]"] = None
    # A corpus splits them when it writes the mark alone this many times as often as it keeps them whole (a
    # corpus that keeps hyphenated words whole still writes dashes between words: "Reuters - ...").
    ratio: int = 1

    def kept_whole(self, token: Token) -> Optional[str]:
        """The token's text if it is such a word written as one token."""
        return token.text if token.text != self.mark and self.whole.search(token.text) else None

    def written_apart(self, token: Token) -> Optional[str]:
        """The word as text if ``token`` is its mark written alone (``well-known`` for ``well`` ``-`` ``known``)."""
        doc, i = token.doc, token.i
        if token.text != self.mark or i == 0 or not self.before.search(doc[i - 1].text):
            return None
        if self.after is None:
            return doc[i - 1].text + token.text
        if i + 1 < len(doc) and self.after.search(doc[i + 1].text):
            return doc[i - 1].text + token.text + doc[i + 1].text
        return None

    def mismatch(self, tokenizer: Tokenizer, whole: Counter, apart: Counter) -> Optional[str]:
        """W005 if ``tokenizer`` splits most of the words the corpus keeps ``whole``, W006 if it keeps whole most of
        those it writes ``apart`` (given enough evidence that the corpus does one or the other), else None."""
        n_whole, n_apart = sum(whole.values()), sum(apart.values())
        if n_whole >= MIN_EVIDENCE and n_whole * self.ratio >= n_apart:
            # Split at the mark, not merely at attached punctuation (a gold token "T-cell," is two tokens either way).
            split = Counter({w: n for w, n in whole.items() if self.mark in [t.text for t in tokenizer(w)]})
            if sum(split.values()) * 2 > n_whole:
                word = split.most_common(1)[0][0]
                pieces = " ".join(t.text for t in tokenizer(word))
                return Warnings.W005.format(
                    what=self.what, total=n_whole, n=sum(split.values()), word=word, pieces=pieces, setting=self.setting
                )
        elif n_apart >= MIN_EVIDENCE and n_apart > n_whole * self.ratio:
            joined = Counter({w: n for w, n in apart.items() if len(tokenizer(w)) == 1})
            if sum(joined.values()) * 2 > n_apart:
                word = joined.most_common(1)[0][0]
                return Warnings.W006.format(
                    what=self.what, total=n_apart, n=sum(joined.values()), word=word, setting=self.setting
                )
        return None


LETTERS = re.compile(r"^[^\W\d_]+$")
CONVENTIONS = (
    Convention(
        "split_hyphens", "hyphenated words", re.compile(rf"[^\W\d_](?:{HYPHENS})[^\W\d_]"), "-", LETTERS, LETTERS, 10
    ),
    Convention(
        "split_capital_periods",
        "words that end in a capital letter and a full stop",
        re.compile(rf"(?<![{ALPHA_UPPER}.])[{ALPHA_UPPER}]\.$"),
        ".",
        re.compile(rf"(?<![{ALPHA_UPPER}.])[{ALPHA_UPPER}]$"),
    ),
    Convention(
        "split_slashes",
        "words joined by a slash",
        re.compile(r"[^\W_]/[^\W\d_]"),
        "/",
        re.compile(r"[^\W_]$"),
        re.compile(r"^[^\W\d_]"),
    ),
)


def tokenizer_mismatch(nlp: Language, docs: Iterable[Doc]) -> List[str]:
    """A warning for each convention the pipeline's tokenizer does not share with the training docs: W005 when it
    splits most of the words they keep whole (the model then meets tokens it never trained on), W006 when it keeps
    whole most of the words they split (an entity ending inside one can then not be found in ``nlp(text)``)."""
    counts = [(Counter(), Counter()) for _ in CONVENTIONS]
    for doc in docs:
        for token in doc:
            for convention, (whole, apart) in zip(CONVENTIONS, counts):
                if word := convention.kept_whole(token):
                    whole[word] += 1
                elif word := convention.written_apart(token):
                    apart[word] += 1
    warnings = (c.mismatch(nlp.tokenizer, whole, apart) for c, (whole, apart) in zip(CONVENTIONS, counts))
    return [warning for warning in warnings if warning]
