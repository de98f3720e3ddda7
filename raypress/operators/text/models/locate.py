"""Where the model files Data-Juicer downloads at run time are found here, and loading them.

Data-Juicer fetches ``{lang}.sp.model`` / ``{lang}.arpa.bin`` (sentencepiece and KenLM models) and
Hugging Face tokenizers (``EleutherAI/pythia-6.9b-deduped``) when an op starts.  raypress never
downloads, so the same files are looked up by the same names, in order:

1. the directory named by ``$RAYPRESS_DJ_MODELS``;
2. Data-Juicer's external model homes (``$DATA_JUICER_EXTERNAL_MODELS_HOME``, os.pathsep-separated),
   then its own model cache (``$DATA_JUICER_MODELS_CACHE``, else
   ``$DATA_JUICER_CACHE_HOME/models``, else ``~/.cache/data_juicer/models``), where a Data-Juicer
   install already put them;
3. for a Hugging Face tokenizer only: ``<dir>/<org>/<name>/tokenizer.json`` in those directories
   (Data-Juicer's ``check_model_home`` layout), then the Hugging Face hub cache (``$HF_HUB_CACHE``,
   ``$HF_HOME/hub`` or ``~/.cache/huggingface/hub``), where ``huggingface-cli download`` puts it.

A missing file is a ``FileNotFoundError`` whose message says how to provide it, raised when the op
starts; a local run resolves them before Ray starts and pins the paths in the params
(``Params.with_model_files``).  Loading
lives in ``sentencepiece`` and ``hf_tokenizers`` beside it: this module imports no model package.
"""

from __future__ import annotations

import os
from pathlib import Path

MODELS_ENV = "RAYPRESS_DJ_MODELS"
SP_NAME = "{lang}.sp.model"  # Data-Juicer's file names
KENLM_NAME = "{lang}.arpa.bin"
PYTHIA_TOKENIZER = "EleutherAI/pythia-6.9b-deduped"  # what Data-Juicer's alphanumeric_filter counts with


def search_dirs() -> list[Path]:
    """Where model files are looked up by name: $RAYPRESS_DJ_MODELS, then where Data-Juicer looks."""
    external = [p.strip() for p in os.environ.get("DATA_JUICER_EXTERNAL_MODELS_HOME", "").split(os.pathsep)]
    dirs = [os.environ.get(MODELS_ENV), *external, os.environ.get("DATA_JUICER_MODELS_CACHE")]
    home = os.environ.get("DATA_JUICER_CACHE_HOME") or os.path.join(os.environ.get("CACHE_HOME", "~/.cache"),
                                                                    "data_juicer")
    dirs.append(os.path.join(home, "models"))
    return [Path(d).expanduser() for d in dirs if d]


def find_by_name(name: str) -> Path | None:
    """The first ``name`` in ``search_dirs()``, or None."""
    return next((d / name for d in search_dirs() if (d / name).is_file()), None)


def sentencepiece_file(lang: str, given: str | None, op: str) -> Path:
    """The sentencepiece model an op with ``tokenization: true`` splits words with."""
    if given:
        return Path(given).expanduser()
    name = SP_NAME.format(lang=lang)
    found = find_by_name(name)
    if found is None:
        raise FileNotFoundError(
            f"{op} with tokenization=True splits words with Data-Juicer's sentencepiece model {name}, and raypress "
            f"does not download it: set `sp_model_path` in the op's `with:` or put {name} in the directory named "
            f"by ${MODELS_ENV} (looked up: {_listed(search_dirs())}). Data-Juicer's copy is the Wikipedia model "
            f"of edugp/kenlm on the Hugging Face Hub (wikipedia/{name})")
    return found


def hf_tokenizer_file(name: str, op: str) -> Path:
    """``tokenizer.json`` of the Hugging Face tokenizer ``name`` (``org/model``), found locally."""
    for d in search_dirs():
        candidate = d / name / "tokenizer.json"
        if candidate.is_file():
            return candidate
    cached = _hub_cached(name)
    if cached is not None:
        return cached
    raise FileNotFoundError(
        f"{op} with tokenization=True counts tokens of the Hugging Face tokenizer {name}, and raypress does not "
        f"download it: put its tokenizer.json at <dir>/{name}/tokenizer.json with <dir> named by ${MODELS_ENV}, "
        f"or in the Hugging Face cache (`huggingface-cli download {name} tokenizer.json` on a connected machine; "
        f"looked up: {_listed([*search_dirs(), hub_cache_dir()])})")


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache, resolved as huggingface_hub does (without importing it)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def _hub_cached(name: str) -> Path | None:
    """``tokenizer.json`` of the snapshot the hub cache's ``main`` ref points at (any snapshot if none)."""
    repo = hub_cache_dir() / f"models--{name.replace('/', '--')}"
    ref = repo / "refs" / "main"
    snapshots = [repo / "snapshots" / ref.read_text().strip()] if ref.is_file() else []
    snapshots += sorted((repo / "snapshots").glob("*")) if (repo / "snapshots").is_dir() else []
    return next((s / "tokenizer.json" for s in snapshots if (s / "tokenizer.json").is_file()), None)


def _listed(dirs: list[Path]) -> str:
    return ", ".join(map(str, dirs)) or "no directory"
