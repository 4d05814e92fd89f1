# SPDX-License-Identifier: GPL-2.0
"""Make the collector package importable for its tests."""

from __future__ import annotations

import sys
from pathlib import Path

COLLECTOR = Path(__file__).resolve().parents[1]
if str(COLLECTOR) not in sys.path:
    sys.path.insert(0, str(COLLECTOR))


import pytest  # noqa: E402

from pgserver import Server  # noqa: E402

BACKENDS = ("sqlite", "postgresql")


@pytest.fixture(scope="session")
def pg() -> Server:
    """One real PostgreSQL server for the session; each test takes a new database."""
    with Server() as server:
        yield server


@pytest.fixture(params=BACKENDS)
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """A new, empty database on each back end: a SQLite file or a PostgreSQL URL."""
    if request.param == "sqlite":
        return tmp_path / "c.sqlite3"
    return request.getfixturevalue("pg").database()
