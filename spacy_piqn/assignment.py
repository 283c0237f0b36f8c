"""One-to-many dynamic label assignment (numpy/scipy only).

Each gold entity gets a share of Q slots, and the M queries are matched to the slots with the
Hungarian algorithm on the cost −(w_c·P_type + w_b·(P_left + P_right)). Repeated slots of one
entity are identical columns, so the solver spreads each entity over distinct queries.

``fixed_assignment`` is the paper's static assignment (its "w/o dynamic LA" ablation);
``ordered_assignment`` is a static alternative for the first updates: queries in index order
take the entities in text order, which breaks the symmetry between freshly initialized queries.
"""

from typing import Optional, Tuple

import numpy as np
from scipy.optimize import linear_sum_assignment


def slot_targets(n_gold: int, n_slots: int, n_queries: int) -> np.ndarray:
    """Indices into the gold list, one per assignable slot.

    Q_eff = max(Q, G), so every entity gets at least one slot (the official code truncates gold
    to Q instead). Entities get ⌊Q/G⌋ or ⌈Q/G⌉ slots, the extra ones going to the first
    entities. More gold than queries cannot all be assigned: the first M are kept and the
    caller reports the rest.
    """
    if n_gold == 0:
        return np.zeros((0,), dtype=np.int64)
    n_eff = min(max(n_slots, n_gold), n_queries)
    return np.arange(n_eff, dtype=np.int64) % n_gold


def assignment_cost(
    p_class: np.ndarray,
    p_left: np.ndarray,
    p_right: np.ndarray,
    gold: np.ndarray,
    class_weight: float,
    boundary_weight: float,
) -> np.ndarray:
    """Cost (M, S) of giving query i the slot whose target is gold[s] = (type, left, right)."""
    types, lefts, rights = gold[:, 0], gold[:, 1], gold[:, 2]
    return -(class_weight * p_class[:, types] + boundary_weight * (p_left[:, lefts] + p_right[:, rights]))


def assign_queries(
    p_class: np.ndarray,
    p_left: np.ndarray,
    p_right: np.ndarray,
    gold: np.ndarray,
    n_slots: int,
    class_weight: float = 1.0,
    boundary_weight: float = 1.0,
) -> Tuple[np.ndarray, np.ndarray]:
    """Match one window's queries to its gold entities.

    p_class (M, C), p_left/p_right (M, n) are probabilities; gold (G, 3) holds (type, left,
    right) with inclusive word indices. Returns (query indices, gold indices), one pair per
    assigned slot; queries not returned learn "None".
    """
    slots = slot_targets(len(gold), n_slots, p_class.shape[0])
    if len(slots) == 0:
        empty = np.zeros((0,), dtype=np.int64)
        return empty, empty
    cost = assignment_cost(p_class, p_left, p_right, gold[slots], class_weight, boundary_weight)
    rows, cols = linear_sum_assignment(cost)
    return rows.astype(np.int64), slots[cols]


def fixed_assignment(gold: np.ndarray, n_slots: int, n_queries: int) -> Tuple[np.ndarray, np.ndarray]:
    """The paper's static assignment: query i takes slot i, the slots being the entities in text
    order (by left, then right boundary) repeated as ``slot_targets`` gives them; queries past the
    slots learn "None". The same queries every update, whatever they predict (the official code's
    ``order`` matcher). Returns (query indices, gold indices) like ``assign_queries``."""
    slots = slot_targets(len(gold), n_slots, n_queries)
    if len(slots) == 0:
        empty = np.zeros((0,), dtype=np.int64)
        return empty, empty
    by_position = np.lexsort((gold[:, 2], gold[:, 1]))
    return np.arange(len(slots), dtype=np.int64), by_position[slots].astype(np.int64)


def ordered_assignment(
    gold: np.ndarray, n_slots: int, n_queries: int, rng: Optional[np.random.Generator] = None
) -> Tuple[np.ndarray, np.ndarray]:
    """Static one-to-many assignment: as many queries as ``slot_targets`` gives slots, drawn at
    random and taken in index order, go in contiguous blocks to the entities in text order
    (by left, then right boundary). Query i thus learns "the entity at rank ~i/M of the
    sentence". Returns (query indices, gold indices) like ``assign_queries``.

    Fresh queries are interchangeable, and Hungarian matching on their near-identical
    predictions lets them collapse onto one entity per window (seen on CoNLL-03, see
    bench/RESULTS.md); a fixed order breaks the tie.
    """
    n_eff = len(slot_targets(len(gold), n_slots, n_queries))
    if n_eff == 0:
        empty = np.zeros((0,), dtype=np.int64)
        return empty, empty
    rng = rng if rng is not None else np.random.default_rng()
    queries = np.sort(rng.choice(n_queries, size=n_eff, replace=False)).astype(np.int64)
    by_position = np.lexsort((gold[:, 2], gold[:, 1]))
    targets = by_position[(np.arange(n_eff) * len(gold)) // n_eff]
    return queries, targets.astype(np.int64)
