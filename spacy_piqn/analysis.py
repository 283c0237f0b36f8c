"""What each instance query learned: where its entities start, how long they are, which types.

PIQN's claim is that its queries learn *where* and *what* to look for (paper, Fig. 3-4). This runs a
trained pipeline over docs, keeps every query's own prediction per window (before any filtering),
marks the ones that survive decoding, and summarises them per query. ``plot_queries`` draws the
summary (matplotlib, the optional ``analysis`` extra). Used by ``python -m spacy_piqn analyze``.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Sequence

import numpy as np
from spacy.language import Language
from spacy.tokens import Doc

from .decoding import keep_candidates, query_spans, window_boundaries

POSITION_BINS = 10  # relative left-boundary position in the window, [0, 1) in tenths
MAX_LENGTH = 10  # span lengths 1..9 and "10 or more"


@dataclass
class QueryPrediction:
    """One query's entity in one window (only queries that predict an entity are recorded)."""

    query: int
    label: int  # class id, >= 1
    relative_start: float  # start / window length, in [0, 1)
    length: int  # words
    score: float
    kept: bool  # survived the component's decoding (not a duplicate or crossing a better span)


def annotate_before(nlp: Language, docs: Sequence[Doc], pipe_name: str) -> List[Doc]:
    """``docs`` run through the components before ``pipe_name`` (its encoder, if it listens to one), so
    that the component itself can then predict on them once and decode many times."""
    before = nlp.pipe_names[: nlp.pipe_names.index(pipe_name)]
    with nlp.select_pipes(enable=before):
        return list(nlp.pipe(docs))


def query_predictions(
    nlp: Language, docs: Sequence[Doc], pipe_name: str = "piqn", batch_size: int = 256
) -> List[QueryPrediction]:
    """Every query's prediction on ``docs`` (with the component's own thresholds and decoding)."""
    pipe = nlp.get_pipe(pipe_name)
    docs = annotate_before(nlp, docs, pipe_name)
    records: List[QueryPrediction] = []
    for i in range(0, len(docs), batch_size):
        batch = docs[i : i + batch_size]
        scores = pipe.predict(batch)
        p_class, p_left, p_right = pipe.probabilities(scores)
        lengths = [window.end - window.start for window in scores.windows]
        checked = window_boundaries(
            p_class, p_left, p_right, lengths, pipe.tag_probabilities(scores), pipe.cfg["tagger_boundary_weight"]
        )
        # Per doc: the candidates of all its windows, with the query and window length of each.
        per_doc: List[List[tuple]] = [[] for _ in batch]
        for b, window in enumerate(scores.windows):
            n = window.end - window.start
            valid, starts, ends, types, span_scores = query_spans(
                p_class[b],
                p_left[b, :, :n],
                p_right[b, :, :n],
                pipe.cfg["class_threshold"],
                pipe.cfg["boundary_threshold"],
                None if checked is None else (checked[0][b], checked[1][b]),
            )
            for q in np.flatnonzero(valid):
                per_doc[window.doc].append(
                    (
                        q,
                        types[q],
                        starts[q] / n,
                        ends[q] - starts[q],
                        span_scores[q],
                        starts[q] + window.start,
                        ends[q] + window.start,
                    )
                )
        for found in per_doc:
            if not found:
                continue
            arr = np.asarray(found, dtype=np.float64)
            starts, ends, types = arr[:, 5].astype(int), arr[:, 6].astype(int), arr[:, 1].astype(int)
            kept = set(keep_candidates(starts, ends, types, arr[:, 4], pipe.cfg).tolist())
            for j, (q, label, rel, length, score, _, _) in enumerate(found):
                records.append(QueryPrediction(int(q), int(label), float(rel), int(length), float(score), j in kept))
    return records


def summarize_queries(records: Sequence[QueryPrediction], n_queries: int, labels: Sequence[str]) -> Dict[str, Any]:
    """Per query: how many entities it predicts and keeps, where they start (relative position
    histogram), how long they are (1..9, 10+) and which types (counts per label)."""
    by_query: Dict[int, List[QueryPrediction]] = {q: [] for q in range(n_queries)}
    for record in records:
        by_query[record.query].append(record)
    queries = []
    for q, mine in by_query.items():
        starts = np.array([r.relative_start for r in mine])
        lengths = np.array([min(r.length, MAX_LENGTH) for r in mine], dtype=int)
        position = (
            np.histogram(starts, bins=POSITION_BINS, range=(0.0, 1.0))[0] if mine else np.zeros(POSITION_BINS, int)
        )
        kept = sum(r.kept for r in mine)
        queries.append(
            {
                "query": q,
                "predicted": len(mine),
                "kept": kept,
                "kept_share": kept / len(mine) if mine else None,
                "mean_relative_start": float(starts.mean()) if mine else None,
                "mean_length": float(np.mean([r.length for r in mine])) if mine else None,
                "relative_start_histogram": position.tolist(),
                "length_histogram": np.bincount(lengths, minlength=MAX_LENGTH + 1)[1:].tolist(),
                "types": {label: sum(r.label == i + 1 for r in mine) for i, label in enumerate(labels)},
            }
        )
    return {
        "n_queries": n_queries,
        "labels": list(labels),
        "position_bins": POSITION_BINS,
        "length_bins": [str(n) for n in range(1, MAX_LENGTH)] + [f"{MAX_LENGTH}+"],
        "predicted": len(records),
        "kept": sum(r.kept for r in records),
        "queries": queries,
    }


def plot_queries(summary: Dict[str, Any], out_dir: Path) -> List[Path]:
    """Three heatmaps (rows: queries, each row normalised to its own predictions): relative start
    position, type, span length. Returns the PNG paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary["queries"]
    panels = (
        (
            "queries_position.png",
            "relative start of the entity in the window",
            [f"{i / POSITION_BINS:.1f}" for i in range(POSITION_BINS)],
            [r["relative_start_histogram"] for r in rows],
        ),
        (
            "queries_type.png",
            "entity type",
            summary["labels"],
            [[r["types"][label] for label in summary["labels"]] for r in rows],
        ),
        ("queries_length.png", "span length (words)", summary["length_bins"], [r["length_histogram"] for r in rows]),
    )
    paths = []
    for filename, xlabel, ticks, counts in panels:
        matrix = np.asarray(counts, dtype=float)
        totals = matrix.sum(1, keepdims=True)
        share = np.divide(matrix, totals, out=np.zeros_like(matrix), where=totals > 0)
        fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(ticks) + 2), max(3.0, 0.18 * len(rows) + 1.5)))
        image = ax.imshow(share, aspect="auto", cmap="viridis", vmin=0.0, vmax=1.0)
        slanted = len(ticks) > 6 or max(len(t) for t in ticks) > 4
        ax.set_xticks(range(len(ticks)), ticks, rotation=45 if slanted else 0, ha="right" if slanted else "center")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("query")
        ax.set_title(f"each row: share of that query's entities ({summary['predicted']:,} in all)", fontsize=10)
        fig.colorbar(image, ax=ax)
        fig.tight_layout()
        path = out_dir / filename
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths
