"""thinc glue for the PyTorch PIQN head: lazy construction, converters, safetensors state."""

import contextlib
import os
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import numpy
from thinc.api import ArgsKwargs, Model, Optimizer, PyTorchGradScaler, PyTorchShim, torch2xp, xp2torch
from thinc.layers.pytorchwrapper import forward as pytorch_forward
from thinc.types import Floats2d, Floats3d, Floats4d

from ..errors import Errors
from ..settings import HeadSettings

# Word vectors per window; with ``encoder_queries``, (word vectors, query states) per window.
InT = Union[List[Floats2d], List[Tuple[Floats2d, Floats2d]]]
OutT = Tuple[Floats4d, Floats4d, Floats4d, Floats3d]


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

    With ``encoder_queries`` the input is (word vectors, query states) per window, from a
    query-carrying encoder of width nI: its query states (projected from nI to the head's
    width) start the word-level layers instead of the head's learned query content.

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


def scale_learning_rate(optimizer: Optimizer, scale_of: Callable[[str], float]) -> Callable:
    """``optimizer`` as a PyTorchShim calls it, with the learning rate of each parameter
    multiplied by ``scale_of(its name)``: thinc has one rate for a whole pipeline, while a
    freshly initialized head next to a pretrained transformer wants a larger one."""

    def update(key: Tuple[int, str], weights: Any, gradient: Any, *, lr_scale: float = 1.0) -> Any:
        return optimizer(key, weights, gradient, lr_scale=lr_scale * scale_of(key[1]))

    return update


class ScaledPyTorchShim(PyTorchShim):
    """A PyTorchShim whose parameters all learn at ``lr_scale`` × the optimizer's rate, and
    which takes the optimizer's weight averages (``use_averages = true``) when spaCy asks."""

    def __init__(self, *args: Any, lr_scale: float = 1.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lr_scale = lr_scale

    @contextlib.contextmanager
    def use_params(self, params: Dict[Any, Any]) -> Iterator[None]:
        """thinc's optimizer keys its averages by (shim id, parameter name), while
        PyTorchShim.use_params only looks for "pytorch_<id>_<name>" strings, so averages never
        reached a PyTorch model; this reads both."""
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
        if self.lr_scale != 1.0:
            optimizer = scale_learning_rate(optimizer, lambda name: self.lr_scale)  # type: ignore[assignment]
        super().finish_update(optimizer)


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
    encoder_queries = attrs["encoder_queries"]
    if X is not None and not model.has_dim("nI"):
        words = X[0][0] if encoder_queries else X[0]
        model.set_dim("nI", words.shape[1])
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
    convert = convert_inputs_with_queries if encoder_queries else convert_inputs
    model._layers = [
        Model(
            "pytorch",
            pytorch_forward,
            attrs={"convert_inputs": convert, "convert_outputs": convert_outputs},
            shims=[shim],
            dims={"nI": None, "nO": None},
        )
    ]


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    """``attrs["denoise"]``, set by the PIQN model for one training forward: per window an int
    array (D, 3) of noised gold entities that enter as denoising queries after the M others."""
    pytorch = model.layers[0]
    if is_train and model.attrs.get("denoise") is not None:
        pytorch.attrs["denoise"] = model.attrs["denoise"]
    try:
        return pytorch(X, is_train)
    finally:
        pytorch.attrs.pop("denoise", None)


def convert_inputs(model: Model, X: InT, is_train: bool) -> Tuple[ArgsKwargs, Callable]:
    """One torch leaf per window; training asks the head for every layer (auxiliary losses)."""
    Xt = [xp2torch(x, requires_grad=is_train) for x in X]

    def get_dX(dXt: ArgsKwargs) -> List[Floats2d]:
        return [torch2xp(g) if g is not None else model.ops.alloc2f(*x.shape) for g, x in zip(dXt.args[0], X)]

    return ArgsKwargs(args=(Xt,), kwargs={"all_layers": is_train, **denoise_kwargs(model)}), get_dX


def denoise_kwargs(model: Model) -> Dict[str, Any]:
    """The head's ``denoise`` argument, where this forward has denoising queries: the windows'
    (D_i, 3) arrays padded into one (B, max D_i, 3) tensor (class 0 marks padding)."""
    denoise = model.attrs.get("denoise")
    if denoise is None:
        return {}
    import torch

    padded = numpy.zeros((len(denoise), max((len(d) for d in denoise), default=0), 3), dtype=numpy.int64)
    for i, rows in enumerate(denoise):
        padded[i, : len(rows)] = rows
    return {"denoise": torch.as_tensor(padded)}


def convert_inputs_with_queries(model: Model, X: InT, is_train: bool) -> Tuple[ArgsKwargs, Callable]:
    """As ``convert_inputs``, plus one leaf per window for the encoder's query states."""
    Xt = [xp2torch(words, requires_grad=is_train) for words, _ in X]
    Qt = [xp2torch(queries, requires_grad=is_train) for _, queries in X]

    def grad(g: Any, x: Floats2d) -> Floats2d:
        return torch2xp(g) if g is not None else model.ops.alloc2f(*x.shape)

    def get_dX(dXt: ArgsKwargs) -> List[Tuple[Floats2d, Floats2d]]:
        grads = zip(dXt.args[0], dXt.kwargs["queries"], X)
        return [(grad(g_w, words), grad(g_q, queries)) for g_w, g_q, (words, queries) in grads]

    kwargs = {"queries": Qt, "all_layers": is_train, **denoise_kwargs(model)}
    return ArgsKwargs(args=(Xt,), kwargs=kwargs), get_dX


def convert_outputs(model: Model, inputs_outputs: Tuple[Any, Any], is_train: bool) -> Tuple[OutT, Callable]:
    """The head returns a tuple of tensors, which thinc's default converter cannot backprop."""
    _, Yt = inputs_outputs
    Y = tuple(torch2xp(t) for t in Yt)

    def get_dYt(dY: OutT) -> ArgsKwargs:
        # Outputs without a gradient (None, or an empty dense block) take no part in backward.
        pairs = [(t, xp2torch(d, device=t.device)) for d, t in zip(dY, Yt) if d is not None and t.numel()]
        return ArgsKwargs(args=([t for t, _ in pairs],), kwargs={"grad_tensors": [g for _, g in pairs]})

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
