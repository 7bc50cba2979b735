"""What the benchmarks share: the collector they run, found in the repository's build folders
unless named."""

from __future__ import annotations

import os
import sys

REPOSITORY = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def collector_path(given: str | None) -> str:
    """The collector named (--collector), else $RINGSIDE_COLLECTOR, else the release build, else the
    debug build; exits saying how to get one when there is none."""
    for candidate in (given, os.environ.get("RINGSIDE_COLLECTOR"),
                      os.path.join(REPOSITORY, ".build", "release", "ringside-collector"),
                      os.path.join(REPOSITORY, ".build", "debug", "ringside-collector")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    sys.exit("ringside-collector not found: build it (swift build -c release --product ringside-collector), "
             "or name it with --collector or RINGSIDE_COLLECTOR")
