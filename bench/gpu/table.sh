#!/usr/bin/env bash
# The MiniLM comparison table in ONE call of a lent GPU machine: the command of a device `run` with
# `carry: [".gpu"]` (made here by bench/gpu/prepare.sh), from the repository root:
#
#   bash bench/gpu/table.sh [ROWS [STEPS]]             # on the GPU machine; results into $OUT
#   bash bench/gpu/table.sh --dry-run [ROWS [STEPS]]   # here, on the CPU: 5 steps, 50/20 sentences, same plumbing
#
# ROWS (default "piqn spancat spancat_tuned,lr=2e-4|3e-4|4e-4 piqn_qt"): trainings run side by side, one
# bench/run_bench.py process each. A row is SYSTEM[,KEY=VALUE...]: SYSTEM one of run_bench.py's minilm systems
# (piqn, piqn_qt, spancat, spancat_tuned, ner), KEY seed, lr (the peak learning rate), ds (dataset: genia, default,
# or conll03), units (sentences, default, or documents: one Doc per document, e.g.
# "piqn,units=sentences|documents,seed=0|1") or a dotted config key; "a|b" in a value makes one row per value.
# STEPS (default 1500): max_steps of every row, which also ends the learning-rate schedule there.
#
# Time: everything is over LIMIT_S (default 580) seconds after the start, inside the device's 600 s command limit.
# After the set-up (wheels, MiniLM, data conversion), each training loop gets what is left minus INIT_S (45: start-up
# and initialization), EVAL_S (60: scoring model-best, and model-last if time stopped the loop) and 15 s for the
# results, as its wall limit (run_bench.py --wall-s, wall clock). A training whose initialization took longer is
# killed 15 s into the evaluation reserve and scored from its last model-best; a row still running 15 s before
# LIMIT_S is killed. Rows stopped by time say so (stopped_by "wall_s" or "killed").
# Back in $OUT: results.jsonl (run_bench.py rows + "table_row"), table.md (the table, dev F at each evaluation),
# logs.tar.xz (every row's config.cfg, train.log, train_log.jsonl, infer logs; GPU load), table.log (this output).
# Other environment: EVAL (steps between dev evaluations, 250), REPEATS (timed nlp.pipe passes per row, 0: not
# timed; speeds of trainings sharing a GPU compare nothing), BENCH_COMMIT (recorded when the copy has no git),
# PYTHON (python3), WORK (scratch folder).
set -uo pipefail
T0=$(date +%s)
cd "$(dirname "$0")/../.." || exit 2
REPO=$PWD
DRY=0
if [[ ${1:-} == --dry-run ]]; then
    DRY=1
    shift
fi
PY=${PYTHON:-python3}
if ((DRY)); then
    ROWS=${1:-"piqn spancat_tuned,lr=2e-4|3e-4 piqn_qt"}
    STEPS=${2:-5}
    EVAL=${EVAL:-5}
    WORK=${WORK:-${TMPDIR:-/tmp}/piqn-table-dry}
    OUT=${OUT:-$WORK-out}
    LIMIT_S=${LIMIT_S:-1800}
    GPU_ID=-1
    SIZES=(--n-train "${N_TRAIN:-50}" --n-dev "${N_DEV:-20}")
else
    ROWS=${1:-"piqn spancat spancat_tuned,lr=2e-4|3e-4|4e-4 piqn_qt"}
    STEPS=${2:-1500}
    EVAL=${EVAL:-250}
    WORK=${WORK:-/tmp/piqn-table}
    LIMIT_S=${LIMIT_S:-580}
    GPU_ID=0
    SIZES=()
    if [[ -z ${OUT:-} ]]; then
        echo "table.sh: OUT is not set: run it as the command of a device run call, or use --dry-run here" >&2
        exit 2
    fi
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT"

say() { echo "[$(($(date +%s) - T0))s] $*"; }
die() {
    say "table.sh: $*" >&2
    exit 2
}

main() {
    say "== check: rows \"$ROWS\", $STEPS steps, limit ${LIMIT_S}s, $( ((DRY)) && echo 'dry run, CPU' || echo GPU)"
    local f
    for f in .gpu/wheels.tar.xz .gpu/pins.txt .gpu/minilm/model.fp16.safetensors.xz .gpu/minilm/config.json \
        .gpu/data.tar.xz; do
        [[ -f $f ]] || die "missing $f: run 'bash bench/gpu/prepare.sh' in the checkout that travels, and name .gpu in the run call's carry"
    done
    "$PY" bench/gpu/kit.py rows "$ROWS" || die "bad ROWS"
    if ((!DRY)); then
        if command -v nvidia-smi >/dev/null; then
            nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
        fi
        "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' || die "torch sees no CUDA GPU"
    fi
    rm -rf "$WORK"
    mkdir -p "$WORK"

    say "== wheels"
    "$PY" bench/gpu/kit.py unpack .gpu/wheels.tar.xz "$WORK" || die "cannot unpack .gpu/wheels.tar.xz"
    local site=$WORK/site
    if ((DRY)); then
        # The cp312 wheels cannot run under this interpreter: install them for 3.12 into a folder of their own
        # (proves the archive installs), and run on this environment's spaCy stack (check-env compares versions).
        "$PY" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --only-binary=:all: \
            --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
            --platform manylinux_2_17_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_27_x86_64 \
            --platform manylinux1_x86_64 --platform manylinux_2_5_x86_64 \
            --target "$WORK/site-cp312" "$WORK"/whl/*.whl || die "wheel install failed"
        say "$(ls "$WORK/site-cp312" | grep -c dist-info) distributions installed for cp312 into $WORK/site-cp312"
    else
        "$PY" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --no-cache-dir \
            --upgrade --target "$site" "$WORK"/whl/*.whl || die "wheel install failed"
    fi
    "$PY" bench/gpu/kit.py site-meta "$site" || die "cannot write spacy-piqn's entry points"
    export PYTHONPATH=$site:$REPO${PYTHONPATH:+:$PYTHONPATH}
    local gpu_flag=()
    ((DRY)) || gpu_flag=(--gpu)
    "$PY" bench/gpu/kit.py check-env .gpu/pins.txt "${gpu_flag[@]}" || die "environment check failed"

    say "== MiniLM and data"
    "$PY" bench/gpu/kit.py minilm-fp32 .gpu/minilm "$WORK/minilm" || die "cannot restore MiniLM"
    "$PY" bench/gpu/kit.py unpack .gpu/data.tar.xz "$WORK/src" || die "cannot unpack .gpu/data.tar.xz"

    local monitor=""
    if ((!DRY)) && command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used,memory.total --format=csv -l 15 \
            >"$WORK/gpu.log" 2>&1 &
        monitor=$!
    fi
    say "== table"
    "$PY" bench/gpu/kit.py table --rows "$ROWS" --steps "$STEPS" --eval-frequency "$EVAL" --data "$WORK/src" \
        --trf "$WORK/minilm" --work "$WORK" --out "$OUT" --gpu-id "$GPU_ID" --t0 "$T0" --limit-s "$LIMIT_S" \
        --init-s "${INIT_S:-45}" --eval-s "${EVAL_S:-60}" --repeats "${REPEATS:-0}" "${SIZES[@]}" \
        --extra-logs "$WORK/gpu.log"
    local rc=$?
    if [[ -n $monitor ]]; then
        kill "$monitor" 2>/dev/null
        wait "$monitor" 2>/dev/null
    fi
    say "== done (exit $rc)"
    return $rc
}

main "$@" 2>&1 | tee "$OUT/table.log"
exit "${PIPESTATUS[0]}"
