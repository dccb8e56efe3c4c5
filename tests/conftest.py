import os
import sys
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("PYTHONHASHSEED", "0")


@pytest.fixture(autouse=True)
def checks_in_english():
    """Every test starts with English check messages, whatever a previous test set."""
    from attention_course import checks

    checks.set_language("en")
    yield
    checks.set_language("en")


def pytest_configure(config):
    """The test tiers' markers (also in pyproject.toml once the tiers land there; twice is harmless)."""
    config.addinivalue_line("markers", "slow: takes long (a subprocess, a build, nbgrader)")
    config.addinivalue_line("markers", "integration: runs another program (a fresh interpreter, nbgrader)")
