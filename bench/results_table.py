"""Markdown tables of the benchmark results, and the generated parts of bench/RESULTS.md.

    python bench/results_table.py             # print the tables of the current rows
    python bench/results_table.py --all       # also superseded rows, quick mode and tables without a piqn line
    python bench/results_table.py --write     # replace the generated parts of bench/RESULTS.md
    python bench/results_table.py --check     # exit 1 when bench/RESULTS.md is not what --write would write

Reads ``bench/results.jsonl`` (one JSON row per run: appended by ``run_bench.py`` or entered from recorded logs, see
bench/README.md), the switch ablation curves (``switch_ablation_cpu.jsonl``, ``switch_ablation_budget_cpu.jsonl``,
``switch_ablation_h100.jsonl``, printed with ``ablation_table.py``'s table) and ``bench/speed.jsonl`` (speed and
memory facts that are not runs).

Results: one table per (dataset, encoder, mode, device, budget), the budget being the run's limits (``max_steps``,
``wall_limit_s`` and the ``clock`` they count), one line per system: mean dev F over seeds with min-max, each seed's F,
the number of seeds, mean P / R where every seed has them, the updates made and the commits; a footnote per line gives
the machines, dates and commands. A row with a ``superseded`` key (a configuration that is not what its system name
means now, or a variant that was not kept) shows only with ``--all``. Without ``--all``, a table shows only when it has
a current ``piqn`` line.

RESULTS.md's generated parts sit between ``<!-- generated:NAME:start -->`` and ``<!-- generated:NAME:end -->``
(NAME: results, ablation, speed); the rest of the file is written by hand.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from ablation_table import markdown as ablation_markdown

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results.jsonl"
SPEED = BENCH / "speed.jsonl"
RESULTS_MD = BENCH / "RESULTS.md"
CURVES_CPU = BENCH / "switch_ablation_cpu.jsonl"
CURVES_BUDGET = BENCH / "switch_ablation_budget_cpu.jsonl"
# The systems that run a shipped config as it is: a table is shown where one of them ran.
SHIPPED = ("piqn", "piqn_qt")
CURVES_H100 = BENCH / "switch_ablation_h100.jsonl"
H100_COMMIT = "bf7e00b"  # the stored H100 curves of the current default's head (the earlier ones are width 128)

DATASETS = {"genia": "GENIA", "conll03": "CoNLL-03", "germeval2014": "GermEval 2014"}
ENCODERS = {"tok2vec": "tok2vec", "minilm": "MiniLM-L6"}
BASELINES = ["spancat", "spancat_tuned", "ner", "ner_tuned"]
# The switch ablation's rows (switch_ablation.sh's ROWS), in the order of the table, and their labels.
ABLATION_ROWS = {
    "paper": "paper model (`configs/piqn_paper.cfg`)",
    "softmax": "+ softmax pointer",
    "anchor": "+ anchor prior κ = 8",
    "bilinear": "+ bilinear pointer fusion",
    "cls8": "+ class-loss weight 8",
    "optim": "+ warm-up, decay to half the peak, weight averages",
    "small": "+ small head (width 192, 30 queries, 1 layer, dropout 0, n_slots 15)",
    "merge": "+ same-label merge in decoding",
    "default": "**all of them: the default** (`configs/piqn_tok2vec.cfg`)",
    "dn": "the default + denoising queries (not kept)",
    "spancat": "stock `spancat`",
}
# Ablation rows whose 20-minute runs are results.jsonl rows rather than switch_ablation_budget_cpu.jsonl records.
ABLATION_BUDGET_SYSTEMS = {"default": "piqn", "dn": "piqn+denoising"}
# Rows that must have these keys, with these types (None allowed where the second element says so).
REQUIRED = {
    "system": (str, False),
    "encoder": (str, False),
    "dataset": (str, False),
    "seed": (int, False),
    "budget": (str, False),
    "f": ((int, float), False),
    "commit": (str, True),
    "machine": (str, False),
    "date": (str, False),
}
# Rows entered from logs must also say how they were made and where they come from; run_bench.py's own rows (they
# carry "versions") record their command line in the run directory and need not.
REQUIRED_ENTERED = {"command": (str, False), "source": (str, False)}
OPTIONAL_PERCENT = ("p", "r", "loc_f", "cls_f")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?(Z|[+-]\d{2}:\d{2})?)?(/\S+)?$")


def load_jsonl(path: Path) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf8").splitlines() if line.strip()]


def check_row(row: Dict[str, Any]) -> List[str]:
    """What is missing or mistyped in one results.jsonl row (empty: nothing)."""
    problems = []
    required = dict(REQUIRED)
    if "versions" not in row:
        required.update(REQUIRED_ENTERED)
    for key, (types, nullable) in required.items():
        if key not in row:
            problems.append(f"no {key!r}")
        elif row[key] is None:
            if not nullable:
                problems.append(f"{key!r} is null")
        elif not isinstance(row[key], types) or isinstance(row[key], bool):
            problems.append(f"{key!r} is {type(row[key]).__name__}")
    for key in ("f",) + OPTIONAL_PERCENT:
        value = row.get(key)
        if isinstance(value, (int, float)) and not 0 <= value <= 100:
            problems.append(f"{key!r} = {value} is not a % in 0..100")
    if isinstance(row.get("f"), (int, float)) and 0 < row["f"] < 1 and row.get("p", 0) <= 1:
        problems.append("'f' looks like a fraction, not a %")
    if isinstance(row.get("date"), str) and not DATE.match(row["date"]):
        problems.append(f"'date' {row['date']!r} is not an ISO date")
    return problems


# ---------------------------------------------------------------------------------------------- formatting


def mean(values: Iterable[float]) -> Decimal:
    """Exact mean of two-decimal values, rounded half up as the text does (76.215 -> 76.22)."""
    values = [Decimal(str(v)) for v in values]
    return (sum(values) / len(values)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def join_seeds(values: Iterable[Any]) -> str:
    return " / ".join(str(v) for v in values)


def device(row: Dict[str, Any]) -> str:
    """'CPU', or the GPU's name ('NVIDIA H100') when the machine names one."""
    found = re.search(r"NVIDIA ([A-Z]\d+)", row.get("machine", ""))
    return f"NVIDIA {found[1]}" if found else "CPU"


def budget_key(row: Dict[str, Any]) -> Tuple[Any, ...]:
    """The run's limits: what makes two rows comparable (``budget`` only names the limit that stopped the run)."""
    if "max_steps" in row and "wall_limit_s" in row:
        return (int(row["max_steps"]), float(row["wall_limit_s"]), row.get("clock", "wall"))
    return (row["budget"],)


def budget_label(key: Tuple[Any, ...]) -> str:
    if len(key) == 1:
        return str(key[0])
    max_steps, wall_s, clock = key
    time = f"{wall_s / 60:g} min" if wall_s % 60 == 0 else f"{wall_s:g} s"
    counted = "CPU time" if clock == "cpu" else "wall clock"
    return f"{time} ({counted}) or {max_steps:,} updates"


def system_order(system: str) -> Tuple[int, str]:
    if system == "piqn":
        return (0, system)
    if system in BASELINES:
        return (1 + BASELINES.index(system), system)
    return (len(BASELINES) + 1, system)


def short(commit: Optional[str]) -> str:
    return "not recorded" if not commit else commit[:7]


def normalized_command(command: str) -> str:
    """The command with its seed written as SEED, so that the seeds of one line share a footnote."""
    return re.sub(r"(system\.seed=)\d+", r"\1SEED", command)


class Footnotes:
    """Numbered markdown footnotes, numbered across all the generated parts of one document."""

    def __init__(self) -> None:
        self.count = 0

    def add(self, lines: List[str], text: str) -> str:
        self.count += 1
        lines.append(f"[^{self.count}]: {text}")
        return f"[^{self.count}]"


def fmt_date(date: Optional[str]) -> str:
    """A harness date (2026-11-26T05:43:06+00:00) to the minute in UTC; recorded dates and intervals as they are."""
    found = re.match(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2})(:\d{2}(\.\d+)?)?(\+00:00|Z)$", date or "")
    return f"{found[1]}Z" if found else (date or "")


def describe(rows: List[Dict[str, Any]], what: str) -> str:
    """A line's footnote: machines, dates, commands (seeds as SEED), notes and sources, each once."""

    def once(values: Iterable[Optional[str]]) -> List[str]:
        return list(dict.fromkeys(v for v in values if v))

    parts = [what] if what else []
    parts.append("machine: " + "; ".join(once(r.get("machine") for r in rows)))
    parts.append("dates: " + ", ".join(once(fmt_date(r.get("date")) for r in rows)))
    commands = once(normalized_command(r["command"]) for r in rows if r.get("command"))
    if commands:
        parts.append("command: " + "; ".join(f"`{c}`" for c in commands))
    elif any("versions" in r for r in rows):
        parts.append("command: `bench/run_bench.py run` (the run directory's logs have it)")
    notes = once(r.get("note") for r in rows)
    if notes:
        parts.append("; ".join(notes))
    return ". ".join(parts) + "."


# ---------------------------------------------------------------------------------------------- results


def results_tables(rows: List[Dict[str, Any]], notes: Footnotes, show_all: bool = False) -> str:
    tables: Dict[Tuple[Any, ...], List[Dict[str, Any]]] = {}
    for row in rows:
        if not show_all and (row.get("superseded") or row.get("mode", "full") != "full"):
            continue
        key = (row["dataset"], row["encoder"], row.get("mode", "full"), device(row), budget_key(row))
        tables.setdefault(key, []).append(row)
    datasets, encoders = list(DATASETS), list(ENCODERS)

    def table_order(key: Tuple[Any, ...]) -> Tuple[Any, ...]:
        dataset, encoder, mode, dev, budget = key
        return (
            datasets.index(dataset) if dataset in datasets else len(datasets), dataset,
            encoders.index(encoder) if encoder in encoders else len(encoders), encoder,
            mode != "full", dev != "CPU", dev, budget[1] if len(budget) == 3 else 0, str(budget),
        )  # fmt: skip

    out: List[str] = []
    for key in sorted(tables, key=table_order):
        dataset, encoder, mode, dev, budget = key
        table_rows = tables[key]
        if not show_all and not any(r["system"] in SHIPPED for r in table_rows):
            continue
        title = f"{DATASETS.get(dataset, dataset)}, {ENCODERS.get(encoder, encoder)}, {budget_label(budget)}, {dev}"
        if mode != "full":
            title += f", {mode} mode"
        out += [f"#### {title}", ""]
        out += [
            "| system | F: mean (min–max) | F by seed | seeds | P | R | updates | commits |",
            "|---|---:|---|---|---:|---:|---:|---|",
        ]
        lines: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
        for row in table_rows:
            lines.setdefault((row["system"], row.get("superseded", "")), []).append(row)
        footnotes: List[str] = []
        for (system, superseded), line_rows in sorted(lines.items(), key=line_order):
            out.append(table_line(system, superseded, line_rows, notes, footnotes))
        out += [""] + footnotes + [""]
    return "\n".join(out).rstrip() + "\n"


def line_order(item: Tuple[Tuple[str, str], Any]) -> Tuple[Any, ...]:
    """Current lines first, piqn first among them, then the baselines, then the rest."""
    (system, superseded), _ = item
    return (bool(superseded), system_order(system))


def table_line(system: str, superseded: str, rows: List[Dict[str, Any]], notes: Footnotes, footnotes: List[str]) -> str:
    """One system's line: F mean (min-max), F per seed, seeds, P, R, updates made, commits; its footnote."""
    rows = sorted(rows, key=lambda r: (r["seed"], str(r.get("date", ""))))
    fs = [r["f"] for r in rows]
    spread = f" ({min(fs):.2f}–{max(fs):.2f})" if len(fs) > 1 else ""
    cells = [f"**{mean(fs)}**{spread}" if system == "piqn" and not superseded else f"{mean(fs)}{spread}"]
    cells.append(join_seeds(f"{f:.2f}" for f in fs))
    cells.append(f"{join_seeds(r['seed'] for r in rows)} (n = {len(fs)})")
    for key in ("p", "r"):
        known = [r[key] for r in rows if r.get(key) is not None]
        cells.append(str(mean(known)) if known and len(known) == len(rows) else "–")
    steps = [r["steps"] for r in rows if isinstance(r.get("steps"), int)]
    updates = "–" if not steps else f"{min(steps):,}" + (f"–{max(steps):,}" if max(steps) != min(steps) else "")
    if steps and len(steps) < len(rows):
        updates += f" ({len(steps)} of {len(rows)} seeds)"
    cells.append(updates)
    commits = dict.fromkeys(short(r.get("commit")) for r in rows)
    cells.append(", ".join(c if c == "not recorded" else f"`{c}`" for c in commits))
    label = f"`{system}`" + (" (superseded)" if superseded else "")
    what = f"`{system}`" + (f", superseded: {superseded}" if superseded else "")
    ref = notes.add(footnotes, describe(rows, what))
    return f"| {label}{ref} | " + " | ".join(cells) + " |"


# ---------------------------------------------------------------------------------------------- ablation


def ablation_records(
    curves: List[Dict[str, Any]], finals: Dict[Tuple[str, int], Dict[str, Any]]
) -> List[Dict[str, Any]]:
    """Curve records with the table's labels and order; ``final``: the F at the budget where one is known."""
    records = []
    for record in curves:
        new = {"row": ABLATION_ROWS.get(record["row"], record["row"]), "seed": record["seed"], "curve": record["curve"]}
        if (record["row"], record["seed"]) in finals:
            new["final"] = finals[(record["row"], record["seed"])]
        records.append((list(ABLATION_ROWS).index(record["row"]) if record["row"] in ABLATION_ROWS else 99, new))
    return [r for _, r in sorted(records, key=lambda x: (x[0], x[1]["seed"]))]


def budget_finals(rows: List[Dict[str, Any]], budget_curves: List[Dict[str, Any]]) -> Dict[Tuple[str, int], Any]:
    """The dev F at the 20-minute budget per (ablation row, seed): the budget runs, and results.jsonl for the rest."""
    finals = {(r["row"], r["seed"]): r["final"] for r in budget_curves if "final" in r}
    for ablation_row, system in ABLATION_BUDGET_SYSTEMS.items():
        for row in rows:
            if (
                row["system"] == system and row["dataset"] == "genia" and row["encoder"] == "tok2vec"
                and budget_key(row) == (6000, 1200.0, "wall") and device(row) == "CPU"
                and (system != "piqn" or not row.get("superseded")) and "steps" in row
            ):  # fmt: skip
                finals.setdefault((ablation_row, row["seed"]), {"f": row["f"], "steps": row["steps"]})
    return finals


def provenance(records: Iterable[Dict[str, Any]]) -> str:
    records = list(records)
    commits = ", ".join(f"`{c}`" for c in dict.fromkeys(r["commit"] for r in records))
    machines = "; ".join(dict.fromkeys(r["machine"] for r in records))
    dates = sorted(r["date"] for r in records)
    when = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
    return f"commits {commits}; {machines}; {when}"


def ablation_tables(rows: List[Dict[str, Any]]) -> str:
    cpu, budget = load_jsonl(CURVES_CPU), load_jsonl(CURVES_BUDGET)
    finals = budget_finals(rows, budget)
    cpu_keys = {(r["row"], r["seed"]) for r in cpu}
    seeds = sorted({r["seed"] for r in cpu})
    finals = {k: v for k, v in finals.items() if k[1] in seeds and k[0] in {row for row, _ in cpu_keys}}
    table = ablation_markdown(ablation_records(cpu, finals), [100, 250, 500, 1000])
    table = table.replace("final dev F, updates made", "F at the 20-minute budget, updates made")
    out = [
        "#### GENIA, tok2vec, each switch alone on the paper model: dev F per update (CPU, 1 thread) and at the "
        "20-minute budget",
        "",
        table,
        "",
        f"Per update: `{CURVES_CPU.relative_to(BENCH.parent)}` ({provenance(cpu)}). At the budget (wall clock, or "
        f"6,000 updates): `{CURVES_BUDGET.relative_to(BENCH.parent)}` ({provenance(budget)}); the default's and the "
        'denoising row\'s are their 20-minute rows of `bench/results.jsonl`. "–": not run, or not reached.',
        "",
    ]
    h100 = [r for r in load_jsonl(CURVES_H100) if r["commit"].startswith(H100_COMMIT)]
    if h100:
        out += [
            f"The same rows to 500 updates on an H100 (18 trainings at once; {provenance(h100)}), where the default "
            f"leads every single switch too (66.4-66.9 at update 500 against at most 55.5): `python "
            f"bench/ablation_table.py {CURVES_H100.relative_to(BENCH.parent)} --steps 250,500,750`.",
            "",
        ]
    return "\n".join(out).rstrip() + "\n"


# ---------------------------------------------------------------------------------------------- speed


def fmt_values(values: List[float]) -> str:
    return " / ".join(f"{v:,}" if isinstance(v, int) else str(v) for v in values)


def speed_tables(rows: List[Dict[str, Any]], facts: List[Dict[str, Any]], notes: Footnotes, show_all: bool) -> str:
    out = [
        "| measure | system | values | unit | what | commit, date |",
        "|---|---|---:|---|---|---|",
    ]
    footnotes: List[str] = []
    for fact in facts:
        if fact.get("superseded") and not show_all:
            continue
        what = fact["setting"] + (f"; model: {fact['model']}" if fact.get("model") else "")
        extra = [f"{k.replace('_', ' ')}: {fmt_values(fact[k])}" for k in ("s_per_update", "inference_ms") if k in fact]
        what += "".join(f"; {e}" for e in extra)
        if fact.get("superseded"):
            what += f" (superseded: {fact['superseded']})"
        ref = notes.add(footnotes, describe([fact], f"{fact['measure']}, {fact['dataset']} {fact['encoder']}"))
        out.append(
            f"| {fact['measure']}{ref} | `{fact['system']}` | {fmt_values(fact['values'])} | {fact['unit']} | {what} "
            f"| `{short(fact['commit'])}`, {fact['date']} |"
        )
    # Only wall-clock runs: the CPU-time runs shared the machine with other work, so their timing measures the load.
    timed = [
        r for r in rows
        if r.get("infer_sents_per_s") is not None
        and (show_all or (not r.get("superseded") and r.get("mode") == "full" and r.get("clock", "wall") == "wall"))
    ]  # fmt: skip
    shown = {
        (r["dataset"], r["encoder"], device(r), budget_key(r))
        for r in rows
        if r["system"] == "piqn" and not r.get("superseded") and r.get("mode", "full") == "full"
    }
    for row in timed:
        if not show_all and (row["dataset"], row["encoder"], device(row), budget_key(row)) not in shown:
            continue
        ref = notes.add(footnotes, describe([row], "the harness's timing of the run, under the load it recorded"))
        load = row.get("load_avg_1m", {}).get("infer_start")
        units = row.get("units", "sentences")  # infer_sents_per_s counts Docs
        out.append(
            f"| inference, memory{ref} | `{row['system']}` | {row['infer_sents_per_s']} / "
            f"{row.get('train_peak_rss_mb', 0):,.0f} / {row.get('infer_peak_rss_mb', 0):,.0f} | {units}/s / peak RSS "
            f"MB training / inference | {DATASETS.get(row['dataset'], row['dataset'])} {row['encoder']} dev, batch "
            f"{row.get('batch_size')}, {row.get('torch_threads')} threads, seed {row['seed']} of the "
            f"{budget_label(budget_key(row))} table; 1-minute load {load} | `{short(row['commit'])}`, "
            f"{fmt_date(row['date'])} |"
        )
    return "\n".join(out + [""] + footnotes).rstrip() + "\n"


# ---------------------------------------------------------------------------------------------- RESULTS.md


def sections(show_all: bool = False) -> Dict[str, str]:
    rows = load_jsonl(RESULTS)
    notes = Footnotes()
    return {
        "results": results_tables(rows, notes, show_all),
        "ablation": ablation_tables(rows),
        "speed": speed_tables(rows, load_jsonl(SPEED), notes, show_all),
    }


def render(text: str, parts: Dict[str, str]) -> str:
    """``text`` with each generated part replaced; every part must have its two markers."""
    for name, body in parts.items():
        start, end = f"<!-- generated:{name}:start -->", f"<!-- generated:{name}:end -->"
        pattern = re.compile(re.escape(start) + r"\n.*?" + re.escape(end), re.S)
        if not pattern.search(text):
            raise SystemExit(f"{RESULTS_MD} has no {start} ... {end}")
        replacement = f"{start}\n{body}{end}"
        text = pattern.sub(lambda _, new=replacement: new, text)
    return text


def main(argv: Optional[List[str]] = None, write: Callable[[str], Any] = sys.stdout.write) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="replace the generated parts of bench/RESULTS.md")
    mode.add_argument("--check", action="store_true", help="exit 1 when bench/RESULTS.md is not up to date")
    parser.add_argument("--all", action="store_true", help="print superseded rows too (not with --write/--check)")
    args = parser.parse_args(argv)
    problems = [f"results.jsonl line {i}: {p}" for i, row in enumerate(load_jsonl(RESULTS), 1) for p in check_row(row)]
    if problems:
        write("\n".join(problems) + "\n")
        return 1
    if args.write or args.check:
        current = RESULTS_MD.read_text(encoding="utf8")
        new = render(current, sections())
        if args.check:
            if new != current:
                write(f"{RESULTS_MD} is not what `python bench/results_table.py --write` writes; run it\n")
                return 1
            return 0
        RESULTS_MD.write_text(new, encoding="utf8")
        write(f"wrote {RESULTS_MD}\n")
        return 0
    parts = sections(args.all)
    titles = {"results": "Results", "ablation": "Ablation", "speed": "Speed and memory"}
    write("\n".join(f"### {titles[name]}\n\n{body}" for name, body in parts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
