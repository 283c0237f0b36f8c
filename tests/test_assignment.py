from itertools import permutations

import numpy as np
import pytest

from spacy_piqn.assignment import assign_queries, assignment_cost, fixed_assignment, ordered_assignment, slot_targets


def brute_force_min(cost: np.ndarray) -> float:
    n_rows, n_cols = cost.shape
    return min(sum(cost[r, c] for c, r in enumerate(rows)) for rows in permutations(range(n_rows), n_cols))


@pytest.mark.parametrize("seed", range(6))
def test_assignment_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n_queries, n_classes, n_words = 6, 4, 5
    p_class = rng.dirichlet(np.ones(n_classes), size=n_queries)
    p_left, p_right = rng.random((n_queries, n_words)), rng.random((n_queries, n_words))
    gold = np.array([[1, 0, 1], [2, 2, 4], [3, 3, 3]])
    queries, slots = assign_queries(p_class, p_left, p_right, gold, n_slots=4, class_weight=2.0, boundary_weight=1.5)
    cost = assignment_cost(p_class, p_left, p_right, gold[slot_targets(3, 4, n_queries)], 2.0, 1.5)
    # Slots of one entity are identical columns, so the cost only depends on the entity.
    per_entity = assignment_cost(p_class, p_left, p_right, gold, 2.0, 1.5)
    found = sum(per_entity[q, g] for q, g in zip(queries, slots))
    assert len(set(queries.tolist())) == len(queries) == 4
    assert found == pytest.approx(brute_force_min(cost))
    # The slot each query got names the gold entity it was matched to.
    assert sorted(slots.tolist()) == sorted(slot_targets(3, 4, n_queries).tolist())


def test_one_to_many_shares():
    # Q=7 slots over G=3 entities: 3, 2, 2 (the extra slot goes to the first entity).
    assert np.bincount(slot_targets(3, 7, 60)).tolist() == [3, 2, 2]
    assert np.bincount(slot_targets(4, 8, 60)).tolist() == [2, 2, 2, 2]


def test_more_gold_than_slots_gets_one_slot_each():
    # Q = max(Q, G): no gold entity is dropped because of the slot budget.
    assert np.bincount(slot_targets(10, 4, 60)).tolist() == [1] * 10


def test_capacity_is_the_number_of_queries():
    assert len(slot_targets(10, 4, 6)) == 6
    assert len(slot_targets(0, 30, 60)) == 0


def test_no_gold_assigns_nothing():
    queries, slots = assign_queries(
        np.ones((5, 3)) / 3, np.zeros((5, 4)), np.zeros((5, 4)), np.zeros((0, 3), dtype=int), 30
    )
    assert len(queries) == len(slots) == 0


def test_identical_slots_go_to_distinct_queries():
    p_class = np.full((4, 2), 0.5)
    p_bnd = np.full((4, 3), 0.5)
    queries, slots = assign_queries(p_class, p_bnd, p_bnd, np.array([[1, 0, 2]]), n_slots=3)
    assert len(set(queries.tolist())) == 3 and set(slots.tolist()) == {0}


@pytest.mark.parametrize("n_gold", [1, 2, 5, 30, 70])
def test_ordered_assignment_gives_entities_in_text_order_to_queries_in_index_order(n_gold):
    rng = np.random.default_rng(n_gold)
    starts = rng.permutation(100)[:n_gold]
    gold = np.stack([np.ones(n_gold, dtype=np.int64), starts, starts + 1], axis=1)
    queries, targets = ordered_assignment(gold, n_slots=30, n_queries=60, rng=rng)
    n_eff = min(max(30, n_gold), 60)
    assert len(queries) == len(targets) == n_eff
    assert len(set(queries.tolist())) == n_eff and np.all(np.diff(queries) > 0)
    # Later queries never take an entity that starts earlier.
    assert np.all(np.diff(gold[targets, 1]) >= 0)
    # Every entity gets a query when there are enough of them.
    assert len(set(targets.tolist())) == min(n_gold, 60)


def test_ordered_assignment_without_gold():
    queries, targets = ordered_assignment(np.zeros((0, 3), dtype=np.int64), n_slots=30, n_queries=60)
    assert len(queries) == len(targets) == 0


def test_fixed_assignment_gives_query_i_the_ith_slot_in_text_order():
    """The paper's static assignment: entities sorted by position, repeated to Q slots (e1 e2 e3 e1 e2 ...),
    query i takes slot i; the same whatever the queries predict."""
    gold = np.array([[2, 7, 8], [1, 0, 3], [3, 0, 1]])  # text order: row 2 (0-1), row 1 (0-3), row 0 (7-8)
    queries, targets = fixed_assignment(gold, n_slots=7, n_queries=10)
    assert queries.tolist() == list(range(7))
    assert targets.tolist() == [2, 1, 0, 2, 1, 0, 2]
    # More gold than slots: one each; more than queries: the first M in text order.
    queries, targets = fixed_assignment(gold, n_slots=1, n_queries=2)
    assert queries.tolist() == [0, 1] and targets.tolist() == [2, 1]
    queries, targets = fixed_assignment(np.zeros((0, 3), dtype=np.int64), n_slots=7, n_queries=10)
    assert len(queries) == len(targets) == 0
