"""What the PyTorch modules share: length groups, so that a batch never pads every window to its
longest, and a bidirectional LSTM over right-padded windows that needs no packing.

The head and the query-carrying encoder both import from here (and from nowhere else in this folder).
"""

from typing import List

import torch
import torch.nn.functional as F
from torch import nn


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
    packing: each direction runs as a one-way LSTM with that direction's weights, the backward
    one on every window reversed within its length, so padding only ever follows a window's
    words and never reaches them.

    Same outputs and gradients as packing, but a packed sequence sends PyTorch's CPU LSTM to a
    step-by-step loop that autograd records op by op, and a plain one runs fused (oneDNN): 3×
    faster forward + backward at GENIA's window lengths. Padded positions come back as zeros.
    ``torch.lstm`` is the functional op ``nn.LSTM`` itself calls: nothing is swapped into a
    module, so concurrent calls are safe."""
    lengths = lengths.to(padded.device)
    index = reverse_within(lengths, padded.shape[1])
    keep = (index < lengths[:, None])[:, :, None]
    layer_in = padded
    for layer in range(lstm.num_layers):
        outputs = []
        for suffix in ("", "_reverse"):
            x = _gather_rows(layer_in, index) if suffix else layer_in
            weights = _direction_params(lstm, layer, suffix)
            zeros = x.new_zeros((1, x.shape[0], lstm.hidden_size))
            # (input, (h0, c0), weights, has_biases, num_layers, dropout, train, bidirectional, batch_first)
            out, _, _ = torch.lstm(x, (zeros, zeros), weights, lstm.bias, 1, 0.0, lstm.training, False, True)
            outputs.append(_gather_rows(out, index) if suffix else out)
        layer_in = torch.cat(outputs, dim=-1) * keep
        if layer < lstm.num_layers - 1 and lstm.dropout:
            layer_in = F.dropout(layer_in, lstm.dropout, lstm.training)
    return layer_in


def _gather_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return x.gather(1, index[:, :, None].expand(-1, -1, x.shape[-1]))


def _direction_params(lstm: nn.LSTM, layer: int, suffix: str) -> List[torch.Tensor]:
    """One direction's weights of one layer, in ``torch.lstm``'s order."""
    names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh") if lstm.bias else ("weight_ih", "weight_hh")
    return [getattr(lstm, f"{name}_l{layer}{suffix}") for name in names]
