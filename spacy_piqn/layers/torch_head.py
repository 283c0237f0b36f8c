"""thinc glue for the PyTorch PIQN head: lazy construction, converters, safetensors state."""

import contextlib
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from thinc.api import ArgsKwargs, Model, Optimizer, PyTorchGradScaler, PyTorchShim, torch2xp, xp2torch
from thinc.layers.pytorchwrapper import forward as pytorch_forward
from thinc.types import Floats2d, Floats4d, Ints2d

from ..errors import Errors
from ..settings import HeadSettings


@dataclass
class HeadInput:
    """What the head reads for a batch of windows: each window's word vectors (its context
    included), per window the offset and length of the words to predict on (None: all of them), and
    the query states of a query-carrying encoder (None: the head's own queries). The gradient
    comes back in the same shape (``spans`` left as it was)."""

    words: List[Floats2d]
    spans: Optional[Ints2d] = None
    queries: Optional[List[Floats2d]] = None


# left, right (L', B, M, n), classes (L', B, M, C): see PIQNHead.
OutT = Tuple[Floats4d, Floats4d, Floats4d]
InT = HeadInput


def build_torch_head(
    settings: HeadSettings,
    *,
    mixed_precision: bool = False,
    encoder_queries: bool = False,
    lr_scale: float = 1.0,
) -> Model[InT, OutT]:
    """A thinc layer whose PyTorch module is built at ``initialize``, once nI (the encoder's
    width) and nO (labels + "None") are known. Loading a saved pipeline sets both dims from the
    component's cfg and initializes this layer alone before the weights arrive.

    With ``encoder_queries`` the input carries query states from a query-carrying encoder of width
    nI: they (projected from nI to the head's width) start the word-level layers instead of the
    head's learned query content.

    ``lr_scale`` multiplies the optimizer's learning rate for the head's parameters."""
    if lr_scale <= 0:
        raise ValueError(Errors.E019.format(lr_scale=lr_scale))
    return Model(
        "piqn_head",
        forward,
        init=init,
        dims={"nI": None, "nO": None},
        attrs={
            "settings": settings.to_dict(),
            "mixed_precision": mixed_precision,
            "encoder_queries": encoder_queries,
            "lr_scale": lr_scale,
        },
    )


def head_settings(model: Model) -> HeadSettings:
    """The settings a head layer was built with (saved with it in its attrs)."""
    return HeadSettings.from_dict(model.attrs["settings"])


def saved_head_settings(data: bytes) -> Optional[Dict[str, Any]]:
    """The head settings a serialized PIQN model (``Model.to_bytes``) was saved with, read before
    the weights are loaded; None if it has no PIQN head."""
    import srsly

    msg = srsly.msgpack_loads(data)
    for info, attrs in zip(msg["nodes"], msg["attrs"]):
        if info["name"] == "piqn_head" and "settings" in attrs:
            return srsly.msgpack_loads(attrs["settings"])
    return None


def check_finite(model: Model, name: str, path: Any) -> None:
    """E056 if any PyTorch parameter of ``model`` holds NaN or inf (a corrupted file loads
    without complaint and then predicts nothing)."""
    import torch

    bad, total = [], 0
    for node in model.walk():
        for shim in node.shims:
            module = getattr(shim, "_model", None)
            if module is None:
                continue
            for param_name, param in module.named_parameters():
                total += 1
                if not bool(torch.isfinite(param).all()):
                    bad.append(param_name)
    if bad:
        raise ValueError(Errors.E056.format(name=name, path=path, n_bad=len(bad), n_params=total, examples=bad[:3]))


def scale_learning_rate(optimizer: Optimizer, scale_of: Callable[[str], float]) -> Callable:
    """``optimizer`` as a PyTorchShim calls it, with the learning rate of each parameter
    multiplied by ``scale_of(its name)``: thinc has one rate for a whole pipeline, while a
    freshly initialized head next to a pretrained transformer wants a larger one."""

    def update(key: Tuple[int, str], weights: Any, gradient: Any, *, lr_scale: float = 1.0) -> Any:
        return optimizer(key, weights, gradient, lr_scale=lr_scale * scale_of(key[1]))

    return update


class ScaledPyTorchShim(PyTorchShim):
    """A PyTorchShim whose parameters learn at ``lr_scale_of(name)`` × the optimizer's rate, and
    which takes the optimizer's weight averages (``use_averages = true``) when spaCy asks: the
    base of both PyTorch wrappers (the head, and the query-carrying transformer)."""

    def __init__(self, *args: Any, lr_scale: float = 1.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lr_scale = lr_scale

    def lr_scale_of(self, name: str) -> float:
        """The learning-rate multiplier of the parameter ``name`` (one for all, here)."""
        return self.lr_scale

    @contextlib.contextmanager
    def use_params(self, params: Dict[Any, Any]) -> Iterator[None]:
        """thinc's optimizer keys its averages by (shim id, parameter name), while
        PyTorchShim.use_params only looks for "pytorch_<id>_<name>" strings, so averages never
        reached a PyTorch model; this reads both."""
        if self._model is None:
            yield
            return
        averaged = {
            name: xp2torch(params[(self.id, name)], device=self.device)
            for name, _ in self._model.named_parameters()
            if (self.id, name) in params
        }
        if not averaged:
            with super().use_params(params):
                yield
            return
        backup = {k: v.clone() for k, v in self._model.state_dict().items()}
        self._model.load_state_dict({**backup, **averaged})
        try:
            yield
        finally:
            self._model.load_state_dict(backup)

    def finish_update(self, optimizer: Optimizer) -> None:
        super().finish_update(scale_learning_rate(optimizer, self.lr_scale_of))


_FORK_HOOK_INSTALLED = False


def install_fork_hook() -> None:
    """Give forked children (``nlp.pipe(..., n_process=2)``) one torch thread.

    A child forked after torch ran its thread pool in the parent hangs on its first parallel
    op; one thread per worker process avoids that pool (and oversubscription) altogether.
    """
    global _FORK_HOOK_INSTALLED
    if _FORK_HOOK_INSTALLED or not hasattr(os, "register_at_fork"):
        return
    import torch

    os.register_at_fork(after_in_child=lambda: torch.set_num_threads(1))
    _FORK_HOOK_INSTALLED = True


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Any = None) -> None:
    if model.layers:
        return
    import torch

    install_fork_hook()

    from ..torch_modules.head import PIQNHead

    attrs = model.attrs
    if X is not None and not model.has_dim("nI"):
        model.set_dim("nI", X.words[0].shape[1])
    module = PIQNHead(
        model.get_dim("nI"),
        model.get_dim("nO"),
        head_settings(model),
        query_in=model.get_dim("nI") if attrs["encoder_queries"] else 0,
    )
    # Mixed precision needs CUDA: a CPU grad scaler crashes in backprop.
    mixed = attrs["mixed_precision"] and torch.cuda.is_available()
    # thinc's PyTorchWrapper_v3, with a shim that can scale the learning rate. v3 builds its own PyTorchShim
    # and takes no shim class, so its (private) forward is reused here rather than its body copied.
    shim = ScaledPyTorchShim(
        module,
        lr_scale=attrs["lr_scale"],
        mixed_precision=mixed,
        grad_scaler=PyTorchGradScaler(enabled=mixed),
        serialize_model=serialize_state,
        deserialize_model=deserialize_state,
    )
    model._layers = [
        Model(
            "pytorch",
            pytorch_forward,
            attrs={"convert_inputs": convert_inputs, "convert_outputs": convert_outputs},
            shims=[shim],
            dims={"nI": None, "nO": None},
        )
    ]


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    return model.layers[0](X, is_train)


def convert_inputs(model: Model, X: InT, is_train: bool) -> Tuple[ArgsKwargs, Callable]:
    """One torch leaf per window (and per query-state array); training asks the head for the logits
    of every layer (auxiliary losses), prediction for the last layer's probabilities."""
    import torch

    words = [xp2torch(x, requires_grad=is_train) for x in X.words]
    queries = None if X.queries is None else [xp2torch(q, requires_grad=is_train) for q in X.queries]
    spans = None if X.spans is None else torch.as_tensor(X.spans)

    def grad(g: Any, x: Floats2d) -> Floats2d:
        return torch2xp(g) if g is not None else model.ops.alloc2f(*x.shape)

    def get_dX(dXt: ArgsKwargs) -> HeadInput:
        d_words = [grad(g, x) for g, x in zip(dXt.args[0], X.words)]
        d_queries = None
        if X.queries is not None:
            d_queries = [grad(g, q) for g, q in zip(dXt.kwargs["queries"], X.queries)]
        return HeadInput(d_words, X.spans, d_queries)

    kwargs = {"spans": spans, "queries": queries, "all_layers": is_train}
    return ArgsKwargs(args=(words,), kwargs=kwargs), get_dX


def convert_outputs(model: Model, inputs_outputs: Tuple[Any, Any], is_train: bool) -> Tuple[OutT, Callable]:
    """The head returns a tuple of tensors, which thinc's default converter cannot backprop."""
    _, Yt = inputs_outputs
    Y = tuple(torch2xp(t) for t in Yt)

    def get_dYt(dY: OutT) -> ArgsKwargs:
        grads = [xp2torch(d, device=t.device) for d, t in zip(dY, Yt)]
        return ArgsKwargs(args=(list(Yt),), kwargs={"grad_tensors": grads})

    return Y, get_dYt  # type: ignore[return-value]


def serialize_state(module: Any) -> bytes:
    """safetensors, so loading a pipeline never unpickles anything."""
    from safetensors.torch import save

    return save({k: v.contiguous() for k, v in module.state_dict().items()})


def deserialize_state(module: Any, data: bytes, device: Any) -> Any:
    from safetensors.torch import load

    module.load_state_dict(load(data))
    module.to(device)
    return module
