#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The wheel as a user gets it: scripts/build-wheel.sh (`python -m build`: the sdist, then the
# wheel from that sdist; auditwheel repair) and then:
#   - the sdist holds what the build needs (meson.build, pyproject.toml, web/dist, viewer/,
#     python/) and no build folder, venv or node_modules;
#   - the repaired wheel is manylinux_X_Y; `auditwheel show` finds nothing it needs from the
#     system but glibc, libstdc++ and libgcc_s: simdjson, protobuf and zlib are bundled in
#     kinetoscope.libs/ (Boost is header-only), and those are the only libraries it bundles;
#   - installed into a clean venv of its own (nothing else in it, then the pinned TensorBoard):
#     `kinetoscope --version` and `analyze` run from the venv's bin/, and `ldd` resolves the
#     program's and the engine module's simdjson, protobuf and zlib inside the venv; with the
#     system's simdjson, protobuf and zlib (and /usr/include) hidden in a mount namespace, the
#     program still analyzes a trace and kinetoscope.open() still loads one (needs root for
#     `unshare -m`; without it those two checks print "skip"); `import kinetoscope` works,
#     TensorBoard finds the plugin through its entry point and, started as the venv's
#     `tensorboard --logdir` (the venv not activated), lists the "PyTorch Profiler" tab and
#     answers the tab's API through it.
# Prints `wheel checks: N passed, N failed`.
#   tests/python/test_wheel.sh SOURCE_ROOT BUILD_DIR PYTHON TRACE_DIR
# PYTHON: the project's venv python, with requirements/wheel.txt (scripts/install-deps.sh); the
# build backend and TensorBoard come from the package index. The sdist and the wheel are left in
# BUILD_DIR/wheel-dist. The wheel is built from the sdist, so from committed files only.
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

skip() { echo "skip  $1"; }
arch=$(uname -m)

dist=$build/wheel-dist
rm -rf "$dist"
started=$SECONDS
if ! bash "$src/scripts/build-wheel.sh" --python "$python" --out "$dist" >"$work/build.log" 2>&1; then
  echo "FAIL  scripts/build-wheel.sh"; tail -n 40 "$work/build.log" | sed 's/^/      /'; failed=$((failed + 1)); finish
fi
sed -n 's/^build-wheel.sh: note: /note  /p' "$work/build.log"  # uncommitted changes: not in this wheel
wheel=$(sed -n 's/^wheel: \([^ ]*\).*/\1/p' "$work/build.log")
sdist=$(sed -n 's/^sdist: \([^ ]*\).*/\1/p' "$work/build.log")
check "scripts/build-wheel.sh: the sdist, the wheel from the sdist, auditwheel repair ($((SECONDS - started)) s)" \
  test -f "$wheel" -a -f "$sdist"
check "the sdist holds what the build needs and no build output ($(basename "$sdist"), $(du -h "$sdist" | cut -f1))" \
  "$python" - "$sdist" <<'PY'
import os, sys, tarfile
path = sys.argv[1]
with tarfile.open(path) as tar:
    names = tar.getnames()
top = names[0].split('/')[0]
rel = {n[len(top) + 1:] for n in names if n.startswith(top + '/')}
need = ['PKG-INFO', 'pyproject.toml', 'meson.build', 'meson_options.txt', 'web/dist/MANIFEST',
        'viewer/meson.build', 'viewer/main.cpp', 'python/meson.build', 'python/kinetoscope/__init__.py']
with tarfile.open(path) as tar:
    manifest = tar.extractfile(f'{top}/web/dist/MANIFEST').read().decode().split()
need += ['web/dist/' + m for m in manifest]
missing = [n for n in need if n not in rel]
assert not missing, f'missing from the sdist: {missing}'
junk = [n for n in rel if n.split('/')[0].startswith(('build', '.venv', 'dist', '.mesonpy'))
        or 'node_modules/' in n or '__pycache__/' in n]
assert not junk, f'build output in the sdist: {junk[:10]}'
size = os.path.getsize(path)
assert size < 10 * 2**20, f'the sdist is {size} bytes'
PY
check "the wheel is a manylinux wheel ($(basename "$wheel"))" \
  bash -c "[[ '$(basename "$wheel")' =~ ^kinetoscope-[^-]+-[^-]+-[^-]+-manylinux_[0-9]+_[0-9]+_$arch\.whl$ ]]"
check "the wheel holds the program, the package, the engine module and the entry point, and no header or static library" \
  "$python" - "$wheel" <<'PY'
import re, sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
def has(x):  # in platlib (the wheel's root) or in .data/purelib|platlib
    return any(n == x or re.fullmatch(r'[^/]+\.data/(pure|plat)lib/' + re.escape(x), n) for n in names)
need = ['kinetoscope/__init__.py', 'kinetoscope/tensorboard_plugin.py']
assert all(has(x) for x in need), names
assert any(re.fullmatch(r'kinetoscope/_engine\.[^/]*\.so', n) for n in names), names
# The program lives inside the package; the `kinetoscope` command is a console script (no native
# program among the wheel's scripts, where auditwheel would move it out of the package).
assert 'kinetoscope/bin/kinetoscope' in names, names
assert not any('.data/scripts/' in n for n in names), names
assert not [n for n in names if n.endswith(('.h', '.hpp', '.a', '.pc', '.cmake'))], names
ep = [n for n in names if n.endswith('entry_points.txt')][0]
text = zipfile.ZipFile(sys.argv[1]).read(ep).decode()
assert '[tensorboard_plugins]' in text and 'kinetoscope.tensorboard_plugin:KinetoscopeLoader' in text, text
assert '[console_scripts]' in text and 'kinetoscope = kinetoscope._launcher:main' in text, text
PY
# glibc, libstdc++ and libgcc_s: what the manylinux tag stands for. Everything else is bundled:
# exactly simdjson, protobuf and zlib (a new dependency shows up here first).
check "auditwheel show: manylinux, nothing from the system but glibc, libstdc++, libgcc_s; simdjson, protobuf, zlib bundled" \
  "$python" - "$wheel" <<'PY'
import json, re, subprocess, sys, zipfile
path = sys.argv[1]
show = json.loads(subprocess.run([sys.executable, '-m', 'auditwheel', 'show', '--json', path],
                                 check=True, capture_output=True, text=True).stdout)
assert re.fullmatch(r'manylinux_\d+_\d+_\w+', show['overall_tag']), show['overall_tag']
assert not show['external_libs'], f"libraries the wheel needs from the system: {show['external_libs']}"
bundled = {n.split('/', 1)[1] for n in zipfile.ZipFile(path).namelist()
           if n.startswith('kinetoscope.libs/') and not n.endswith('/')}
kinds = sorted(re.sub(r'-[0-9a-f]{8}\..*', '', b) for b in bundled)
assert kinds == ['libprotobuf', 'libsimdjson', 'libz'], f'bundled: {sorted(bundled)}'
glibc_era = {'libc.so.6', 'libm.so.6', 'libstdc++.so.6', 'libgcc_s.so.1', 'libpthread.so.0',
             'libdl.so.2', 'librt.so.1'}
system = {s for s in show['versioned_symbols'] if not s.startswith('ld-linux')} - bundled
assert system <= glibc_era, f'versioned symbols from {sorted(system - glibc_era)}'
print(show['overall_tag'])
PY

check "the bundled libraries' licence texts and ids are in the wheel's metadata" "$python" - "$wheel" <<'PY'
import re, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
meta = z.read(next(n for n in z.namelist() if n.endswith('.dist-info/METADATA'))).decode()
expr = re.search(r'^License-Expression: (.*)$', meta, re.M).group(1)
assert set(expr.split(' AND ')) == {'BSD-3-Clause', 'Apache-2.0', 'Zlib'}, expr
for lib in ('libsimdjson', 'libprotobuf', 'libz'):
    name = next(n for n in z.namelist() if n.endswith(f'.dist-info/licenses/{lib}.copyright'))
    assert f'License-File: licenses/{lib}.copyright' in meta, meta
    assert b'Copyright' in z.read(name) or b'copyright' in z.read(name), name
PY
"$python" -m venv "$work/venv"
venv=$work/venv
check "pip install the wheel into a clean venv (with its one dependency, numpy)" "$venv/bin/python" -m pip install -q "$wheel" \
  "numpy==$(sed -n 's/^numpy==\([^ ]*\).*/\1/p' "$src/requirements/peers.txt")"
check "kinetoscope --version runs from the venv's bin/" "$venv/bin/kinetoscope" --version
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
program=$site/kinetoscope/bin/kinetoscope
engine=$(ls "$site"/kinetoscope/_engine.*.so)
# ldd: every library either inside the venv (kinetoscope.libs) or one of glibc's, libstdc++, libgcc_s.
check "ldd: the program's and the engine module's simdjson, protobuf and zlib resolve inside the venv" \
  "$python" - "$site" "$program" "$engine" <<'PY'
import os, re, subprocess, sys
site = os.path.realpath(sys.argv[1])
allowed = re.compile(r'(linux-vdso|libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux-[\w-]+)\.so')
for elf in sys.argv[2:]:
    out = subprocess.run(['ldd', elf], check=True, capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r'\s*(\S+)(?: => (\S+))?', line)
        name, where = m.group(1), m.group(2) or m.group(1)
        assert 'not found' not in line, f'{elf}: {line}'
        if allowed.match(os.path.basename(name)):
            continue
        assert os.path.realpath(where).startswith(site + os.sep + 'kinetoscope.libs' + os.sep), f'{elf}: {line.strip()}'
        found[re.sub(r'-[0-9a-f]{8}\..*', '', name)] = where
    assert sorted(found) == ['libprotobuf', 'libsimdjson', 'libz'], f'{elf}: {found}'
PY
trace=$(ls "$traces"/*.pt.trace.json* | head -n 1)
check "kinetoscope analyze runs from the venv's bin/" bash -c "'$venv/bin/kinetoscope' analyze '$trace' --json --no_cache | '$python' -c 'import json,sys; d=json.load(sys.stdin); assert d[\"overview\"][\"steps\"], d'"
# The machine without the -dev packages: the system's simdjson, protobuf and zlib (shared and
# static, every file of them found in the library folders) are /dev/null and /usr/include is an
# empty tmpfs, in a mount namespace of their own; the run fails unless simdjson's were among the
# files hidden. hide_libs KEEP_ZLIB COMMAND...: KEEP_ZLIB=1 leaves zlib visible, for Python runs
# (the interpreter and NumPy load the system's libz.so.1 themselves).
hide_libs() {
  unshare -m bash -c '
    names="simdjson protobuf protobuf-lite"; [ "$1" = 1 ] || names="$names z"; shift
    multiarch=$(gcc -print-multiarch 2>/dev/null || echo "$(uname -m)-linux-gnu")
    hidden=$(for n in $names; do
               for d in /lib/$multiarch /usr/lib/$multiarch /lib64 /usr/lib64 /usr/local/lib; do
                 for f in "$d"/lib$n.so* "$d"/lib$n.a; do [ -e "$f" ] && readlink -f "$f"; done
               done
             done | sort -u)
    grep -q "/libsimdjson\.so\." <<<"$hidden" || { echo "no system libsimdjson found to hide"; exit 1; }
    for f in $hidden; do mount --bind /dev/null "$f" || exit 1; done
    mount -t tmpfs none /usr/include || exit 1
    exec "$@"' hide_libs "$@"
}
if unshare -m true 2>/dev/null; then
  check "without the system's simdjson, protobuf, zlib and headers, the installed program analyzes a trace" \
    hide_libs 0 bash -c "'$program' analyze '$trace' --json --no_cache | grep -q '\"overview\"'"
else
  skip "without the system's simdjson, protobuf, zlib and headers (needs root for unshare -m)"
fi
# Another install scheme (--prefix, as --user and --target): the console script and
# `python -m kinetoscope` find the program inside the package wherever that lands.
"$venv/bin/python" -m pip install -q --no-deps --ignore-installed --prefix "$work/prefix" "$wheel" >/dev/null 2>&1
prefix_site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_path('platlib', vars={'base': '$work/prefix', 'platbase': '$work/prefix'}))")
check "pip install --prefix: its bin/kinetoscope and python -m kinetoscope run the program inside it" \
  env PYTHONPATH="$prefix_site" "$venv/bin/python" - "$work/prefix/bin/kinetoscope" "$prefix_site" <<'PY'
import subprocess, sys
import kinetoscope._launcher as launcher
script, site = sys.argv[1], sys.argv[2]
assert launcher.program().startswith(site + '/'), launcher.program()
for argv in ([script, '--version'], [sys.executable, '-m', 'kinetoscope', '--version']):
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    assert out.startswith('kinetoscope '), (argv, out)
PY
check "import kinetoscope (no TensorBoard needed)" "$venv/bin/python" -c "import kinetoscope; print(kinetoscope.__version__)"
check "pip install the pinned TensorBoard (the [tensorboard] extra)" \
  "$venv/bin/python" -m pip install -q "tensorboard==$(sed -n 's/^tensorboard==\([^ ]*\).*/\1/p' "$src/requirements/peers.txt")"
check "TensorBoard finds the plugin through its entry point, and it imports" "$venv/bin/python" -c "
from importlib.metadata import entry_points
eps = [e for e in entry_points(group='tensorboard_plugins') if e.name == 'kinetoscope']
assert eps and eps[0].load().__name__ == 'KinetoscopeLoader', eps"

if unshare -m true 2>/dev/null; then
  check "without the system's simdjson, protobuf and headers, kinetoscope.open() loads a trace (bundled libraries)" \
    hide_libs 1 env HOME="$work" XDG_CACHE_HOME="$work/cache" "$venv/bin/python" -c "
import kinetoscope
steps = kinetoscope.open('$trace', cache=False).overview()['name']
assert len(steps), steps"
else
  skip "kinetoscope.open() without the system's simdjson, protobuf and headers (needs root for unshare -m)"
fi

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
