"""A throwaway PostgreSQL server: for the tests, ``linview demo --db`` and ``bench/db_bench.py``.

``initdb`` into a temporary folder, ``pg_ctl start`` with ``wal_level=logical`` on
127.0.0.1 (a free port) and a unix socket in the data folder; ``destroy()`` stops it and
removes the folder.

Why not pytest-postgresql: it runs ``pg_ctl`` as the current user, and CI runs as root,
which PostgreSQL refuses.  Here every server command goes through ``runuser -u postgres``
when we are root (the ``postgres`` system user that Debian's package creates), and the
folder is given to that user.

The binaries are found with ``pg_config --bindir`` or under ``/usr/lib/postgresql/*/bin``
(Debian keeps them off PATH).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

from linview.errors import InputError

#: a role that must give a password (scram over TCP): the no-password-in-output tests
PASSWORD_USER = "lv_secret_user"


def bindir() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl`` (PostgreSQL 15 or later), or None."""
    candidates = []
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True,
                             check=True).stdout.strip()
        candidates.append(out)
    except (OSError, subprocess.CalledProcessError):
        pass
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                         key=lambda p: int(Path(p).parent.name) if Path(p).parent.name
                         .isdigit() else 0, reverse=True)
    for c in candidates:
        if (Path(c) / "initdb").exists() and (Path(c) / "pg_ctl").exists():
            return Path(c)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    """One PostgreSQL cluster in a temporary folder; ``dsn(db)`` for clients."""

    def __init__(self):
        self.bin = bindir()
        if self.bin is None:
            raise InputError("PostgreSQL's initdb was not found",
                             hint="install PostgreSQL 15 or later (Debian: apt-get install "
                             "postgresql)")
        self.root = Path(tempfile.mkdtemp(prefix="linview-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
        os.chmod(self.root, 0o755)

    def _cmd(self, *args: str) -> list[str]:
        cmd = [str(self.bin / args[0]), *args[1:]]
        return ["runuser", "-u", "postgres", "--", *cmd] if self.as_root else cmd

    def _run(self, *args: str) -> None:
        subprocess.run(self._cmd(*args), check=True, capture_output=True, cwd=self.root)

    def init(self) -> PgServer:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust",
                  "--no-sync", "-E", "UTF8", "--locale=C")
        conf = {
            "listen_addresses": "'127.0.0.1'", "port": str(self.port),
            "unix_socket_directories": f"'{self.data}'", "wal_level": "logical",
            "max_replication_slots": "20", "max_wal_senders": "20", "fsync": "off",
            "shared_buffers": "32MB", "max_connections": "60",
            "wal_sender_timeout": "60s", "log_min_messages": "warning",
        }
        with open(self.data / "postgresql.conf", "a") as f:
            f.writelines(f"{k} = {v}\n" for k, v in conf.items())
        hba = (f"local all all trust\n"
               f"host all {PASSWORD_USER} 127.0.0.1/32 scram-sha-256\n"
               f"host all all 127.0.0.1/32 trust\n")
        (self.data / "pg_hba.conf").write_text(hba)
        return self

    def start(self) -> PgServer:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"),
                  "-w", "-t", "60", "start")
        return self

    def stop(self, mode: str = "fast") -> None:
        if (self.data / "postmaster.pid").exists():
            subprocess.run(self._cmd("pg_ctl", "-D", str(self.data), "-m", mode, "-w",
                                     "stop"), capture_output=True, cwd=self.root)

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def dsn(self, db: str = "postgres", user: str = "postgres") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{db}"

    def connect(self, db: str = "postgres"):
        import psycopg2

        conn = psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres", dbname=db)
        conn.autocommit = True
        return conn

    def create_db(self, name: str) -> str:
        """A fresh database (dropped first if it exists, its slots too); its DSN."""
        conn = self.connect()
        try:
            cur = conn.cursor()
            cur.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                        "WHERE database = %s AND NOT active", (name,))
            cur.execute(f'DROP DATABASE IF EXISTS "{name}"')
            cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            conn.close()
        return self.dsn(name)
