"""A PostgreSQL server of korpus's own, from Debian's packages: the topology's (tasks/runtime/topology.py: Prefect's
database and the catalog's) and the tests'. Its data directory is made by initdb on first start, with trust on
loopback and the superuser `korpus`; as root it runs as the `postgres` user, which PostgreSQL requires, so the
directory must be one that user reaches (not a 0700 pytest temporary directory).

`LocalPostgres` runs one server as a child process (the tests: one a session, killed and restarted by the fault
tests); the topology runs the same command as a part of its own.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path


class PostgresError(RuntimeError):
    """PostgreSQL is missing, or a server did not start (the message ends with its log's last lines)."""


def pg_bin(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))), None)
    if not found:
        raise PostgresError(f"{name} not found: install PostgreSQL (Debian: apt-get install postgresql)")
    return str(found)


def server_user() -> str | None:
    """The user the server runs as: `postgres` under root (PostgreSQL refuses root), else the caller."""
    return "postgres" if os.geteuid() == 0 else None


def init_cluster(pg_dir: Path) -> None:
    """initdb into `pg_dir/data` unless it holds a cluster already (`pg_dir` is the socket directory too)."""
    if (pg_dir / "data" / "PG_VERSION").is_file():
        return
    pg_dir.mkdir(parents=True, exist_ok=True)
    user = server_user()
    if user:
        entry = pwd.getpwnam(user)
        os.chown(pg_dir, entry.pw_uid, entry.pw_gid)
    argv = [pg_bin("initdb"), "-D", str(pg_dir / "data"), "-U", "korpus", "--auth=trust", "-E", "UTF8", "--no-locale"]
    subprocess.run(argv, check=True, capture_output=True, user=user, cwd="/")


def server_argv(pg_dir: Path, port: int) -> list[str]:
    return [
        pg_bin("postgres"),
        "-D",
        str(pg_dir / "data"),
        "-p",
        str(port),
        "-k",
        str(pg_dir),
        "-c",
        "listen_addresses=127.0.0.1",
    ]


def accepting(port: int) -> bool:
    """The server answers a real request (`pg_isready`: one still in crash recovery after a SIGKILL has its port
    open but refuses connections — «the database system is starting up» — and is not ready)."""
    argv = [pg_bin("pg_isready"), "-h", "127.0.0.1", "-p", str(port), "-U", "korpus", "-d", "postgres", "-t", "2"]
    return subprocess.run(argv, capture_output=True).returncode == 0


def create_database(port: int, name: str) -> None:
    argv = [pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "korpus", name]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode and "already exists" not in done.stderr:
        raise PostgresError(f"createdb {name}: {done.stderr}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalPostgres:
    """One server on a free loopback port with one database; `kill` (SIGKILL, as a crash) and `start` again on the
    same port and data; `stop` ends it and removes its directory."""

    def __init__(self, pg_dir: Path, database: str = "korpus") -> None:
        self.pg_dir, self.database, self.port = pg_dir, database, free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"postgresql://korpus@127.0.0.1:{self.port}/{self.database}"

    def start(self, timeout: float = 60.0) -> None:
        init_cluster(self.pg_dir)
        log = open(self.pg_dir / "server.log", "ab")
        self.process = subprocess.Popen(
            server_argv(self.pg_dir, self.port),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            user=server_user(),
            cwd="/",
        )
        log.close()
        deadline = time.monotonic() + timeout
        while not accepting(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                tail = (self.pg_dir / "server.log").read_text(errors="replace").splitlines()[-20:]
                raise PostgresError("PostgreSQL did not start:\n" + "\n".join(tail))
            time.sleep(0.2)
        create_database(self.port, self.database)

    def kill(self) -> None:
        """SIGKILL the server and its backends (the next start runs crash recovery)."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.process = None

    def stop(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
            self.process = None
        shutil.rmtree(self.pg_dir, ignore_errors=True)
