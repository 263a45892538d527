# SPDX-License-Identifier: BSD-3-Clause
"""The `kinetoscope` command of the wheel: runs the program installed inside this package
(kinetoscope/bin/kinetoscope) with the same arguments, in place of this process."""

from __future__ import annotations

import os
import sys


def program() -> str:
    """The path of the kinetoscope program inside the package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "kinetoscope")


def main() -> None:
    path = program()
    if not os.access(path, os.X_OK):
        sys.exit(f"kinetoscope: the program {path} is missing from the installed package (reinstall kinetoscope)")
    os.execv(path, [path] + sys.argv[1:])


if __name__ == "__main__":
    main()
