'use strict';
// index.js finds the platform package by napi-rs's names. Windows releases are built with
// the GNU toolchain (npm/win32-x64-gnu), so on win32 the loader must try -gnu after -msvc.
// No Windows here: a child node reports win32/x64 and loads a copy of index.js beside a
// node_modules holding stand-in platform packages.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const spoof = `Object.defineProperty(process, 'platform', { value: process.env.SPOOF_PLATFORM });
Object.defineProperty(process, 'arch', { value: process.env.SPOOF_ARCH });`;

function loadAs(platform, arch, packages) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'caerus-node-loader-'));
  fs.copyFileSync(path.join(__dirname, '..', 'index.js'), path.join(dir, 'index.js'));
  fs.writeFileSync(path.join(dir, 'spoof.js'), spoof);
  for (const name of packages) {
    const pkg = path.join(dir, 'node_modules', '@caerus-dev', `sdk-${name}`);
    fs.mkdirSync(pkg, { recursive: true });
    fs.writeFileSync(path.join(pkg, 'package.json'), JSON.stringify({ name: `@caerus-dev/sdk-${name}`, main: 'addon.js' }));
    // A stand-in addon: loading it is the fact under test, so it stops index.js right there.
    fs.writeFileSync(path.join(pkg, 'addon.js'), `throw new Error('loaded ${name}');`);
  }
  const env = { ...process.env, SPOOF_PLATFORM: platform, SPOOF_ARCH: arch };
  delete env.CAERUS_NODE_NATIVE;
  const run = spawnSync(process.execPath, ['--require', './spoof.js', '-e', "require('./index.js')"], { cwd: dir, env });
  fs.rmSync(dir, { recursive: true, force: true });
  return run.stderr.toString();
}

test('win32: the GNU build (win32-x64-gnu) is found when no MSVC one is installed', () => {
  assert.match(loadAs('win32', 'x64', ['win32-x64-gnu']), /loaded win32-x64-gnu/);
});

test('win32: an MSVC build is preferred when both are installed', () => {
  assert.match(loadAs('win32', 'x64', ['win32-x64-msvc', 'win32-x64-gnu']), /loaded win32-x64-msvc/);
});

test('darwin arm64 loads darwin-arm64; none installed names the package to install', () => {
  assert.match(loadAs('darwin', 'arm64', ['darwin-arm64']), /loaded darwin-arm64/);
  assert.match(loadAs('win32', 'x64', []), /no native addon for win32-x64-msvc or win32-x64-gnu.*@caerus-dev\/sdk-win32-x64-gnu/s);
});

test('every platform package under npm/ is named as napi-rs names its target', () => {
  const napi = {
    'x86_64-unknown-linux-gnu': 'linux-x64-gnu',
    'aarch64-unknown-linux-gnu': 'linux-arm64-gnu',
    'x86_64-unknown-linux-musl': 'linux-x64-musl',
    'aarch64-unknown-linux-musl': 'linux-arm64-musl',
    'x86_64-apple-darwin': 'darwin-x64',
    'aarch64-apple-darwin': 'darwin-arm64',
    'x86_64-pc-windows-gnu': 'win32-x64-gnu',
  };
  const root = path.join(__dirname, '..');
  const { napi: config } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
  assert.deepEqual(config.targets.map((t) => napi[t]).sort(), fs.readdirSync(path.join(root, 'npm')).sort());
  for (const dir of fs.readdirSync(path.join(root, 'npm'))) {
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'npm', dir, 'package.json'), 'utf8'));
    const [os_, cpu, libc] = dir.split('-');
    assert.equal(pkg.name, `@caerus-dev/sdk-${dir}`);
    assert.equal(pkg.main, `caerus.${dir}.node`);
    assert.deepEqual([pkg.os, pkg.cpu], [[os_], [cpu]]);
    if (os_ === 'linux') assert.deepEqual(pkg.libc, [libc === 'gnu' ? 'glibc' : 'musl']);
  }
});
