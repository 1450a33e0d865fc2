"""Test configuration: the IR checker runs after every pass in every test; decisions use
the reference machine rates (``LINVIEW_CALIBRATION=off``)."""

import os
from pathlib import Path

import pytest

# decisions plan with the reference machine rates, not this machine's calibration, so that
# what the tests expect the compiler to choose does not depend on the machine running them
os.environ.setdefault("LINVIEW_CALIBRATION", "off")

from linview.compiler import check

check.enable(True)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@pytest.fixture
def examples() -> Path:
    return EXAMPLES


@pytest.fixture(scope="session")
def pg_server():
    """A PostgreSQL server (wal_level=logical) for the whole session, started as the
    ``postgres`` user when the tests run as root; stopped and removed at the end
    (``tests/pg_server.py``)."""
    pytest.importorskip("psycopg2", reason="the db extra (psycopg2-binary) is not installed")
    from tests.pg_server import PgServer, bindir

    if bindir() is None:
        pytest.skip("PostgreSQL's initdb is not installed (make test installs it)")
    server = PgServer().init().start()
    try:
        yield server
    finally:
        server.destroy()


@pytest.fixture(scope="module")
def spark():
    """A local[2] Spark session for one test file (starting Spark costs seconds); a file
    that needs other settings defines its own."""
    pytest.importorskip("pyspark")
    from linview.backends.spark.session import local_session

    session = local_session("local[2]")
    yield session
    session.stop()
