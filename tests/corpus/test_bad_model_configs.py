"""A config.json with wrong value types, impossible sizes or a broken encoding, and model
paths that are no regular file: each is one `error:` line naming the key or the file, exit 2,
never a traceback or a hang (issue: tracebacks from `int()` on raw JSON values)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import huggingface_hub
import pytest

from generator import hf_files as models
from mapshard.cli import EXIT_BAD_INPUT, main

TINY_LLAMA = {
    "model_type": "llama",
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 512,
    "vocab_size": 1000,
}
SETUP = """workload {{ llm_inference {{ model {{ hf_model: "{model}" }} phase: DECODE batch: 1
  context_len: 64 }} }}
system {{ chip: "H100-SXM5-80GB" num_chip: 1 }}
"""

# (name, the JSON text of config.json, text the error must contain)
BAD_VALUES = [
    ("string_dim", {"hidden_size": "256"}, "'hidden_size' must be a whole number"),
    ("float_dim", {"num_hidden_layers": 2.5}, "'num_hidden_layers' must be a whole number"),
    ("list_dim", {"vocab_size": [1000]}, "'vocab_size' must be a whole number"),
    ("bool_dim", {"intermediate_size": True}, "'intermediate_size' must be a whole number"),
    ("zero_heads", {"num_attention_heads": 0}, "'num_attention_heads' must be a whole number"),
    ("negative_dim", {"hidden_size": -256}, "'hidden_size' must be a whole number in 1.."),
    ("huge_dim", {"vocab_size": 10**30}, "'vocab_size' must be a whole number in 1.."),
    ("string_flag", {"tie_word_embeddings": "false"}, "'tie_word_embeddings' must be true"),
    ("list_type", {"model_type": ["llama"]}, "is not supported"),
]


def _run(tmp_path: Path, model: str) -> tuple[int, str, str]:
    setup = tmp_path / "setup.txt"
    setup.write_text(SETUP.format(model=model))
    return main(["run", str(tmp_path), "--out", str(tmp_path / "out"), "--quiet"]), str(setup)


def _assert_one_error(capsys: pytest.CaptureFixture[str], code: int, where: str, want: str):
    stdout, stderr = capsys.readouterr()
    assert "Traceback" not in stdout + stderr
    assert code == EXIT_BAD_INPUT, stderr
    assert stderr.startswith("error: ") and where in stderr and want in stderr, stderr


@pytest.mark.parametrize("name, change, want", BAD_VALUES, ids=[c[0] for c in BAD_VALUES])
def test_bad_config_value(name, change, want, tmp_path: Path, capsys) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA | change))
    code, where = _run(tmp_path, "config.json")
    _assert_one_error(capsys, code, where, want)


@pytest.mark.parametrize(
    "name, text, want",
    [
        ("nan", '{"model_type": "llama", "hidden_size": NaN}', "'hidden_size' must be a whole"),
        ("infinity", '{"model_type": "llama", "hidden_size": Infinity}', "must be a whole"),
        ("deep_nesting", "[" * 100_000 + "]" * 100_000, "nests too deeply"),
        ("not_an_object", "[1, 2]", "is not a JSON object"),
    ],
)
def test_bad_config_text(name, text, want, tmp_path: Path, capsys) -> None:
    (tmp_path / "config.json").write_text(text)
    code, where = _run(tmp_path, "config.json")
    _assert_one_error(capsys, code, where, want)


@pytest.mark.parametrize(
    "name, data, want",
    [
        ("binary", bytes(range(256)) * 4, "is not UTF-8 text"),
        ("utf16", json.dumps(TINY_LLAMA).encode("utf-16"), "is not UTF-8 text"),
    ],
)
def test_bad_config_encoding(name, data, want, tmp_path: Path, capsys) -> None:
    (tmp_path / "config.json").write_bytes(data)
    code, where = _run(tmp_path, "config.json")
    _assert_one_error(capsys, code, where, want)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_config_path_that_is_a_fifo_does_not_hang(tmp_path: Path, capsys) -> None:
    os.mkfifo(tmp_path / "config.json")
    code, where = _run(tmp_path, "config.json")
    _assert_one_error(capsys, code, where, "is neither a file")


def test_good_tiny_config_runs(tmp_path: Path, capsys) -> None:
    """The base of the cases above is valid, so each case fails for its one change."""
    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    code, _ = _run(tmp_path, "config.json")
    assert code == 0, capsys.readouterr().err


def cache_only_hub(monkeypatch, reachable: bool, allow: bool) -> None:
    """The hub as the tests below need it: nothing cached, reachable or not, downloads
    allowed or not, and any download attempt fails the test."""

    def download(repo_id, filename, local_files_only=False, **kw):
        assert local_files_only, "a download was attempted"
        raise FileNotFoundError(filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    monkeypatch.setattr(models, "_hub_reachable", lambda timeout_s=2.0: reachable)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    if allow:
        monkeypatch.setenv(models.DOWNLOAD_ENV, "1")
    else:
        monkeypatch.delenv(models.DOWNLOAD_ENV, raising=False)


def test_unreachable_hub_is_not_retried(tmp_path: Path, capsys, monkeypatch) -> None:
    """Offline, a hub id missing from the cache fails with its message at once: no download
    is attempted (huggingface_hub would retry for ~23 s)."""
    cache_only_hub(monkeypatch, reachable=False, allow=True)
    code, where = _run(tmp_path, "some-org/not-cached-model")
    _assert_one_error(capsys, code, where, "could not be downloaded")


def test_hub_downloads_are_off_unless_allowed(tmp_path: Path, capsys, monkeypatch) -> None:
    """No default reaches out (issue 36): with the hub reachable but MAPSHARD_HUB_DOWNLOAD
    unset, a hub id missing from the cache and the shipped models is one error naming the
    variable, and no download is attempted."""
    cache_only_hub(monkeypatch, reachable=True, allow=False)
    code, where = _run(tmp_path, "some-org/not-cached-model")
    _assert_one_error(capsys, code, where, "MAPSHARD_HUB_DOWNLOAD=1")
