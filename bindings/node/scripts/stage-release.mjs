// Stages the root package for `npm pack` in DIR: the files package.json lists, and a
// package.json that names every platform package under npm/ as an optional dependency
// (what `napi pre-publish` adds at publish time). The committed package.json leaves them
// out so that `npm ci` in a checkout never looks for them on the registry.
//
//   node scripts/stage-release.mjs DIR
import { cpSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const out = process.argv[2];
if (!out) throw new Error('usage: node scripts/stage-release.mjs DIR');
const read = (f) => JSON.parse(readFileSync(f, 'utf8'));
const pkg = read('package.json');

const optionalDependencies = {};
for (const dir of readdirSync('npm')) {
  const platform = read(join('npm', dir, 'package.json'));
  if (platform.version !== pkg.version) {
    throw new Error(`npm/${dir}: version ${platform.version} differs from ${pkg.name} ${pkg.version}`);
  }
  optionalDependencies[platform.name] = platform.version;
}

mkdirSync(out, { recursive: true });
for (const file of pkg.files) cpSync(file, join(out, file));
const { scripts, devDependencies, ...release } = pkg;
writeFileSync(join(out, 'package.json'), `${JSON.stringify({ ...release, optionalDependencies }, null, 2)}\n`);
console.log(`staged ${pkg.name}@${pkg.version} in ${out}, optional: ${Object.keys(optionalDependencies).join(', ')}`);
