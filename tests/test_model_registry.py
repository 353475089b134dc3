"""Model registry: names resolve to real files verified by sha256; errors are clear and fast.

Downloads are tested against a loopback HTTP server and a closed loopback port only; the
tests never touch the internet.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import http.server
import re
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from pipeline.cli import models as cli_models
from pipeline.core import settings
from pipeline.nets import registry as model_registry
from pipeline.nets.formats import NET_FORMATS
from pipeline.nets.lc0_net import Lc0Net
from pipeline.nets.loading import LOADERS, load_net
from pipeline.nets.registry import (
    ChecksumMismatchError,
    FetchError,
    ModelNotFoundError,
    RegistryFileError,
)

MAIA_1100_SHA = "e1cf1cd0c96b8a4fa6a275f4b9fd54ed1ffebf9fe44641b9fceded310e9619c4"


def shared_sums() -> dict[str, str]:
    """``models/SHA256SUMS``: relative path -> sha256."""
    lines = (settings.models_dir() / "SHA256SUMS").read_text().splitlines()
    return {path: sha for sha, path in (line.split() for line in lines if line.strip())}


def write_user_registry(models_dir: Path, entries: list[dict]) -> None:
    models_dir.mkdir(parents=True, exist_ok=True)
    (models_dir / "registry.yaml").write_text(yaml.safe_dump({"models": entries}))


def user_entry(name: str, path: str, sha256: str, url: str | None = None) -> dict:
    entry = {"name": name, "game": "chess", "format": "lc0", "path": path, "sha256": sha256}
    if url:
        entry["url"] = url
    return entry


MAIA_2200 = "maia/maia-2200.pb.gz"


def test_builtin_registry_matches_shared_checksums() -> None:
    # Project-trained nets (models/registry.yaml, source "project") are not in ../shared.
    entries = {e.name: e for e in model_registry.list_models() if e.source == "built-in"}
    assert {f"maia-{n}" for n in range(1100, 2000, 100)} <= set(entries)
    sums = shared_sums()
    assert len(sums) == 10
    # Maia-2200 came to ../shared after SHA256SUMS; ../shared/README.md's table gives its sha256.
    sums[MAIA_2200] = "284dc0280faef11f78b9ccd62b51cc6861afc4d8de646fe3d32039cc1432ba8b"
    assert f"`{sums[MAIA_2200]}`" in (settings.shared_dir() / "README.md").read_text()
    for entry in entries.values():
        assert sums[entry.path] == entry.sha256, entry.name
        resolved = model_registry.resolve(entry.name)
        assert resolved.file == (settings.models_dir() / entry.path).resolve()
        assert model_registry.file_sha256(resolved.file) == sums[entry.path]


def test_sha256_is_computed_once_per_file() -> None:
    path = settings.models_dir() / "maia" / "maia-1100.pb.gz"
    assert model_registry.file_sha256(path) == MAIA_1100_SHA
    key = next(k for k in model_registry._sha_cache if k[0] == str(path.resolve()))
    model_registry._sha_cache[key] = "cached-marker"
    try:
        assert model_registry.file_sha256(path) == "cached-marker"
    finally:
        model_registry._sha_cache[key] = MAIA_1100_SHA


def test_flipped_byte_is_detected(tmp_path: Path) -> None:
    models = tmp_path / "models"
    (models / "mine").mkdir(parents=True)
    copy = models / "mine" / "maia-1100.pb.gz"
    shutil.copyfile(settings.models_dir() / "maia" / "maia-1100.pb.gz", copy)
    write_user_registry(models, [user_entry("my-maia", "mine/maia-1100.pb.gz", MAIA_1100_SHA)])
    assert model_registry.resolve("my-maia", models_dir=models).file == copy.resolve()

    data = bytearray(copy.read_bytes())
    data[len(data) // 2] ^= 0x01
    copy.write_bytes(bytes(data))
    with pytest.raises(ChecksumMismatchError, match=r"'my-maia'.*registry says e1cf1cd0"):
        model_registry.resolve("my-maia", models_dir=models)


def test_missing_file_and_unknown_name(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match=r"maia-1500.*not found under models dir"):
        model_registry.resolve("maia-1500", models_dir=tmp_path)
    with pytest.raises(ModelNotFoundError, match="no model named 'maia-9999'"):
        model_registry.resolve("maia-9999")


def test_user_registry_adds_entries_and_is_validated(tmp_path: Path) -> None:
    write_user_registry(tmp_path, [user_entry("extra", "x.pb.gz", "ab" * 32)])
    names = [e.name for e in model_registry.list_models(models_dir=tmp_path)]
    assert "extra" in names and "maia-1100" in names
    (tmp_path / "registry.yaml").write_text("models:\n  - name: broken\n    game: chess\n")
    with pytest.raises(RegistryFileError, match="lacks \\['format', 'path', 'sha256'\\]"):
        model_registry.list_models(models_dir=tmp_path)


def test_a_names_history_outlives_a_new_registration_and_is_in_the_card(tmp_path: Path) -> None:
    """A default replaced under its name keeps the name's past: ``write_entry`` carries the
    old entry's ``history`` over, and the model's card prints it with the name it was trained
    under and the names it went by (the Go default, registered as kibitz-go-policy-distill,
    whose name stood for three nets before it; the nets it replaced left the tree, and the
    history says which commit holds them)."""
    from pipeline.train.model_cards import render_card

    old = {**user_entry("net-a", "a.pb.gz", "ab" * 32), "history": ["Was a 4 × 32 net."]}
    write_user_registry(tmp_path, [old])
    model_registry.write_entry(tmp_path, user_entry("net-a", "b.pb.gz", "cd" * 32))
    (entry,) = [e for e in model_registry.list_models(models_dir=tmp_path) if e.name == "net-a"]
    assert (entry.sha256, entry.history) == ("cd" * 32, ("Was a 4 × 32 net.",))
    write_user_registry(tmp_path, [{**old, "history": "not a list"}])
    with pytest.raises(RegistryFileError, match="history must be a list of strings"):
        model_registry.list_models(models_dir=tmp_path)

    def history(name: str) -> str:
        folder = model_registry.resolve(name).file.parent
        header = yaml.safe_load((folder / "model.yaml").read_text(encoding="utf-8"))
        card = render_card(header, name)
        return card[card.index("## History") :]

    default = history("kibitz-go-policy")
    assert "- Went by `kibitz-go-policy-distill` before a rename; the registry resolves" in default
    assert "`kibitz-go-policy-4x32`" in default and "`kibitz-go-policy-cpu`" in default
    assert "shipped on as `kibitz-go-policy-gpu`" in default
    assert "left the tree" in default and "commit 9ba4a73 holds each" in default
    small = history("kibitz-go-policy-4x32")  # trained under the default's name
    assert "- Registered as `kibitz-go-policy` by the command above; the same file" in small
    assert "Went by" not in small  # the name it was registered under is said once


def test_a_card_gives_the_start_of_a_run_by_its_present_name(tmp_path, monkeypatch) -> None:
    """``--init-from NAME`` resolved a name that may since stand for other weights: the default
    was trained from the net that was ``kibitz-go-policy`` then (sha256 ``85d747dd…``), which
    has left the tree, so its card gives that start by the header's name and sha256 alone.
    Registered again under another name (here a user's registry), the card names it too."""
    from pipeline.train.model_cards import render_card

    def card() -> str:
        folder = model_registry.resolve("kibitz-go-policy").file.parent
        return render_card(yaml.safe_load((folder / "model.yaml").read_text()), "kibitz-go-policy")

    start = "85d747dda2253be6f664fb5abe04b3425c75c4cb99733f4ad4c27947981f68a6"
    assert f"Started from the weights of `kibitz-go-policy` (sha256 `{start}`: 400 steps" in card()
    write_user_registry(tmp_path, [user_entry("go-policy-before", "gpu.kibitz.pt", start)])
    monkeypatch.setenv("KIBITZ_MODELS_DIR", str(tmp_path))
    renamed = f"(sha256 `{start}`, now the registry's `go-policy-before`: 400 steps"
    assert f"Started from the weights of `kibitz-go-policy` {renamed}" in card()


def test_load_net_by_name_and_path() -> None:
    net = load_net("maia-1300")
    assert isinstance(net, Lc0Net) and net.output_names == ("policy", "wdl")
    by_path = load_net(settings.models_dir() / "maia" / "maia-1300.pb.gz")
    assert by_path.description == net.description


def test_every_registry_format_has_one_loader(tmp_path: Path) -> None:
    assert sorted(LOADERS) == sorted(NET_FORMATS)
    assert all(callable(loader) for loader in LOADERS.values())
    write_user_registry(tmp_path, [{**user_entry("odd", "x.pb.gz", "ab" * 32), "format": "onnx"}])
    with pytest.raises(RegistryFileError, match="has format 'onnx'"):
        model_registry.list_models(models_dir=tmp_path)


def test_fetch_fails_fast_offline(tmp_path: Path) -> None:
    write_user_registry(
        tmp_path, [user_entry("offline", "o.pb.gz", "00" * 32, url="http://127.0.0.1:9/x")]
    )
    started = time.perf_counter()
    with pytest.raises(FetchError, match=r"cannot reach 127\.0\.0\.1:9.*no network"):
        model_registry.fetch("offline", models_dir=tmp_path, timeout=5)
    assert time.perf_counter() - started < 5
    assert not (tmp_path / "o.pb.gz").exists()


@pytest.fixture
def loopback_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An HTTP server on 127.0.0.1 serving ``tmp_path / "www"``."""
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *args: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_downloads_verifies_and_rejects_bad_checksums(
    tmp_path: Path, loopback_server: tuple[str, Path]
) -> None:
    base, root = loopback_server
    payload = b"not really a net, but bytes with a known hash"
    (root / "net.pb.gz").write_bytes(payload)
    good_sha = hashlib.sha256(payload).hexdigest()
    models = tmp_path / "models"
    write_user_registry(
        models,
        [
            user_entry("good", "dl/good.pb.gz", good_sha, url=f"{base}/net.pb.gz"),
            user_entry("bad", "dl/bad.pb.gz", "11" * 32, url=f"{base}/net.pb.gz"),
        ],
    )
    target = model_registry.fetch("good", models_dir=models)
    assert target.read_bytes() == payload
    assert model_registry.resolve("good", models_dir=models).file == target

    with pytest.raises(FetchError, match=r"has sha256 .*not installed"):
        model_registry.fetch("bad", models_dir=models)
    assert sorted(p.name for p in (models / "dl").iterdir()) == ["good.pb.gz"]


def kibitz_models(argv: list[str]) -> int:
    """``kibitz models ARGV`` through this command's own parser (no other command modules)."""
    parser = argparse.ArgumentParser(prog="kibitz")
    cli_models.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["models", *argv])
    return args.func(args)


def test_cli_list_and_offline_fetch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # --models-dir sets KIBITZ_MODELS_DIR for the process; restore it after the test.
    monkeypatch.setenv("KIBITZ_MODELS_DIR", str(settings.models_dir()))
    assert kibitz_models(["list"]) == 0
    out = capsys.readouterr().out
    maia_line = next(line for line in out.splitlines() if line.startswith("maia-1100 "))
    assert maia_line.split()[1:6] == ["default", "chess", "lc0", "yes", "ok"]

    write_user_registry(
        tmp_path, [user_entry("offline", "o.pb.gz", "00" * 32, url="http://127.0.0.1:9/x")]
    )
    assert kibitz_models(["--models-dir", str(tmp_path), "fetch", "offline"]) == 1
    assert "cannot reach 127.0.0.1:9" in capsys.readouterr().err


def test_cli_check_needs_the_games_of_the_nets_game(capsys: pytest.CaptureFixture[str]) -> None:
    games = (
        settings.data_dir() / "chess" / "lichess-2024-02-blitz" / "testing" / "1000-1200.pgn.zst"
    )
    assert kibitz_models(["check", "katago-g170-b6c96", "--pgn", str(games)]) == 2
    assert "is a go net: give the games with --sgf" in capsys.readouterr().err


def test_a_renamed_net_resolves_under_its_former_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A net renamed in the registry (``formerly``) still resolves under the name that
    features, meta-models and levels heads recorded when they were made: Maia-1100's file
    registered as ``maia-renamed``, formerly ``maia-old-name``. A current name wins over a
    former one, and a former name two entries claim is an error."""
    from types import SimpleNamespace

    from pipeline.meta.model_card import _nets
    from pipeline.meta.registered import check_nets

    shutil.copy(settings.models_dir() / "maia" / "maia-1100.pb.gz", tmp_path)
    monkeypatch.setenv("KIBITZ_MODELS_DIR", str(tmp_path))
    renamed = user_entry("maia-renamed", "maia-1100.pb.gz", MAIA_1100_SHA)
    write_user_registry(tmp_path, [{**renamed, "formerly": ["maia-old-name", "maia-1100"]}])
    entry = model_registry.find_entry("maia-old-name")
    assert (entry.name, entry.formerly) == ("maia-renamed", ("maia-old-name", "maia-1100"))
    assert model_registry.resolve("maia-old-name").file == tmp_path / "maia-1100.pb.gz"
    assert model_registry.model_sha256("maia-old-name") == MAIA_1100_SHA
    assert model_registry.find_entry("maia-1100").source == "built-in"  # the current name wins

    # a meta-model whose features recorded the former name: its nets check, its card says both
    config = {"imitation_nets": [{"name": "maia-1100", "model": "maia-old-name"}]}
    manifest = {"features_config": {"config": config, "nets": {"maia-old-name": MAIA_1100_SHA}}}
    check_nets(SimpleNamespace(manifest=manifest, root=tmp_path))
    row = f"| maia-1100 | maia-renamed (extracted as maia-old-name) | `{MAIA_1100_SHA}` |"
    assert _nets(manifest, None)[2] == row

    assert kibitz_models(["list", "--no-verify"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("maia-renamed")]
    assert line.startswith("maia-renamed (formerly maia-old-name, maia-1100) ")
    assert line.split()[4:8] == ["default", "chess", "lc0", "yes"]  # the name it replaces

    other = {
        **user_entry("maia-other", "maia-1100.pb.gz", MAIA_1100_SHA),
        "formerly": ["maia-old-name"],
    }
    write_user_registry(tmp_path, [{**renamed, "formerly": ["maia-old-name"]}, other])
    with pytest.raises(RegistryFileError, match="'maia-old-name' is a former name of 2 entries"):
        model_registry.find_entry("maia-old-name")
    write_user_registry(tmp_path, [{**renamed, "formerly": "maia-old-name"}])
    with pytest.raises(RegistryFileError, match="formerly must be a list of strings"):
        model_registry.list_models()


def test_models_list_shows_one_default_per_role_first(tmp_path: Path, monkeypatch, capsys) -> None:
    """``kibitz models list``: the nets the presets run and the shipped meta-models were fitted
    on are defaults and come first; the one registered net no default uses (the tests' small
    Go policy) is a reference; a models directory's own entry is a user's. Each role of the
    defaults is filled once: one Go policy, one levels head and one meta-model a game."""
    write_user_registry(tmp_path, [user_entry("my-net", "my-net.pb.gz", "ab" * 32)])
    monkeypatch.setenv("KIBITZ_MODELS_DIR", str(tmp_path))
    assert cli_models.cmd_list(argparse.Namespace(models_dir=None, no_verify=True)) == 0
    header, *rows = (re.split(r"\s{2,}", line) for line in capsys.readouterr().out.splitlines())
    assert header[:2] == ["name", "role"]
    roles = {row[0].split()[0]: row[1] for row in rows}
    order = [row[1] for row in rows]
    assert order == sorted(order, key=cli_models.ROLES.index)  # defaults, then the rest
    assert roles["kibitz-go-policy-4x32"] == "reference" and roles["my-net"] == "user"
    defaults = [e for e in model_registry.list_models() if roles.get(e.name) == "default"]
    assert {e.name for e in defaults} == {
        *(f"maia-{r}" for r in (*range(1100, 2000, 100), 2200)), "katago-g170-b6c96",
        "kibitz-go-policy",
        "kibitz-sscore-chess", "kibitz-sscore-chess-levels", "kibitz-sscore-go",
        "kibitz-sscore-go-levels", "kibitz-meta-chess", "kibitz-meta-go",
    }  # fmt: skip
    for game in model_registry.GAMES:
        kinds = [e.format for e in defaults if e.game == game and e.format != "lc0"]
        assert all(kinds.count(f) == 1 for f in set(kinds)), (game, kinds)
