# SPDX-License-Identifier: GPL-2.0
"""Build the C receive thread (netoops_collector/_rx.c) with the package.

It is a plain shared object that rx.py loads through ctypes (no Python API),
built as an extension so that pip and Debian's pybuild build and install it;
everything else is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("netoops_collector._netoops_rx",
                             sources=["netoops_collector/_rx.c"],
                             extra_compile_args=["-O2", "-pthread", "-Wall", "-Wextra"],
                             extra_link_args=["-pthread"])])
