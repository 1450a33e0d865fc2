"""Test configuration: the IR checker runs after every pass in every test."""

from pathlib import Path

import pytest

from linview.compiler import check

check.enable(True)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@pytest.fixture
def examples() -> Path:
    return EXAMPLES
