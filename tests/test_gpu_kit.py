"""bench/gpu/kit.py, the helper of bench/gpu/{prepare,table}.sh: the parts that run without a GPU or a download."""

import base64
import configparser
import hashlib
import importlib.util
import sys
import zipfile
from importlib.metadata import PathDistribution
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("gpu_kit", REPO / "bench" / "gpu" / "kit.py")
kit = importlib.util.module_from_spec(_spec)
sys.modules["gpu_kit"] = kit  # dataclasses look their module up there
_spec.loader.exec_module(kit)


def test_rows_expand_sweeps_and_keys():
    rows = kit.parse_rows("piqn spancat_tuned,lr=1e-4|2e-4,seed=0|1 ner,ds=conll03 piqn,components.piqn.n_slots=15")
    assert [row.name for row in rows] == [
        "piqn",
        "spancat_tuned-lr1e-4-seed0",
        "spancat_tuned-lr1e-4-seed1",
        "spancat_tuned-lr2e-4-seed0",
        "spancat_tuned-lr2e-4-seed1",
        "ner-conll03",
        "piqn-components.piqn.n_slots15",
    ]
    assert rows[1].sets == {"training.optimizer.learn_rate.initial_rate": "1e-4", "system.seed": "0"}
    assert rows[5].dataset == "conll03" and rows[5].sets == {}
    assert rows[6].sets == {"components.piqn.n_slots": "15"}


@pytest.mark.parametrize(
    "text",
    [
        "spancat,ds=conll03",  # not a system of that dataset
        "piqn,width=3",  # neither a short key nor a dotted config key
        "piqn piqn",  # two rows with one name (one runs dir)
        "piqn,seed",  # not KEY=VALUE
        "piqn,ds=ace05",  # unknown dataset
    ],
)
def test_rows_rejected(text):
    with pytest.raises(SystemExit):
        kit.parse_rows(text)


def test_site_meta_has_setup_cfg_entry_points(tmp_path):
    kit.site_meta(type("Args", (), {"site": str(tmp_path)})())
    (info,) = tmp_path.glob("spacy_piqn-*.dist-info")
    dist = PathDistribution(info)
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    assert dist.metadata["Name"] == "spacy-piqn"
    assert dist.version == config["metadata"]["version"]
    expected = {
        (group, line.split("=", 1)[0].strip(), line.split("=", 1)[1].strip())
        for group, text in config["options.entry_points"].items()
        for line in text.splitlines()
        if line.strip()
    }
    assert {(p.group, p.name, p.value) for p in dist.entry_points} == expected


def test_minilm_fp16_round_trip(tmp_path):
    from safetensors import safe_open
    from safetensors.numpy import save_file

    src, half, full = tmp_path / "src", tmp_path / "half", tmp_path / "full"
    src.mkdir()
    rng = np.random.default_rng(0)
    weights = {"w": rng.normal(size=(8, 4)).astype(np.float32), "ids": np.arange(6, dtype=np.int64)}
    save_file(weights, str(src / "model.safetensors"), metadata={"format": "pt"})
    for name in kit.MINILM_FILES:
        (src / name).write_text(name)
    kit.minilm_fp16(type("Args", (), {"model_dir": str(src), "out_dir": str(half)})())
    kit.minilm_fp32(type("Args", (), {"fp16_dir": str(half), "out_dir": str(full)})())
    with safe_open(full / "model.safetensors", framework="numpy") as f:
        assert f.metadata() == {"format": "pt"}
        assert f.get_tensor("w").dtype == np.float32
        np.testing.assert_allclose(f.get_tensor("w"), weights["w"], rtol=1e-3)
        np.testing.assert_array_equal(f.get_tensor("ids"), weights["ids"])
    assert all((full / name).read_text() == name for name in kit.MINILM_FILES)


def test_repacked_wheel_record_matches(tmp_path):
    src, dest = tmp_path / "pkg-1.0-py3-none-any.whl", tmp_path / "out"
    dest.mkdir()
    with zipfile.ZipFile(src, "w", zipfile.ZIP_DEFLATED) as wheel:
        wheel.writestr("pkg/__init__.py", "x = 1\n")
        wheel.writestr("pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
        wheel.writestr("pkg-1.0.dist-info/RECORD", "stale\n")
    kit.repack_wheel(src, dest, strip=None)
    with zipfile.ZipFile(dest / src.name) as wheel:
        assert all(info.compress_type == zipfile.ZIP_STORED for info in wheel.infolist())
        record = wheel.read("pkg-1.0.dist-info/RECORD").decode().splitlines()
        for line in record:
            name, digest, size = line.split(",")
            if name.endswith("RECORD"):
                continue
            data = wheel.read(name)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={expected}" and int(size) == len(data)
    assert kit.wheel_metadata(dest / src.name) == ("pkg", "1.0", [])
