"""The `data` step of `spacy project run all`: make sure a dataset's JSONL files (and doc-id files) exist.

    python scripts/prepare_data.py DATA_DIR DATASET [--genia-tgz assets/genia/GENIAcorpus3.02.tgz]

* ``DATA_DIR/DATASET/train.jsonl`` and ``dev.jsonl`` exist (``--vars.data_dir ../shared/data``, or files a user
  put there): they are used as they are, nothing is written. Their doc-id files ``train.doc_ids.txt`` and
  ``dev.doc_ids.txt`` (one document id per record), when there, are what gives ``convert`` one Doc per document;
  one without the other is an error, since train and dev would then be cut differently.
* DATASET is ``genia`` and neither exists: the standard split is built into ``DATA_DIR/genia`` from the GENIA 3.02
  release that ``spacy project assets`` downloaded, exactly as the ``preprocess-genia`` command does
  (``genia_xml_to_jsonl.py``: sha256 checked before reading, sentence and entity counts checked after), doc-id
  files included.
* Otherwise the step fails with the command to run, instead of ``convert`` failing on a missing file.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Annotated

import typer

SPLITS = ("train", "dev")
GENIA_TGZ = Path("assets/genia/GENIAcorpus3.02.tgz")


def genia_script() -> ModuleType:
    """``genia_xml_to_jsonl.py`` from this folder (the scripts are files, not a package)."""
    path = Path(__file__).with_name("genia_xml_to_jsonl.py")
    spec = importlib.util.spec_from_file_location("genia_xml_to_jsonl", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


def main(
    data_dir: Annotated[Path, typer.Argument(help="The project's data_dir: holds DATASET/{train,dev}.jsonl.")],
    dataset: Annotated[str, typer.Argument(help="The folder under data_dir (genia, conll03, germeval2014, ...).")],
    genia_tgz: Annotated[Path, typer.Option(help="The release tgz (`spacy project assets`).")] = GENIA_TGZ,
    sha256: Annotated[str, typer.Option(help="Expected sha256 of the tgz. Default: the 3.02 release's.")] = "",
    test_size: Annotated[int, typer.Option(help="GENIA: sentences at the end that form test.")] = 1854,
    dev_size: Annotated[int, typer.Option(help="GENIA: sentences at the end of train+dev that form dev.")] = 1669,
) -> None:
    """Use DATA_DIR/DATASET/{train,dev}.jsonl if they exist; for GENIA, build them from the release otherwise."""
    folder = data_dir / dataset
    files = [folder / f"{split}.jsonl" for split in SPLITS]
    present = [path.is_file() for path in files]
    if all(present):
        doc_ids = [folder / f"{split}.doc_ids.txt" for split in SPLITS]
        with_ids = [path.is_file() for path in doc_ids]
        if any(with_ids) and not all(with_ids):
            have, missing = (doc_ids[0], doc_ids[1]) if with_ids[0] else (doc_ids[1], doc_ids[0])
            raise fail(
                f"{have} exists but {missing} does not: train and dev would be converted differently (whole "
                "documents and single sentences). Add it, or remove both to convert sentences."
            )
        documents = f" (documents from {doc_ids[0].name} and {doc_ids[1].name})" if all(with_ids) else ""
        typer.echo(f"Using {files[0]} and {files[1]}{documents}")
        return
    if any(present):
        have, missing = (files[0], files[1]) if present[0] else (files[1], files[0])
        raise fail(f"{have} exists but {missing} does not: add it, or remove {folder} to rebuild both")
    if dataset == "genia":
        if not genia_tgz.is_file():
            raise fail(
                f"no {files[0]} and no {genia_tgz} to build it from. Download the GENIA release first: "
                "python -m spacy project assets . (or point --vars.data_dir at a folder holding "
                "genia/train.jsonl and dev.jsonl, e.g. ../shared/data)"
            )
        genia = genia_script()
        typer.echo(f"Building {folder} from {genia_tgz}")
        genia.main(genia_tgz, folder, sha256=sha256 or genia.GENIA_302_SHA256, test_size=test_size, dev_size=dev_size)
        return
    hint = (
        " For CoNLL-2003 from the column files: python -m spacy project assets . --extra && "
        "python -m spacy project run conll03 . --vars.dataset conll03"
        if dataset == "conll03"
        else ""
    )
    raise fail(
        f"no {files[0]}. Put {dataset}/train.jsonl and dev.jsonl (the JSONL format of docs/data.md, "
        f'"Data format") under {data_dir}, or point --vars.data_dir at the folder that holds them.{hint}'
    )


if __name__ == "__main__":
    typer.run(main)
