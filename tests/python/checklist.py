# SPDX-License-Identifier: BSD-3-Clause
"""The check lines of the peer tests (test_hta_peer.py, test_pytorch_peer.py): one "ok    ..." or
"FAIL  ..." line per check, counted for their closing `<name> checks: N passed, N failed`."""


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = []

    def check(self, ok, what):
        if ok:
            self.passed += 1
            print('ok    ' + what, flush=True)
        else:
            self.failed.append(what)
            print('FAIL  ' + what, flush=True)
        return ok
