# SPDX-License-Identifier: GPL-2.0
"""netoops collector: receive netoops crash dumps, store and show them."""

__version__ = "1.1"
