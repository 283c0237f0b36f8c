"""The Python half of bench/gpu/prepare.sh (here) and bench/gpu/table.sh (on a lent GPU machine).

Standard library only, except where a command says otherwise, so that it runs under the GPU image's python3
before the carried spaCy stack is installed.

    python bench/gpu/kit.py pack-wheels WHEEL_DIR ARCHIVE      # verify Requires-Dist, strip, repack, tar.xz
    python bench/gpu/kit.py minilm-fp16 MODEL_DIR OUT_DIR        # float16 safetensors + config/tokenizer files
    python bench/gpu/kit.py minilm-fp32 FP16_DIR OUT_DIR         # back to float32 (where the table runs)
    python bench/gpu/kit.py unpack ARCHIVE DEST                  # extract a .tar.xz (no xz binary needed)
    python bench/gpu/kit.py site-meta SITE                       # spacy_piqn dist-info: entry points, version
    python bench/gpu/kit.py check-env PINS [--gpu]               # what imports is what was pinned; GPU usable
    python bench/gpu/kit.py table --rows "piqn spancat ..." ...  # the trainings side by side, results to --out
    python bench/gpu/kit.py rows "piqn spancat_tuned,lr=1e-4|2e-4"   # print how ROWS expands, run nothing
"""

from __future__ import annotations

import argparse
import base64
import configparser
import hashlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"

# The Python packages of the lent machines' 'cuda' image (device KINDS.md, as read there on 2026-11-17), with the
# versions known from a pip list taken there. A carried wheel whose requirement is one of these is covered by the
# image; a known version is checked against the requirement, an unknown one is reported as unchecked.
IMAGE_PACKAGES = """
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core cuda-pathfinder
cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools
formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna
imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver
lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe
matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals
networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime
nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13
nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy
peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments
pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist
python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six
sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile
tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm
transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel
wrapt xarray xxhash yarl zipp
""".split()
IMAGE_VERSIONS = {
    "accelerate": "1.15.0",
    "cupy-cuda13x": "14.2.0",
    "huggingface-hub": "1.33.0",
    "numpy": "2.5.2",
    "safetensors": "0.8.0",
    "sentence-transformers": "6.0.1",
    "sentencepiece": "0.2.2",
    "tokenizers": "0.23.2",
    "torch": "2.11.0",
    "transformers": "5.17.0",
    "triton": "3.6.0",
}
# Where Requires-Dist markers are evaluated: the image's interpreter.
TARGET_ENV = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "extra": "",
}
# The MiniLM files that travel next to the weights (the sentence-transformers extras are not needed).
MINILM_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")
FP16_WEIGHTS = "model.fp16.safetensors.xz"  # xz saves another ~10% (4 MiB)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def mib(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:.1f} MiB"


# ------------------------------------------------------------------------------------------------------ wheels


def wheel_metadata(path: Path) -> tuple[str, str, list[str]]:
    """(canonical name, version, Requires-Dist lines) of a wheel."""
    with zipfile.ZipFile(path) as wheel:
        meta_name = next(n for n in wheel.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA"))
        text = wheel.read(meta_name).decode("utf8")
    headers = text.split("\n\n", 1)[0]
    fields: dict[str, list[str]] = {}
    for line in headers.splitlines():
        if ":" in line and not line.startswith((" ", "\t")):
            key, value = line.split(":", 1)
            fields.setdefault(key.strip(), []).append(value.strip())
    return canonical(fields["Name"][0]), fields["Version"][0], fields.get("Requires-Dist", [])


def check_requirements(wheels: list[Path]) -> list[str]:
    """Every Requires-Dist of every wheel (markers evaluated for the image's python 3.12 on x86-64 Linux, no
    extras) must be met by another carried wheel or by a package of the image. Returns the problems (empty: all
    covered) and prints one line per requirement. Needs ``packaging`` (here: the venv has it)."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    carried = {}
    for path in wheels:
        name, version, _ = wheel_metadata(path)
        if name in carried:
            raise SystemExit(f"two wheels of {name}: {carried[name][1]} and {path.name}; keep one")
        carried[name] = (version, path.name)
    image = {canonical(n) for n in IMAGE_PACKAGES}
    problems = []
    for path in wheels:
        name, version, requires = wheel_metadata(path)
        for line in requires:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate(TARGET_ENV):
                continue
            dep = canonical(req.name)
            spec = str(req.specifier) or "any"
            if dep in carried:
                ok = req.specifier.contains(Version(carried[dep][0]), prereleases=True)
                where = f"carried {carried[dep][0]}"
            elif dep in image and dep in IMAGE_VERSIONS:
                ok = req.specifier.contains(Version(IMAGE_VERSIONS[dep]), prereleases=True)
                where = f"image {IMAGE_VERSIONS[dep]}"
            elif dep in image:
                ok, where = True, "image (version not known here: unchecked)"
            else:
                ok, where = False, "MISSING"
            print(f"  {name} {version} needs {dep} {spec}: {where}{'' if ok else '  <-- not met'}")
            if not ok:
                problems.append(f"{name} {version} needs {dep} {spec}: {where}")
    return problems


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def repack_wheel(src: Path, dest_dir: Path, strip: str | None) -> tuple[int, int]:
    """``src`` rewritten into ``dest_dir``: shared libraries stripped (``strip --strip-unneeded``: their debug
    symbols and local symbols go, the dynamic symbols Python needs stay), members stored uncompressed (the archive
    around the wheels compresses them all together, far better than zip's deflate), RECORD with the new hashes.
    Returns (bytes of .so before, after)."""
    before = after = 0
    dest = dest_dir / src.name
    with zipfile.ZipFile(src) as old, zipfile.ZipFile(dest, "w", zipfile.ZIP_STORED) as new:
        record_name = next(n for n in old.namelist() if n.endswith(".dist-info/RECORD") and n.count("/") == 1)
        records = []
        for info in old.infolist():
            if info.filename == record_name:
                continue
            data = old.read(info)
            if strip and (info.filename.endswith(".so") or ".so." in info.filename):
                before += len(data)
                with tempfile.TemporaryDirectory() as tmp:
                    lib = Path(tmp) / "lib.so"
                    lib.write_bytes(data)
                    subprocess.run([strip, "--strip-unneeded", str(lib)], check=True)
                    data = lib.read_bytes()
                after += len(data)
            out = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            out.external_attr = info.external_attr
            new.writestr(out, data, zipfile.ZIP_STORED)
            if not info.filename.endswith("/"):
                records.append(record_line(info.filename, data))
        records.append(f"{record_name},,")
        new.writestr(zipfile.ZipInfo(record_name, date_time=(2020, 1, 1, 0, 0, 0)), "\n".join(records) + "\n")
    return before, after


def pack_wheels(args: argparse.Namespace) -> None:
    wheels = sorted(Path(args.wheel_dir).glob("*.whl"))
    if not wheels:
        raise SystemExit(f"no wheels in {args.wheel_dir}")
    print(f"Requires-Dist of {len(wheels)} wheels, against the carried wheels and the GPU image's packages:")
    problems = check_requirements(wheels)
    if problems:
        raise SystemExit("requirements not covered:\n  " + "\n  ".join(problems))
    print(f"every requirement of the {len(wheels)} wheels is covered")
    strip = shutil.which("strip")
    if strip is None:
        print("no `strip` here: shared libraries travel unstripped")
    archive = Path(args.archive)
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp) / "whl"
        stage.mkdir()
        total_before = total_after = 0
        for path in wheels:
            before, after = repack_wheel(path, stage, strip)
            total_before, total_after = total_before + before, total_after + after
        print(f"shared libraries: {mib(total_before)} -> {mib(total_after)} stripped")
        archive.parent.mkdir(parents=True, exist_ok=True)
        partial = archive.with_name(archive.name + ".partial")
        import lzma

        with lzma.open(partial, "wb", preset=9) as xz:
            with tarfile.open(fileobj=xz, mode="w") as tar:
                for path in sorted(stage.iterdir()):
                    tar.add(path, arcname=f"whl/{path.name}")
        partial.replace(archive)
    print(f"{archive}: {len(wheels)} wheels, {mib(archive.stat().st_size)}")


def unpack(args: argparse.Namespace) -> None:
    dest = Path(args.dest)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(args.archive, "r:xz") as tar:
        tar.extractall(dest, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(dest)
        print(f"{args.archive}: {len(tar.getnames())} entries -> {dest}")


# ------------------------------------------------------------------------------------------------------ MiniLM


def minilm_fp16(args: argparse.Namespace) -> None:
    """MiniLM's float32 safetensors as float16 (half the bytes), with its config and tokenizer files. Every weight
    must be finite and inside float16's range; the largest relative rounding error is printed and kept in
    manifest.json."""
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import save_file

    src, out = Path(args.model_dir), Path(args.out_dir)
    weights = src / "model.safetensors"
    out.mkdir(parents=True, exist_ok=True)
    tensors, worst, worst_abs, flushed = {}, 0.0, 0.0, 0
    with safe_open(weights, framework="numpy") as f:
        metadata = f.metadata() or {}
        for name in f.keys():
            value = f.get_tensor(name)
            if value.dtype != np.float32:  # e.g. the int64 position ids: kept as they are
                tensors[name] = value
                continue
            if not np.isfinite(value).all() or np.abs(value).max() >= 65504:
                raise SystemExit(f"{name} does not fit float16 (non-finite or |x| >= 65504)")
            half = value.astype(np.float16)
            error = np.abs(half.astype(np.float32) - value)
            worst_abs = max(worst_abs, float(error.max()))
            normal = np.abs(value) >= np.finfo(np.float16).tiny  # float16's normal range: relative error ~ 2**-11
            if normal.any():
                worst = max(worst, float((error[normal] / np.abs(value[normal])).max()))
            flushed += int(((half == 0) & (value != 0)).sum())
            tensors[name] = half
    import lzma

    half_path = out / "model.fp16.safetensors"
    save_file(tensors, str(half_path), metadata=metadata)
    with half_path.open("rb") as raw, lzma.open(out / FP16_WEIGHTS, "wb", preset=6) as xz:
        shutil.copyfileobj(raw, xz, 2**22)
    half_path.unlink()
    for name in MINILM_FILES:
        shutil.copy2(src / name, out / name)
    manifest = {
        "source": str(weights),
        "source_sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
        "source_bytes": weights.stat().st_size,
        "tensors": len(tensors),
        "float16_tensors": int(sum(t.dtype == np.float16 for t in tensors.values())),
        "parameters": int(sum(t.size for t in tensors.values())),
        "max_relative_rounding_error_normal_range": worst,
        "max_absolute_rounding_error": worst_abs,
        "values_flushed_to_zero": flushed,
        "metadata": metadata,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{out / FP16_WEIGHTS}: {len(tensors)} tensors, {manifest['parameters']:,} parameters, "
          f"{mib((out / FP16_WEIGHTS).stat().st_size)} (float16, xz; float32 source {mib(weights.stat().st_size)}); "
          f"rounding: largest relative error {worst:.1e} in float16's normal range, largest absolute {worst_abs:.1e}, "
          f"{flushed} tiny values flushed to 0")  # fmt: skip


def minilm_fp32(args: argparse.Namespace) -> None:
    """The float16 weights back as float32 ``model.safetensors`` with the same metadata, next to the config and
    tokenizer files: a Hugging Face model folder for ``--trf-name``. Needs numpy and safetensors (the image has
    both)."""
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import save_file

    src, out = Path(args.fp16_dir), Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    import lzma

    half_path = out / "model.fp16.safetensors"
    with lzma.open(src / FP16_WEIGHTS, "rb") as xz, half_path.open("wb") as raw:
        shutil.copyfileobj(xz, raw, 2**22)
    with safe_open(half_path, framework="numpy") as f:
        metadata = f.metadata() or {}
        tensors = {}
        for name in f.keys():
            value = f.get_tensor(name)
            tensors[name] = value.astype(np.float32) if value.dtype == np.float16 else value
    half_path.unlink()
    save_file(tensors, str(out / "model.safetensors"), metadata=metadata)
    for name in MINILM_FILES:
        shutil.copy2(src / name, out / name)
    print(f"{out}: {len(tensors)} float32 tensors, {mib((out / 'model.safetensors').stat().st_size)}")


# ------------------------------------------------------------------------------------------------ spacy-piqn


def site_meta(args: argparse.Namespace) -> None:
    """A ``spacy_piqn-<version>.dist-info`` (METADATA, entry_points.txt) in ``SITE``, read from setup.cfg, so that
    spaCy finds the ``piqn`` factory and the ``spacy-piqn.*`` functions by their entry points while the code runs
    from the working tree (on PYTHONPATH): ``spacy train`` resolves a config before it imports anything else."""
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg", encoding="utf8")
    name, version = config["metadata"]["name"], config["metadata"]["version"]
    info = Path(args.site) / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf8")
    lines, n_points = [], 0
    for group, text in config["options.entry_points"].items():
        lines.append(f"[{group}]")
        for entry in filter(None, (line.strip() for line in text.splitlines())):
            lines.append(entry)
            n_points += 1
        lines.append("")
    (info / "entry_points.txt").write_text("\n".join(lines), encoding="utf8")
    (info / "top_level.txt").write_text("spacy_piqn\n", encoding="utf8")
    print(f"{info}: {n_points} entry points (code from {REPO})")


def check_env(args: argparse.Namespace) -> None:
    """Fail fast where the table runs: every pinned package is the one this interpreter imports, at its pinned
    version; spaCy, spacy-transformers and transformers import; every spacy-piqn entry point loads, from the working
    tree; with ``--gpu``, torch sees a CUDA device and spaCy/thinc allocate on it. A requirement of a pinned package
    that what this interpreter sees does not meet (an image package in another version, say hf-xet, which nothing
    here uses) is printed as a warning: the imports decide."""
    from importlib.metadata import PackageNotFoundError, distribution, version

    from packaging.requirements import Requirement

    problems, warnings = [], []
    pins = [line.strip().split("==") for line in Path(args.pins).read_text().splitlines() if line.strip()]
    for name, pinned in pins:
        try:
            found = version(name)
        except PackageNotFoundError:
            problems.append(f"{name}: not installed (pinned {pinned})")
            continue
        if found != pinned:
            problems.append(f"{name}: {found} is the one imported, not the pinned {pinned}")
        for line in distribution(name).requires or []:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            try:
                have = version(req.name)
            except PackageNotFoundError:
                warnings.append(f"{name} needs {req}: not installed")
                continue
            if not req.specifier.contains(have, prereleases=True):
                warnings.append(f"{name} needs {req}: {have} found")
    dist = distribution("spacy-piqn")
    n_points = 0
    for point in dist.entry_points:
        try:
            point.load()
            n_points += 1
        except Exception as err:  # noqa: BLE001 - reported, then fail
            problems.append(f"entry point {point.group}:{point.name} = {point.value}: {err!r}")
    import spacy_piqn

    if not Path(spacy_piqn.__file__).resolve().is_relative_to(REPO):
        problems.append(f"spacy_piqn imported from {spacy_piqn.__file__}, not from the working tree {REPO}")
    import spacy
    import spacy_transformers  # noqa: F401 - imports transformers, tokenizers, huggingface_hub
    import torch
    import transformers

    for warning in warnings:
        print(f"warning: {warning}")

    print(f"python {sys.version.split()[0]}; spacy {spacy.__version__}, transformers {transformers.__version__}, "
          f"torch {torch.__version__}; {len(pins)} pins checked; {n_points} spacy-piqn entry points load from "
          f"{Path(spacy_piqn.__file__).parent}")  # fmt: skip
    if args.gpu:
        if not torch.cuda.is_available():
            problems.append("torch sees no CUDA device")
        else:
            try:
                spacy.require_gpu(0)
                from thinc.api import get_current_ops

                ops = get_current_ops()
                x = ops.xp.ones((64, 64), dtype="float32")
                float((x @ x).sum())
                print(f"GPU: {torch.cuda.get_device_name(0)}; thinc ops {type(ops).__name__}; cupy "
                      f"{ops.xp.__version__}")  # fmt: skip
            except Exception as err:  # noqa: BLE001 - reported, then fail
                problems.append(f"spaCy/thinc on the GPU: {err!r}")
    if problems:
        raise SystemExit("environment check failed:\n  " + "\n  ".join(problems))
    print("environment check passed")


# ---------------------------------------------------------------------------------------------------- rows


@dataclass
class Row:
    """One training of the table: a run_bench.py system on a dataset with config overrides."""

    system: str
    dataset: str = "genia"
    units: str = "sentences"  # run_bench.py --units: one Doc per sentence or per document
    sets: dict[str, str] = field(default_factory=dict)  # dotted config key -> JSON value

    @property
    def name(self) -> str:
        parts = [self.system] + ([] if self.dataset == "genia" else [self.dataset])
        parts += [] if self.units == "sentences" else [self.units]
        for key, value in self.sets.items():
            short = {"system.seed": "seed", "training.optimizer.learn_rate.initial_rate": "lr"}.get(key, key)
            parts.append(f"{short}{value}")
        return re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join(parts))


# Short keys of a row; any other key with a dot is a config key (run_bench.py --set SYSTEM:KEY=VALUE).
ROW_KEYS = {"seed": "system.seed", "lr": "training.optimizer.learn_rate.initial_rate"}


def parse_rows(text: str) -> list[Row]:
    """``"piqn spancat_tuned,lr=1e-4|2e-4,seed=1 piqn_qt,ds=conll03"`` -> rows. A row is SYSTEM[,KEY=VALUE...]
    with KEY ``seed``, ``lr`` (the peak learning rate), ``ds`` (dataset, default genia), ``units`` (sentences,
    the default, or documents: one Doc per document from the doc-id sidecars) or a dotted config key;
    ``a|b|c`` in a value makes one row per value (a sweep; several swept keys: every combination)."""
    rows = []
    for token in text.replace(";", " ").split():
        system, *pairs = token.split(",")
        choices: list[tuple[str, list[str]]] = []
        for pair in pairs:
            if "=" not in pair:
                raise SystemExit(f"row {token!r}: {pair!r} is not KEY=VALUE")
            key, value = pair.split("=", 1)
            if key not in ("ds", "units") and key not in ROW_KEYS and "." not in key:
                raise SystemExit(f"row {token!r}: unknown key {key!r} (seed, lr, ds, units or a dotted config key)")
            choices.append((key, value.split("|")))
        for combo in itertools.product(*(values for _, values in choices)):
            row = Row(system)
            for (key, _), value in zip(choices, combo):
                if key == "ds":
                    row.dataset = value
                elif key == "units":
                    if value not in ("sentences", "documents"):
                        raise SystemExit(f"row {token!r}: units must be sentences or documents, not {value!r}")
                    row.units = value
                else:
                    row.sets[ROW_KEYS.get(key, key)] = value
            rows.append(row)
    sys.path.insert(0, str(BENCH))
    import run_bench  # standard library only at import time

    for row in rows:
        if row.dataset not in run_bench.DATASETS:
            raise SystemExit(f"row {row.name}: unknown dataset {row.dataset!r} ({', '.join(run_bench.DATASETS)})")
        baseline = run_bench.DATASETS[row.dataset].baseline
        systems = [
            s
            for s in (*run_bench.PIQN_SYSTEMS, baseline, run_bench.TUNED[baseline])
            if s in run_bench.ENCODERS["minilm"].configs
        ]
        if row.system not in systems:
            raise SystemExit(f"row {row.name}: {row.system!r} is not a minilm system of {row.dataset} ({systems})")
    names = [row.name for row in rows]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SystemExit(f"rows named twice: {', '.join(duplicates)}")
    return rows


def rows_command(args: argparse.Namespace) -> None:
    for row in parse_rows(args.rows):
        print(row.name, row.system, row.dataset, json.dumps(row.sets))


# --------------------------------------------------------------------------------------------------- table


def start_row(row: Row, args: argparse.Namespace, wall_s: float, grace_s: float, threads: int) -> subprocess.Popen:
    row_dir = args.work / "rows" / row.name
    row_dir.mkdir(parents=True, exist_ok=True)
    data_link = row_dir / "data"
    if not data_link.exists():
        data_link.symlink_to(args.work / "data", target_is_directory=True)
    cmd = [
        sys.executable, str(BENCH / "run_bench.py"), "run", "--mode", "full", "--datasets", row.dataset,
        "--encoders", "minilm", "--systems", row.system, "--data-dir", str(args.data), "--trf-name", str(args.trf),
        "--gpu-id", str(args.gpu_id), "--max-steps", str(args.steps), "--eval-frequency", str(args.eval_frequency),
        "--wall-s", f"{wall_s:.0f}", "--clock", "wall", "--grace-s", f"{grace_s:.0f}", "--repeats", str(args.repeats),
        "--train-threads", str(threads), "--infer-threads", str(threads), "--runs-dir", str(row_dir),
        "--results", str(row_dir / "results.jsonl"), "--plot", str(row_dir / "f1_over_time.png"),
        "--units", row.units,
    ]  # fmt: skip
    if args.n_train is not None:
        cmd += ["--n-train", str(args.n_train)]
    if args.n_dev is not None:
        cmd += ["--n-dev", str(args.n_dev)]
    for key, value in row.sets.items():
        cmd += ["--set", f"{row.system}:{key}={value}"]
    log = (row_dir / "run_bench.log").open("w", encoding="utf8")
    log.write("$ " + " ".join(cmd) + "\n")
    log.flush()
    # Its own process group, so that the time guard can end it with the spacy processes it started.
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)


def stop_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def prepare_data(rows: list[Row], args: argparse.Namespace) -> None:
    """Each dataset converted once (``python -m spacy_piqn convert``, through run_bench.prepare_split, the
    harness's own cache); every row's runs dir links to it, so its run_bench finds the cache and converts
    nothing."""
    sys.path.insert(0, str(BENCH))
    from concurrent.futures import ThreadPoolExecutor

    import run_bench

    jobs = []
    for dataset, units in sorted({(row.dataset, row.units) for row in rows}):
        src = args.data / dataset
        for split, n in (("train", args.n_train or 0), ("dev", args.n_dev or 0)):
            if not (src / f"{split}.jsonl").exists():
                raise SystemExit(f"no {src / f'{split}.jsonl'}: was {dataset} packed by bench/gpu/prepare.sh?")
            jobs.append((src / f"{split}.jsonl", args.work / "data" / dataset, split, n, 0, units))

    def convert(job):
        start = time.perf_counter()
        spacy_path, _ = run_bench.prepare_split(*job)
        return f"[data] {spacy_path} ({time.perf_counter() - start:.1f}s)"

    # One conversion process per file, all at once (GENIA train alone takes ~30 s of one core).
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        for line in pool.map(convert, jobs):
            print(line, flush=True)


def read_results(rows: list[Row], args: argparse.Namespace) -> list[dict]:
    found = []
    for row in rows:
        path = args.work / "rows" / row.name / "results.jsonl"
        if path.exists():
            for line in path.read_text(encoding="utf8").splitlines():
                if line.strip():
                    found.append({"table_row": row.name, **json.loads(line)})
    return found


def curve(row: Row, args: argparse.Namespace) -> str:
    """Dev F (%) at each evaluation of the row's training, from its train_log.jsonl."""
    logs = list((args.work / "rows" / row.name).glob("full/*/minilm/*/train_log.jsonl"))
    if not logs:
        return "-"
    points = []
    for line in logs[0].read_text(encoding="utf8").splitlines():
        entry = json.loads(line)
        if entry.get("event") != "wall_limit":
            f = entry.get("scores", {}).get("spans_sc_f", entry.get("scores", {}).get("ents_f"))
            points.append(f"{entry['step']}:{'-' if f is None else f'{100 * f:.1f}'}")
    return " ".join(points) or "-"


def table_markdown(rows: list[Row], results: list[dict], args: argparse.Namespace, header: str) -> str:
    by_row = {r["table_row"]: r for r in results}
    lines = [
        header,
        "",
        "| row | dataset | system | seed | lr | P | R | F | loc F | cls F | steps (stop) | best step | train s |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for row in rows:
        r = by_row.get(row.name)
        lr = row.sets.get("training.optimizer.learn_rate.initial_rate", "config")
        if r is None:
            lines.append(f"| {row.name} | {row.dataset} | {row.system} | - | {lr} | no result (see logs) |||||||")
            continue

        def pct(key, r=r):
            return "-" if r.get(key) is None else f"{r[key]:.2f}"

        lines.append(
            f"| {row.name} | {r['dataset']} | {r['system']} | {r['seed']} | {lr} | {pct('p')} | {pct('r')} "
            f"| **{pct('f')}** | {pct('loc_f')} | {pct('cls_f')} | {r['steps']} ({r['stopped_by']}) "
            f"| {r.get('best_step')} | {r['train_s']:.0f} |"
        )
    lines += ["", "Dev F (%) at each evaluation (step:F):", ""]
    lines += [f"- {row.name}: {curve(row, args)}" for row in rows]
    return "\n".join(lines) + "\n"


def pack_logs(rows: list[Row], args: argparse.Namespace, dest: Path) -> None:
    """Configs, logs and score files of every row (no models, no data) as one .tar.xz."""
    import lzma

    keep = {".cfg", ".log", ".json", ".jsonl", ".md"}
    with lzma.open(dest, "wb", preset=6) as xz, tarfile.open(fileobj=xz, mode="w") as tar:
        for row in rows:
            row_dir = args.work / "rows" / row.name
            for path in sorted(row_dir.rglob("*")):
                rel = path.relative_to(row_dir)
                if rel.parts[0] == "data" or any(p.startswith("model-") for p in rel.parts):
                    continue
                if path.is_file() and path.suffix in keep:
                    tar.add(path, arcname=f"{row.name}/{rel}")
        for extra in args.extra_logs:
            if extra.exists():
                tar.add(extra, arcname=extra.name)


def table(args: argparse.Namespace) -> None:
    t0 = args.t0 if args.t0 is not None else time.time()
    deadline = t0 + args.limit_s  # the whole call must be over by then (the device's command limit is above it)
    rows = parse_rows(args.rows)
    if not rows:
        raise SystemExit("no rows")
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"[table] {len(rows)} rows side by side: {', '.join(r.name for r in rows)}", flush=True)
    prepare_data(rows, args)

    # Time plan, from now to the deadline: start-up and initialization of spacy train, the training loop (its
    # wall limit), evaluation (model-best and possibly model-last, in fresh processes), packing the results.
    left = deadline - time.time()
    wall_s = left - args.init_s - args.eval_s - args.pack_s
    if wall_s < args.min_wall_s:
        raise SystemExit(f"only {left:.0f}s left before the deadline: no room for a {args.min_wall_s:.0f}s training")
    threads = args.threads or max(1, min(2, (os.cpu_count() or 1) // len(rows)))
    print(f"[table] {left:.0f}s left: training loops stop at {args.steps} steps or {wall_s:.0f}s (wall), evaluated "
          f"every {args.eval_frequency} steps; killed {args.init_s + 15:.0f}s after that if still training; "
          f"{threads} thread(s) each; gpu_id {args.gpu_id}", flush=True)  # fmt: skip
    # A training whose initialization outlasts init_s still gets its full loop until 15 s into the evaluation
    # reserve; then run_bench.py kills it and scores its last model-best (stopped_by "killed").
    procs = {row.name: start_row(row, args, wall_s, args.init_s + 15, threads) for row in rows}
    guard = deadline - args.pack_s
    last_note = time.time()
    while any(p.poll() is None for p in procs.values()):
        if time.time() > guard:
            for name, proc in procs.items():
                if proc.poll() is None:
                    print(f"[table] {name}: still running at the time guard, killed", flush=True)
                    stop_group(proc)
            break
        if time.time() - last_note > 60:
            running = [n for n, p in procs.items() if p.poll() is None]
            print(f"[table] {time.time() - t0:.0f}s: running {', '.join(running)}", flush=True)
            last_note = time.time()
        time.sleep(1)
    for name, proc in procs.items():
        print(f"[table] {name}: exit {proc.returncode}", flush=True)

    results = read_results(rows, args)
    with (args.out / "results.jsonl").open("w", encoding="utf8") as f:
        for result in results:
            f.write(json.dumps(result) + "\n")
    first = results[0] if results else {}
    header = (
        f"GENIA/CoNLL dev, MiniLM-L6, {len(rows)} trainings side by side, {args.steps} steps budget; "
        f"{first.get('machine', '?')}; commit {first.get('commit', '?')}{' (dirty)' if first.get('dirty') else ''}; "
        f"{first.get('date', '?')}"
    )
    markdown = table_markdown(rows, results, args, header)
    (args.out / "table.md").write_text(markdown, encoding="utf8")
    pack_logs(rows, args, args.out / "logs.tar.xz")
    print()
    print(markdown)
    print(f"[table] {len(results)}/{len(rows)} rows with results; {time.time() - t0:.0f}s since the start; "
          f"$OUT: {', '.join(sorted(p.name for p in args.out.iterdir()))}")  # fmt: skip
    if len(results) < len(rows):
        sys.exit(3)


# ---------------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack-wheels")
    p.add_argument("wheel_dir")
    p.add_argument("archive")
    p.set_defaults(func=pack_wheels)
    p = sub.add_parser("unpack")
    p.add_argument("archive")
    p.add_argument("dest")
    p.set_defaults(func=unpack)
    p = sub.add_parser("minilm-fp16")
    p.add_argument("model_dir")
    p.add_argument("out_dir")
    p.set_defaults(func=minilm_fp16)
    p = sub.add_parser("minilm-fp32")
    p.add_argument("fp16_dir")
    p.add_argument("out_dir")
    p.set_defaults(func=minilm_fp32)
    p = sub.add_parser("site-meta")
    p.add_argument("site")
    p.set_defaults(func=site_meta)
    p = sub.add_parser("check-env")
    p.add_argument("pins")
    p.add_argument("--gpu", action="store_true")
    p.set_defaults(func=check_env)
    p = sub.add_parser("rows")
    p.add_argument("rows")
    p.set_defaults(func=rows_command)
    p = sub.add_parser("table")
    p.add_argument("--rows", required=True, help="e.g. 'piqn spancat spancat_tuned,lr=2e-4|3e-4|4e-4 piqn_qt'")
    p.add_argument("--steps", type=int, required=True, help="max_steps of every row")
    p.add_argument("--eval-frequency", type=int, default=250)
    p.add_argument("--data", type=Path, required=True, help="holds <dataset>/{train,dev}.jsonl")
    p.add_argument("--trf", type=Path, required=True, help="the MiniLM model folder (--trf-name)")
    p.add_argument("--work", type=Path, required=True, help="converted data and the rows' runs dirs")
    p.add_argument("--out", type=Path, required=True, help="results.jsonl, table.md, logs.tar.xz go here")
    p.add_argument("--gpu-id", type=int, default=0)
    p.add_argument("--n-train", type=int)
    p.add_argument("--n-dev", type=int)
    p.add_argument("--threads", type=int, help="torch/OMP threads per training (default: cores / rows, at most 2)")
    p.add_argument("--t0", type=float, help="epoch seconds the call started (default: now)")
    p.add_argument("--limit-s", type=float, default=580, help="everything done by t0 + this")
    p.add_argument("--init-s", type=float, default=45, help="reserved for start-up and initialization")
    p.add_argument("--eval-s", type=float, default=60, help="reserved for scoring model-best (and model-last)")
    p.add_argument("--repeats", type=int, default=0, help="timed nlp.pipe passes per row (0: scores only)")
    p.add_argument("--pack-s", type=float, default=15, help="reserved for writing the results")
    p.add_argument("--min-wall-s", type=float, default=30)
    p.add_argument("--extra-logs", type=Path, nargs="*", default=[])
    p.set_defaults(func=table)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
