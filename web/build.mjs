// Bundles the web app (src/main.js and everything it imports, CSS included) with esbuild.
//   node build.mjs --out DIR    writes index.html, assets/app.<hash>.{js,css} and MANIFEST into DIR
// web/dist/ holds the committed output (`ninja -C BUILD web-dist` rewrites it): the C++ build
// embeds web/dist with web/embed.cpp, so building the viewer never needs node; the test suite
// rebuilds the bundle when node is there and fails when web/dist is stale.
// Names carry a content hash so the server can let browsers cache them for a year; index.html
// refers to them with relative URLs so the app works under any --path_prefix.
import * as esbuild from 'esbuild';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const option = (name) => {
  const i = args.indexOf(name);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : null;
};
const outDir = option('--out');
if (!outDir) {
  console.error('usage: node build.mjs --out DIR');
  process.exit(2);
}

const result = await esbuild.build({
  entryPoints: [join(here, 'src', 'main.js')],
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2020'],
  write: false,
  outdir: 'out',
  entryNames: 'app',
  loader: { '.css': 'css' },
  legalComments: 'none',
  logLevel: 'warning',
});

const hash8 = (bytes) => createHash('sha256').update(bytes).digest('hex').slice(0, 8);
const assets = [];
let jsName = null;
let cssName = null;
for (const f of result.outputFiles) {
  const ext = f.path.endsWith('.css') ? 'css' : 'js';
  const name = `assets/app.${hash8(f.contents)}.${ext}`;
  if (ext === 'css') cssName = name; else jsName = name;
  assets.push({ path: name, data: Buffer.from(f.contents) });
}
const template = readFileSync(join(here, 'src', 'index.html'), 'utf8');
const html = template
  .replace('%APP_CSS%', cssName ? `<link rel="stylesheet" href="./${cssName}">` : '')
  .replace('%APP_JS%', `<script src="./${jsName}"></script>`);
assets.push({ path: 'index.html', data: Buffer.from(html) });

// Old bundles go: DIR/assets holds exactly this build's files.
rmSync(join(outDir, 'assets'), { recursive: true, force: true });
for (const a of assets) {
  const p = join(outDir, a.path);
  mkdirSync(dirname(p), { recursive: true });
  writeFileSync(p, a.data);
}
// The file list web/meson.build reads (names carry hashes, so Meson cannot know them).
const names = assets.map((a) => a.path).sort();
writeFileSync(join(outDir, 'MANIFEST'), names.join('\n') + '\n');
