"""bench/gpu/kit.py, the helper of bench/gpu/{prepare,table}.sh: the parts that run without a GPU or a download."""

import base64
import configparser
import hashlib
import importlib.util
import json
import sys
import zipfile
from importlib.metadata import PathDistribution
from pathlib import Path

import numpy as np
import pytest
from spacy.vocab import Vocab

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


def test_rows_with_documents_are_named_apart_and_run_on_documents():
    context = "components.piqn.model.windows.context=32"
    rows = kit.parse_rows(f"piqn,units=sentences|documents,seed=0 piqn,units=documents,{context}")
    assert [row.name for row in rows] == [
        "piqn-seed0",
        "piqn-documents-seed0",
        "piqn-documents-components.piqn.model.windows.context32",
    ]
    assert [row.units for row in rows] == ["sentences", "documents", "documents"]


@pytest.mark.parametrize(
    "text",
    [
        "spancat,ds=conll03",  # not a system of that dataset
        "piqn,width=3",  # neither a short key nor a dotted config key
        "piqn piqn",  # two rows with one name (one runs dir)
        "piqn,seed",  # not KEY=VALUE
        "piqn,ds=ace05",  # unknown dataset
        "piqn,units=paragraphs",  # neither sentences nor documents
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


def test_document_rows_get_document_docs(tmp_path):
    """A units=documents row's data is converted one Doc per document from the doc-id sidecar, next to the
    sentence-per-Doc conversion of the same dataset; a dataset packed without the sidecar is a clear exit (the
    harness's own check, run_bench.prepare_split)."""
    from spacy.tokens import DocBin

    src = tmp_path / "src" / "genia"
    src.mkdir(parents=True)
    for split in ("train", "dev"):
        lines = [{"tokens": ["IL-2", "binds", "."], "entities": [{"start": 0, "end": 1, "label": "protein"}]}] * 3
        (src / f"{split}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
        (src / f"{split}.doc_ids.txt").write_text("a\na\nb\n")
    args = type("Args", (), {"data": tmp_path / "src", "work": tmp_path / "work", "n_train": None, "n_dev": None})()
    kit.prepare_data(kit.parse_rows("piqn,units=sentences|documents"), args)
    data = tmp_path / "work" / "data" / "genia"
    docs = {
        units: list(DocBin().from_disk(data / f"dev-all-{units}.spacy").get_docs(Vocab()))
        for units in ("sentences", "documents")
    }
    assert [len(doc) for doc in docs["sentences"]] == [3, 3, 3] and [len(doc) for doc in docs["documents"]] == [6, 3]
    assert sum(len(doc.spans["sc"]) for doc in docs["documents"]) == 3
    (src / "dev.doc_ids.txt").unlink()
    with pytest.raises(SystemExit, match="dev.doc_ids.txt"):
        kit.prepare_data(kit.parse_rows("piqn,units=documents"), args)
