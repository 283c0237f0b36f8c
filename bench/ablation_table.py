"""Dev F per row and seed at chosen updates, from `switch_ablation.sh` runs or from their stored curves.

    python bench/ablation_table.py RUNS_DIR [--steps 100,250,500,1000] [--append CURVES.jsonl --machine TEXT]
    python bench/ablation_table.py bench/switch_ablation_h100.jsonl [--commit bf7e00b]

A runs directory holds one `run_bench.py run` per row and seed (NAME = ROW_sSEED); its curve is spaCy's own dev
evaluation at every `eval_frequency` updates (`train_log.jsonl`). `--append` stores the curves in the format of
`bench/switch_ablation_h100.jsonl` ([update, F in %, seconds] per evaluation), so the table can be printed again
without the runs. Prints a markdown table: one line per row, "seed 0 / seed 1 / ..." per update ("–": not reached).
Where a run finished (RUNS_DIR/NAME.jsonl, the harness's result), a last column gives the dev F of the model it kept
(model-best, scored by `run_bench.py infer`) and the updates it made: for runs stopped by the harness's wall limit
(`--mode full`: 20 minutes), that is the F at the budget.
"""

import argparse
import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional

from run_bench import read_train_log

RUN_NAME = re.compile(r"^(?P<row>.+)_s(?P<seed>\d+)$")


def curves_from_runs(runs: Path, machine: Optional[str]) -> List[Dict[str, Any]]:
    """One record per run directory named ROW_sSEED: its dev F curve and where it ran."""
    records = []
    for run_dir in sorted(p for p in runs.iterdir() if p.is_dir()):
        match = RUN_NAME.match(run_dir.name)
        logs = sorted(run_dir.glob("full/*/*/*/train_log.jsonl"))
        if not match or not logs:
            continue
        system = logs[0].parent.name
        evals, _ = read_train_log(logs[0])
        curve = [[row["step"], round(100 * row["score"], 2), row["wall_s"]] for row in evals if "score" in row]
        header = (runs / f"{run_dir.name}.log").read_text(encoding="utf8").splitlines()[:1]
        commit = re.search(r"commit ([0-9a-f]{7})", header[0]) if header else None
        mtime = datetime.fromtimestamp(logs[0].stat().st_mtime, timezone.utc)
        record = {
            "row": match["row"],
            "seed": int(match["seed"]),
            "system": system,
            "curve": curve,
            "commit": commit[1] if commit else "unknown",
            "machine": machine or (header[0].rsplit("; ", 1)[-1] if header else "unknown"),
            "date": mtime.strftime("%Y-%m-%dT%H:%MZ"),
        }
        result = runs / f"{run_dir.name}.jsonl"
        if result.exists():
            record["final"] = final_result(result)
        records.append(record)
    return records


def final_result(path: Path) -> Dict[str, Any]:
    """What the harness measured on the kept model: dev F in %, updates made, why training stopped."""
    result = json.loads(path.read_text(encoding="utf8").splitlines()[-1])
    return {
        "f": round(100 * result["f"], 2),
        "steps": result["steps"],
        "stopped_by": result["stopped_by"],
        "train_loop_s": result["train_loop_s"],
        "model": result["model"],
    }


def f_at(curve: List[List[float]], step: int) -> Optional[float]:
    """The dev F evaluated at exactly this update, or None when the run did not get there."""
    return next((f for s, f, *_ in curve if s == step), None)


def markdown(records: List[Dict[str, Any]], steps: List[int]) -> str:
    """Rows in the order they first appear, each cell one F per seed."""
    rows: Dict[str, List[Dict[str, Any]]] = {}
    for record in records:
        rows.setdefault(record["row"], []).append(record)
    seeds = sorted({r["seed"] for r in records})
    seed_list = " / ".join(map(str, seeds))
    lines = [
        "| row | " + " | ".join(f"F at {step:,} (seeds {seed_list})" for step in steps) + " |",
        "|---" * (len(steps) + 1) + "|",
    ]
    with_final = any("final" in r for r in records)
    if with_final:
        lines[0] += f" final dev F, updates made (seeds {seed_list}) |"
        lines[1] += "---|"
    for row, runs in rows.items():
        by_seed = {r["seed"]: r["curve"] for r in runs}
        cells = []
        for step in steps:
            values = [f_at(by_seed.get(seed, []), step) for seed in seeds]
            cells.append(" / ".join("–" if v is None else f"{v:.1f}" for v in values))
        if with_final:
            finals = [next((r.get("final") for r in runs if r["seed"] == seed), None) for seed in seeds]
            cells.append(" / ".join("–" if x is None else f"{x['f']:.1f} ({x['steps']:,})" for x in finals))
        lines.append(f"| {row} | {' | '.join(cells)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help="a switch_ablation.sh RUNS_DIR, or a curves .jsonl")
    parser.add_argument("--steps", default="100,250,500,1000", help="comma-separated updates to show")
    parser.add_argument("--commit", help="only the stored curves of this commit (a curves .jsonl)")
    parser.add_argument("--append", type=Path, help="append the runs' curves to this .jsonl")
    parser.add_argument("--machine", help="the machine to record with --append (default: the run log's)")
    args = parser.parse_args()
    if args.source.is_dir():
        records = curves_from_runs(args.source, args.machine)
        if args.append:
            with args.append.open("a", encoding="utf8") as out:
                out.writelines(json.dumps(r) + "\n" for r in records)
    else:
        lines = args.source.read_text(encoding="utf8").splitlines()
        records = [json.loads(line) for line in lines if line.strip()]
        records = [r for r in records if args.commit is None or r["commit"].startswith(args.commit)]
    print(markdown(records, [int(s) for s in args.steps.split(",")]))


if __name__ == "__main__":
    main()
