# SPDX-License-Identifier: GPL-2.0
"""`python3 -m netoops_collector ...` runs the command line tool."""

import sys

from .cli import main

sys.exit(main())
