"""Hugging Face ids (`org/name`) found in the local Hugging Face cache, without a network.

The cache that `huggingface_hub` fills keeps a model as

    $HF_HUB_CACHE (default $HF_HOME/hub, default ~/.cache/huggingface/hub)
        models--org--name/
            refs/main                 the revision the id names (a commit hash)
            snapshots/<revision>/     config.json, model.safetensors, tokenizer files (links into blobs/)

`resolve` turns an id into that snapshot folder, which the importers then read like any local folder;
`cached_models` lists the cached models of the families scratchformer opens (for the window's Open menu).
Nothing here downloads: an id that is not cached is one sentence saying how to get it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")


def hub_cache() -> Path:
    """Where the cache lives: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return Path(home).expanduser() / "hub"


def looks_like_id(spec: str) -> bool:
    """'org/name' that is not a folder on disk (a relative path such as 'models/en' that exists stays a path)."""
    return bool(HUB_ID.match(spec)) and not Path(spec).expanduser().exists()


def _repo_dir(repo_id: str) -> Path:
    return hub_cache() / ("models--" + repo_id.replace("/", "--"))


def _snapshot(repo: Path) -> Path | None:
    """The snapshot that refs/main names; with no refs/main, the only snapshot there is."""
    snapshots = repo / "snapshots"
    ref = repo / "refs" / "main"
    if ref.is_file():
        revision = ref.read_text(encoding="utf-8", errors="replace").strip()
        folder = snapshots / revision
        if revision and folder.is_dir():
            return folder
    found = sorted(p for p in snapshots.iterdir() if p.is_dir()) if snapshots.is_dir() else []
    return found[0] if len(found) == 1 else None


def resolve(repo_id: str) -> Path:
    """The cached snapshot folder of `repo_id`, or UserError saying how to get it (nothing is downloaded)."""
    repo = _repo_dir(repo_id)
    folder = _snapshot(repo) if repo.is_dir() else None
    if folder is not None and (folder / "config.json").is_file():
        return folder
    where = hub_cache()
    if repo.is_dir():
        raise UserError(f"{repo_id} is in the Hugging Face cache ({repo}) but without a complete snapshot (no "
                        "refs/main or no config.json); download it again with `hf download " + repo_id + "`.")
    raise UserError(f"{repo_id} is no folder here and not in the local Hugging Face cache ({where}); scratchformer "
                    f"never downloads, so run `hf download {repo_id}` (or `huggingface-cli download {repo_id}`) where "
                    "there is a network, or give the model's folder.")  # fmt: skip


def revisions(repo_id: str) -> dict[str, Path]:
    """Every named revision of `repo_id` in the cache with a complete snapshot: refs/<name> → its folder. A model
    published with its training checkpoints as revisions (Pythia: `step1000`, …) keeps one ref per revision
    downloaded (`hf download org/name --revision step1000`)."""
    refs = _repo_dir(repo_id) / "refs"
    out: dict[str, Path] = {}
    if not refs.is_dir():
        return out
    for ref in sorted(p for p in refs.rglob("*") if p.is_file()):
        revision = ref.read_text(encoding="utf-8", errors="replace").strip()
        folder = _repo_dir(repo_id) / "snapshots" / revision
        if revision and (folder / "config.json").is_file():
            out[ref.relative_to(refs).as_posix()] = folder
    return out


def is_cached(repo_id: str) -> bool:
    """Whether `repo_id` has a complete snapshot in the cache (what resolve would open)."""
    try:
        resolve(repo_id)
    except UserError:
        return False
    return True


@dataclass
class CachedModel:
    repo_id: str  # 'org/name'
    folder: Path  # its snapshot
    model_type: str  # config.json's model_type


def cached_models(supported: tuple[str, ...] | None = None) -> list[CachedModel]:
    """The complete cached models whose config.json names a family scratchformer opens, sorted by id."""
    if supported is None:
        from .importers.hf import SUPPORTED

        supported = SUPPORTED
    root = hub_cache()
    out: list[CachedModel] = []
    if not root.is_dir():
        return out
    for repo in sorted(root.glob("models--*")):
        parts = repo.name.split("--")[1:]
        if len(parts) != 2:
            continue
        folder = _snapshot(repo)
        try:
            config = json.loads((folder / "config.json").read_text(encoding="utf-8")) if folder else None
        except (OSError, ValueError):
            continue
        if isinstance(config, dict) and config.get("model_type") in supported:
            out.append(CachedModel("/".join(parts), folder, config["model_type"]))
    return out
