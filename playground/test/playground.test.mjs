// Drives the Playground page in headless Chromium against a real dls: the page must show
// what the server decided (deadlock victim, lease expiry, locks of other clients).
// Screenshots go to playground/artifacts/ and are kept.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { chromium } from 'playwright-core';

import { WORDS } from '../web/i18n.js';
import { addKey, api, startCluster, startDls, waitForEvent } from './dls.mjs';

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

/**
 * One word for a raft term and one for a lease in each language, and the synonyms the
 * Spanish text once mixed in ("término", "arrendamiento").
 */
const GLOSSARY = {
  en: { term: 'term', lease: 'lease', avoid: [] },
  es: { term: 'mandato', lease: 'concesión', avoid: [/término/i, /\btermino\b/i, /arrendamiento/i] },
};
const ARTIFACTS = new URL('../artifacts/', import.meta.url).pathname;
mkdirSync(ARTIFACTS, { recursive: true });

// The page follows the browser's language: each scenario runs once in English and once in
// Spanish, and asserts on data attributes rather than words, so the same checks hold.
for (const locale of ['en-US', 'es-ES']) describe(`playground page on a real dls (${locale})`, () => {
  const lang = locale.slice(0, 2);
  let dls;
  let browser;

  before(async () => {
    dls = await startDls();
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  });

  after(async () => {
    await browser?.close();
    await dls?.stop();
  });

  async function open(viewport = { width: 1280, height: 900 }) {
    const page = await browser.newPage({ viewport, locale });
    page.on('pageerror', (e) => console.error('page error:', e));
    await page.goto(`${dls.base}/playground`);
    await page.locator('#cluster .member.leader').waitFor();
    assert.equal(await page.getAttribute('html', 'lang'), lang);
    assert.equal(await page.textContent('#clients-panel h2'), WORDS[lang]['panel.clients']);
    return page;
  }

  test('two-way deadlock: the victim shown is the one in the server event', async () => {
    const page = await open();
    const serverEvent = waitForEvent(dls.base, 'kinds=DEADLOCK_RESOLVED', () => true);
    await page.selectOption('#scenario', 'deadlock2');
    await page.click('#run-scenario');
    const shown = page.locator('#deadlock[data-victim-id]');
    await shown.waitFor({ timeout: 20000 });
    const event = await serverEvent;
    const victim = event.detail.victim_transaction_id;
    assert.equal(await shown.getAttribute('data-victim-id'), victim);
    assert.equal(event.detail.cycle.length, 2);
    // The victim's card is marked and aborted; the graph marks it too.
    const card = page.locator(`.txn[data-txn-id="${victim}"]`);
    await card.locator('[data-testid=victim]').waitFor();
    assert.equal(await card.getAttribute('data-state'), 'ABORTED');
    await page.locator(`#graph .node.victim[data-txn-id="${victim}"]`).waitFor();
    // The survivor gets the lock and commits.
    const survivor = event.detail.cycle.map((m) => m.transaction_id).find((id) => id !== victim);
    await page.locator(`.txn[data-txn-id="${survivor}"][data-state=COMMITTED]`).waitFor({ timeout: 20000 });
    await page.screenshot({ path: `${ARTIFACTS}deadlock-desktop-${lang}.png`, fullPage: true });
    await page.setViewportSize({ width: 375, height: 812 });
    await page.screenshot({ path: `${ARTIFACTS}deadlock-phone-${lang}.png`, fullPage: true });
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 375, `the page scrolls sideways on a phone (${width}px wide)`);
    await page.close();
  });

  test('three-way deadlock: one victim, the two others finish', async () => {
    const page = await open();
    const since = (await api(dls.base, 'GET', '/api/v1/cluster')).last_event_sequence;
    const serverEvent = waitForEvent(dls.base, `after=${since}&kinds=DEADLOCK_RESOLVED`, () => true);
    await page.selectOption('#scenario', 'deadlock3');
    await page.click('#run-scenario');
    const event = await serverEvent;
    assert.equal(event.detail.cycle.length, 3);
    const victim = event.detail.victim_transaction_id;
    await page.locator(`#deadlock[data-victim-id="${victim}"]`).waitFor();
    for (const m of event.detail.cycle.filter((m) => m.transaction_id !== victim)) {
      await page.locator(`.txn[data-txn-id="${m.transaction_id}"][data-state=COMMITTED]`).waitFor({ timeout: 20000 });
    }
    assert.equal(await page.locator('#graph .edge.cycle').count(), 3);
    await page.screenshot({ path: `${ARTIFACTS}deadlock3-desktop-${lang}.png`, fullPage: true });
    await page.close();
  });

  test('reader/writer fairness: the second reader waits behind the writer', async () => {
    const page = await open();
    await page.selectOption('#scenario', 'fairness');
    await page.click('#run-scenario');
    await page.locator('.txn[data-name=reader-2][data-state=COMMITTED]').waitFor({ timeout: 30000 });
    const token = async (who) => BigInt(await page.locator(`#log li[data-event=granted][data-txn="${who}"]`).first().getAttribute('data-token'));
    assert.ok((await token('writer')) < (await token('reader-2')), 'reader-2 was granted before the writer');
    await page.close();
  });

  test('heartbeats off: the page shows the lease expiring', async () => {
    const page = await open();
    await page.fill('#new-txn input[name=name]', 'sleepy');
    await page.fill('#new-txn input[name=lease]', '1500');
    await page.click('#new-txn button[type=submit]');
    const card = page.locator('.txn[data-name=sleepy]');
    await card.waitFor();
    const id = await card.getAttribute('data-txn-id');
    await card.locator('input[name=key]').fill('sleepy-key');
    await card.locator('button[type=submit]').click();
    await page.locator('#locks [data-key="playground/sleepy-key"]').waitFor();
    await card.locator('[data-testid=heartbeat]').uncheck();
    await page.locator(`.txn[data-txn-id="${id}"][data-state=EXPIRED]`).waitFor({ timeout: 20000 });
    const status = await api(dls.base, 'GET', `/api/v1/transactions/${id}`);
    assert.equal(status.state, 'EXPIRED');
    await page.locator('#log li[data-event=expired][data-txn=sleepy]').first().waitFor();
    await page.screenshot({ path: `${ARTIFACTS}heartbeat-expired-${lang}.png`, fullPage: true });
    await page.close();
  });

  test('lock-delay: an expired holder\'s key is shown delayed, then passes to the waiter', async () => {
    const page = await open();
    const ns = `pg-delay-${lang}`;
    await page.fill('#lock-delay input[name=prefix]', ns);
    await page.fill('#lock-delay input[name=ms]', '2500');
    await page.click('#lock-delay button[type=submit]');
    await page.locator(`#lock-delay-rules [data-prefix="${ns}"]`).waitFor();
    const newClient = async (name, lease) => {
      await page.fill('#new-txn input[name=name]', name);
      await page.fill('#new-txn input[name=lease]', String(lease));
      await page.click('#new-txn button[type=submit]');
      const card = page.locator(`.txn[data-name=${name}]`);
      await card.waitFor();
      await card.locator('input[name=namespace]').fill(ns);
      await card.locator('input[name=key]').fill('k');
      await card.locator('button[type=submit]').click();
      return { card, id: await card.getAttribute('data-txn-id') };
    };
    const first = await newClient(`paused-${lang}`, 1500);
    await page.locator(`#locks [data-key="${ns}/k"] .holder[data-txn-id="${first.id}"]`).waitFor();
    const next = await newClient(`next-${lang}`, 10000);
    await page.locator(`#locks [data-key="${ns}/k"] .waiter[data-txn-id="${next.id}"]`).waitFor();
    await first.card.locator('[data-testid=heartbeat]').uncheck();
    // The lease lapses: the key is delayed (no holder), the waiter still waits.
    await page.locator(`#locks [data-key="${ns}/k"] [data-testid=delay]`).waitFor({ timeout: 20000 });
    const listed = (await api(dls.base, 'GET', `/api/v1/locks?namespace_prefix=${ns}`)).locks[0];
    assert.equal(listed.delay.transaction_id, first.id);
    assert.equal(listed.delay.cause, 'LEASE_EXPIRED');
    await page.screenshot({ path: `${ARTIFACTS}lock-delay-${lang}.png`, fullPage: true });
    await page.locator(`#locks [data-key="${ns}/k"] .holder[data-txn-id="${next.id}"]`).waitFor({ timeout: 20000 });
    const now = (await api(dls.base, 'GET', `/api/v1/locks?namespace_prefix=${ns}`)).locks[0];
    assert.ok(now.holders[0].since_ms >= listed.delay.until_ms, 'granted before the delay ended');
    assert.equal(now.delay, null);
    await page.fill('#lock-delay input[name=ms]', '0');
    await page.click('#lock-delay button[type=submit]');
    await page.locator(`#lock-delay-rules [data-prefix="${ns}"]`).waitFor({ state: 'detached' });
    await api(dls.base, 'POST', `/api/v1/transactions/${next.id}/end`, { commit: true });
    await page.close();
  });

  test('a semaphore admits its permit count; the next in line gets a freed permit', async () => {
    const page = await open();
    const ids = [];
    for (const name of ['slot-a', 'slot-b', 'slot-c']) {
      await page.fill('#new-txn input[name=name]', `${name}-${lang}`);
      await page.click('#new-txn button[type=submit]');
      const card = page.locator(`.txn[data-name=${name}-${lang}]`);
      await card.waitFor();
      ids.push(await card.getAttribute('data-txn-id'));
      await card.locator('input[name=key]').fill(`pool-${lang}`);
      await card.locator('select[name=mode]').selectOption('SEMAPHORE');
      await card.locator('input[name=permits]').fill('2');
      await card.locator('button[type=submit]').click();
    }
    const key = page.locator(`#locks [data-key="playground/pool-${lang}"]`);
    await key.locator(`.waiter[data-txn-id="${ids[2]}"]`).waitFor();
    assert.equal(await key.getAttribute('data-permits'), '2');
    assert.equal(await key.locator('.holder').count(), 2);
    await page.screenshot({ path: `${ARTIFACTS}semaphore-${lang}.png`, fullPage: true });
    await page.locator(`.txn[data-txn-id="${ids[0]}"] button.quiet`, { hasText: WORDS[lang]['txn.commit'] }).click();
    await key.locator(`.holder[data-txn-id="${ids[2]}"]`).waitFor();
    const listed = (await api(dls.base, 'GET', '/api/v1/locks?namespace_prefix=playground')).locks.find((k) => k.key === `pool-${lang}`);
    assert.deepEqual(listed.holders.map((h) => h.mode), ['SEMAPHORE', 'SEMAPHORE']);
    for (const id of ids.slice(1)) await api(dls.base, 'POST', `/api/v1/transactions/${id}/end`, { commit: true });
    await page.close();
  });

  test('leader election: the watched key shows each leader, with a higher term after a crash', async () => {
    const page = await open();
    await page.selectOption('#scenario', 'election');
    await page.click('#run-scenario');
    const leader = (name) => page.locator(`#election[data-leader-name="${name}"]`);
    await leader('node-a').waitFor({ timeout: 15000 });
    const termA = BigInt(await page.getAttribute('#election', 'data-term'));
    await leader('node-b').waitFor({ timeout: 20000 });
    const termB = BigInt(await page.getAttribute('#election', 'data-term'));
    assert.ok(termB > termA, `the new leader's term ${termB} is above ${termA}`);
    await page.screenshot({ path: `${ARTIFACTS}election-${lang}.png`, fullPage: true });
    await leader('node-c').waitFor({ timeout: 20000 });
    assert.ok(BigInt(await page.getAttribute('#election', 'data-term')) > termB);
    await page.locator('#run-scenario:not([disabled])').waitFor({ timeout: 20000 });
    await page.close();
  });

  test('GC pause: the stale token is rejected by the fenced store', async () => {
    const page = await open({ width: 375, height: 812 });
    await page.selectOption('#scenario', 'gcpause');
    await page.click('#run-scenario');
    await page.locator('#store .write.rejected').waitFor({ timeout: 30000 });
    const accepted = await page.locator('#store .write.ok').count();
    assert.equal(accepted, 2);
    await page.screenshot({ path: `${ARTIFACTS}gc-pause-phone-${lang}.png`, fullPage: true });
    await page.close();
  });

  test('several keys in one acquire are granted together or not at all', async () => {
    const page = await open();
    const outside = await api(dls.base, 'POST', '/api/v1/transactions', { timeout_ms: 10000, name: 'outside-holder' });
    await api(dls.base, 'POST', `/api/v1/transactions/${outside.transaction_id}/locks`,
      { namespace: 'playground', key: 'multi-b', mode: 'EXCLUSIVE', timeout_ms: 1000 });
    await page.fill('#new-txn input[name=name]', 'multi');
    await page.click('#new-txn button[type=submit]');
    const card = page.locator('.txn[data-name=multi]');
    await card.waitFor();
    const id = await card.getAttribute('data-txn-id');
    await card.locator('input[name=key]').fill('multi-a, multi-b');
    await card.locator('button[type=submit]').click();
    // Waiting in both queues, holding neither: multi-a is free but not taken alone.
    await page.locator(`#locks [data-key="playground/multi-a"] .waiter[data-txn-id="${id}"]`).waitFor();
    assert.equal(await page.locator('#locks [data-key="playground/multi-a"] .holder').count(), 0);
    await api(dls.base, 'POST', `/api/v1/transactions/${outside.transaction_id}/end`, { commit: true });
    for (const key of ['multi-a', 'multi-b']) {
      await page.locator(`#locks [data-key="playground/${key}"] .holder[data-txn-id="${id}"]`).waitFor();
    }
    await card.locator('.held .chip', { hasText: 'multi-b' }).waitFor();
    assert.equal(await card.locator('.held .chip').count(), 2);
    const status = await api(dls.base, 'GET', `/api/v1/transactions/${id}`);
    assert.deepEqual(status.locks.map((l) => l.key).sort(), ['multi-a', 'multi-b']);
    await page.screenshot({ path: `${ARTIFACTS}multi-key-${lang}.png`, fullPage: true });
    await page.close();
  });

  test('the permits field shows, labelled, for a SEMAPHORE request only', async () => {
    const page = await open();
    await page.fill('#new-txn input[name=name]', `permits-${lang}`);
    await page.click('#new-txn button[type=submit]');
    const card = page.locator(`.txn[data-name=permits-${lang}]`);
    await card.waitFor();
    const id = await card.getAttribute('data-txn-id');
    const mode = card.locator('select[name=mode]');
    const permits = card.locator('input[name=permits]');
    assert.equal(await mode.inputValue(), 'EXCLUSIVE');
    assert.equal(await permits.isVisible(), false, 'a permits box sits next to Acquire in EXCLUSIVE mode');
    await mode.selectOption('SEMAPHORE');
    await permits.waitFor();
    assert.equal((await card.locator('label:has(input[name=permits])').textContent()).trim(), WORDS[lang]['txn.permits']);
    await mode.selectOption('SHARED_READ');
    await permits.waitFor({ state: 'hidden' });
    await api(dls.base, 'POST', `/api/v1/transactions/${id}/end`, { commit: false });
    await page.close();
  });

  test('the node whose HTTP port serves the page is marked with that address, the others by their gRPC one', async () => {
    const page = await open();
    const http = new URL(dls.base).host;
    const c = await api(dls.base, 'GET', '/api/v1/cluster');
    const marked = page.locator(`#cluster .member[data-this-page="${http}"]`);
    await marked.waitFor();
    assert.equal(await marked.getAttribute('data-node-id'), c.node_id);
    const m = c.members.find((x) => x.node_id === c.node_id);
    const words = WORDS[lang];
    assert.equal(await marked.textContent(),
      words['cluster.member']({ id: m.node_id, addr: m.addr }) + words['cluster.leader'] + words['cluster.thisPage']({ http }));
    assert.ok((await marked.textContent()).includes(http), 'the page\'s own (HTTP) address is not shown');
    await page.close();
  });

  test('one word for a raft term and one for a lease, as the glossary says', async () => {
    const page = await open();
    const { term, lease } = GLOSSARY[lang];
    assert.ok((await page.textContent('#cluster .muted')).startsWith(`${term} `), await page.textContent('#cluster .muted'));
    assert.ok((await page.textContent('#new-txn')).includes(lease));
    // Everything the page shows, its tooltips included, avoids the other words.
    const shown = await page.evaluate(() => [document.body.innerText,
      ...[...document.querySelectorAll('[title], [placeholder], [aria-label]')].flatMap((el) => [el.title, el.placeholder, el.getAttribute('aria-label')])].join('\n'));
    for (const word of GLOSSARY[lang].avoid) assert.ok(!word.test(shown), `the page says ${word}`);
    await page.close();
  });

  test('the lock-delay button stays on one line, beside its field, on a phone and on laptops', async () => {
    const page = await open();
    for (const width of [375, 768, 1280, 1440]) {
      await page.setViewportSize({ width, height: 900 });
      await page.locator('#locks-panel').screenshot({ path: `${ARTIFACTS}lock-delay-form-${width}-${lang}.png` });
      const { button, field, lineHeight, contentHeight } = await page.evaluate(() => {
        const b = document.querySelector('#lock-delay button[type=submit]');
        const cs = getComputedStyle(b);
        const px = (v) => parseFloat(v) || 0;
        const box = b.getBoundingClientRect();
        return {
          button: box.top,
          field: document.querySelector('#lock-delay input[name=ms]').getBoundingClientRect().top,
          lineHeight: px(cs.lineHeight),
          contentHeight: box.height - px(cs.paddingTop) - px(cs.paddingBottom) - px(cs.borderTopWidth) - px(cs.borderBottomWidth),
        };
      });
      assert.ok(contentHeight < 1.5 * lineHeight, `at ${width}px the button's text takes ${contentHeight}px, lines of ${lineHeight}px`);
      assert.ok(Math.abs(button - field) <= 1, `at ${width}px the button wrapped away from its field (top ${button} vs ${field})`);
    }
    await page.close();
  });

  test('locks taken by another client show up in the page', async () => {
    const page = await open();
    const t = await api(dls.base, 'POST', '/api/v1/transactions', { timeout_ms: 10000, name: 'outside-client' });
    const r = await api(dls.base, 'POST', `/api/v1/transactions/${t.transaction_id}/locks`,
      { namespace: 'elsewhere', key: 'report', mode: 'SHARED_READ', timeout_ms: 1000 });
    const row = page.locator('#locks [data-key="elsewhere/report"]');
    await row.waitFor();
    const text = await row.textContent();
    assert.ok(text.includes('outside-client') && text.includes(`#${r.fencing_token}`), text);
    await api(dls.base, 'POST', `/api/v1/transactions/${t.transaction_id}/end`, { commit: true });
    await page.close();
  });
});

describe('playground page languages', () => {
  test('English and Spanish have the same words, and the page uses only words they have', () => {
    assert.deepEqual(Object.keys(WORDS.es).sort(), Object.keys(WORDS.en).sort());
    for (const [lang, words] of Object.entries(WORDS)) {
      for (const [key, w] of Object.entries(words)) assert.ok(typeof w === 'function' || w.trim(), `${lang} ${key} is empty`);
    }
    const html = readFileSync(new URL('../web/index.html', import.meta.url), 'utf8');
    for (const [, key] of html.matchAll(/data-i18n(?:-[a-z-]+)?="([^"]+)"/g)) assert.ok(key in WORDS.en, `index.html uses ${key}, which i18n.js lacks`);
  });

  test('each language keeps to its glossary: one word for a raft term, one for a lease', () => {
    for (const [lang, words] of Object.entries(WORDS)) {
      // A function's source holds its words too.
      const text = Object.values(words).map((w) => (typeof w === 'function' ? w.toString() : w)).join('\n');
      for (const word of GLOSSARY[lang].avoid) assert.ok(!word.test(text), `${lang} says ${word}`);
      assert.ok(words['cluster.summary']({ term: 7, token: 1, active: 0, seq: 1 }).startsWith(`${GLOSSARY[lang].term} 7`));
      assert.ok(words['election.leader']({ key: 'k', name: 'n', term: 7 }).includes(`${GLOSSARY[lang].term} 7`));
      assert.ok(words['form.lease'].includes(GLOSSARY[lang].lease));
    }
  });

  test('the switch changes every fixed text and is remembered; a card is drawn in the new language', async () => {
    const dls = await startDls();
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 }, locale: 'en-US' });
      page.on('pageerror', (e) => console.error('page error:', e));
      await page.goto(`${dls.base}/playground`);
      await page.locator('#cluster .member.leader').waitFor();
      const fixedTexts = () => page.$$eval('[data-i18n]', (els) => els.map((el) => [el.dataset.i18n, el.textContent]));
      for (const [key, text] of await fixedTexts()) assert.equal(text, WORDS.en[key], key);
      await page.fill('#new-txn input[name=name]', 'bilingual');
      await page.click('#new-txn button[type=submit]');
      const card = page.locator('.txn[data-name=bilingual]');
      await card.locator('button[type=submit]', { hasText: WORDS.en['txn.acquire'] }).waitFor();

      await page.selectOption('#lang', 'es');
      assert.equal(await page.getAttribute('html', 'lang'), 'es');
      assert.equal(await page.title(), WORDS.es['page.title']);
      for (const [key, text] of await fixedTexts()) assert.equal(text, WORDS.es[key], key);
      assert.equal(await page.getAttribute('#new-txn input[name=name]', 'placeholder'), WORDS.es['form.name']);
      await card.locator('button[type=submit]', { hasText: WORDS.es['txn.acquire'] }).waitFor();
      assert.equal(await card.locator('[data-testid=state]').textContent(), WORDS.es['state.ACTIVE']);
      await page.locator('#cluster .member.leader', { hasText: WORDS.es['cluster.leader'].trim() }).waitFor();
      assert.equal(await page.textContent('#scenario-note'), WORDS.es['note.deadlock2']);

      // Remembered over a reload, even though the browser still asks for English.
      await page.reload();
      await page.locator('#cluster .member.leader').waitFor();
      assert.equal(await page.inputValue('#lang'), 'es');
      assert.equal(await page.textContent('#clients-panel h2'), WORDS.es['panel.clients']);
      await page.screenshot({ path: `${ARTIFACTS}switched-to-es.png`, fullPage: true });
      await page.close();
    } finally {
      await browser.close();
      await dls.stop();
    }
  });
});

// A server with a keys file: the page tells the reader, in the page's language, to paste an
// admin key into the field (decided by the HTTP status, never by the server's gRPC-worded
// message), and works once one is pasted.
for (const locale of ['en-US', 'es-ES']) describe(`playground page on a server with API keys (${locale})`, () => {
  const lang = locale.slice(0, 2);

  test('no key, an unknown key, a key that is not admin: each asks for an admin key; an admin key works', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'dls-playground-keys-'));
    const file = path.join(dir, 'keys.toml');
    const admin = addKey(file, 'ops', ['--admin']);
    const app = addKey(file, 'app', ['--namespace', 'playground']);
    const dls = await startDls(['--api-keys-file', file]);
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 }, locale });
      page.on('pageerror', (e) => console.error('page error:', e));
      await page.goto(`${dls.base}/playground`);
      const note = page.locator('#auth-note');
      const asks = async (problem) => {
        await page.locator(`#auth-note[data-auth=${problem}]`).waitFor();
        assert.equal(await note.textContent(), WORDS[lang][`auth.${problem}`]);
        // Nowhere the gRPC advice meant for SDK users.
        await page.locator('#cluster', { hasText: WORDS[lang][`auth.${problem}`] }).waitFor();
        const text = await page.evaluate(() => document.body.innerText);
        assert.ok(!/metadata|Bearer/.test(text), text);
      };
      await asks('noKey');
      await page.screenshot({ path: `${ARTIFACTS}api-key-missing-${lang}.png`, fullPage: true });
      const paste = async (key) => {
        await page.fill('#api-key', key);
        await page.press('#api-key', 'Enter');
      };
      await paste('dls_not-a-key-this-server-knows');
      await asks('unknownKey');
      await paste(app);
      await asks('notAdmin');
      await paste(admin);
      await page.locator('#cluster .member.leader').waitFor();
      assert.equal(await note.isVisible(), false);
      await page.fill('#new-txn input[name=name]', `keyed-${lang}`);
      await page.click('#new-txn button[type=submit]');
      const card = page.locator(`.txn[data-name=keyed-${lang}]`);
      await card.locator('input[name=key]').fill('k');
      await card.locator('button[type=submit]').click();
      await page.locator('#locks [data-key="playground/k"]').waitFor();
      await page.close();
    } finally {
      await browser.close();
      await dls.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('playground page on a three-node cluster', () => {
  test('shows members and leader, and keeps working through a leader change', async () => {
    const cluster = await startCluster(3);
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
    try {
      const leader = await cluster.leader();
      // The page is served by a follower that survives the leader's death.
      const node = cluster.nodes.find((x) => x.id !== leader);
      // In Spanish: what this test reads is data, not words.
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 }, locale: 'es-ES' });
      await page.goto(`${node.base}/playground`);
      await page.locator(`#cluster[data-leader="${leader}"]`).waitFor();
      assert.equal(await page.locator('#cluster .member').count(), 3);
      // The node marked as serving the page is the one whose HTTP port the page came from.
      assert.equal(await page.getAttribute(`#cluster .member[data-this-page="127.0.0.1:${node.http}"]`, 'data-node-id'), String(node.id));
      assert.equal(await page.locator('#cluster .member[data-this-page]').count(), 1);

      const runDeadlock = async () => {
        const since = (await api(node.base, 'GET', '/api/v1/cluster')).last_event_sequence;
        const serverEvent = waitForEvent(node.base, `after=${since}&kinds=DEADLOCK_RESOLVED`, () => true, 30000);
        await page.selectOption('#scenario', 'deadlock2');
        await page.click('#run-scenario');
        const event = await serverEvent;
        await page.locator(`#deadlock[data-victim-id="${event.detail.victim_transaction_id}"]`).waitFor({ timeout: 30000 });
      };
      await runDeadlock();

      cluster.kill(leader);
      const next = await cluster.leader(leader);
      await page.locator(`#cluster[data-leader="${next}"]`).waitFor({ timeout: 30000 });
      await page.locator('#run-scenario:not([disabled])').waitFor();
      await runDeadlock();
      await page.screenshot({ path: `${ARTIFACTS}cluster-after-failover.png`, fullPage: true });
      await page.close();
    } finally {
      await browser.close();
      await cluster.stop();
    }
  });
});

describe('playground page over HTTPS', () => {
  test('a TLS node serves the page and a lock is taken through it', async () => {
    const dls = await startDls([], { tls: true });
    // The browser trusts exactly this node's key (Chromium pins its SPKI hash); certificate
    // errors are not ignored wholesale, so a page served with another key would not load.
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', `--ignore-certificate-errors-spki-list=${dls.tls.spkiHash}`],
    });
    try {
      assert.ok(dls.base.startsWith('https://'), dls.base);
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      page.on('pageerror', (e) => console.error('page error:', e));
      const response = await page.goto(`${dls.base}/playground`);
      assert.equal(response.status(), 200);
      assert.ok(page.url().startsWith('https://'), page.url());
      await page.locator('#cluster .member.leader').waitFor();
      await page.fill('#new-txn input[name=name]', 'over-tls');
      await page.click('#new-txn button[type=submit]');
      const card = page.locator('.txn[data-name=over-tls]');
      await card.waitFor();
      const id = await card.getAttribute('data-txn-id');
      await card.locator('input[name=key]').fill('tls-key');
      await card.locator('button[type=submit]').click();
      await page.locator('#locks [data-key="playground/tls-key"]').waitFor();
      // The server agrees (asked over https, trusting the test CA).
      const status = await api(dls.base, 'GET', `/api/v1/transactions/${id}`);
      assert.equal(status.state, 'ACTIVE');
      assert.deepEqual(status.locks.map((l) => `${l.namespace}/${l.key}`), ['playground/tls-key']);
      await page.screenshot({ path: `${ARTIFACTS}https.png`, fullPage: true });
      await page.close();
    } finally {
      await browser.close();
      await dls.stop();
    }
  });
});
