"""PIQN's training loss, in DETR's ``SetCriterion`` shape: per word-level layer, ``match`` assigns
queries to gold entities (indices only, no gradient), one function per loss term reads those
indices, and one loop sums the terms over the layers (PIQN's auxiliary losses).

The terms: class cross-entropy over all queries (unmatched ones learn "None", weighted so that
"None" and matched queries weigh the same in total) and a boundary loss over the matched ones (its
form follows the pointer type, ``boundary_loss``). ``loss_and_gradient`` is what the component
calls: the head's logits in, the loss and its gradient with respect to them out.
"""

from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from thinc.api import torch2xp, xp2torch

from .assignment import assign_queries, fixed_assignment, ordered_assignment
from .settings import LossSettings
from .torch_modules.head import boundary_loss, boundary_probs

# Per window: (query indices, indices into its gold array), one pair per matched query.
Indices = List[Tuple[np.ndarray, np.ndarray]]


def none_class_weight(n_matched: int, n_queries: int) -> float:
    """Weight of the "None" class so that None queries and matched queries weigh the same in
    total. Entity-free batches (no matched query) weigh None normally: the official code's
    formula gives 0/0 (NaN) there."""
    n_none = n_queries - n_matched
    if n_matched == 0 or n_none == 0:
        return 1.0
    return n_matched / n_none


def match(
    left: torch.Tensor,
    right: torch.Tensor,
    classes: torch.Tensor,
    gold: List[np.ndarray],
    weights: LossSettings,
    pointer: str,
) -> Indices:
    """Hungarian one-to-many assignment of one layer's queries to each window's gold slots, on
    the cost −(w_c·P_type + w_b·(P_left + P_right)) of that layer's own predictions.

    left/right (B, M, n) and classes (B, M, C) are logits; gold[b] an int array (G_b, 3) of
    (class id >= 1, left, right) with inclusive word indices."""
    with torch.no_grad():
        p_class = torch.softmax(classes.float(), -1).cpu().numpy()
        p_left = boundary_probs(left.float(), pointer).cpu().numpy()
        p_right = boundary_probs(right.float(), pointer).cpu().numpy()
    return [
        assign_queries(
            p_class[b],
            p_left[b],
            p_right[b],
            window_gold,
            weights.n_slots,
            weights.match_class_weight,
            weights.match_boundary_weight,
        )
        for b, window_gold in enumerate(gold)
    ]


def static_match(gold: List[np.ndarray], n_slots: int, n_queries: int) -> Indices:
    """The static assignment (``ordered_assignment``): queries in index order take the entities
    in text order, one draw per window shared by all layers."""
    # Seeded from numpy's global state, which spaCy's fix_random_seed sets.
    rng = np.random.default_rng(np.random.randint(2**31))
    return [ordered_assignment(window_gold, n_slots, n_queries, rng) for window_gold in gold]


def _flat(indices: Indices, gold: List[np.ndarray], device: torch.device) -> Tuple[torch.Tensor, ...]:
    """Window, query and target rows (class, left, right) of every matched query, as tensors."""
    rows = [(np.full(len(q), b), q, gold[b][g]) for b, (q, g) in enumerate(indices) if len(q)]
    if not rows:
        empty = torch.zeros((0,), dtype=torch.long, device=device)
        return empty, empty, torch.zeros((0, 3), dtype=torch.long, device=device)
    b_idx, q_idx, target = (torch.as_tensor(np.concatenate(parts), device=device) for parts in zip(*rows))
    return b_idx, q_idx, target


def loss_classes(
    classes: torch.Tensor,
    indices: Indices,
    gold: List[np.ndarray],
    label_smoothing: float = 0.0,
    keep: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Weighted mean cross-entropy of every query's class (B, M, C logits): matched queries
    target their gold type, the others "None" (class 0), weighted by ``none_class_weight``;
    ``label_smoothing`` of the target spread uniformly over the classes. ``keep`` (one per
    matched query, in ``indices``' order): the share of its target on its type, the rest on "None".

    The weight is a query's (its row's), not a class's inside the smoothed target: torch's
    ``weight`` with ``label_smoothing`` weighs each class's share of every target, which trains a
    None query towards P(None) = w·(1−ε+ε/C) / (w·(1−ε+ε/C) + (C−1)·ε/C), 0.64 at w = 0.41,
    ε = 0.2, C = 13, and lower in batches with fewer entities."""
    batch, n_queries, n_classes = classes.shape
    b_idx, q_idx, target = _flat(indices, gold, classes.device)
    class_target = torch.zeros((batch, n_queries), dtype=torch.long, device=classes.device)
    class_target[b_idx, q_idx] = target[:, 0]
    class_target = class_target.reshape(-1)
    # Class indices, or with ``keep`` distributions (torch smooths either the same way).
    goal: torch.Tensor = class_target
    if keep is not None:
        goal = F.one_hot(class_target, n_classes).float()
        rows = b_idx * n_queries + q_idx
        goal[rows, target[:, 0]] = keep
        goal[rows, 0] = 1.0 - keep
    row_loss = F.cross_entropy(
        classes.reshape(-1, n_classes).float(), goal, reduction="none", label_smoothing=label_smoothing
    )
    row_weight = torch.ones_like(row_loss)
    row_weight[class_target == 0] = none_class_weight(len(b_idx), batch * n_queries)
    return (row_weight * row_loss).sum() / row_weight.sum()


def span_iou(left: torch.Tensor, right: torch.Tensor, indices: Indices, gold: List[np.ndarray]) -> torch.Tensor:
    """Word IoU (no gradient) of each matched query's argmax span (left/right (B, M, n) logits) with
    its gold entity, in ``indices``' order; 0 where the argmax left boundary lies after the right one."""
    b_idx, q_idx, target = _flat(indices, gold, left.device)
    with torch.no_grad():
        pred_left, pred_right = left[b_idx, q_idx].argmax(-1), right[b_idx, q_idx].argmax(-1)
        gold_left, gold_right = target[:, 1], target[:, 2]
        inter = (torch.minimum(pred_right, gold_right) - torch.maximum(pred_left, gold_left) + 1).clamp(min=0)
        # Where the spans overlap their hull is their union; elsewhere the intersection is 0.
        hull = torch.maximum(pred_right, gold_right) - torch.minimum(pred_left, gold_left) + 1
        iou = inter.float() / hull.float()
        return torch.where(pred_left <= pred_right, iou, torch.zeros_like(iou))


def loss_boundaries(
    left: torch.Tensor,
    right: torch.Tensor,
    indices: Indices,
    gold: List[np.ndarray],
    word_mask: torch.Tensor,
    pointer: str,
) -> torch.Tensor:
    """Boundary loss of the matched queries (left/right (B, M, n) logits), a mean over them."""
    b_idx, q_idx, target = _flat(indices, gold, left.device)
    if not len(b_idx):
        return left.new_zeros(())
    mask = word_mask[b_idx]
    total = sum(
        boundary_loss(logits[b_idx, q_idx], target[:, column], mask, pointer)
        for logits, column in ((left, 1), (right, 2))
    )
    return total / len(b_idx)


def loss_tags(tags: torch.Tensor, gold: List[np.ndarray], word_mask: torch.Tensor) -> torch.Tensor:
    """Mean over the real words of the summed binary cross-entropy of a word tagger's logits
    (B, n, labels): a word's target is 1 for each label of a gold entity that covers it."""
    _, n_words, n_labels = tags.shape
    rows = [(np.full(len(g), b), g) for b, g in enumerate(gold) if len(g)]
    target = tags.new_zeros(tags.shape, dtype=torch.float32)
    if rows:
        b_idx, spans = (torch.as_tensor(np.concatenate(parts), device=tags.device) for parts in zip(*rows))
        positions = torch.arange(n_words, device=tags.device)
        covers = (positions >= spans[:, 1:2]) & (positions <= spans[:, 2:3])  # (entities, n)
        labels = F.one_hot(spans[:, 0] - 1, n_labels).bool()  # (entities, labels)
        per_entity = (covers[:, :, None] & labels[:, None, :]).float()
        target = target.index_add(0, b_idx, per_entity).clamp(max=1.0)
    bce = F.binary_cross_entropy_with_logits(tags.float(), target, reduction="none").sum(-1)
    return (bce * word_mask).sum() / word_mask.sum().clamp(min=1)


def piqn_loss(
    left: torch.Tensor,
    right: torch.Tensor,
    classes: torch.Tensor,
    lengths: Sequence[int],
    gold: List[np.ndarray],
    weights: LossSettings,
    pointer: str = "softmax",
    ordered: bool = False,
    tags: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Sum over layers of w_c · class CE + w_b · boundary loss, plus w_t · the word tagger's loss
    when ``tags`` (its logits (1, B, n, labels)) are given.

    left/right (L, B, M, n) and classes (L, B, M, C) are logits; lengths the real word count of each
    window; gold[b] an int array (G_b, 3) of (class id >= 1, left, right), inclusive word indices.
    ``ordered``: the warm-up's static assignment instead of Hungarian matching on each layer;
    ``weights.static_assignment``: the paper's static assignment on every update."""
    n_layers, _, n_queries, n_words = left.shape
    device = left.device
    word_mask = torch.arange(n_words, device=device)[None, :] < torch.as_tensor(lengths, device=device)[:, None]
    static = None
    if weights.static_assignment:
        static = [fixed_assignment(window_gold, weights.n_slots, n_queries) for window_gold in gold]
    elif ordered:
        static = static_match(gold, weights.n_slots, n_queries)
    total = left.new_zeros(())
    if tags is not None:
        total = total + weights.loss_tag_weight * loss_tags(tags[0], gold, word_mask)
    for layer in range(n_layers):
        indices = (
            static if static is not None else match(left[layer], right[layer], classes[layer], gold, weights, pointer)
        )
        keep = None
        if weights.iou_class_target:
            keep = 1.0 - weights.iou_class_target * (1.0 - span_iou(left[layer], right[layer], indices, gold))
        class_loss = loss_classes(classes[layer], indices, gold, weights.label_smoothing, keep)
        total = total + weights.loss_class_weight * class_loss
        total = total + weights.loss_boundary_weight * loss_boundaries(
            left[layer], right[layer], indices, gold, word_mask, pointer
        )
    return total


def loss_and_gradient(
    scores: Any, gold: List[np.ndarray], weights: LossSettings, pointer: str, ordered: bool = False
) -> Tuple[float, Tuple[Any, ...]]:
    """The loss of a ``PIQNOutput``'s logits and its gradient (left, right, classes and any tags) as
    arrays of the same shapes; pointer logits get zeros where nothing reached them (an entity-free batch)."""
    leaves = [xp2torch(a, requires_grad=True) for a in scores.logits()]
    tags = leaves[3] if len(leaves) > 3 else None
    loss = piqn_loss(*leaves[:3], scores.lengths, gold, weights, pointer, ordered, tags)
    loss.backward()
    grads = tuple(torch2xp(t.grad if t.grad is not None else torch.zeros_like(t)) for t in leaves)
    return float(loss.detach()), grads
