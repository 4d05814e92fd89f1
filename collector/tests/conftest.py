# SPDX-License-Identifier: GPL-2.0
"""Make the collector package importable for its tests."""

from __future__ import annotations

import sys
from pathlib import Path

COLLECTOR = Path(__file__).resolve().parents[1]
if str(COLLECTOR) not in sys.path:
    sys.path.insert(0, str(COLLECTOR))
