# SPDX-License-Identifier: BSD-3-Clause
"""The exception the engine raises (importable without the compiled engine)."""

from __future__ import annotations


class TraceError(RuntimeError):
    """A trace could not be found, read or analysed.

    The message is the engine's diagnostic, "<file>: <reason> (at byte N, event #K)".

    Attributes:
        file: the trace file (or the path given).
        byte_offset: where in the JSON text (the gzip stream for gzip errors) reading stopped;
            None when not meaningful.
        event_index: the index in traceEvents of the event being read; None when none.
        reason: the reason alone ("truncated gzip stream", "JSON syntax error: ...").
    """

    file: str = ""
    byte_offset: int | None = None
    event_index: int | None = None
    reason: str = ""
