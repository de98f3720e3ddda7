"""Hugging Face ``datasets`` in, local files only: raypress never downloads from the Hub.

Reading takes a ``save_to_disk`` directory, a packaged local builder (json, csv, parquet, text,
arrow) with ``data_files``, or a Hub dataset by id (``hub_id``, Data-Juicer's ``type: remote,
source: huggingface``) that is already in the local ``datasets`` cache (loaded there on a connected
machine with the same ``HF_HOME``): ``datasets`` runs offline, so one that is not is an error
saying so.  Ray workers then read the dataset's Arrow files directly, so rows
never pass through the driver.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Literal

import pyarrow as pa
from pydantic import Field, model_validator

from raypress.operators.base import Params, Reader, RunContext
from raypress.operators.io.hf.offline import datasets_cache, offline_datasets
from raypress.operators.registry import register
from raypress.operators.shared.files import map_items
from raypress.operators.shared.rows import with_row_ids
from raypress.schema import ID_COL

if TYPE_CHECKING:  # pragma: no cover
    import datasets

LOCAL_BUILDERS = ("json", "csv", "parquet", "text", "arrow")
DataFiles = str | list[str] | dict[str, str | list[str]]


class ReadHfDatasetParams(Params):
    path: str | None = Field(default=None, description="a directory written by datasets' save_to_disk")
    hub_id: str | None = Field(default=None, description="a Hugging Face Hub dataset id (org/name) read from the "
                               "local datasets cache, offline")
    hub_config: str | None = Field(default=None, description="the Hub dataset's configuration name (with hub_id)")
    builder: Literal["json", "csv", "parquet", "text", "arrow"] | None = Field(
        default=None, description="a packaged local builder to run on data_files (instead of path)"
    )
    data_files: DataFiles | None = Field(
        default=None, description="local files or globs for the builder (a list, or a split -> files mapping)"
    )
    split: str | None = Field(
        default=None,
        description="split to read: needed when a saved DatasetDict has several; 'train' for builders",
    )
    columns: list[str] | None = Field(default=None, description="columns to read (default: all)")
    id_key: str | None = Field(
        default=None,
        description="column whose value (as a string) is the row id; rows where it is null become "
        "'missing_id' tombstones. Without it, id = '{source}:{row}' (row index in the dataset) and "
        "an 'id' column in the data is replaced (set id_key: id to keep it)",
    )

    @model_validator(mode="after")
    def _one_source(self):
        if sum(x is not None for x in (self.path, self.builder, self.hub_id)) != 1:
            raise ValueError("give exactly one of 'path' (a save_to_disk directory), 'builder' + 'data_files' "
                             "or 'hub_id' (a Hub dataset in the local cache)")
        if self.hub_config is not None and self.hub_id is None:
            raise ValueError("'hub_config' names a configuration of 'hub_id'")
        if self.builder is not None and not self.data_files:
            raise ValueError(f"builder {self.builder!r} needs data_files (local files)")
        for f in _flat_files(self.data_files):
            if "://" in f:
                raise ValueError(f"data_files must be local paths, got {f!r} (raypress never downloads)")
        return self


@register("read_hf_dataset", requires={"datasets": "hf", "huggingface_hub": "hf"})
class ReadHfDataset(Reader[ReadHfDatasetParams]):
    """Read a local Hugging Face dataset (save_to_disk directory or json/csv/parquet files)."""

    def columns_written(self) -> tuple[str, ...] | None:
        cols = self.params.columns
        return (ID_COL, *[c for c in cols if c != ID_COL]) if cols else None

    def read(self, ctx: RunContext):
        hf, source = self._load(ctx)
        files = [c["filename"] for c in hf.cache_files]
        counts = [arrow_rows(f) for f in files]
        if not files or sum(counts) != hf.num_rows:
            raise RuntimeError(
                f"{source}: the dataset is not plainly backed by Arrow files (in memory, or an indices "
                "mapping from select/shuffle); call flatten_indices() and save_to_disk it first"
            )
        starts = [0, *itertools.accumulate(counts)][:-1]
        items = [{"file": f, "offset": s} for f, s in zip(files, starts)]
        p = self.params
        read_one = partial(read_arrow_file, source=source, node=ctx.node_id, columns=p.columns, id_key=p.id_key)
        return map_items(items, read_one, ctx)

    def _load(self, ctx: RunContext) -> tuple["datasets.Dataset", str]:
        """The (memory-mapped) dataset on the driver, and the source name its ids start with."""
        datasets = offline_datasets()
        p = self.params
        if p.hub_id is not None:
            return _from_hub_cache(datasets, p.hub_id, p.hub_config, p.split or "train")
        if p.builder is not None:
            split = p.split or "train"
            cache = Path(ctx.run_dir) / "_hf_cache"
            cache.mkdir(parents=True, exist_ok=True)
            hf = datasets.load_dataset(p.builder, data_files=p.data_files, split=split, cache_dir=str(cache))
            digest = hashlib.sha1(json.dumps(p.data_files, sort_keys=True).encode()).hexdigest()[:10]
            return hf, f"{p.builder}-{digest}/{split}"
        if not Path(p.path).is_dir():
            raise FileNotFoundError(
                f"{p.path!r} is not a local directory written by save_to_disk; raypress never downloads "
                "from the Hugging Face Hub (use builder + data_files for local json/csv/parquet files)"
            )
        loaded = datasets.load_from_disk(p.path)
        if isinstance(loaded, datasets.DatasetDict):
            split = p.split or _only_split(loaded, p.path)
            if split not in loaded:
                raise KeyError(f"{p.path}: no split {split!r} (splits: {sorted(loaded)})")
            return loaded[split], f"{p.path}/{split}"
        return loaded, p.path


def _from_hub_cache(datasets: Any, hub_id: str, config: str | None, split: str) -> tuple["datasets.Dataset", str]:
    """A Hub dataset from the local cache (``datasets`` is offline: nothing is downloaded)."""
    try:
        hf = datasets.load_dataset(hub_id, config, split=split)
    except (ConnectionError, FileNotFoundError, ValueError) as exc:
        where = datasets_cache(datasets)
        named = f"{hub_id!r}" + (f" (configuration {config!r})" if config else "")
        raise FileNotFoundError(
            f"the Hugging Face Hub dataset {named}, split {split!r}, is not in the local datasets cache ({where}), "
            f"and raypress never downloads: load it once on a connected machine with the same HF_HOME "
            f"(datasets.load_dataset({hub_id!r}, {config!r}, split={split!r})), or save_to_disk it and give "
            f"that directory as `path` ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})") from None
    source = f"{hub_id}/{config}/{split}" if config else f"{hub_id}/{split}"
    return hf, source


def _only_split(dd: "datasets.DatasetDict", path: str) -> str:
    if len(dd) != 1:
        raise ValueError(f"{path} holds splits {sorted(dd)}: choose one with 'split'")
    return next(iter(dd))


def _flat_files(data_files: DataFiles | None) -> list[str]:
    if data_files is None:
        return []
    if isinstance(data_files, str):
        return [data_files]
    if isinstance(data_files, dict):
        return [f for v in data_files.values() for f in _flat_files(v)]
    return list(data_files)


def arrow_rows(file: str) -> int:
    """Rows in an Arrow IPC stream file; memory-mapped, so only the batch headers are touched."""
    return sum(batch.num_rows for batch in pa.ipc.open_stream(pa.memory_map(file)))


def read_arrow_file(
    item: dict[str, Any], source: str, node: str, columns: list[str] | None, id_key: str | None
) -> Iterator[pa.Table]:
    """Stream one Arrow file of a dataset as tables with ids ``{source}:{row in the dataset}``."""
    def tables() -> Iterator[pa.Table]:
        for batch in pa.ipc.open_stream(pa.memory_map(item["file"])):
            table = pa.Table.from_batches([batch])
            if columns is not None:
                table = table.select(list(dict.fromkeys(columns + ([id_key] if id_key else []))))
            yield table

    yield from with_row_ids(tables(), source, node, columns, id_key, offset=item["offset"])
