"""PIQN's training loss from a label assignment and the head's logits (torch).

Per word-level layer: the queries are matched to gold slots on that layer's own predictions
(no gradient), then class cross-entropy over all queries (unmatched ones target "None") and a
boundary loss over the matched ones: cross-entropy over the words (softmax pointer) or BCE per
word (sigmoid pointer, PIQN's). Layers are summed (PIQN's auxiliary losses).
"""

from typing import List, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .assignment import assign_queries, ordered_assignment
from .settings import LossSettings
from .torch_modules.head import PAD_LOGIT, boundary_probs


def none_class_weight(n_matched: int, n_queries: int) -> float:
    """Weight of the "None" class so that None queries and matched queries weigh the same in
    total. Entity-free batches (no matched query) weigh None normally: the official code's
    formula gives 0/0 (NaN) there."""
    n_none = n_queries - n_matched
    if n_matched == 0 or n_none == 0:
        return 1.0
    return n_matched / n_none


def piqn_loss(
    left: torch.Tensor,
    right: torch.Tensor,
    classes: torch.Tensor,
    lengths: Sequence[int],
    gold: List[np.ndarray],
    weights: LossSettings,
    ordered: bool = False,
    pointer: str = "softmax",
) -> torch.Tensor:
    """Sum over layers of class CE + boundary loss.

    left/right (L, B, M, n) and classes (L, B, M, C) are logits; lengths the real word count
    of each window; gold[b] an int array (G_b, 3) of (class id >= 1, left, right) with
    inclusive word indices. ``ordered``: the static ``ordered_assignment`` (one draw per window,
    shared by all layers) instead of Hungarian matching. ``pointer``: "softmax" trains each
    matched query's boundaries with cross-entropy over the words, "sigmoid" with binary
    cross-entropy per word (PIQN's); the matching cost reads the same kind of probabilities.
    """
    n_layers, batch, n_queries, n_words = left.shape
    n_classes = classes.shape[-1]
    device = left.device
    word_mask = torch.arange(n_words, device=device)[None, :] < torch.as_tensor(lengths, device=device)[:, None]
    total = left.new_zeros(())
    if ordered:
        # Seeded from numpy's global state, which spaCy's fix_random_seed sets.
        rng = np.random.default_rng(np.random.randint(2**31))
        static = [ordered_assignment(g, weights.n_slots, n_queries, rng) for g in gold]
    else:
        # The matching cost reads probabilities; the static assignment needs none.
        with torch.no_grad():
            p_class = torch.softmax(classes.float(), -1).cpu().numpy()
            p_left = boundary_probs(left.float(), pointer).cpu().numpy()
            p_right = boundary_probs(right.float(), pointer).cpu().numpy()
    for layer in range(n_layers):
        last = layer == n_layers - 1
        n_slots = weights.last_layer_n_slots if last and weights.last_layer_n_slots else weights.n_slots
        rows_b, rows_q, targets = [], [], []
        for b, window_gold in enumerate(gold):
            if len(window_gold) == 0:
                continue
            if ordered:
                queries, slots = static[b]
            else:
                queries, slots = assign_queries(
                    p_class[layer, b],
                    p_left[layer, b],
                    p_right[layer, b],
                    window_gold,
                    n_slots,
                    weights.match_class_weight,
                    weights.match_boundary_weight,
                )
            rows_b.append(np.full(len(queries), b))
            rows_q.append(queries)
            targets.append(window_gold[slots])
        n_matched = sum(len(q) for q in rows_q)
        class_target = torch.zeros((batch, n_queries), dtype=torch.long, device=device)
        class_weights = torch.ones((n_classes,), device=device)
        class_weights[0] = none_class_weight(n_matched, batch * n_queries)
        loss = left.new_zeros(())
        if n_matched:
            b_idx = torch.as_tensor(np.concatenate(rows_b), device=device)
            q_idx = torch.as_tensor(np.concatenate(rows_q), device=device)
            target = torch.as_tensor(np.concatenate(targets), device=device)
            class_target[b_idx, q_idx] = target[:, 0]
            mask = word_mask[b_idx].float()
            boundary = left.new_zeros(())
            for logits, column in ((left, 1), (right, 2)):
                matched = logits[layer, b_idx, q_idx].float()
                if pointer == "softmax":
                    # Padded words take no probability mass (and get no gradient).
                    matched = matched.masked_fill(mask == 0, PAD_LOGIT)
                    boundary = boundary + F.cross_entropy(matched, target[:, column], reduction="sum")
                else:
                    onehot = F.one_hot(target[:, column], n_words).float()
                    bce = F.binary_cross_entropy_with_logits(matched, onehot, reduction="none")
                    boundary = boundary + (bce * mask).sum()
            loss = loss + weights.loss_boundary_weight * boundary / n_matched
        flat_target = class_target.reshape(-1)
        log_p = F.log_softmax(classes[layer].reshape(-1, n_classes).float(), -1)
        soft = F.one_hot(flat_target, n_classes).float()
        if n_matched and weights.iou_class_target:
            keep = 1.0 - weights.iou_class_target * (1.0 - span_iou(left[layer], right[layer], b_idx, q_idx, target))
            rows = b_idx * n_queries + q_idx
            soft[rows, target[:, 0]] = keep
            soft[rows, 0] = 1.0 - keep
        # Weighted mean as F.cross_entropy's with class weights (hard targets give exactly that).
        ce = -(soft * class_weights * log_p).sum() / class_weights[flat_target].sum()
        total = total + loss + weights.loss_class_weight * ce
    return total


def span_iou(
    left: torch.Tensor, right: torch.Tensor, b_idx: torch.Tensor, q_idx: torch.Tensor, target: torch.Tensor
) -> torch.Tensor:
    """Word IoU (no gradient) of each matched query's argmax span with its gold (class, left,
    right); 0 where the predicted left boundary lies after the right one."""
    with torch.no_grad():
        pred_left = left[b_idx, q_idx].argmax(-1)
        pred_right = right[b_idx, q_idx].argmax(-1)
        gold_left, gold_right = target[:, 1], target[:, 2]
        inter = (torch.minimum(pred_right, gold_right) - torch.maximum(pred_left, gold_left) + 1).clamp(min=0)
        union = torch.maximum(pred_right, gold_right) - torch.minimum(pred_left, gold_left) + 1
        iou = inter.float() / union.float()
        return torch.where(pred_left <= pred_right, iou, torch.zeros_like(iou))


def dense_boundary_loss(dense: torch.Tensor, lengths: Sequence[int], gold: List[np.ndarray]) -> torch.Tensor:
    """Binary cross-entropy of the dense boundary head: per real word, whether some gold entity
    starts (channel 0) or ends (channel 1) there; the mean over real words, summed over the two
    channels. Needs no matching, so it trains the words from the first update."""
    batch, n_words, _ = dense.shape
    device = dense.device
    target = torch.zeros((batch, n_words, 2), device=device)
    for b, window_gold in enumerate(gold):
        if len(window_gold):
            rows = torch.as_tensor(window_gold[:, 1:3], device=device, dtype=torch.long)
            target[b, rows[:, 0], 0] = 1.0
            target[b, rows[:, 1], 1] = 1.0
    word_mask = torch.arange(n_words, device=device)[None, :] < torch.as_tensor(lengths, device=device)[:, None]
    bce = F.binary_cross_entropy_with_logits(dense.float(), target, reduction="none").sum(-1)
    return (bce * word_mask).sum() / word_mask.sum().clamp(min=1)


def denoising_loss(
    left: torch.Tensor,
    right: torch.Tensor,
    classes: torch.Tensor,
    lengths: Sequence[int],
    denoise: List[np.ndarray],
    weights: LossSettings,
    pointer: str = "softmax",
) -> torch.Tensor:
    """Sum over layers of the denoising queries' class CE + boundary loss, each a mean over
    the real denoising queries, weighted as the matched queries' losses are.

    left/right (L, B, D, n) and classes (L, B, D, C) are the logits of the D denoising queries
    (padded to the batch's most); denoise[b] the (D_b, 6) array of gold (class, left, right)
    and noised copy that built window b's queries: each must give back its gold entity."""
    n_layers, batch, n_denoise, n_words = left.shape
    device = left.device
    rows_b = np.concatenate([np.full(len(d), b) for b, d in enumerate(denoise)] + [np.zeros(0, int)])
    rows_d = np.concatenate([np.arange(len(d)) for d in denoise] + [np.zeros(0, int)])
    if not len(rows_b):
        return left.new_zeros(())
    b_idx = torch.as_tensor(rows_b, device=device)
    d_idx = torch.as_tensor(rows_d, device=device)
    target = torch.as_tensor(np.concatenate(denoise)[:, :3], device=device)
    word_mask = torch.arange(n_words, device=device)[None, :] < torch.as_tensor(lengths, device=device)[b_idx, None]
    total = left.new_zeros(())
    for layer in range(n_layers):
        boundary = left.new_zeros(())
        for logits, column in ((left, 1), (right, 2)):
            matched = logits[layer, b_idx, d_idx].float()
            if pointer == "softmax":
                matched = matched.masked_fill(~word_mask, PAD_LOGIT)
                boundary = boundary + F.cross_entropy(matched, target[:, column])
            else:
                onehot = F.one_hot(target[:, column], n_words).float()
                bce = F.binary_cross_entropy_with_logits(matched, onehot, reduction="none")
                boundary = boundary + (bce * word_mask).sum() / len(rows_b)
        ce = F.cross_entropy(classes[layer, b_idx, d_idx].float(), target[:, 0])
        total = total + weights.loss_boundary_weight * boundary + weights.loss_class_weight * ce
    return weights.loss_denoising_weight * total
