"""Typed errors. ``UserError`` is printed as one line (no traceback) by the CLI."""

from __future__ import annotations

import argparse
import difflib
from typing import Iterable, NoReturn


class UserError(Exception):
    """A problem with the user's input or configuration, reported as a one-line message."""


class RecordError(Exception):
    """A problem with one record: it is reported in that record's ``error``, the run goes on."""

    def __init__(self, stage: str, message: str):
        super().__init__(message)
        self.stage = stage
        self.message = message


def closest(name: str, choices: Iterable[str]) -> str | None:
    """The choice closest to ``name`` (difflib, ratio >= 0.5), or None when none is close."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return close[0] if close else None


def ratio(a: str, b: str) -> float:
    """How alike two names are (difflib's ratio, 0..1): what ``closest`` ranks by."""
    return difflib.SequenceMatcher(None, a, b).ratio()


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """A ' (did you mean X?)' suffix for the closest choice, or '' when none is close."""
    close = closest(name, choices)
    return f" (did you mean {close!r}?)" if close else ""


class OneLineParser(argparse.ArgumentParser):
    """An argparse parser whose usage errors are one line on stderr (exit code 2), no usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")
