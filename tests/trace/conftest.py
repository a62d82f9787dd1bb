from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


@pytest.fixture
def fx():
    """Path of a committed trace fixture by file name."""
    return lambda name: FIXTURES / name
