# SPDX-License-Identifier: BSD-3-Clause
"""Pieces the GPU check's scripts share (they run as `python3 scripts/gpu/NAME.py`, so this
folder is on their import path)."""
import socket
import subprocess


def free_port():
    """A TCP port on loopback that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc, seconds=10):
    """SIGTERM, then SIGKILL after `seconds`. True when SIGTERM was enough."""
    proc.terminate()
    try:
        proc.wait(timeout=seconds)
        return True
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return False
