"""A spaCy training logger for bench/run_bench.py: the console table, plus wall time and a time budget.

spaCy's ``spacy.ConsoleLogger.v1`` prints each evaluation but not *when* it happened, and ``spacy train`` has a
step budget (``max_steps``) but no time budget. This logger wraps the console logger (same table on stdout) and

* appends one JSON line per evaluation to ``path``: step, epoch, seconds since the training loop started,
  the weighted score, every numeric dev score and the losses, for F1-over-time plots;
* stops training at the first step after ``max_wall_s`` seconds of the training loop (wall time, or the
  process's CPU time with ``clock = "cpu"``, which other load on the machine does not shrink), the way Ctrl-C does:
  spaCy's ``train`` saves ``model-last`` in its ``finally`` block and keeps the ``model-best`` of the last
  improving evaluation. It raises from ``log_step``, which spaCy calls only after a finished update and any
  checkpoint save, so no checkpoint is ever half-written. A last line ``{"event": "wall_limit", ...}`` records it.

Load it with ``spacy train ... --code bench/bench_logger.py`` and

    [training.logger]
    @loggers = "spacy-piqn-bench.TimedConsoleLogger.v1"
    path = "train_log.jsonl"
    max_wall_s = 240
    clock = "cpu"
    progress_bar = false
"""

import json
import numbers
import time
from pathlib import Path
from typing import IO, Any, Callable, Dict, Optional, Tuple

from spacy.language import Language
from spacy.util import registry


class WallClockLimit(KeyboardInterrupt):
    """Raised by the logger when the time budget is spent.

    A KeyboardInterrupt, so that ``spacy.training.loop.train`` treats it like Ctrl-C (skips its "Aborting"
    handler, still saves model-last) and ``spacy train`` exits non-zero with this message in its log.
    """


def numbers_only(values: Dict[str, Any]) -> Dict[str, float]:
    """The numeric entries as plain floats (losses can be numpy scalars; per-type scores are dicts)."""
    return {
        key: float(value)
        for key, value in values.items()
        if isinstance(value, numbers.Real) and not isinstance(value, bool)
    }


@registry.loggers("spacy-piqn-bench.TimedConsoleLogger.v1")
def timed_console_logger(
    path: str, max_wall_s: Optional[float] = None, progress_bar: bool = False, clock: str = "wall"
) -> Callable[[Language, IO, IO], Tuple[Callable[[Optional[Dict[str, Any]]], None], Callable[[], None]]]:
    """spacy.ConsoleLogger.v1 plus a JSONL line per evaluation and an optional time budget.

    path (str): the JSONL file to write (truncated when training starts).
    max_wall_s (Optional[float]): stop at the first step after this many seconds of the training loop
        (initialization excluded); null: no time budget.
    clock (str): "wall" counts wall time, "cpu" the CPU time of this process (all its threads), so that a
        1-thread training gets the same budget on a busy machine as on an idle one. Rows record both.
    progress_bar (bool): passed to spacy.ConsoleLogger.v1.
    """
    if clock not in ("wall", "cpu"):
        raise ValueError(f"clock must be 'wall' or 'cpu', not {clock!r}")
    console = registry.get("loggers", "spacy.ConsoleLogger.v1")(progress_bar=progress_bar)
    now = time.process_time if clock == "cpu" else time.perf_counter

    def setup(nlp: Language, stdout: IO, stderr: IO):
        log_console, finalize_console = console(nlp, stdout, stderr)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        out = open(path, "w", encoding="utf8")
        start = now()
        wall_start = time.perf_counter()
        # log_step is called once per update, with info only after an evaluation.
        state = {"steps": 0}

        def log_step(info: Optional[Dict[str, Any]]) -> None:
            log_console(info)
            state["steps"] += 1
            elapsed = now() - start
            wall = time.perf_counter() - wall_start
            if info is not None:
                row = {
                    "step": info["step"],
                    "epoch": info["epoch"],
                    "wall_s": round(wall, 3),
                    "budget_s": round(elapsed, 3),
                    "score": float(info["score"]),
                    "scores": numbers_only(info.get("other_scores") or {}),
                    "losses": numbers_only(info["losses"]),
                    "words": info["words"],
                }
                out.write(json.dumps(row) + "\n")
                out.flush()
            if max_wall_s is not None and elapsed >= max_wall_s:
                stdout.write(
                    f"Time budget of {max_wall_s:g}s ({clock}) spent after {state['steps']} steps ({elapsed:.1f}s): "
                    "stopping; spaCy saves model-last, model-best is the best evaluation so far.\n"
                )
                stdout.flush()
                out.write(
                    json.dumps(
                        {
                            "event": "wall_limit",
                            "clock": clock,
                            "steps": state["steps"],
                            "budget_s": round(elapsed, 3),
                            "wall_s": round(wall, 3),
                        }
                    )
                    + "\n"
                )
                out.flush()
                raise WallClockLimit(f"time budget of {max_wall_s:g}s spent after {state['steps']} steps")

        def finalize() -> None:
            finalize_console()
            out.close()

        return log_step, finalize

    return setup
