"""The message catalogue (spacy_piqn/errors.py): well-formed codes, and user mistakes that raise with them."""

import re
import string

import numpy as np
import pytest

from spacy_piqn.convert import ConversionError, read_jsonl
from spacy_piqn.decoding import filter_candidates
from spacy_piqn.errors import Errors, Warnings
from spacy_piqn.settings import HeadSettings
from spacy_piqn.windows import configure_token_windows


def catalogue(cls: type) -> dict:
    return {name: value for name, value in vars(cls).items() if not name.startswith("_")}


@pytest.mark.parametrize("cls, prefix", [(Errors, "E"), (Warnings, "W")])
def test_every_message_starts_with_its_own_code(cls, prefix):
    messages = catalogue(cls)
    assert messages
    for name, message in messages.items():
        assert re.fullmatch(rf"{prefix}\d{{3}}", name), name
        assert isinstance(message, str), name
        assert message.startswith(f"[{name}] "), name
        assert re.findall(r"\[([EW]\d{3})\]", message) == [name], name  # no second code inside the text
        list(string.Formatter().parse(message))  # a valid format string (raises on a stray brace)


def test_codes_are_unique():
    codes = [
        re.match(r"\[(\w+)\]", message).group(1) for cls in (Errors, Warnings) for message in catalogue(cls).values()
    ]
    assert len(codes) == len(set(codes))


def test_bad_pointer_in_head_settings():
    with pytest.raises(ValueError, match=r"^\[E006\] pointer must be one of \('softmax', 'sigmoid'\), got 'argmax'"):
        HeadSettings(pointer="argmax")


def test_malformed_jsonl_line_names_file_line_and_code_once(tmp_path):
    source = tmp_path / "bad.jsonl"
    source.write_text('{"tokens": ["a"], "entities": []}\n{"tokens": ["a"\n', encoding="utf-8")
    with pytest.raises(ConversionError) as info:
        list(read_jsonl(source))
    message = str(info.value)
    assert message.startswith(f"{source}:2: [E116] invalid JSON: ")
    assert message.count("E116") == 1 and info.value.reason.startswith("[E116] ")


def test_bad_decoding_mode():
    with pytest.raises(ValueError, match=r"^\[E015\] decoding must be one of .*got 'overlapping'"):
        filter_candidates(np.zeros(0, int), np.zeros(0, int), np.zeros(0), "overlapping")


def test_token_windows_stride_larger_than_size():
    with pytest.raises(ValueError, match=r"^\[E016\] token_windows needs 0 < stride <= size, got stride=8, size=4"):
        configure_token_windows(size=4, stride=8)


def test_token_windows_prediction_stride_larger_than_size():
    message = r"^\[E016\] token_windows needs 0 < predict_stride <= predict_size, got predict_stride=8, predict_size=4"
    with pytest.raises(ValueError, match=message):
        configure_token_windows(size=32, stride=16, predict_size=4, predict_stride=8)


def test_unknown_component_setting_is_named():
    import spacy

    nlp = spacy.blank("en")
    piqn = nlp.add_pipe("piqn")
    with pytest.raises(TypeError, match=r"\[E044\].*'n_slot'"):
        type(piqn)(nlp.vocab, piqn.model, n_slot=3)
