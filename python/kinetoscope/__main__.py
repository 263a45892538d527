# SPDX-License-Identifier: BSD-3-Clause
"""`python -m kinetoscope ARGS`: the kinetoscope program (`--logdir DIR`, `analyze`, ...)."""

from kinetoscope._launcher import main

main()
