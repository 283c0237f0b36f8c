"""PIQN against spaCy's stock span models, under one training budget, on gold tokens.

    python bench/run_bench.py run --mode quick [--datasets genia,conll03] [--encoders tok2vec,minilm]
    python bench/run_bench.py run --mode full
    python bench/run_bench.py infer MODEL DEV.spacy --system piqn --encoder tok2vec   # one model, no training
    python bench/run_bench.py raw MODEL DEV.jsonl [--group 10|documents]     # sentences, documents, nlp(text)
    python bench/run_bench.py memory MODEL DOCS.spacy [--n-docs 10000]       # RSS over many docs
    python bench/run_bench.py labels TRAIN.jsonl [--labels 5,100,1000]       # cost of many entity types
    python bench/run_bench.py ray MODEL CORPUS.jsonl [--docs 8000]           # nlp.pipe against Ray Data

For every (dataset, encoder, system) of the grid, ``run``:

1. converts ``<data-dir>/<dataset>/{train,dev}.jsonl`` with ``python -m spacy_piqn convert`` (quick mode: a
   seeded sample of the sentences), cached under ``bench/runs/data/<mode>/<dataset>/``;
2. writes the run's config (``configs/piqn_*.cfg`` or ``bench/configs/<baseline>_*.cfg`` with the budget, the
   corpus paths and a timed logger filled in) and trains it with ``python -m spacy train``. Both systems of a
   dataset get the SAME budget: ``max_steps`` updates or ``wall_s`` seconds of training loop, whichever comes
   first (see bench/bench_logger.py). The console log goes to ``train.log``, the dev scores with their wall
   times to ``train_log.jsonl``;
3. in a fresh process, loads ``model-best`` (spaCy's best dev checkpoint, as ``spacy train`` keeps it) and
   scores the dev docs on their gold tokens with ``spacy-piqn.piqn_scorer.v1`` (strict P/R/F, localization F,
   classification F); for ``ner`` the predicted ``doc.ents`` are copied to ``doc.spans["sc"]`` first. Then it
   times ``nlp.pipe`` on fresh gold-token docs of the dev set (one warm-up batch, best of ``--repeats``) with
   torch on ``--infer-threads`` threads, and the same for the encoder component alone (``tok2vec`` or
   ``transformer``): an upper bound on the pipeline's throughput;
4. records the peak RSS (VmHWM, polled with psutil) of the training and of the inference process.

It prints a markdown table, appends one JSON row per result to ``bench/results.jsonl`` and draws
``bench/f1_over_time.png`` (dev F1 against training-loop wall time, PIQN against its baseline).

The grid: GENIA (nested) runs piqn against ``spancat`` (``spacy.ngram_suggester.v1``, sizes 1..k with k the
smallest length covering >= 99.5% of the training spans, printed); CoNLL-2003 (flat) runs piqn with
``decoding = "flat"`` against ``ner``. Encoders: ``tok2vec`` (configs/piqn_tok2vec.cfg and the same tok2vec in
the baselines) and ``minilm`` (the shared MiniLM transformer of configs/piqn_trf_listener.cfg).

The other subcommands train nothing (``labels`` makes a few updates of fresh pipelines) and print a markdown table;
loading, reading gold docs, timing and RSS are bench/timing.py's, shared with ``run`` and ``infer``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Sequence

from timing import (
    SPANS_KEY,
    best_seconds,
    fresh_docs,
    gold_examples,
    load_pipeline,
    peak_rss_mb,
    pipe_rate,
    read_gold_docs,
    rss_mb,
    timed_pipe,
    words_of,
)

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
DEFAULT_PLOT = BENCH / "f1_over_time.png"  # rewritten by every run: not a change of the code (git_commit)
RUNS = BENCH / "runs"
LOGGER_CODE = BENCH / "bench_logger.py"
DEFAULT_DATA_DIR = Path("/work/shared/data")
COVERAGE_TARGET = 0.995
SPLIT = "dev"


@dataclass(frozen=True)
class Budget:
    """One training budget, the same for every system of an encoder."""

    max_steps: int
    wall_s: float
    eval_frequency: int


@dataclass(frozen=True)
class Mode:
    n_train: int  # 0: all sentences
    n_dev: int
    encoders: tuple[str, ...]  # default encoders (``--encoders`` adds or replaces)
    budgets: dict[str, Budget]
    repeats: int  # timed nlp.pipe passes; the best one counts


MODES = {
    # < 20 min for genia + conll03 with tok2vec on 2 shared cores: 4 runs of 210 s training loop, plus
    # initialization, evaluation and throughput (15 to 90 s a run) and the conversion (cached). The wall limit
    # binds first for both systems (spancat makes about 5 steps/s, piqn about 1 on one core).
    "quick": Mode(
        n_train=3000,
        n_dev=500,
        encoders=("tok2vec",),
        budgets={
            "tok2vec": Budget(max_steps=2000, wall_s=210, eval_frequency=50),
            "minilm": Budget(max_steps=1000, wall_s=600, eval_frequency=50),
        },
        repeats=3,
    ),
    # Full train -> full dev under equal wall-clock budgets (the ones RESULTS.md reports): tok2vec 20 min (the
    # 6,000 steps of configs/piqn_tok2vec.cfg only bind on a fast machine), minilm 70 min or 1,500 steps (the
    # transformer's learning-rate schedule ends there). On a 2-core CPU the time limit binds for PIQN.
    "full": Mode(
        n_train=0,
        n_dev=0,
        encoders=("tok2vec", "minilm"),
        budgets={
            "tok2vec": Budget(max_steps=6000, wall_s=1200, eval_frequency=500),
            "minilm": Budget(max_steps=1500, wall_s=4200, eval_frequency=250),
        },
        repeats=3,
    ),
}


@dataclass(frozen=True)
class Encoder:
    configs: dict[str, Path]  # system -> config file
    pipe: str  # the encoder component, timed alone as the upper bound (a pipeline without it: not timed)
    batch_size: int  # nlp.pipe batch size for the throughput (the configs' [nlp] batch_size)
    transformer: bool


ENCODERS = {
    "tok2vec": Encoder(
        configs={
            "piqn": REPO / "configs" / "piqn_tok2vec.cfg",
            "spancat": BENCH / "configs" / "spancat_tok2vec.cfg",
            "spancat_tuned": BENCH / "configs" / "spancat_tok2vec_tuned.cfg",
            "ner": BENCH / "configs" / "ner_tok2vec.cfg",
            "ner_tuned": BENCH / "configs" / "ner_tok2vec_tuned.cfg",
        },
        pipe="tok2vec",
        batch_size=256,
        transformer=False,
    ),
    "minilm": Encoder(
        configs={
            "piqn": REPO / "configs" / "piqn_trf_listener.cfg",
            # PIQN's own encoder: the queries ride through MiniLM (spacy-piqn.QueryTransformer.v1).
            "piqn_qt": REPO / "configs" / "piqn_trf.cfg",
            "spancat": BENCH / "configs" / "spancat_trf.cfg",
            # spancat at a higher peak learning rate (the same for transformer and head): bench/gpu/table.sh sweeps
            # it with lr=..., and the value is chosen on dev.
            "spancat_tuned": BENCH / "configs" / "spancat_trf_tuned.cfg",
            "ner": BENCH / "configs" / "ner_trf.cfg",
        },
        pipe="transformer",
        batch_size=64,
        transformer=True,
    ),
}


@dataclass(frozen=True)
class Dataset:
    nested: bool
    baseline: str
    piqn_decoding: str


DATASETS = {
    "genia": Dataset(nested=True, baseline="spancat", piqn_decoding="nested"),
    "conll03": Dataset(nested=False, baseline="ner", piqn_decoding="flat"),
    "germeval2014": Dataset(nested=True, baseline="spancat", piqn_decoding="nested"),
}

# The dev score each system's training log reports as its strict F (ner scores doc.ents).
TRAIN_F_KEY = {
    "piqn": "spans_sc_f",
    "piqn_qt": "spans_sc_f",
    "spancat": "spans_sc_f",
    "spancat_tuned": "spans_sc_f",
    "ner": "ents_f",
    "ner_tuned": "ents_f",
}
# Baselines with PIQN's optimizer setting (warm-up, decay to half the peak, weight averages), next to the stock ones.
TUNED = {"spancat": "spancat_tuned", "ner": "ner_tuned"}
PIQN_SYSTEMS = ("piqn", "piqn_qt")
# PIQN freezes BERT for 5 of its 50 GENIA epochs; a budgeted run freezes the same share of its max_steps.
FREEZE_SHARE = 0.1


@dataclass
class RunResult:
    system: str
    encoder: str
    dataset: str
    split: str
    seed: int
    budget: str
    p: float | None
    r: float | None
    f: float | None
    loc_f: float | None
    cls_f: float | None
    train_s: float
    infer_sents_per_s: float | None  # None: --repeats 0 (not timed)
    infer_words_per_s: float | None
    peak_rss_mb: float
    commit: str
    date: str
    machine: str
    mode: str
    extra: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        row = asdict(self)
        row.update(row.pop("extra"))
        return row


# ---------------------------------------------------------------------------------------------- environment


def git_commit() -> tuple[str, bool | None]:
    """HEAD and whether tracked files differ from it (read-only: no index refresh), the plot every run rewrites
    (``--plot``'s default) aside. Without git or a repository (a copy of the working tree on another machine):
    $BENCH_COMMIT or "unknown", and None (not known)."""
    plot = f":(exclude){DEFAULT_PLOT.relative_to(REPO)}"
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
        status = subprocess.run(
            ["git", "--no-optional-locks", "status", "--porcelain", "--untracked-files=no", "--", ".", plot],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
    except OSError:
        return os.environ.get("BENCH_COMMIT", "unknown"), None
    if head.returncode != 0 or not head.stdout.strip():
        return os.environ.get("BENCH_COMMIT", "unknown"), None
    return head.stdout.strip(), bool(status.stdout.strip())


def machine_description(gpu_id: int = -1) -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    description = f"{model}, {os.cpu_count()} logical cores, {platform.system()}"
    if gpu_id >= 0:
        import torch

        description += f", GPU {gpu_id}: {torch.cuda.get_device_name(gpu_id)}"
    return description


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version()}
    for name in ("spacy", "spacy-transformers", "thinc", "torch", "spacy-piqn"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def child_env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[name] = str(threads)
    env["PYTHONUNBUFFERED"] = "1"
    # This checkout's spacy_piqn, also where another one is installed (e.g. editable, from a worktree's main).
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


def run_watched(
    cmd: list[str], log_path: Path, env: dict[str, str], timeout_s: float
) -> tuple[int, float, float, bool]:
    """Run ``cmd`` with stdout+stderr to ``log_path``; return (exit code, wall seconds, peak RSS in MB, killed).

    ``killed``: it ran past ``timeout_s`` (counted from its start, imports and initialization included).

    The peak is polled every 0.2 s; VmHWM is a high-water mark, so a short peak between polls still counts.
    """
    import psutil

    log_path.parent.mkdir(parents=True, exist_ok=True)
    peak = 0.0
    killed = False
    with log_path.open("w", encoding="utf8") as log:
        log.write("$ " + " ".join(str(c) for c in cmd) + "\n")
        log.flush()
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        watched = psutil.Process(proc.pid)
        try:
            while proc.poll() is None:
                try:
                    peak = max(peak, peak_rss_mb(watched))
                except psutil.Error:
                    pass
                if time.perf_counter() - start > timeout_s:
                    # The caller decides whether what the process left (e.g. model-best) is usable.
                    print(f"{cmd[:4]} ran past {timeout_s:.0f}s and was killed; see {log_path}", flush=True)
                    proc.kill()
                    proc.wait()
                    killed = True
                    log.write(f"\n[run_bench] killed after {timeout_s:.0f}s\n")
                    break
                time.sleep(0.2)
        except BaseException:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            raise
        wall = time.perf_counter() - start
    return proc.returncode, wall, peak, killed


# --------------------------------------------------------------------------------------------------- data


def read_jsonl(path: Path) -> list[str]:
    with path.open(encoding="utf8") as f:
        return [line for line in f if line.strip()]


def prepare_split(
    src: Path, dest_dir: Path, split: str, n: int, seed: int = 0, units: str = "sentences"
) -> tuple[Path, Path]:
    """``(dest_dir/<split>-<n>-<units>.spacy, its JSONL)`` from ``src``: a seeded sample of ``n`` sentences, in
    corpus order (0 or more than there are: all of them, converted from ``src`` itself).

    ``units``: "sentences" makes one Doc per sentence; "documents" one Doc per document, from the doc-id file
    beside ``src`` (``<stem>.doc_ids.txt``; a sample keeps the ids of its sentences, so a document may lose some
    of them). Cached: converted again only when the source, ``n``, the seed or the units changed.
    """
    lines = read_jsonl(src)
    sampled = 0 < n < len(lines)
    ids_src = src.with_name(f"{src.stem}.doc_ids.txt")
    if units == "documents" and not ids_src.exists():
        raise SystemExit(f"error: --units documents needs {ids_src}")
    stem = f"{split}-{n if sampled else 'all'}-{units}"
    spacy_path = dest_dir / f"{stem}.spacy"
    jsonl_path = dest_dir / f"{stem}.jsonl" if sampled else src
    stat = src.stat()
    key = {"src": str(src), "size": stat.st_size, "mtime": stat.st_mtime, "n": n, "seed": seed, "units": units}
    meta_path = dest_dir / f"{stem}.meta.json"
    if spacy_path.exists() and meta_path.exists() and json.loads(meta_path.read_text()) == key:
        return spacy_path, jsonl_path
    dest_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "spacy_piqn", "convert", str(jsonl_path), str(spacy_path)]
    if sampled:
        keep = sorted(random.Random(seed).sample(range(len(lines)), n))
        jsonl_path.write_text("".join(lines[i] if lines[i].endswith("\n") else lines[i] + "\n" for i in keep))
        if units == "documents":
            ids = ids_src.read_text(encoding="utf8").splitlines()
            ids_path = dest_dir / f"{stem}.doc_ids.txt"
            ids_path.write_text("".join(ids[i] + "\n" for i in keep), encoding="utf8")
            cmd += ["--doc-ids", str(ids_path)]
    cmd += ["--sentences"] if units == "sentences" else ["--n-sents", "0"]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=child_env(1))
    if done.returncode != 0:
        raise RuntimeError(f"conversion of {jsonl_path} failed:\n{done.stderr}")
    meta_path.write_text(json.dumps(key))
    return spacy_path, jsonl_path


def span_length_coverage(jsonl: Path, target: float = COVERAGE_TARGET) -> tuple[int, float, int]:
    """The smallest k such that spans of 1..k tokens are >= ``target`` of the gold spans: (k, coverage, n)."""
    lengths: dict[int, int] = {}
    for line in read_jsonl(jsonl):
        for ent in json.loads(line)["entities"]:
            length = ent["end"] - ent["start"]
            lengths[length] = lengths.get(length, 0) + 1
    total = sum(lengths.values())
    if total == 0:
        raise ValueError(f"no gold spans in {jsonl}: cannot choose ngram sizes")
    covered = 0
    for k in sorted(lengths):
        covered += lengths[k]
        if covered / total >= target:
            return k, covered / total, total
    raise AssertionError("unreachable: the cumulative coverage ends at 1.0")


# ----------------------------------------------------------------------------------------------- training


def write_run_config(
    system: str,
    encoder: str,
    dataset: str,
    budget: Budget,
    train_path: Path,
    dev_path: Path,
    run_dir: Path,
    ngram_max: int | None,
    trf_name: str | None,
    overrides: Sequence[tuple[str, str, Any]] = (),
    clock: str = "wall",
) -> Path:
    """The system's config with this run's corpus, budget, logger (and ngram sizes / decoding) filled in."""
    from spacy.util import load_config

    config = load_config(ENCODERS[encoder].configs[system], interpolate=False)
    config["paths"]["train"] = str(train_path)
    config["paths"]["dev"] = str(dev_path)
    training = config["training"]
    training["max_steps"] = budget.max_steps
    training["max_epochs"] = 0
    training["patience"] = 0
    training["eval_frequency"] = budget.eval_frequency
    training["logger"] = {
        "@loggers": "spacy-piqn-bench.TimedConsoleLogger.v1",
        "path": str(run_dir / "train_log.jsonl"),
        "max_wall_s": budget.wall_s,
        "clock": clock,
        "progress_bar": False,
    }
    learn_rate = training["optimizer"].get("learn_rate")
    if isinstance(learn_rate, dict) and "total_steps" in learn_rate:
        # The warm-up/linear decay of the transformer configs ends with the budget, not at their 20,000 steps.
        learn_rate["total_steps"] = budget.max_steps
    before_update = training.get("before_update")
    if isinstance(before_update, dict) and "steps" in before_update:
        before_update["steps"] = round(FREEZE_SHARE * budget.max_steps)
    if ENCODERS[encoder].transformer and trf_name is not None:
        config["vars"]["trf_name"] = trf_name
    if system in PIQN_SYSTEMS:
        config["components"]["piqn"]["decoding"] = DATASETS[dataset].piqn_decoding
    for target, dotted, value in overrides:
        if target == system:
            section = config
            *parents, leaf = dotted.split(".")
            for key in parents:
                section = section[key]
            section[leaf] = value
    if system.startswith("spancat"):
        config["components"]["spancat"]["suggester"]["sizes"] = list(range(1, ngram_max + 1))
    path = run_dir / "config.cfg"
    config.to_disk(path)
    return path


def stop_point(
    evals: list[dict[str, Any]], stop: dict[str, Any] | None, killed: bool, max_steps: int
) -> tuple[int, str]:
    """Updates made and what ended training: the logger's time stop, the harness's kill, or the run config's
    max_steps (not the budget's, which a --set may override)."""
    if stop:
        return stop["steps"], "wall_s"
    if killed:
        # Killed before the logger's own time stop (start-up counts towards --grace-s): the steps actually made
        # are unknown, the last evaluated one is a lower bound.
        return (evals[-1]["step"] if evals else 0), "killed"
    return max_steps + 1, "max_steps"  # spaCy's steps count from 0


def read_train_log(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    if not path.exists():
        return [], None
    evals, stop = [], None
    for line in path.read_text(encoding="utf8").splitlines():
        row = json.loads(line)
        if row.get("event") == "wall_limit":
            stop = row
        else:
            evals.append(row)
    return evals, stop


# ---------------------------------------------------------------------------------------------- inference


def infer(
    model: Path, data: Path, system: str, encoder: str, batch_size: int, threads: int, repeats: int, gpu_id: int = -1
) -> dict:
    """Dev scores on gold tokens and the throughput of the pipeline and of its encoder alone."""
    import torch
    from spacy.tokens import SpanGroup
    from spacy.training import Example

    from spacy_piqn.scorer import piqn_score

    nlp = load_pipeline(model, threads, gpu_id)
    examples = gold_examples(nlp, data)
    if not examples:
        raise ValueError(f"no docs in {data}")
    predicted = list(nlp.pipe((eg.predicted for eg in examples), batch_size=batch_size))
    scored = []
    for doc, eg in zip(predicted, examples):
        if system.startswith("ner"):
            doc.spans["sc"] = SpanGroup(doc, name="sc", spans=list(doc.ents))
        scored.append(Example(doc, eg.reference))
    scores = piqn_score(scored, spans_key="sc")
    word_lists = [words_of(eg.reference) for eg in examples]
    sents = words = enc_sents = enc_words = None
    if repeats > 0:
        sents, words = pipe_rate(nlp, word_lists, batch_size, repeats)
    pipe = ENCODERS[encoder].pipe
    if repeats > 0 and pipe in nlp.pipe_names:
        with nlp.select_pipes(enable=[pipe]):
            enc_sents, enc_words = pipe_rate(nlp, word_lists, batch_size, repeats)
    return {
        "p": scores["spans_sc_p"],
        "r": scores["spans_sc_r"],
        "f": scores["spans_sc_f"],
        "loc_f": scores["spans_sc_loc_f"],
        "cls_f": scores["spans_sc_cls_f"],
        "per_type": scores.get("spans_sc_per_type"),
        "n_docs": len(examples),
        "n_words": sum(len(words) for words in word_lists),
        "infer_sents_per_s": sents,
        "infer_words_per_s": words,
        "encoder_sents_per_s": enc_sents,
        "encoder_words_per_s": enc_words,
        "batch_size": batch_size,
        "torch_threads": torch.get_num_threads(),
        "repeats": repeats,
        "gpu_id": gpu_id,
    }


# ---------------------------------------------------------------------------------------------------- run


@dataclass
class Trained:
    """What one training run left for its evaluation."""

    system: str
    encoder: str
    dataset: str
    budget: Budget
    run_dir: Path
    config_path: Path
    code: int
    train_s: float
    train_peak: float
    train_load: float
    killed: bool = False  # by run_watched past wall_s + grace_s: evaluated from model-best all the same


def kill_after_s(budget: Budget, args: argparse.Namespace) -> float:
    """When a training that ignores its time limit is killed: a CPU-time limit can take many times as long in wall
    time on a loaded machine (a 1,200 s CPU budget took over 4,000 s of wall time beside five other jobs on 2
    cores), so that one is only a guard against a hung process."""
    return budget.wall_s * (10 if args.clock == "cpu" else 1) + args.grace_s


def train_one(
    system: str,
    encoder: str,
    dataset: str,
    mode_name: str,
    budget: Budget,
    data: dict[str, Path],
    ngram_max: int | None,
    args: argparse.Namespace,
) -> Trained:
    run_dir = args.runs_dir / mode_name / dataset / encoder / system
    run_dir.mkdir(parents=True, exist_ok=True)
    config_path = write_run_config(
        system, encoder, dataset, budget, data["train"], data["dev"], run_dir, ngram_max, args.trf_name, args.set,
        args.clock,
    )  # fmt: skip
    train_cmd = [
        sys.executable, "-m", "spacy", "train", str(config_path),
        "--output", str(run_dir), "--code", str(LOGGER_CODE), "--gpu-id", str(args.gpu_id),
    ]  # fmt: skip
    from spacy.util import load_config

    max_steps = load_config(config_path)["training"]["max_steps"]  # a --set may override the budget's
    print(f"[{dataset}/{encoder}/{system}] training: max_steps={max_steps}, wall limit {budget.wall_s:g}s, "
          f"eval every {budget.eval_frequency} steps, {args.train_threads} thread(s), gpu_id {args.gpu_id}; "
          f"log {run_dir / 'train.log'}", flush=True)  # fmt: skip
    train_load = round(os.getloadavg()[0], 2)
    code, train_s, train_peak, killed = run_watched(
        train_cmd, run_dir / "train.log", child_env(args.train_threads), kill_after_s(budget, args)
    )
    return Trained(
        system, encoder, dataset, budget, run_dir, config_path, code, train_s, train_peak, train_load, killed
    )


def evaluate_one(
    trained: Trained, mode_name: str, data: dict[str, Path], ngram_max: int | None, args: argparse.Namespace,
    env_info: dict[str, Any],
) -> tuple[RunResult, list[dict[str, Any]]]:  # fmt: skip
    mode = MODES[mode_name]
    system, encoder, dataset, budget, run_dir = (
        trained.system, trained.encoder, trained.dataset, trained.budget, trained.run_dir
    )  # fmt: skip
    code, train_s, train_peak, train_load = trained.code, trained.train_s, trained.train_peak, trained.train_load
    config_path = trained.config_path
    evals, stop = read_train_log(run_dir / "train_log.jsonl")
    model = run_dir / "model-best"
    if not (model / "meta.json").exists():
        model = run_dir / "model-last"
    if (code != 0 and stop is None and not trained.killed) or not (model / "meta.json").exists():
        raise RuntimeError(f"spacy train failed (exit {code}); see {run_dir / 'train.log'}")
    from spacy.util import load_config

    run_config = load_config(config_path, interpolate=True)
    # A --set of training.max_steps overrides the budget's.
    max_steps = run_config["training"]["max_steps"]
    steps, stopped_by = stop_point(evals, stop, trained.killed, max_steps)
    f_key = TRAIN_F_KEY[system]
    best = max(evals, key=lambda row: row["score"]) if evals else None
    batch_size = args.batch_size or ENCODERS[encoder].batch_size
    last_f = None
    if stop and best and stop["steps"] > best["step"] + 1 and (run_dir / "model-last" / "meta.json").exists():
        # A time limit stops training between evaluations: spaCy's model-best lacks the updates since the last
        # one, so model-last (saved with the same weight averages) is scored once more and kept if it is better.
        last_json = run_dir / "infer-last.json"
        last_cmd = [
            sys.executable, str(Path(__file__).resolve()), "infer", str(run_dir / "model-last"), str(data["dev"]),
            "--system", system, "--encoder", encoder, "--batch-size", str(batch_size), "--threads",
            str(args.infer_threads), "--repeats", "0", "--output", str(last_json), "--gpu-id", str(args.gpu_id),
        ]  # fmt: skip
        code, _, _, _ = run_watched(last_cmd, run_dir / "infer-last.log", child_env(args.infer_threads), 3600)
        if code != 0:
            raise RuntimeError(f"scoring model-last failed (exit {code}); see {run_dir / 'infer-last.log'}")
        last_f = json.loads(last_json.read_text())["f"] or 0.0
        if last_f > best["scores"].get(f_key, 0.0):
            model = run_dir / "model-last"
    print(f"[{dataset}/{encoder}/{system}] trained {steps} steps in {train_s:.0f}s (stopped by {stopped_by}), "
          f"best dev {f_key} {100 * best['scores'].get(f_key, 0):.2f} at step {best['step']}"
          f"{'' if last_f is None else f', model-last {100 * last_f:.2f}'}; evaluating {model.name}",
          flush=True)  # fmt: skip

    infer_json = run_dir / "infer.json"
    infer_cmd = [
        sys.executable, str(Path(__file__).resolve()), "infer", str(model), str(data["dev"]),
        "--system", system, "--encoder", encoder, "--batch-size", str(batch_size), "--threads", str(args.infer_threads),
        "--repeats", str(mode.repeats if args.repeats is None else args.repeats), "--output", str(infer_json),
        "--gpu-id", str(args.gpu_id),
    ]  # fmt: skip
    infer_load = round(os.getloadavg()[0], 2)
    code, infer_s, infer_peak, _ = run_watched(
        infer_cmd, run_dir / "infer.log", child_env(args.infer_threads), args.infer_timeout_s
    )
    if code != 0:
        raise RuntimeError(f"inference failed (exit {code}); see {run_dir / 'infer.log'}")
    measured = json.loads(infer_json.read_text())
    extra = {
        "train_peak_rss_mb": round(train_peak, 1),
        "infer_peak_rss_mb": round(infer_peak, 1),
        "encoder_sents_per_s": rounded(measured["encoder_sents_per_s"]),
        "encoder_words_per_s": rounded(measured["encoder_words_per_s"]),
        "gpu_id": args.gpu_id,
        "parallel_training": args.parallel,
        "batch_size": measured["batch_size"],
        "torch_threads": measured["torch_threads"],
        "train_threads": args.train_threads,
        "max_steps": max_steps,
        "wall_limit_s": budget.wall_s,
        "eval_frequency": budget.eval_frequency,
        "steps": steps,
        "stopped_by": stopped_by,
        "train_loop_s": round(stop["wall_s"] if stop else (evals[-1]["wall_s"] if evals else train_s), 1),
        # The training loop's time on the budget's clock (CPU seconds with --clock cpu).
        "train_loop_budget_s": round(stop["budget_s"], 1) if stop and "budget_s" in stop else None,
        "best_step": best["step"] if best else None,
        "model": model.name,
        "model_last_f": None if last_f is None else round(100 * last_f, 2),
        "units": args.units,
        "clock": args.clock,
        "n_train_docs": env_info["n_train"][dataset],
        "n_dev_docs": measured["n_docs"],
        "n_dev_words": measured["n_words"],
        "config": str(config_path.relative_to(REPO) if config_path.is_relative_to(REPO) else config_path),
        "dirty": env_info["dirty"],
        "load_avg_1m": {"train_start": train_load, "infer_start": infer_load},
        "versions": env_info["versions"],
    }
    if system in PIQN_SYSTEMS:
        extra["decoding"] = DATASETS[dataset].piqn_decoding
    changed = {dotted: value for target, dotted, value in args.set if target == system}
    if changed:
        extra["set"] = changed
    if system.startswith("spancat"):
        extra["ngram_sizes"] = f"1-{ngram_max}"
    if ENCODERS[encoder].transformer:
        extra["trf_name"] = args.trf_name or "config default"
    budget_name = f"{budget.wall_s / 60:g}min" if stopped_by != "max_steps" else f"{max_steps}steps"
    result = RunResult(
        system=system,
        encoder=encoder,
        dataset=dataset,
        split=SPLIT,
        seed=run_config["training"]["seed"],
        budget=budget_name,
        p=percent(measured["p"]),
        r=percent(measured["r"]),
        f=percent(measured["f"]),
        loc_f=percent(measured["loc_f"]),
        cls_f=percent(measured["cls_f"]),
        train_s=round(train_s, 1),
        infer_sents_per_s=rounded(measured["infer_sents_per_s"]),
        infer_words_per_s=rounded(measured["infer_words_per_s"]),
        peak_rss_mb=round(max(train_peak, infer_peak), 1),
        commit=env_info["commit"],
        date=env_info["date"],
        machine=env_info["machine"],
        mode=mode_name,
        extra=extra,
    )
    curve = [{"wall_s": row["wall_s"], "step": row["step"], "f": row["scores"].get(f_key)} for row in evals]
    return result, curve


def percent(value: float | None) -> float | None:
    """Scores are stored in %, to two decimals."""
    return None if value is None else round(100 * value, 2)


def rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def count(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def markdown_table(results: list[RunResult]) -> str:
    header = (
        "| dataset | encoder | system | P | R | F | loc F | cls F | steps (stop) | train s | Docs/s | words/s "
        "| encoder Docs/s | peak RSS train / infer MB |"
    )
    rule = "|" + "|".join(["---"] * 3 + ["---:"] * 11) + "|"
    rows = [header, rule]
    for res in results:
        x = res.extra
        system = res.system + (f" ({x['decoding']})" if "decoding" in x else "")
        system += f" (ngrams {x['ngram_sizes']})" if "ngram_sizes" in x else ""
        system += "".join(f" ({key}={value})" for key, value in x.get("set", {}).items())
        rows.append(
            f"| {res.dataset} | {res.encoder} | {system} | {pct(res.p)} | {pct(res.r)} | {pct(res.f)} "
            f"| {pct(res.loc_f)} | {pct(res.cls_f)} | {x['steps']} ({x['stopped_by']}) | {res.train_s:.0f} "
            f"| {count(res.infer_sents_per_s)} | {count(res.infer_words_per_s)} | {count(x['encoder_sents_per_s'])} "
            f"| {x['train_peak_rss_mb']:.0f} / {x['infer_peak_rss_mb']:.0f} |"
        )
    return "\n".join(rows)


def plot_curves(curves: dict[tuple[str, str, str], list[dict[str, Any]]], mode: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({(dataset, encoder) for dataset, encoder, _ in curves})
    fig, axes = plt.subplots(1, len(groups), figsize=(5.5 * len(groups), 4), squeeze=False)
    for ax, (dataset, encoder) in zip(axes[0], groups):
        for (d, e, system), points in sorted(curves.items()):
            if (d, e) != (dataset, encoder) or not points:
                continue
            decoding = DATASETS[dataset].piqn_decoding
            label = f"{system} ({decoding})" if system in PIQN_SYSTEMS else system
            ax.plot([p["wall_s"] for p in points], [100 * (p["f"] or 0.0) for p in points], marker=".", label=label)
        ax.set_title(f"{dataset} dev, {encoder} ({mode} mode)")
        ax.set_xlabel("training-loop wall time, s (dev evaluations included)")
        ax.set_ylabel("strict F1 (%)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_command(args: argparse.Namespace) -> None:
    mode = MODES[args.mode]
    datasets = args.datasets.split(",") if args.datasets else list(DATASETS)
    encoders = args.encoders.split(",") if args.encoders else list(mode.encoders)
    for name, known in (("dataset", DATASETS), ("encoder", ENCODERS)):
        for value in datasets if name == "dataset" else encoders:
            if value not in known:
                raise SystemExit(f"error: unknown {name} {value!r}; choose from {', '.join(known)}")
    commit, dirty = git_commit()
    env_info: dict[str, Any] = {
        "commit": commit,
        "dirty": dirty,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_description(args.gpu_id),
        "n_train": {},
        "versions": package_versions(),
    }
    print(f"mode {args.mode}: datasets {datasets}, encoders {encoders}; commit {commit}{' (dirty)' if dirty else ''}; "
          f"{env_info['machine']}", flush=True)  # fmt: skip
    started = time.perf_counter()
    results: list[RunResult] = []
    curves: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for dataset in datasets:
        src = args.data_dir / dataset
        data_dir = args.runs_dir / "data" / dataset
        n_train = mode.n_train if args.n_train is None else args.n_train
        n_dev = mode.n_dev if args.n_dev is None else args.n_dev
        train_path, train_jsonl = prepare_split(src / "train.jsonl", data_dir, "train", n_train, units=args.units)
        dev_path, dev_jsonl = prepare_split(src / "dev.jsonl", data_dir, "dev", n_dev, units=args.units)
        data = {"train": train_path, "dev": dev_path}
        env_info["n_train"][dataset] = len(read_jsonl(train_jsonl))
        print(f"[{dataset}] data: {env_info['n_train'][dataset]} train / {len(read_jsonl(dev_jsonl))} dev sentences: "
              f"{train_path}, {dev_path}", flush=True)  # fmt: skip
        baseline = DATASETS[dataset].baseline
        ngram_max = None
        if baseline == "spancat":
            ngram_max, coverage, n_spans = span_length_coverage(train_jsonl)
            print(f"[{dataset}] spancat ngram sizes 1-{ngram_max}: {100 * coverage:.2f}% of the {n_spans} training "
                  f"spans (target >= {100 * COVERAGE_TARGET:.1f}%)", flush=True)  # fmt: skip
        for encoder in encoders:
            budget = mode.budgets[encoder]
            if args.max_steps is not None or args.wall_s is not None or args.eval_frequency is not None:
                budget = Budget(
                    max_steps=args.max_steps if args.max_steps is not None else budget.max_steps,
                    wall_s=args.wall_s if args.wall_s is not None else budget.wall_s,
                    eval_frequency=args.eval_frequency if args.eval_frequency is not None else budget.eval_frequency,
                )
            systems = [s for s in (*PIQN_SYSTEMS, baseline, TUNED[baseline]) if s in ENCODERS[encoder].configs]
            if args.systems:
                systems = [s for s in systems if s in args.systems.split(",")]

            train = partial(
                train_one, encoder=encoder, dataset=dataset, mode_name=args.mode, budget=budget, data=data,
                ngram_max=ngram_max, args=args,
            )  # fmt: skip
            if args.parallel:
                # Concurrent training (e.g. several processes sharing one GPU); evaluation stays sequential.
                with ThreadPoolExecutor(max_workers=len(systems)) as pool:
                    trained = list(pool.map(train, systems))
            else:
                trained = [train(system) for system in systems]
            for run in trained:
                system = run.system
                result, curve = evaluate_one(run, args.mode, data, ngram_max, args, env_info)
                results.append(result)
                curves[(dataset, encoder, system)] = curve
                with args.results.open("a", encoding="utf8") as f:
                    f.write(json.dumps(result.row()) + "\n")
                print(f"[{dataset}/{encoder}/{system}] F {pct(result.f)}, {count(result.infer_sents_per_s)} Docs/s; "
                      f"appended to {args.results}", flush=True)  # fmt: skip
    table = markdown_table(results)
    print()
    print(table)
    (args.runs_dir / args.mode).mkdir(parents=True, exist_ok=True)
    (args.runs_dir / args.mode / "table.md").write_text(table + "\n", encoding="utf8")
    try:
        plot_curves(curves, args.mode, args.plot)
        print(f"\nF1-over-time plot: {args.plot}; total {time.perf_counter() - started:.0f}s")
    except ImportError as err:
        print(f"\nno plot ({err}); total {time.perf_counter() - started:.0f}s")


def infer_command(args: argparse.Namespace) -> None:
    measured = infer(
        args.model, args.data, args.system, args.encoder, args.batch_size, args.threads, args.repeats, args.gpu_id
    )
    print(json.dumps(measured, indent=2))
    if args.output is not None:
        args.output.write_text(json.dumps(measured), encoding="utf8")


# Tokens written without a space before them (closing punctuation), and after them (opening brackets).
CLOSING = re.compile(r"^[,.;:)\]?!%]+$")
OPENING = {"(", "["}


def written_spaces(words: Sequence[str]) -> list[bool]:
    """Whether a space follows each word when gold tokens are written as text: none before closing punctuation
    or after an opening bracket (``(``, ``NF-kappa``, ``B``, ``)``, ``.`` → ``(NF-kappa B).``)."""
    return [
        i + 1 < len(words) and word not in OPENING and not CLOSING.match(words[i + 1]) for i, word in enumerate(words)
    ]


def raw_text_scores(model: Path, jsonl: Path, group: str, threads: int, batch_size: int) -> dict[str, Any]:
    """How a pipeline does on running text: strict P/R/F of the same gold sentences fed one per Doc, in
    multi-sentence Docs with and without sentence starts (gold tokens), and as plain text (``nlp(text)``, the
    pipeline's own tokenizer; predictions scored where they align with the gold tokens), whole and one sentence
    per text, which separates what the tokenizer costs from what running text costs; and whole as written
    (``written_spaces``: punctuation attached, as in the source text). ``group``: "documents"
    (the doc-id file beside ``jsonl``) or a number of consecutive sentences per Doc."""
    from spacy.tokens import Doc, Span
    from spacy.training import Example

    from spacy_piqn.scorer import piqn_score

    nlp = load_pipeline(model, threads)
    rows = [json.loads(line) for line in read_jsonl(jsonl)]
    if group == "documents":
        ids = jsonl.with_name(f"{jsonl.stem}.doc_ids.txt").read_text(encoding="utf8").splitlines()
        groups: list[list[int]] = []
        for i, doc_id in enumerate(ids):
            if i == 0 or doc_id != ids[i - 1]:
                groups.append([])
            groups[-1].append(i)
    else:
        size = int(group)
        groups = [list(range(i, min(i + size, len(rows)))) for i in range(0, len(rows), size)]

    def reference(members: list[int], sent_starts: bool, written: bool = False) -> Doc:
        words, starts, spans = [], [], []
        for i in members:
            offset = len(words)
            words += rows[i]["tokens"]
            starts += [True] + [False] * (len(rows[i]["tokens"]) - 1)
            spans += [(e["start"] + offset, e["end"] + offset, e["label"]) for e in rows[i]["entities"]]
        spaces = written_spaces(words) if written else None
        doc = Doc(nlp.vocab, words=words, spaces=spaces, sent_starts=starts if sent_starts else None)
        doc.spans["sc"] = [Span(doc, a, b, label=label) for a, b, label in spans]
        return doc

    def score(references: list[Doc], predicted_input: list[Any]) -> dict[str, Any]:
        predicted = list(nlp.pipe(predicted_input, batch_size=batch_size))
        scores = piqn_score([Example(p, r) for p, r in zip(predicted, references)], spans_key="sc")
        crossing = 0
        for p, r in zip(predicted, references):
            bounds = {t.idx for t in r if t.is_sent_start}
            for span in p.spans.get("sc", []):
                start_char, end_char = span.start_char, span.end_char
                crossing += any(start_char < b < end_char for b in bounds)
        return {
            "p": percent(scores["spans_sc_p"]),
            "r": percent(scores["spans_sc_r"]),
            "f": percent(scores["spans_sc_f"]),
            "n_docs": len(references),
            "n_predicted": sum(len(p.spans.get("sc", [])) for p in predicted),
            "crossing_sentences": crossing,
        }

    with_starts = [reference(m, True) for m in groups]
    written = [reference(m, True, written=True) for m in groups]
    sentences = [reference([i], True) for i in range(len(rows))]

    def tokens(doc: Doc) -> Doc:
        return Doc(nlp.vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc])

    def starts_only(doc: Doc) -> Doc:
        return Doc(nlp.vocab, words=[t.text for t in doc], sent_starts=[t.is_sent_start for t in doc])

    return {
        "model": str(model),
        "data": str(jsonl),
        "group": group,
        "one_sentence_per_doc": score(sentences, [tokens(d) for d in sentences]),
        "docs_with_sentence_starts": score(with_starts, [starts_only(d) for d in with_starts]),
        "docs_without_sentence_starts": score(with_starts, [tokens(d) for d in with_starts]),
        "plain_text": score(with_starts, [d.text for d in with_starts]),
        "plain_text_one_sentence_per_doc": score(sentences, [d.text for d in sentences]),
        "text_as_written": score(written, [d.text for d in written]),
    }


def raw_command(args: argparse.Namespace) -> None:
    result = raw_text_scores(args.model, args.data, args.group, args.threads, args.batch_size)
    print("| input | P | R | F | crossing a sentence |")
    print("|---|---:|---:|---:|---:|")
    for key, value in result.items():
        if isinstance(value, dict):
            print(f"| {key} ({value['n_docs']} docs) | {value['p']} | {value['r']} | {value['f']} "
                  f"| {value['crossing_sentences']} |")  # fmt: skip
    if args.output is not None:
        args.output.write_text(json.dumps(result, indent=2), encoding="utf8")


def span_groups(span, seen: set[str]) -> list[str]:
    """The groups of ``breakdown`` a span falls in: all, its length in words (4 = 4 or more), seen or unseen (whether
    its lowercased text is an entity anywhere in training)."""
    length = {1: "1 word", 2: "2 words", 3: "3 words"}.get(len(span), "4+ words")
    return ["all", length, "seen" if span.text.lower() in seen else "unseen"]


def breakdown_counts(pairs, seen: set[str]) -> dict[str, list[int]]:
    """Per group of ``span_groups``: [correct predictions, predictions, correct gold spans, gold spans] over
    (predicted doc, reference doc) pairs on the same tokens; a prediction is correct if start, end and label match."""
    counts: dict[str, list[int]] = {}
    for predicted, reference in pairs:
        gold = {(s.start, s.end, s.label_) for s in reference.spans[SPANS_KEY]}
        found = {(s.start, s.end, s.label_) for s in predicted.spans.get(SPANS_KEY, [])}
        for spans, doc, total, hits in ((found, predicted, 1, 0), (gold, reference, 3, 2)):
            other = gold if total == 1 else found
            for start, end, label in spans:
                for group in span_groups(doc[start:end], seen):
                    row = counts.setdefault(group, [0, 0, 0, 0])
                    row[total] += 1
                    row[hits] += (start, end, label) in other
    return counts


def breakdown_command(args: argparse.Namespace) -> None:
    """P / R / F of pipelines on DATA by gold span length and by whether the span's text is an entity in TRAIN:
    where one system gains or loses against another."""
    import spacy

    seen = {s.text.lower() for doc in read_gold_docs(args.train, spacy.blank("xx").vocab) for s in doc.spans[SPANS_KEY]}
    tables = {}
    for model in args.models:
        nlp = load_pipeline(model, args.threads)
        examples = gold_examples(nlp, args.data)
        predicted = nlp.pipe((eg.predicted for eg in examples), batch_size=args.batch_size)
        tables[model] = breakdown_counts(zip(predicted, (eg.reference for eg in examples)), seen)
    first = tables[args.models[0]]
    print("| gold spans | " + " | ".join(f"{model} P / R / F" for model in args.models) + " |")
    print("|---|" + "---|" * len(args.models))
    for group in sorted(first, key=lambda g: (g != "all", not g[0].isdigit(), g)):
        cells = []
        for model in args.models:
            tp, n_pred, hits, n_gold = tables[model].get(group, [0, 0, 0, 0])
            p, r = 100 * tp / max(n_pred, 1), 100 * hits / max(n_gold, 1)
            cells.append(f"{p:.1f} / {r:.1f} / {2 * p * r / max(p + r, 1e-9):.1f}")
        print(f"| {group} ({first[group][3]}) | " + " | ".join(cells) + " |")


# ------------------------------------------------------------------------------------- other measurements


def memory_command(args: argparse.Namespace) -> None:
    """Does inference memory grow over many docs? ``nlp.pipe`` over a stream of ``--n-docs`` fresh gold-token docs
    (the docs of DATA cycled), the process's RSS after every ``--every`` docs."""
    import itertools

    from spacy.tokens import Doc

    nlp = load_pipeline(args.model, args.threads, args.gpu_id)
    word_lists = [words_of(doc) for doc in read_gold_docs(args.data, nlp.vocab, skip_empty=True)]
    if not word_lists:
        raise SystemExit(f"error: no docs in {args.data}")
    stream = (Doc(nlp.vocab, words=w) for w in itertools.islice(itertools.cycle(word_lists), args.n_docs))
    print(f"{args.model}: {args.n_docs:,} docs ({len(word_lists):,} of {args.data} cycled), batch {args.batch_size}, "
          f"{args.threads} torch thread(s)")  # fmt: skip
    print("| docs | seconds | RSS MB | peak RSS MB |")
    print("|---:|---:|---:|---:|")
    start = time.perf_counter()
    for i, _doc in enumerate(nlp.pipe(stream, batch_size=args.batch_size), start=1):
        if i % args.every == 0 or i == args.n_docs:
            print(f"| {i:,} | {time.perf_counter() - start:.1f} | {rss_mb():.0f} | {peak_rss_mb():.0f} |", flush=True)


LABELS_SYSTEMS = ("piqn", "spancat")


def relabelled_examples(nlp, gold: list, n_labels: int, seed: int = 0) -> tuple[list, list[str]]:
    """Examples of the gold docs' words and spans, each span relabelled with one of ``n_labels`` synthetic types
    (seeded), so that only the number of types changes."""
    from spacy.tokens import Doc, Span
    from spacy.training import Example

    rng = random.Random(seed)
    labels = [f"T{i:04d}" for i in range(n_labels)]
    examples = []
    for ref in gold:
        doc = Doc(nlp.vocab, words=words_of(ref))
        doc.spans[SPANS_KEY] = [Span(doc, s.start, s.end, rng.choice(labels)) for s in ref.spans[SPANS_KEY]]
        examples.append(Example(Doc(nlp.vocab, words=words_of(ref)), doc))
    return examples, labels


def labels_measure(
    system: str, gold: list, n_labels: int, batch_size: int, repeats: int
) -> tuple[float, float, float, int]:
    """(s per update: median of 8 after 2 warm-ups, model sents/s, nlp.pipe sents/s, labels) of a fresh, untrained
    pipeline of the shipped tok2vec config of ``system`` with ``n_labels`` entity types."""
    import statistics

    from spacy.util import load_model_from_config
    from thinc.api import Config, fix_random_seed

    fix_random_seed(0)
    config = Config().from_disk(
        ENCODERS["tok2vec"].configs[system], overrides={"paths.train": "unused.spacy", "paths.dev": "unused.spacy"}
    )
    nlp = load_model_from_config(config, auto_fill=True)
    examples, labels = relabelled_examples(nlp, gold, n_labels)
    component = nlp.get_pipe(system)
    for label in labels:  # every label exists, even those no sampled span drew
        component.add_label(label)
    optimizer = nlp.initialize(lambda: examples)
    batches = [examples[i : i + 40] for i in range(0, len(examples), 40)][:10]
    warm_ups = min(2, len(batches) - 1)  # fewer docs than 3 batches (a smoke test): time what there is
    times = []
    for i, batch in enumerate(batches):
        start = time.perf_counter()
        nlp.update(batch, sgd=optimizer)
        if i >= warm_ups:
            times.append(time.perf_counter() - start)
    word_lists = [words_of(eg.reference) for eg in examples]

    def forward(docs: list) -> None:
        # The model alone: the encoder and the component's predict, no spans written (an untrained spancat keeps
        # about half of all n-gram x label pairs at threshold 0.5, which is what nlp.pipe then times).
        for i in range(0, len(docs), batch_size):
            batch = docs[i : i + batch_size]
            for name, proc in nlp.pipeline:
                if name == system:
                    proc.predict(batch)
                else:
                    batch = list(proc.pipe(batch))

    forward(fresh_docs(nlp.vocab, word_lists[:batch_size]))
    model_s = best_seconds(forward, repeats, lambda: fresh_docs(nlp.vocab, word_lists))
    pipe_sents, _ = pipe_rate(nlp, word_lists, batch_size, repeats)
    return statistics.median(times), len(word_lists) / model_s, pipe_sents, len(labels)


def labels_command(args: argparse.Namespace) -> None:
    """Training update time and inference speed of piqn and spancat as the number of entity types grows."""
    import spacy
    import torch

    torch.set_num_threads(args.threads)
    gold = read_gold_docs(args.data, spacy.blank("en").vocab, limit=args.docs, skip_empty=True)
    n_spans = sum(len(doc.spans[SPANS_KEY]) for doc in gold)
    print(f"{len(gold)} sentences of {args.data}, {n_spans} spans, {args.threads} thread(s), batch {args.batch_size}")
    print("| system | labels | s/update (40 docs) | model sents/s | nlp.pipe sents/s (untrained) |")
    print("|---|---:|---:|---:|---:|")
    for n_labels in (int(x) for x in args.labels.split(",")):
        for system in LABELS_SYSTEMS:
            per_update, model, pipe, n = labels_measure(system, gold, n_labels, args.batch_size, args.repeats)
            print(f"| {system} | {n:,} | {per_update:.3f} | {model:.0f} | {pipe:.0f} |", flush=True)


def ray_command(args: argparse.Namespace) -> None:
    """Sentences/s of a trained pipeline over a corpus: ``nlp.pipe`` against Ray Data with N workers."""
    try:
        import ray
    except ImportError:
        raise SystemExit(
            'error: `run_bench.py ray` needs Ray, which is not installed here: pip install -e ".[ray]"'
        ) from None
    import tempfile

    from spacy_piqn.scale import predict_jsonl_with_ray, read_predictions

    nlp = load_pipeline(args.model, args.threads)
    word_lists = [words_of(doc) for doc in read_gold_docs(args.data, nlp.vocab, limit=args.docs, skip_empty=True)]
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "in.jsonl"
        corpus.write_text("".join(json.dumps({"id": str(i), "tokens": w}) + "\n" for i, w in enumerate(word_lists)))
        base, docs = timed_pipe(nlp, word_lists, args.batch_size, repeats=1, keep=True)
        expected = [[(s.start, s.end, s.label_) for s in doc.spans.get(SPANS_KEY, [])] for doc in docs]
        n = len(word_lists)
        print(f"{n:,} docs, {sum(len(w) for w in word_lists):,} words, batch {args.batch_size}, "
              f"{args.threads} torch thread(s) per process")  # fmt: skip
        print("| run | workers | start-up s | predict + write s | sents/s | same spans |")
        print("|---|---:|---:|---:|---:|---|")
        print(f"| `nlp.pipe` | - | - | {base:.1f} | {n / base:.0f} | yes |", flush=True)
        for workers in (int(w) for w in args.workers.split(",")):
            start = time.perf_counter()
            ray.init(num_cpus=workers * args.threads, include_dashboard=False, log_to_driver=False)
            ray.data.DataContext.get_current().enable_progress_bars = False
            startup = time.perf_counter() - start
            out = Path(tmp) / f"out{workers}"
            start = time.perf_counter()
            predict_jsonl_with_ray(
                args.model, corpus, out, workers=workers, batch_size=args.batch_size, threads_per_worker=args.threads
            )
            took = time.perf_counter() - start
            ray.shutdown()
            same = [[tuple(s[:3]) for s in row["spans"]] for row in read_predictions(out)] == expected
            print(f"| Ray Data | {workers} | {startup:.1f} | {took:.1f} | {n / took:.0f} | {same} |", flush=True)


def parse_override(text: str) -> tuple[str, str, Any]:
    """ "piqn_qt:components.piqn.model.head.lr_scale=1" -> ("piqn_qt", "components.piqn.model.head.lr_scale", 1)."""
    try:
        target, rest = text.split(":", 1)
        dotted, value = rest.split("=", 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected SYSTEM:SECTION.KEY=VALUE, got {text!r}") from None
    try:
        return target, dotted, json.loads(value)
    except json.JSONDecodeError:
        return target, dotted, value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="train, evaluate and time the grid of a mode")
    run.add_argument("--mode", choices=sorted(MODES), default="quick")
    run.add_argument("--datasets", help=f"comma-separated subset of {','.join(DATASETS)} (default: all)")
    run.add_argument("--encoders", help=f"comma-separated subset of {','.join(ENCODERS)} (default: the mode's)")
    run.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="holds <dataset>/{train,dev}.jsonl")
    run.add_argument("--trf-name", help="vars.trf_name of the minilm configs (default: the configs' own)")
    run.add_argument("--n-train", type=int, help="override the mode's number of train sentences (0: all)")
    run.add_argument("--n-dev", type=int, help="override the mode's number of dev sentences (0: all)")
    run.add_argument(
        "--repeats", type=int, help="timed nlp.pipe passes, best counts (default: the mode's; 0: scored, not timed)"
    )
    run.add_argument("--max-steps", type=int, help="override the mode's max_steps (all systems alike)")
    run.add_argument("--wall-s", type=float, help="override the mode's training time limit (all systems alike)")
    run.add_argument("--eval-frequency", type=int, help="override the mode's steps between dev evaluations")
    run.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="what the time limit counts: the training process's CPU time (default; other load on the machine "
        "does not shrink the budget) or wall time",
    )
    run.add_argument("--batch-size", type=int, help="nlp.pipe batch size (default: 256 tok2vec, 64 minilm)")
    run.add_argument(
        "--units",
        choices=("sentences", "documents"),
        default="sentences",
        help="train and dev Docs: one per sentence, or one per document (from <split>.doc_ids.txt)",
    )
    run.add_argument("--train-threads", type=int, default=1, help="OMP/torch threads of spacy train")
    run.add_argument("--infer-threads", type=int, default=2, help="torch threads for inference and timing")
    run.add_argument(
        "--grace-s",
        type=float,
        default=600,
        help="kill spacy train this long after its wall limit (counted from its start: start-up counts)",
    )
    run.add_argument("--infer-timeout-s", type=float, default=3600)
    run.add_argument("--systems", help=f"comma-separated subset of {','.join(TRAIN_F_KEY)} (default: all)")
    run.add_argument("--gpu-id", type=int, default=-1, help="train and run the pipelines on this GPU (-1: CPU)")
    run.add_argument("--parallel", action="store_true", help="train a dataset's systems at the same time")
    run.add_argument(
        "--set",
        type=parse_override,
        action="append",
        default=[],
        metavar="SYSTEM:SECTION.KEY=JSON",
        help="change one config value of one system, e.g. piqn_qt:components.piqn.model.head.lr_scale=1",
    )
    run.add_argument("--runs-dir", type=Path, default=RUNS, help="where each run keeps its config, logs and models")
    run.add_argument("--results", type=Path, default=BENCH / "results.jsonl")
    run.add_argument("--plot", type=Path, default=DEFAULT_PLOT)
    run.set_defaults(func=run_command)

    inf = sub.add_parser("infer", help="score one trained pipeline on gold tokens and time it")
    inf.add_argument("model", type=Path)
    inf.add_argument("data", type=Path, help=".spacy DocBin with gold doc.spans['sc'], or JSONL (tokens, entities)")
    inf.add_argument("--system", choices=sorted(TRAIN_F_KEY), required=True)
    inf.add_argument("--encoder", choices=sorted(ENCODERS), required=True)
    inf.add_argument("--batch-size", type=int, default=256)
    inf.add_argument("--threads", type=int, default=2)
    inf.add_argument("--repeats", type=int, default=2)
    inf.add_argument("--output", type=Path)
    inf.add_argument("--gpu-id", type=int, default=-1)
    inf.set_defaults(func=infer_command)

    raw = sub.add_parser("raw", help="score one pipeline on sentences, multi-sentence Docs and nlp(text)")
    raw.add_argument("model", type=Path)
    raw.add_argument("data", type=Path, help="JSONL with gold tokens and entities, one sentence per line")
    raw.add_argument("--group", default="10", help="sentences per Doc, or 'documents' (the doc-id file beside data)")
    raw.add_argument("--threads", type=int, default=2)
    raw.add_argument("--batch-size", type=int, default=64)
    raw.add_argument("--output", type=Path)
    raw.set_defaults(func=raw_command)

    brk = sub.add_parser("breakdown", help="P / R / F of pipelines by gold span length and seen / unseen in training")
    brk.add_argument("data", type=Path, help=".spacy DocBin or JSONL with gold tokens and spans (e.g. dev)")
    brk.add_argument("train", type=Path, help="the training data, for which entities count as seen")
    brk.add_argument("models", type=Path, nargs="+")
    brk.add_argument("--threads", type=int, default=2)
    brk.add_argument("--batch-size", type=int, default=256)
    brk.set_defaults(func=breakdown_command)

    mem = sub.add_parser("memory", help="RSS of one pipeline while it processes many docs")
    mem.add_argument("model", type=Path)
    mem.add_argument("data", type=Path, help=".spacy DocBin or JSONL with gold tokens, cycled to --n-docs")
    mem.add_argument("--n-docs", type=int, default=10000)
    mem.add_argument("--every", type=int, default=1000, help="print the RSS after every this many docs")
    mem.add_argument("--batch-size", type=int, default=64)
    mem.add_argument("--threads", type=int, default=1)
    mem.add_argument("--gpu-id", type=int, default=-1)
    mem.set_defaults(func=memory_command)

    lab = sub.add_parser("labels", help="piqn and spancat update time and speed with 5 to 1,000 entity types")
    lab.add_argument("data", type=Path, help=".spacy DocBin or JSONL with gold tokens and spans (e.g. GENIA train)")
    lab.add_argument("--labels", default="5,100,1000", help="numbers of synthetic entity types")
    lab.add_argument("--docs", type=int, default=400, help="the first this many non-empty docs")
    lab.add_argument("--threads", type=int, default=1)
    lab.add_argument("--batch-size", type=int, default=256, help="inference batch size")
    lab.add_argument("--repeats", type=int, default=2, help="timed inference passes, best counts")
    lab.set_defaults(func=labels_command)

    ray_ = sub.add_parser("ray", help="one pipeline over a corpus: nlp.pipe against Ray Data (needs the [ray] extra)")
    ray_.add_argument("model", type=Path)
    ray_.add_argument("data", type=Path, help=".spacy DocBin or JSONL with gold tokens")
    ray_.add_argument("--docs", type=int, default=8000, help="the first this many non-empty docs")
    ray_.add_argument("--workers", default="1,2", help="comma-separated worker counts, one Ray run each")
    ray_.add_argument("--batch-size", type=int, default=64)
    ray_.add_argument("--threads", type=int, default=1, help="torch threads of nlp.pipe and of each worker")
    ray_.set_defaults(func=ray_command)

    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
