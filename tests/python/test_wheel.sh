#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The wheel (pyproject.toml, meson-python) as a user gets it: built from this checkout with pip,
# installed into a clean venv of its own (nothing else in it, then the pinned TensorBoard), and
# then: `kinetoscope --version` and `analyze` run from the venv's bin/, `import kinetoscope`
# works, TensorBoard finds the plugin through its entry point and, started as the venv's
# `tensorboard --logdir` (the venv not activated), lists the "PyTorch Profiler" tab and answers
# the tab's API through it. Prints `wheel checks: N passed, N failed`.
#   tests/python/test_wheel.sh SOURCE_ROOT BUILD_DIR PYTHON TRACE_DIR
# PYTHON: the project's venv python (pip and the build tools come from the package index).
set -uo pipefail
src=$1 build=$2 python=$3 traces=$4
work=$(mktemp -d /tmp/kinetoscope-wheel.XXXXXX)
tb_pid=
cleanup() {
  [ -n "$tb_pid" ] && kill "$tb_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
passed=0 failed=0
check() {  # check "what" command...
  local what=$1
  shift
  if out=$("$@" 2>&1); then
    echo "ok    $what"
    passed=$((passed + 1))
  else
    echo "FAIL  $what"
    echo "$out" | tail -n 20 | sed 's/^/      /'
    failed=$((failed + 1))
  fi
}
finish() {
  echo "wheel checks: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
}

# The build directory persists in the meson build folder: a second run rebuilds only what changed.
if ! "$python" -m pip wheel "$src" -w "$work/dist" --no-deps -q -Cbuild-dir="$build/wheel-build" >"$work/build.log" 2>&1; then
  echo "FAIL  pip wheel $src"; tail -n 40 "$work/build.log" | sed 's/^/      /'; failed=$((failed + 1)); finish
fi
wheel=$(ls "$work"/dist/kinetoscope-*.whl)
check "the wheel is a platform wheel for any CPython 3 ($(basename "$wheel"))" \
  bash -c "[[ '$(basename "$wheel")' == kinetoscope-*-py3-none-linux_x86_64.whl ]]"
check "the wheel holds the program, the package and the entry point, and no header or library" \
  "$python" - "$wheel" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
need = ['kinetoscope/__init__.py', 'kinetoscope/tensorboard_plugin.py']
assert all(any(n.endswith('/purelib/' + x) or n == x for n in names) for x in need), names
assert any(n.endswith('.data/scripts/kinetoscope') for n in names), names
assert not [n for n in names if n.endswith(('.h', '.hpp', '.a', '.pc', '.cmake')) or '.so' in n], names
ep = [n for n in names if n.endswith('entry_points.txt')][0]
text = zipfile.ZipFile(sys.argv[1]).read(ep).decode()
assert '[tensorboard_plugins]' in text and 'kinetoscope.tensorboard_plugin:KinetoscopeLoader' in text, text
PY

"$python" -m venv "$work/venv"
venv=$work/venv
check "pip install the wheel into a clean venv" "$venv/bin/python" -m pip install -q --no-deps "$wheel"
check "kinetoscope --version runs from the venv's bin/" "$venv/bin/kinetoscope" --version
trace=$(ls "$traces"/*.pt.trace.json* | head -n 1)
check "kinetoscope analyze runs from the venv's bin/" bash -c "'$venv/bin/kinetoscope' analyze '$trace' --json --no_cache | '$python' -c 'import json,sys; d=json.load(sys.stdin); assert d[\"overview\"][\"steps\"], d'"
check "import kinetoscope (no TensorBoard needed)" "$venv/bin/python" -c "import kinetoscope; print(kinetoscope.__version__)"
check "pip install the pinned TensorBoard (the [tensorboard] extra)" \
  "$venv/bin/python" -m pip install -q "tensorboard==$(sed -n 's/^tensorboard==\([^ ]*\).*/\1/p' "$src/requirements/peers.txt")"
check "TensorBoard finds the plugin through its entry point, and it imports" "$venv/bin/python" -c "
from importlib.metadata import entry_points
eps = [e for e in entry_points(group='tensorboard_plugins') if e.name == 'kinetoscope']
assert eps and eps[0].load().__name__ == 'KinetoscopeLoader', eps"

# `tensorboard --logdir` as installed (not activated: the plugin finds the program by itself).
mkdir -p "$work/logs/run1"
cp "$trace" "$work/logs/run1/"
port=$((20000 + RANDOM % 20000))
env -i HOME="$work" PATH=/usr/bin:/bin XDG_CACHE_HOME="$work/cache" \
  "$venv/bin/tensorboard" --logdir "$work/logs" --port "$port" --host 127.0.0.1 >"$work/tb.log" 2>&1 &
tb_pid=$!
check "tensorboard --logdir lists the PyTorch Profiler tab and answers its API" "$python" - "$port" <<'PY'
import json, sys, time, urllib.request
base = f'http://127.0.0.1:{sys.argv[1]}/data/'
def get(path):
    return urllib.request.urlopen(base + path, timeout=30).read()
for _ in range(240):
    try:
        listing = json.loads(get('plugins_listing'))
        if listing.get('kinetoscope', {}).get('enabled'):
            break
    except OSError:
        pass
    time.sleep(0.5)
else:
    sys.exit('no enabled kinetoscope plugin in /data/plugins_listing')
assert listing['kinetoscope']['tab_name'] == 'PyTorch Profiler', listing['kinetoscope']
for _ in range(240):
    runs = json.loads(get('plugin/kinetoscope/api/runs'))
    if 'run1' in runs['runs'] and not runs['loading']:
        break
    time.sleep(0.5)
else:
    sys.exit(f'run1 never loaded: {runs}')
views = json.loads(get('plugin/kinetoscope/api/views?run=run1'))
assert 'Overview' in views, views
PY
finish
