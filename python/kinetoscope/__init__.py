# SPDX-License-Identifier: BSD-3-Clause
"""kinetoscope: a viewer for PyTorch profiler traces (*.pt.trace.json[.gz]).

The engine is the C++ `kinetoscope` program; this package holds the TensorBoard plugin
(`kinetoscope.tensorboard_plugin`) that runs it behind TensorBoard's "PyTorch Profiler" tab.
"""

__version__ = "0.1.0"
