# SPDX-License-Identifier: BSD-3-Clause
"""TensorBoard with kinetoscope's plugin loaded from this checkout, without installing it.

    .venv/bin/python tests/python/run_tensorboard.py --logdir DIR [tensorboard flags...]

What `tensorboard` does once the package is installed (its `tensorboard_plugins` entry point):
TensorBoard's first-party plugins plus KinetoscopeLoader. Other installed dynamic plugins
(torch-tb-profiler in the project's venv) are left out unless --with_dynamic_plugins is the first
argument. python/ (the package) is put on sys.path from this file's place in the repository.
Used by tests/python/test_tensorboard_plugin.py and web/tests/checks/tensorboard.mjs.
"""

import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_REPO, "python"))


def main():
    args = sys.argv[1:]
    with_dynamic = bool(args) and args[0] == "--with_dynamic_plugins"
    if with_dynamic:
        args = args[1:]

    from absl import app
    from tensorboard import default, main_lib, program
    from tensorboard.plugins import base_plugin

    from kinetoscope.tensorboard_plugin import KinetoscopeLoader

    main_lib.global_init()
    plugins = default.get_static_plugins() + [KinetoscopeLoader()]
    if with_dynamic:
        plugins += [p for p in default.get_dynamic_plugins() if getattr(p, "__module__", "") != "kinetoscope.tensorboard_plugin"]
    tensorboard = program.TensorBoard(plugins=plugins)
    try:
        app.run(tensorboard.main, argv=[sys.argv[0]] + args, flags_parser=tensorboard.configure)
    except base_plugin.FlagsError as e:
        print("Error: %s" % e, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
