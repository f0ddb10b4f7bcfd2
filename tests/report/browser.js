#!/usr/bin/env node
// Opens a page in Debian's chromium, headless, and reports what a test needs to know about it:
// every request the page made (over the DevTools protocol's Network domain) and every console
// message (a Content-Security-Policy refusal lands there), the result of an expression evaluated
// in the page, and a screenshot of the whole page. It can also compare two PNG images, using the
// browser's own decoder and a canvas, so the tests need no image library.
//
//   node browser.js open PAGE.html [--eval FILE.js] [--screenshot OUT.png [--clip Y:H] [--scale S]]
//                   [--width 1000]
//   node browser.js compare A.png B.png [--diff OUT.png] [--threshold 48]
//
// Prints one JSON object on stdout. The browser talks over a pipe (--remote-debugging-pipe), not
// a port; it runs with a fresh profile directory and the flags that keep it off the network.
// Exit status: 0 when the browser answered, 2 on a usage error, 1 when the browser failed.
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const BROWSER = process.env.DLK_CHROMIUM || 'chromium';
const TIMEOUT_MS = 60000;

function usage(msg) {
  process.stderr.write(`browser.js: ${msg}\n`);
  process.exit(2);
}

function args(argv) {
  const out = { _: [] };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i].startsWith('--')) out[argv[i].slice(2)] = argv[++i];
    else out._.push(argv[i]);
  }
  return out;
}

class Browser {
  constructor() {
    this.profile = fs.mkdtempSync(path.join(os.tmpdir(), 'dlk-chromium-'));
    this.proc = spawn(BROWSER, [
      '--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-default-apps', '--disable-extensions', '--no-default-browser-check',
      '--hide-scrollbars', '--mute-audio', '--font-render-hinting=none',
      `--user-data-dir=${this.profile}`, '--remote-debugging-pipe', 'about:blank',
    ], { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });
    this.stderr = '';
    this.proc.stderr.on('data', (d) => { this.stderr += d; });
    this.next = 1;
    this.waiting = new Map();
    this.listeners = [];
    this.buf = Buffer.alloc(0);
    this.exited = new Promise((resolve) => this.proc.on('exit', resolve));
    this.proc.stdio[4].on('data', (d) => this.receive(d));
    this.proc.on('exit', (code) => {
      for (const [, w] of this.waiting) w.reject(new Error(`chromium exited (${code}): ${this.stderr.slice(-2000)}`));
      this.waiting.clear();
    });
  }

  receive(d) {
    this.buf = Buffer.concat([this.buf, d]);
    let nul;
    while ((nul = this.buf.indexOf(0)) >= 0) {
      const msg = JSON.parse(this.buf.subarray(0, nul).toString('utf8'));
      this.buf = this.buf.subarray(nul + 1);
      if (msg.id && this.waiting.has(msg.id)) {
        const w = this.waiting.get(msg.id);
        this.waiting.delete(msg.id);
        if (msg.error) w.reject(new Error(`${w.method}: ${msg.error.message}`));
        else w.resolve(msg.result);
      } else if (msg.method) {
        for (const l of this.listeners) l(msg);
      }
    }
  }

  send(method, params = {}, sessionId) {
    const id = this.next++;
    const msg = { id, method, params };
    if (sessionId) msg.sessionId = sessionId;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject, method });
      this.proc.stdio[3].write(JSON.stringify(msg) + '\0');
    });
  }

  on(fn) { this.listeners.push(fn); }

  waitFor(pred, what) {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), TIMEOUT_MS);
      this.on((m) => { if (pred(m)) { clearTimeout(t); resolve(m); } });
    });
  }

  async page(width, height) {
    const { targetId } = await this.send('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = await this.send('Target.attachToTarget', { targetId, flatten: true });
    const s = (method, params) => this.send(method, params, sessionId);
    await s('Emulation.setDeviceMetricsOverride', { width, height, deviceScaleFactor: 1, mobile: false });
    return { s, sessionId };
  }

  async close() {
    try { await this.send('Browser.close'); } catch (e) { /* it may be gone already */ }
    const t = setTimeout(() => this.proc.kill('SIGKILL'), 5000);
    await this.exited;
    clearTimeout(t);
    fs.rmSync(this.profile, { recursive: true, force: true });
  }
}

async function evaluate(s, expression) {
  const r = await s('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true });
  if (r.exceptionDetails) {
    const e = r.exceptionDetails;
    throw new Error(`evaluation failed: ${e.exception ? e.exception.description : e.text}`);
  }
  return r.result.value;
}

async function open(b, file, opts) {
  const width = Number(opts.width || 1000);
  const { s, sessionId } = await b.page(width, 800);
  const requests = [];
  const console_ = [];
  b.on((m) => {
    if (m.sessionId !== sessionId) return;
    if (m.method === 'Network.requestWillBeSent') requests.push({ url: m.params.request.url, type: m.params.type });
    if (m.method === 'Network.webSocketCreated') requests.push({ url: m.params.url, type: 'WebSocket' });
    if (m.method === 'Runtime.consoleAPICalled') console_.push(m.params.args.map((a) => a.value).join(' '));
    if (m.method === 'Log.entryAdded') console_.push(`${m.params.entry.source}: ${m.params.entry.text}`);
  });
  await s('Network.enable');
  await s('Page.enable');
  await s('Runtime.enable');
  await s('Log.enable');
  const loaded = b.waitFor((m) => m.sessionId === sessionId && m.method === 'Page.loadEventFired', 'the page to load');
  const url = 'file://' + path.resolve(file);
  const nav = await s('Page.navigate', { url });
  if (nav.errorText) throw new Error(`cannot open ${url}: ${nav.errorText}`);
  await loaded;
  const out = { url, requests, console: console_ };
  if (opts.eval) out.eval = await evaluate(s, fs.readFileSync(opts.eval, 'utf8'));
  if (opts.screenshot) {
    const m = await s('Page.getLayoutMetrics');
    const height = Math.ceil(m.cssContentSize.height);
    await s('Emulation.setDeviceMetricsOverride', { width, height, deviceScaleFactor: 1, mobile: false });
    // --clip Y:H takes a band of the page (for looking at it); the default is all of it
    const [cy, ch] = opts.clip ? opts.clip.split(':').map(Number) : [0, height];
    const shot = await s('Page.captureScreenshot', { format: 'png', captureBeyondViewport: true,
      clip: { x: 0, y: cy, width, height: Math.min(ch, height - cy), scale: Number(opts.scale || 1) } });
    fs.writeFileSync(opts.screenshot, Buffer.from(shot.data, 'base64'));
    out.screenshot = { file: opts.screenshot, width, height };
  }
  // whatever the page asked for after it loaded is in the list too: give it a moment to ask
  await new Promise((r) => setTimeout(r, 300));
  return out;
}

// Both images drawn on canvases in a blank page; a pixel differs when any channel differs by
// more than threshold (of 255). Reports the sizes, the count and the share of differing pixels.
async function compare(b, fileA, fileB, opts) {
  const { s } = await b.page(800, 600);
  const a = fs.readFileSync(fileA).toString('base64');
  const c = fs.readFileSync(fileB).toString('base64');
  const threshold = Number(opts.threshold || 48);
  const expr = `(async () => {
    const load = (d) => new Promise((res, rej) => { const i = new Image(); i.onload = () => res(i);
      i.onerror = () => rej(new Error('not a PNG image')); i.src = 'data:image/png;base64,' + d; });
    const [a, b] = await Promise.all([load(${JSON.stringify(a)}), load(${JSON.stringify(c)})]);
    const w = Math.max(a.width, b.width), h = Math.max(a.height, b.height);
    const px = (img) => { const cv = document.createElement('canvas'); cv.width = w; cv.height = h;
      const x = cv.getContext('2d'); x.fillStyle = '#ff00ff'; x.fillRect(0, 0, w, h); x.drawImage(img, 0, 0);
      return x.getImageData(0, 0, w, h); };
    const pa = px(a), pb = px(b);
    const cv = document.createElement('canvas'); cv.width = w; cv.height = h;
    const dx = cv.getContext('2d'), diff = dx.createImageData(w, h);
    let n = 0;
    for (let i = 0; i < pa.data.length; i += 4) {
      const d = Math.max(Math.abs(pa.data[i] - pb.data[i]), Math.abs(pa.data[i + 1] - pb.data[i + 1]),
        Math.abs(pa.data[i + 2] - pb.data[i + 2]));
      const bad = d > ${threshold};
      if (bad) n++;
      const g = 255 - (pa.data[i] + pa.data[i + 1] + pa.data[i + 2]) / 12;
      diff.data[i] = bad ? 255 : g; diff.data[i + 1] = bad ? 0 : g; diff.data[i + 2] = bad ? 0 : g; diff.data[i + 3] = 255;
    }
    dx.putImageData(diff, 0, 0);
    return { a: [a.width, a.height], b: [b.width, b.height], differing: n, pixels: w * h,
      share: n / (w * h), diff: cv.toDataURL('image/png') };
  })()`;
  const r = await evaluate(s, expr);
  if (opts.diff) fs.writeFileSync(opts.diff, Buffer.from(r.diff.split(',')[1], 'base64'));
  delete r.diff;
  r.threshold = threshold;
  return r;
}

async function main() {
  const a = args(process.argv.slice(2));
  const cmd = a._[0];
  if (cmd === 'open' && a._.length !== 2) usage('usage: open PAGE.html [--eval FILE] [--screenshot OUT.png]');
  if (cmd === 'compare' && a._.length !== 3) usage('usage: compare A.png B.png [--diff OUT.png]');
  if (cmd !== 'open' && cmd !== 'compare') usage('the command is open or compare');
  const b = new Browser();
  const killer = setTimeout(() => { process.stderr.write('browser.js: timed out\n'); b.proc.kill('SIGKILL'); process.exit(1); },
    TIMEOUT_MS * 2);
  try {
    const out = cmd === 'open' ? await open(b, a._[1], a) : await compare(b, a._[1], a._[2], a);
    process.stdout.write(JSON.stringify(out, null, 1) + '\n');
  } catch (e) {
    process.stderr.write(`browser.js: ${e.message}\n`);
    process.exitCode = 1;
  } finally {
    await b.close();
    clearTimeout(killer);
  }
}

main();
