#!/usr/bin/env bash
# Each switch between the paper's head and the default alone on top of the paper model (configs/piqn_paper.cfg),
# the default and stock spancat,
# all trained at the same time, one `run_bench.py run` per row and seed (GENIA, tok2vec, full data).
#
#   bench/switch_ablation.sh RUNS_DIR [more run_bench.py run options]
#   SEEDS="0 1" (default) picks the seeds, ROWS the rows in the order they start (default: all), EVAL the
#   evaluation interval (50), SPANCAT=0 leaves spancat out, JOBS=N runs at most N trainings at a time (default:
#   all at once; on a small machine JOBS=2 keeps memory bounded and finishes rows one after the other); the
#   options go to every run, e.g.
#   bench/switch_ablation.sh /tmp/abl --gpu-id 0 --data-dir DATA --max-steps 1000 --wall-s 330 --grace-s 120
#   (the stored curves in bench/switch_ablation_*.jsonl counted wall time: add --clock wall to repeat them)
#
# Every row starts from configs/piqn_tok2vec.cfg (the harness's `piqn`): PAPER holds the --set values that make
# it the paper config; a row drops the values of its one switch. Rows with the default's schedule keep its decay
# over 6,000 updates, whatever --max-steps says, so their first updates match the 20-minute runs'.
# The merge row trains exactly as the paper row (the switch is decoding only).
# Each run writes RUNS_DIR/NAME.log and RUNS_DIR/NAME/.../train_log.jsonl (dev F at every evaluation).
set -u
runs=${1:?usage: switch_ablation.sh RUNS_DIR [run_bench.py run options]}
shift
here=$(cd "$(dirname "$0")" && pwd)
s=piqn
optim="--set $s:training.optimizer.use_averages=false --set $s:training.optimizer.learn_rate=0.001"
size="--set $s:components.piqn.n_slots=30 --set $s:components.piqn.model.head.hidden_width=256"
size+=" --set $s:components.piqn.model.head.n_queries=60 --set $s:components.piqn.model.head.n_layers=3"
size+=" --set $s:components.piqn.model.head.dropout=0.1"
pointer="--set $s:components.piqn.model.head.pointer=\"sigmoid\""
anchor="--set $s:components.piqn.model.head.anchor_strength=0.0"
fusion="--set $s:components.piqn.model.head.pointer_fusion=\"additive\""
cls="--set $s:components.piqn.loss_class_weight=2.0"
merge="--set $s:components.piqn.merge_nested_duplicates=false"
sched="--set $s:training.optimizer.learn_rate.total_steps=6000"
declare -A rows=(
    [paper]="$optim $size $pointer $anchor $fusion $cls $merge"
    [softmax]="$optim $size $anchor $fusion $cls $merge"
    [anchor]="$optim $size $pointer $fusion $cls $merge"
    [bilinear]="$optim $size $pointer $anchor $cls $merge"
    [cls8]="$optim $size $pointer $anchor $fusion $merge"
    [merge]="$optim $size $pointer $anchor $fusion $cls"
    [optim]="$sched $size $pointer $anchor $fusion $cls $merge"
    [small]="$optim $pointer $anchor $fusion $cls $merge"
    [default]="$sched"
)
mkdir -p "$runs"
run() {
    local name=$1 system=$2 seed=$3
    shift 3
    python "$here/run_bench.py" run --mode full --datasets genia --encoders tok2vec --systems "$system" \
        --repeats 1 --train-threads 1 --infer-threads 1 --runs-dir "$runs/$name" --results "$runs/$name.jsonl" \
        --plot "$runs/$name.png" --set "$system:system.seed=$seed" --set "$system:training.eval_frequency=${EVAL:-50}" \
        "$@" >"$runs/$name.log" 2>&1
}
throttle() {
    # Wait for a free slot when JOBS caps the number of trainings at a time.
    while [ -n "${JOBS:-}" ] && [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do
        wait -n
    done
}
for seed in ${SEEDS:-0 1}; do
    for row in ${ROWS:-${!rows[@]}}; do
        throttle
        # shellcheck disable=SC2086  # the row's --set list is meant to split into words
        eval "run ${row}_s$seed piqn $seed ${rows[$row]} \"\$@\"" &
    done
    throttle
    [ "${SPANCAT:-1}" = 0 ] || run "spancat_s$seed" spancat "$seed" "$@" &
done
wait
