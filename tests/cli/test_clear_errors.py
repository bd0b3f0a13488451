"""Bad input is one clear line on stderr (exit 2), found before anything is written."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from lifeline_mesh.transport.addresses import split_address
from tests.support.clirun import lifeline
from tests.support.mesh_procs import cli


def one_line(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    err = result.stderr
    assert result.returncode == 2, (result.returncode, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.fixture
def project(tmp_path: Path) -> Path:
    assert lifeline(tmp_path, "init").returncode == 0
    return tmp_path


def _log_file(root: Path, path: Path | str) -> subprocess.CompletedProcess[str]:
    return lifeline(root, "log", "--kind", "note", "--summary", "s", "--body-file", str(path))


def test_body_file_that_is_not_utf8(project: Path) -> None:
    path = project / "latin1.txt"
    path.write_bytes("caf\u00e9".encode("latin-1"))
    one_line(_log_file(project, path), "is not UTF-8 text", "byte 3")


def test_body_file_that_is_binary(project: Path) -> None:
    path = project / "blob.bin"
    path.write_bytes(b"\x00\x01\x02abc")
    one_line(_log_file(project, path), "NUL bytes")


def test_body_file_dev_zero_is_refused_at_once(project: Path) -> None:
    started = time.monotonic()
    one_line(_log_file(project, "/dev/zero"), "larger than the body cap of 64000 bytes")
    assert time.monotonic() - started < 30  # before: read forever


def test_a_huge_body_file_is_not_read_whole(project: Path) -> None:
    path = project / "huge.txt"
    with path.open("wb") as fh:  # 2 GB, sparse: reading it whole would take the machine
        fh.truncate(2 * 1024**3)
    one_line(_log_file(project, path), "larger than the body cap")
    assert lifeline(project, "history", "--json").stdout.strip() == "[]"


def test_body_file_on_stdin_is_capped_too(project: Path) -> None:
    done = lifeline(
        project, "log", "--kind", "note", "--summary", "s", "--body-file", "-", stdin="x" * 70_000
    )
    one_line(done, "standard input is larger than the body cap")


def test_invite_with_a_ttl_too_long_writes_nothing(tmp_path: Path) -> None:
    cli("lifeline_mesh", tmp_path, "init", "--new-mesh", "team")
    book = tmp_path / ".lifeline" / "mesh" / "invites.json"
    assert not book.exists()
    one_line(cli("lifeline_mesh", tmp_path, "invite", "--ttl", "100000d", check=False), "--ttl")
    assert not book.exists()  # no dangling invite
    cli("lifeline_mesh", tmp_path, "invite", "--ttl", "365d")
    assert len(json.loads(book.read_text())) == 1


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1:99999", "the port must be a number from 1 to 65535"),
        ("127.0.0.1:0", "the port must be a number from 1 to 65535"),
        ("localhost", "no port"),
        ("::1:7000", "an IPv6 address needs brackets"),
        ("[::1]:65536", "the port must be a number from 1 to 65535"),
        ("127.0.0.1:\u00b2", "the port must be"),
        ("bad host:7000", "characters no host name has"),
    ],
)
def test_sync_address_is_checked_before_dialing(project: Path, address: str, reason: str) -> None:
    done = cli("lifeline_mesh", project, "sync", address, "--insecure", check=False)
    one_line(done, "is not HOST:PORT", reason)


def test_ipv6_in_brackets_and_port_zero_to_listen_are_fine() -> None:
    assert split_address("[::1]:7420") == ("::1", 7420)
    assert split_address("[fe80::1%eth0]:7420") == ("fe80::1%eth0", 7420)
    assert split_address("127.0.0.1:0", listen=True) == ("127.0.0.1", 0)


def test_a_line_name_with_a_trailing_newline_is_refused(tmp_path: Path) -> None:
    one_line(lifeline(tmp_path, "--line", "x\n", "init"), "is not valid")
    assert not (tmp_path / ".lifeline").exists() or os.listdir(tmp_path / ".lifeline") in (
        [],
        [".gitignore"],
    )


def test_sharing_a_line_that_does_not_exist_is_refused(project: Path) -> None:
    one_line(
        cli("lifeline_mesh", project, "share", "ledgr", check=False),
        "line 'ledgr' does not exist",
        "lifeline --line ledgr init",
    )
    assert cli("lifeline_mesh", project, "share", "ledger").returncode == 0


@pytest.mark.parametrize(
    "args",
    [
        ("lifeline", "log", "--kind", "{big}", "--summary", "s"),  # our own error
        ("lifeline", "recall", "q", "--kind", "{big}"),  # argparse's
        ("lifeline_mesh", "sync", "{big}"),  # an argument's type
        ("lifeline_mesh", "revoke", "{big}"),  # a command's check
    ],
)
def test_an_error_clips_a_huge_argument_it_tells_back(project: Path, args: tuple[str, ...]) -> None:
    big = "ab" * 50_000
    done = cli(args[0], project, *(a.replace("{big}", big) for a in args[1:]), check=False)
    err = one_line(done, "(100,000 characters)")
    assert len(err) < 1000 and big[:120] in err
    assert "see `" in err or "use one of" in err or "node id" in err  # the advice survives
