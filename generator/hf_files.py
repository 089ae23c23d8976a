"""Where an `hf_model` reference's config.json comes from: a local file or folder, a
shipped model, or (when the user allows it) the Hugging Face hub; read as one SetupError
line whatever goes wrong. Kept apart from generator/models.py, which reads the fields."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

from schema.errors import SetupError

MODELS_DIR = Path(__file__).parent / "models"
MAX_CONFIG_BYTES = 8 << 20  # a config.json is a few KiB; refuse to parse a huge file


def shipped_models() -> list[str]:
    return sorted(p.name for p in MODELS_DIR.iterdir() if (p / "config.json").is_file())


def _read_json(path: Path, where: str) -> dict[str, Any]:
    """A config.json as a dict; any unreadable, oversized, non-UTF-8, too deeply nested or
    non-JSON file is one SetupError line (never a traceback or a hang on a FIFO/device)."""
    try:
        if not path.is_file():
            raise SetupError(f"{where}: {path} is not a regular file")
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise SetupError(
                f"{where}: {path} is over {MAX_CONFIG_BYTES >> 20} MiB; not a config.json"
            )
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SetupError(f"{where}: cannot read {path} ({exc.strerror or exc})") from None
    except json.JSONDecodeError as exc:
        raise SetupError(
            f"{where}: {path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})"
        ) from None
    except UnicodeDecodeError:
        raise SetupError(
            f"{where}: {path} is not UTF-8 text (a config.json is UTF-8 JSON)"
        ) from None
    except RecursionError:
        raise SetupError(f"{where}: {path} nests too deeply to be a config.json") from None
    if not isinstance(data, dict):
        raise SetupError(f"{where}: {path} is not a JSON object")
    return data


def _hub_reachable(timeout_s: float = 2.0) -> bool:
    """Whether the hub's host answers at all (one TCP connect, no request)."""
    from urllib.parse import urlparse

    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout_s).close()
    except OSError:
        return False
    return True


DOWNLOAD_ENV = "MAPSHARD_HUB_DOWNLOAD"  # "1": an hf_model hub id may be downloaded


def downloads_allowed() -> bool:
    """A run reaches out to the hub only when the user says so (issue 36: no default that
    reaches out): MAPSHARD_HUB_DOWNLOAD=1, and never under HF_HUB_OFFLINE."""
    yes = os.environ.get(DOWNLOAD_ENV, "").strip().lower() in ("1", "true", "yes")
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() not in ("", "0", "false", "no")
    return yes and not offline


def _hub_config(repo_id: str, where: str) -> Path | None:
    """config.json of a hub repo: the local cache, then the shipped copy of the same name,
    then (downloads_allowed) a download."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:  # pragma: no cover - a declared dependency
        return None
    try:
        return Path(hf_hub_download(repo_id, "config.json", local_files_only=True))
    except Exception:  # noqa: BLE001 - any miss (not cached, bad id) falls through
        pass
    shipped = MODELS_DIR / repo_id.rsplit("/", 1)[-1] / "config.json"
    if shipped.is_file():
        return shipped
    if not downloads_allowed():
        return None
    if not _hub_reachable():
        return None  # offline: huggingface_hub would retry for ~23 s before failing
    try:
        return Path(hf_hub_download(repo_id, "config.json"))
    except Exception:  # noqa: BLE001 - network errors, gated repos, unknown ids
        return None


def resolve_hf_model(ref: str, setup_path: Path, where: str) -> tuple[dict[str, Any], str, str]:
    """(config dict, model name, the name of the file read) for an `hf_model` reference."""
    local = Path(ref).expanduser()
    if not local.is_absolute():
        local = setup_path.parent / local
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise SetupError(f"{where}: folder {local} has no config.json")
        return _read_json(local / "config.json", where), local.name, "config.json"
    if local.is_file():
        return _read_json(local, where), local.parent.name or local.stem, local.name
    shipped = MODELS_DIR / ref / "config.json"
    if shipped.is_file():
        return _read_json(shipped, where), ref, "config.json"
    if "/" in ref and not ref.startswith((".", "/")):
        path = _hub_config(ref, where)
        if path is not None:
            return _read_json(path, where), ref.rsplit("/", 1)[-1], "config.json"
        why = (
            "could not be downloaded (offline, gated or unknown id)"
            if downloads_allowed()
            else f"downloads are off (set {DOWNLOAD_ENV}=1 to fetch its config.json)"
        )
        raise SetupError(
            f"{where}: hub model {ref!r} is not in the local Hugging Face cache nor shipped, "
            f"and {why}; or put its config.json in a folder and set hf_model to that folder "
            f'(e.g. hf_model: "models/{ref}"); `mapshard models` lists the shipped ones'
        )
    raise SetupError(
        f"{where}: hf_model {ref!r} is neither a file or folder (relative to "
        f"{setup_path.parent}) nor a shipped model ({', '.join(shipped_models())})"
        " nor a hub id (owner/name)"
    )
