# SPDX-License-Identifier: GPL-2.0
"""`serve --config FILE`: every serve option in a TOML file.

A key is an option's long name without the dashes (``quiet-timeout`` or
``quiet_timeout``), its value what the option takes: a number, a string,
``true`` for a flag, a list of strings for ``listen``.  Options given on the
command line override the file; a key that is no option, or a value the
option refuses, is an error that names the file and the key.
"""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A config file that cannot be read or holds a bad key or value."""


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The parser's options by long name, without the dashes."""
    out = {}
    for action in parser._actions:          # argparse keeps no public list
        for opt in action.option_strings:
            if opt.startswith("--") and action.dest not in ("help", "config"):
                out[opt[2:]] = action
    return out


def _convert(action: argparse.Action, key: str, value: Any) -> Any:
    def one(v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise ConfigError(f"{key}: expected a string or a number, not {v!r}")
        text = str(v)
        try:
            out = action.type(text) if action.type else text
        except (argparse.ArgumentTypeError, ValueError) as err:
            raise ConfigError(f"{key}: {err}") from None
        if action.choices is not None and out not in action.choices:
            raise ConfigError(f"{key}: {v!r} is not one of "
                              f"{', '.join(map(str, action.choices))}")
        return out

    if action.nargs == 0:                   # a flag (store_true)
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, not {value!r}")
        return value
    if isinstance(action, argparse._AppendAction):
        values = value if isinstance(value, list) else [value]
        return [one(v) for v in values]
    return one(value)


def load(path: Path, parser: argparse.ArgumentParser) -> dict[str, Any]:
    """The defaults ``path`` gives ``parser``'s options, by dest."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as err:
        raise ConfigError(f"{path}: {err.strerror}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not TOML: {err}") from None
    options = _options(parser)
    out: dict[str, Any] = {}
    for key, value in data.items():
        action = options.get(key.replace("_", "-"))
        if action is None:
            raise ConfigError(f"{path}: {key}: no such serve option")
        try:
            out[action.dest] = _convert(action, key, value)
        except ConfigError as err:
            raise ConfigError(f"{path}: {err}") from None
    return out
