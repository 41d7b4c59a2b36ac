"""Settings given as files: `PRESSROOM_X_FILE` names a file that holds `PRESSROOM_X`.

Secrets then come from files (a Kubernetes Secret volume) and stay out of every process's
environment, where a same-user process or a crash report could see them. Both variables
at once is an error, as is a file that cannot be read, and `Settings.from_env` reports a
bad value read from a file without showing it. The files read are remembered
(`files_read`): the renderer keeps Chromium from reading them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping


class SettingsError(ValueError):
    """A `PRESSROOM_*` variable holds a value the service cannot use."""


FILE_SUFFIX = "_FILE"
"""`PRESSROOM_X_FILE` names a file holding the value of `PRESSROOM_X`."""

MAX_FILE_BYTES = 64 * 1024
"""The largest value file: a setting is a line or a key, and a path to a device that never
ends (`/dev/zero`) must stop the service instead of hanging it."""

_files_read: set[str] = set()


def files_read() -> frozenset[str]:
    """Every file a `PRESSROOM_X_FILE` variable named, read by this process so far: the
    renderer keeps Chromium from reading them (`renderer/browser/privileges`)."""
    return frozenset(_files_read)


def read_value_file(variable: str, path: str) -> str:
    """The content of `path` without its trailing line breaks; `SettingsError` naming
    `variable` and `path` when it cannot be read."""
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise SettingsError(
                f"{variable}={path}: the file is larger than {MAX_FILE_BYTES} bytes"
            )
        text = data.decode("utf-8")
    except OSError as exc:
        raise SettingsError(f"{variable}={path}: cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise SettingsError(f"{variable}={path}: the file is not UTF-8 text") from None
    _files_read.add(os.path.realpath(path))
    return text.rstrip("\r\n")


def raw_value(environ: Mapping[str, str], name: str) -> tuple[str, str] | None:
    """(the raw value of `name`, where it came from for messages) from the variable itself
    or from the file its `_FILE` variable names; None when neither is set."""
    file_variable = name + FILE_SUFFIX
    if name in environ and file_variable in environ:
        raise SettingsError(f"{name} and {file_variable} are both set: set only one of them")
    if file_variable in environ:
        path = environ[file_variable]
        return read_value_file(file_variable, path), f"{file_variable}={path}: its content"
    if name in environ:
        return environ[name], f"{name}={environ[name]!r}"
    return None
