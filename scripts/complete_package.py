"""Complete a package folder from `spacy package --build none` with what sharing it needs: the second part of the
project's `package` step, before its sdist is built.

    python scripts/complete_package.py packages/en_piqn_genia-0.1.0 --dataset genia [--config piqn_tok2vec]

A trained pipeline has no LICENSE, and its meta.json no description, author, url or license, so `spacy package` warns
"no files found matching 'LICENSE'" and writes an empty README. The weights carry the terms of the data they were
trained on (GENIA's annotations are CC BY 3.0, CoNLL-2003 is research-only), not spacy-piqn's MIT, so this writes
LICENSE, LICENSES_SOURCES and those meta.json fields for the dataset (the package's setup.py copies the top meta.json
into the pipeline at build time), and the README again from them. A pipeline with a transformer also requires
``spacy-piqn[trf]``, which spaCy cannot infer (it lists ``spacy-piqn`` without the extra).
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Annotated, Any

import srsly
import typer

import spacy_piqn

AUTHOR = "the spacy-piqn authors"
PAPER_URL = "https://aclanthology.org/2022.acl-long.67"
PROJECT_LICENSE = Path(__file__).resolve().parents[1] / "LICENSE"
SPACY_PIQN_LICENSE = "spacy-piqn, the code this pipeline runs with (a requirement of this package), is MIT-licensed."

# Per dataset of project.yml: the meta.json license, the LICENSE file's text and meta.json's sources.
DATASETS: dict[str, dict[str, Any]] = {
    "genia": {
        "title": "GENIA term corpus 3.02",
        "license": "CC BY 3.0 (GENIA annotations)",
        "terms": (
            "The weights of this pipeline were trained on the GENIA term corpus 3.02. Its annotations are licensed\n"
            "under the Creative Commons Attribution 3.0 Unported license (CC BY 3.0,\n"
            'https://creativecommons.org/licenses/by/3.0/): "Corpus annotations (c) GENIA Project". The annotated\n'
            "abstracts are MEDLINE text, under the U.S. National Library of Medicine's terms.\n"
        ),
        "sources": [
            {
                "name": "GENIA term corpus 3.02",
                "url": "http://www.geniaproject.org/genia-corpus/term-corpus",
                "license": "CC BY 3.0 (annotations)",
                "author": "GENIA Project",
            }
        ],
    },
    "conll03": {
        "title": "CoNLL-2003 English",
        "license": "research use only (CoNLL-2003 / Reuters RCV1); do not redistribute",
        "terms": (
            "RESEARCH USE ONLY. The weights of this pipeline were trained on CoNLL-2003 English, whose text is\n"
            "Reuters RCV1 newswire, available only under a research agreement with Reuters. Use this package for\n"
            "research only and do not redistribute it.\n"
        ),
        "sources": [
            {
                "name": "CoNLL-2003 English (Reuters RCV1)",
                "url": "https://www.clips.uantwerpen.be/conll2003/ner/",
                "license": "research use only",
                "author": "Tjong Kim Sang and De Meulder (annotations), Reuters (text)",
            }
        ],
    },
    "germeval2014": {
        "title": "GermEval 2014 NER",
        "license": "CC BY 4.0 (GermEval 2014 data)",
        "terms": (
            "The weights of this pipeline were trained on the GermEval 2014 NER data (Benikova, Biemann and\n"
            "Reznicek, LREC 2014), licensed under the Creative Commons Attribution 4.0 International license\n"
            "(CC BY 4.0, https://creativecommons.org/licenses/by/4.0/).\n"
        ),
        "sources": [
            {
                "name": "GermEval 2014 NER",
                "url": "https://sites.google.com/site/germeval2014ner/",
                "license": "CC BY 4.0",
                "author": "Benikova, Biemann, Reznicek",
            }
        ],
    },
    "sample": {
        "title": "the project's hand-written sample",
        "license": "MIT",
        "terms": (
            "The weights of this pipeline were trained on the hand-written sample of the spacy-piqn project\n"
            "(assets/sample), which is MIT-licensed like the project (the license follows).\n"
        ),
        "include_project_license": True,
        "sources": [{"name": "spacy-piqn sample (assets/sample)", "license": "MIT", "author": AUTHOR}],
    },
}

# What a pipeline config names when it has a transformer (spacy-transformers, or the encoder of configs/piqn_trf.cfg).
TRANSFORMER_MARKERS = ("spacy-transformers.", "spacy-piqn.QueryTransformer.", "spacy-piqn.PIQNQueryTransformer.")


def spacy_piqn_requirement(version: str, extra: str = "") -> str:
    """``spacy-piqn[extra]>=X.Y.Z,<X.(Y+1).0``, the range spaCy itself writes for spacy-piqn."""
    major, minor = version.split(".")[:2]
    return f"spacy-piqn{f'[{extra}]' if extra else ''}>={version},<{major}.{int(minor) + 1}.0"


def has_transformer(model: Path) -> bool:
    config = (model / "config.cfg").read_text(encoding="utf-8")
    return any(marker in config for marker in TRANSFORMER_MARKERS)


def main(
    package: Annotated[Path, typer.Argument(help="The folder `spacy package` wrote: packages/en_<name>-<version>.")],
    dataset: Annotated[str, typer.Option(help="The dataset it was trained on: genia, conll03, germeval2014, sample.")],
    config: Annotated[str, typer.Option(help="The config it was trained with, for the description.")] = "",
) -> None:
    from spacy.cli.package import generate_readme

    if not (package / "meta.json").is_file() or not (package / "setup.py").is_file():
        typer.echo(f"error: {package} is not a folder from `spacy package` (no meta.json and setup.py)", err=True)
        raise typer.Exit(1)
    meta = srsly.read_json(package / "meta.json")
    # The pipeline inside: <package>/<lang>_<name>/<lang>_<name>-<version>/, as `spacy package` lays it out.
    name = meta["name"] if meta["name"].startswith(f"{meta['lang']}_") else f"{meta['lang']}_{meta['name']}"
    pipeline = package / name / f"{name}-{meta['version']}"
    info = DATASETS.get(dataset)
    if info is None:
        typer.echo(
            f"warning: the data license of {dataset!r} is not known here; LICENSE and meta.json say so. Set them "
            f"before you share the package.",
            err=True,
        )
        info = {
            "title": dataset,
            "license": f"unknown: see the license of the {dataset} data",
            "terms": f"The weights of this pipeline were trained on {dataset}; its data license applies to them.\n",
            "sources": [{"name": dataset}],
        }
    transformer = has_transformer(pipeline)
    version = spacy_piqn.__version__
    try:
        url = metadata.metadata("spacy-piqn").get("Home-page") or PAPER_URL
    except metadata.PackageNotFoundError:
        url = PAPER_URL

    trained_with = f" with configs/{config}.cfg" if config else ""
    meta.update(
        {
            "description": (
                f"PIQN (Parallel Instance Query Network) nested NER, trained on {info['title']}{trained_with} "
                f"(spacy-piqn {version}). All entities, nested ones included, go to doc.spans."
            ),
            "author": AUTHOR,
            "url": url,
            "license": info["license"],
            "sources": info["sources"],
        }
    )
    if transformer:
        requirements = [r for r in meta.get("requirements", []) if not r.startswith("spacy-piqn")]
        meta["requirements"] = [*requirements, spacy_piqn_requirement(version, "trf")]

    license_text = f"A spaCy pipeline with the piqn component of spacy-piqn.\n\n{info['terms']}\n{SPACY_PIQN_LICENSE}\n"
    if info.get("include_project_license"):
        license_text += "\n" + PROJECT_LICENSE.read_text(encoding="utf-8")
    sources = [f"{info['title']}: {info['license']}", f"spacy-piqn {version}: MIT"]
    if transformer:
        sources.append(
            "The transformer weights inside this pipeline were fine-tuned from a pretrained model, whose own "
            "license also applies (e.g. sentence-transformers/all-MiniLM-L6-v2: Apache 2.0)."
        )
    readme = generate_readme(meta)
    for folder in (package, pipeline):
        srsly.write_json(folder / "meta.json", meta)
        (folder / "README.md").write_text(readme, encoding="utf-8")
        (folder / "LICENSE").write_text(license_text, encoding="utf-8")
        (folder / "LICENSES_SOURCES").write_text("\n".join(sources) + "\n", encoding="utf-8")
    typer.echo(f"Completed {package}: license {info['license']!r}; LICENSE, LICENSES_SOURCES, meta.json, README.md")


if __name__ == "__main__":
    typer.run(main)
