"""What every `pressroom` command shares: how it reports (`Outcome`), where it reads and
writes (`Io`), its usage errors and the exit statuses scripts rely on (`cli.py`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from pressroom.client import Client

OK, ENDED_BADLY, USAGE, API_ERROR, UNAVAILABLE, INTERRUPTED = 0, 1, 2, 3, 4, 130
EXIT_TEXT = (
    "exit status: 0 done; 1 the job or batch ended failed or cancelled; 2 usage (bad "
    "arguments, an unreadable file, a bad setting); 3 the API refused the request (4xx); "
    "4 the gateway is unreachable or unavailable (5xx), or --timeout passed; 130 "
    "interrupted. Data goes to stdout (--json: JSON), messages and errors to stderr."
)


class UsageError(Exception):
    """A bad argument or an unreadable file: exit status 2."""


@dataclass
class Io:
    """Where the command reads answers and writes output (tests pass their own)."""

    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    ask: Callable[[str], str] = input


@dataclass
class Outcome:
    """What a command ended with: the JSON for `--json` and the text for people (both
    stdout), the exit status, and a message for stderr (why it did not end well)."""

    data: Any
    text: str
    status: int = OK
    note: str | None = None


Command = Callable[[Client, argparse.Namespace, Io], Outcome]


def table(rows: Sequence[Sequence[object]], header: Sequence[str]) -> str:
    """Left-aligned columns, two spaces apart; `-` for a missing value."""
    cells = [list(header)] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)
