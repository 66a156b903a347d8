"""``data download`` against a real HTTP server on 127.0.0.1 serving fixture archives (no outside network)."""

from __future__ import annotations

import hashlib
import http.server
import io
import threading
import zipfile
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from recagent_gym.data.download import URL_ENV, DownloadError, download
from recagent_gym.data.load import load_dataset
from recagent_gym.runs.cli import main
from tests import _data_fixtures as fx


def _zip_folder(folder: Path, top: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.iterdir()):
            zf.write(path, f"{top}/{path.name}")
    return buffer.getvalue()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # keep pytest output clean
        pass


@pytest.fixture
def server(tmp_path) -> Iterator[tuple[str, Path]]:
    """A loopback HTTP server over ``tmp_path/www``; yields its base URL and folder; stopped after the test."""
    root = tmp_path / "www"
    root.mkdir()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", root
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def _publish_ml_1m(tmp_path: Path, root: Path) -> str:
    data = _zip_folder(fx.ml_1m(tmp_path / "src"), "ml-1m")
    (root / "ml-1m.zip").write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def test_download_verifies_and_unpacks(tmp_path, server):
    base, root = server
    sha = _publish_ml_1m(tmp_path, root)
    folder = download("ml-1m", tmp_path / "data", url=f"{base}/ml-1m.zip", sha256=sha, progress=False)
    assert folder == tmp_path / "data" / "ml-1m"
    assert load_dataset(str(folder)).n_users == 3
    assert [p.name for p in (tmp_path / "data").iterdir()] == ["ml-1m"]  # no temporary leftovers


def test_cli_download_with_base_url_from_env(tmp_path, server, monkeypatch, capsys):
    base, root = server
    sha = _publish_ml_1m(tmp_path, root)
    monkeypatch.setenv(URL_ENV, base)
    assert main(["data", "download", "ml-1m", "--dir", str(tmp_path / "d"), "--sha256", sha, "--no-progress"]) == 0
    assert (tmp_path / "d" / "ml-1m" / "movies.dat").is_file()
    assert capsys.readouterr().out.strip() == str(tmp_path / "d" / "ml-1m")


def test_pinned_checksum_rejects_other_bytes(tmp_path, server, capsys):
    base, root = server
    _publish_ml_1m(tmp_path, root)
    # Without --sha256 the official checksums apply, and the fixture archive is not the official one.
    code = main(
        ["data", "download", "ml-1m", "--dir", str(tmp_path / "d"), "--url", f"{base}/ml-1m.zip", "--no-progress"]
    )
    assert code == 2  # a typed error: one line, exit status 2
    assert "MD5 checksum mismatch" in capsys.readouterr().err
    assert list((tmp_path / "d").iterdir()) == []


def test_corrupt_zip_leaves_nothing(tmp_path, server):
    base, root = server
    data = b"PK\x03\x04 this is not really a zip archive"
    (root / "ml-100k.zip").write_bytes(data)
    with pytest.raises(DownloadError, match="not a valid zip archive"):
        download(
            "ml-100k",
            tmp_path / "d",
            url=f"{base}/ml-100k.zip",
            sha256=hashlib.sha256(data).hexdigest(),
            progress=False,
        )
    assert list((tmp_path / "d").iterdir()) == []


def test_archive_missing_required_files_and_http_errors(tmp_path, server):
    base, root = server
    data = _zip_folder(fx.ml_100k(tmp_path / "src"), "wrong-name")
    (tmp_path / "src" / "u.user").unlink()
    data = _zip_folder(tmp_path / "src", "ml-100k")
    (root / "ml-100k.zip").write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    with pytest.raises(DownloadError, match=r"no ml-100k/u.user"):
        download("ml-100k", tmp_path / "d", url=f"{base}/ml-100k.zip", sha256=sha, progress=False)
    assert list((tmp_path / "d").iterdir()) == []
    with pytest.raises(DownloadError, match="HTTP 404"):
        download("ml-100k", tmp_path / "d", url=f"{base}/missing.zip", sha256=sha, progress=False)
    with pytest.raises(DownloadError, match="unknown dataset"):
        download("ml-20m", tmp_path / "d")


def test_existing_folder_is_kept_without_force(tmp_path, server):
    base, root = server
    sha = _publish_ml_1m(tmp_path, root)
    target = tmp_path / "d" / "ml-1m"
    target.mkdir(parents=True)
    assert download("ml-1m", tmp_path / "d", url=f"{base}/ml-1m.zip", sha256=sha, progress=False) == target
    assert not (target / "movies.dat").exists()
    download("ml-1m", tmp_path / "d", url=f"{base}/ml-1m.zip", sha256=sha, progress=False, force=True)
    assert (target / "movies.dat").is_file()
