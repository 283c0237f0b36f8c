"""Learning-rate schedules (``[training.optimizer.learn_rate]``)."""

from typing import Iterator

from spacy.util import registry

from .errors import Errors


@registry.schedules("spacy-piqn.warmup_linear.v1")
def warmup_linear_to(
    initial_rate: float, warmup_steps: int, total_steps: int, final_rate: float = 0.0
) -> Iterator[float]:
    """thinc's ``warmup_linear.v1`` with an end point: a linear warm-up to ``initial_rate`` over
    ``warmup_steps``, then a straight line down to ``final_rate`` at ``total_steps``, constant after.

    With ``total_steps = ${training.max_steps}`` the rate ends at ``final_rate`` whatever the run's
    length. Why not 0: on GENIA at the 20-minute CPU budget, decaying to 0 by the last update cost
    0.6-1.0 F, and ending at half the peak gained 0.07-0.56 on each of four seeds (bench/RESULTS.md).
    ``final_rate = 0`` is ``warmup_linear.v1``.
    """
    if warmup_steps < 0 or total_steps < 0 or not 0 <= final_rate <= initial_rate:
        raise ValueError(
            Errors.E047.format(
                warmup_steps=warmup_steps, total_steps=total_steps, initial_rate=initial_rate, final_rate=final_rate
            )
        )
    # A run shorter than its warm-up (e.g. a smoke test) goes straight to final_rate after it.
    span = total_steps - warmup_steps
    step = 0
    while True:
        if step < warmup_steps:
            yield initial_rate * step / warmup_steps
        else:
            done = min(1.0, (step - warmup_steps) / span) if span > 0 else 1.0
            yield initial_rate + (final_rate - initial_rate) * done
        step += 1
