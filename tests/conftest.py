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
