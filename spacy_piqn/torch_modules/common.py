"""What the PyTorch modules share: length groups, so that a batch never pads every window to its
longest, and a bidirectional LSTM over right-padded windows that needs no packing.

The head and the query-carrying encoder both import from here (and from nowhere else in this folder).
"""

from typing import Dict, List

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call


def length_groups(lengths: List[int], max_padded_words: int) -> List[List[int]]:
    """Window indices grouped by length, shortest first, so that no group pads to more than
    ``max_padded_words`` (count × its longest window; a longer window goes alone; 0: one group).

    Padding a batch to its longest window wastes most of the head's work on real length spreads:
    in batches of 256 GENIA sentences only 30% of the padded word positions are words."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    if max_padded_words <= 0:
        return [order]
    groups: List[List[int]] = []
    group: List[int] = []
    for i in order:
        if group and (len(group) + 1) * lengths[i] > max_padded_words:
            groups.append(group)
            group = []
        group.append(i)
    groups.append(group)
    return groups


def in_input_order(parts: List[torch.Tensor], groups: List[List[int]], dim: int) -> torch.Tensor:
    """Concatenate per-group outputs along the window dimension ``dim`` and put the windows
    back in input order (the inverse of the ``length_groups`` permutation)."""
    order = torch.tensor([i for group in groups for i in group], device=parts[0].device)
    return torch.cat(parts, dim=dim).index_select(dim, torch.argsort(order))


def reverse_within(lengths: torch.Tensor, n_words: int) -> torch.Tensor:
    """(B, n) gather index that reverses each window's first ``lengths[b]`` positions and leaves its
    padding in place. It is its own inverse, so it also puts reversed outputs back."""
    positions = torch.arange(n_words, device=lengths.device)[None, :]
    return torch.where(positions < lengths[:, None], lengths[:, None] - 1 - positions, positions)


def unpacked_bilstm(lstm: nn.LSTM, padded: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``lstm`` (bidirectional, batch_first) over right-padded windows (B, n, n_in) without
    packing: each direction runs as a one-way LSTM, the backward one on every window reversed
    within its length, so padding only ever follows a window's words and never reaches them.

    Same outputs and gradients as packing, but a packed sequence sends PyTorch's CPU LSTM to a
    step-by-step loop that autograd records op by op, and a plain one runs fused (oneDNN): 2.5×
    faster forward + backward at GENIA's window lengths. Padded positions come back as zeros."""
    n_words = padded.shape[1]
    index = reverse_within(lengths.to(padded.device), n_words)
    keep = (index < lengths.to(padded.device)[:, None])[:, :, None]
    layer_in = padded
    for layer in range(lstm.num_layers):
        outputs = []
        for suffix in ("", "_reverse"):
            flip = bool(suffix)
            x = _gather_rows(layer_in, index) if flip else layer_in
            out = functional_call(_one_way(lstm, layer), _direction_params(lstm, layer, suffix), (x,))[0]
            outputs.append(_gather_rows(out, index) if flip else out)
        layer_in = torch.cat(outputs, dim=-1) * keep
        if layer < lstm.num_layers - 1 and lstm.dropout:
            layer_in = F.dropout(layer_in, lstm.dropout, lstm.training)
    return layer_in


def _gather_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return x.gather(1, index[:, :, None].expand(-1, -1, x.shape[-1]))


def _direction_params(lstm: nn.LSTM, layer: int, suffix: str) -> Dict[str, torch.Tensor]:
    names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh") if lstm.bias else ("weight_ih", "weight_hh")
    return {f"{name}_l0": getattr(lstm, f"{name}_l{layer}{suffix}") for name in names}


# One-way single-layer LSTMs used only as functions (their own weights are never read), keyed
# by shape; kept out of every module so they never reach a state dict.
_ONE_WAY: Dict[tuple, nn.LSTM] = {}


def _one_way(lstm: nn.LSTM, layer: int) -> nn.LSTM:
    n_in = lstm.input_size if layer == 0 else 2 * lstm.hidden_size
    key = (n_in, lstm.hidden_size, lstm.bias)
    if key not in _ONE_WAY:
        _ONE_WAY[key] = nn.LSTM(n_in, lstm.hidden_size, bias=lstm.bias, batch_first=True)
    return _ONE_WAY[key]
