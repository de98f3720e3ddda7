"""A writer's destination: staged parts, a manifest of what raypress wrote there, an atomic commit.

Why: writers used to write `part-*` files straight into their folder and delete every `part-*`
they found there first, so a second writer with the same path (or a user's own files) was
silently deleted, and a crash left half-written temp parts behind for good.  Now:

- parts are written to a staging folder beside the destination (`.<name>.raypress-staging`,
  removed before a run starts writing and after it commits, so no temp file outlives a run);
- the destination's files are listed in a manifest beside it (`.<name>.raypress-manifest.json`,
  with the pipeline and node that wrote them); anything else found there is *foreign*, and a
  run refuses to start over foreign files unless the writer says `overwrite: true`;
- commit is a journal: the manifest first lists the new files as pending, then each staged file
  is renamed into place (a reader never sees half a file), the writer's previous files are
  removed, and the manifest flips to the new list in one rename.  A crash at any point leaves a
  manifest that still names every file raypress owns there.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raypress.dag.cancel import cancel_deferred

STAGING_SUFFIX = ".raypress-staging"
MANIFEST_SUFFIX = ".raypress-manifest.json"


class DestinationConflict(Exception):
    """A destination holds files raypress did not write (or that another node wrote)."""


@dataclass
class Destination:
    """Where one writer node puts its output: a folder, or a single file when ``single_file``."""

    target: Path
    single_file: bool
    owner: dict[str, str]  # {"pipeline", "node", "op"}: who may replace the files listed here
    overwrite: bool = False

    def __post_init__(self) -> None:
        self.target = Path(os.path.abspath(self.target))

    @property
    def staging(self) -> Path:
        return self.target.parent / f".{self.target.name}{STAGING_SUFFIX}"

    @property
    def manifest_path(self) -> Path:
        return self.target.parent / f".{self.target.name}{MANIFEST_SUFFIX}"

    # -- what is there ----------------------------------------------------------
    def manifest(self) -> dict[str, Any]:
        try:
            data = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _same_owner(self, manifest: dict[str, Any]) -> bool:
        theirs = manifest.get("owner") or {}
        return (theirs.get("pipeline"), theirs.get("node")) == (self.owner.get("pipeline"), self.owner.get("node"))

    def _present(self) -> list[str]:
        """Relative names of the files at the destination now."""
        if self.single_file:
            return [self.target.name] if self.target.exists() else []
        if not self.target.exists():
            return []
        return sorted(str(p.relative_to(self.target)) for p in self.target.rglob("*") if not p.is_dir())

    def ours(self) -> set[str]:
        """Files at the destination that this node wrote (committed or pending in the manifest)."""
        m = self.manifest()
        if not self._same_owner(m):
            return set()
        return set(m.get("files") or []) | set(m.get("pending") or [])

    def foreign(self) -> list[str]:
        return [f for f in self._present() if f not in self.ours()]

    def check(self) -> None:
        """Refuse, before anything runs, a destination this writer may not fill."""
        t = self.target
        if self.single_file and t.is_dir():
            raise DestinationConflict(f"{t} is a folder, but this writer writes one file there")
        if not self.single_file and t.exists() and not t.is_dir():
            raise DestinationConflict(f"{t} is a file, but this writer writes a folder of parts there")
        if self.overwrite:
            return
        foreign = self.foreign()
        if not foreign:
            return
        m = self.manifest()
        theirs = m.get("owner") or {}
        who = (f" (written by pipeline {theirs.get('pipeline')!r}, node {theirs.get('node')!r})"
               if theirs and not self._same_owner(m) else " that raypress did not write")
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        what = "file" if self.single_file else f"folder holds {len(foreign)} file(s)"
        raise DestinationConflict(f"{t}: the {what}{who}: {shown}. Nothing was deleted; choose an empty "
                                  "destination, or set `overwrite: true` on this writer to replace them")

    # -- writing --------------------------------------------------------------------
    def reset_staging(self) -> Path:
        """An empty staging folder (what an interrupted attempt left there is removed)."""
        if self.staging.exists():
            shutil.rmtree(self.staging)
        self.staging.mkdir(parents=True)
        return self.staging

    def discard_staging(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)

    def commit(self) -> dict[str, int]:
        """Move the staged output into place; return the committed files (absolute path -> size).
        A cancel arriving meanwhile waits until the commit is done (``cancel_deferred``)."""
        with cancel_deferred():
            return self._commit()

    def _commit(self) -> dict[str, int]:
        self.check()  # the destination may have changed while the run was working
        new = self._staged()
        old = self.ours() | (set(self._present()) if self.overwrite else set())
        self._write_manifest(sorted(old & set(self._present())), pending=new)
        if not self.single_file:
            self.target.mkdir(parents=True, exist_ok=True)
        for rel in new:
            final = self.target if self.single_file else self.target / rel
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.staging / rel, final)
        for rel in sorted(old - set(new)):
            (self.target if self.single_file else self.target / rel).unlink(missing_ok=True)
            if not self.single_file:
                _remove_empty_parents(self.target / rel, self.target)
        self._write_manifest(new, pending=[])
        self.discard_staging()
        return self.committed()

    def committed(self) -> dict[str, int]:
        """The files the manifest lists, as they are on disk (absolute path -> size)."""
        out = {}
        for rel in self.manifest().get("files") or []:
            path = self.target if self.single_file else self.target / rel
            if path.exists():
                out[str(path)] = path.stat().st_size
        return out

    def _staged(self) -> list[str]:
        files = sorted(p for p in self.staging.rglob("*") if p.is_file() and not p.name.endswith(".tmp"))
        if self.single_file:
            if len(files) != 1:
                raise RuntimeError(f"writer for {self.target} staged {len(files)} files, expected its one file")
            staged = files[0]
            if staged.name != self.target.name:
                staged = staged.rename(self.staging / self.target.name)
            return [self.target.name]
        return [str(p.relative_to(self.staging)) for p in files]

    def _write_manifest(self, files: list[str], pending: list[str]) -> None:
        self.manifest_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.manifest_path.with_name(self.manifest_path.name + ".tmp")
        tmp.write_text(json.dumps({"owner": self.owner, "files": files, "pending": pending}, indent=1))
        os.replace(tmp, self.manifest_path)


def _remove_empty_parents(removed: Path, root: Path) -> None:
    """Folders emptied by removing ``removed`` (below ``root``) go too; nothing else is touched."""
    d = removed.parent
    while d != root and root in d.parents:
        try:
            d.rmdir()
        except OSError:
            return  # not empty
        d = d.parent

