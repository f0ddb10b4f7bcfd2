#!/usr/bin/env node
// A small Kubernetes API server for tests: real HTTP/TLS, real Status errors, real watch and log
// streams, and a scripted pod lifecycle read from a JSON scenario file (see README.md).
// Node 20 built-ins only.
'use strict';

const https = require('https');
const http = require('http');
const net = require('net');
const os = require('os');
const { spawn } = require('child_process');
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const { URL } = require('url');

// ---------- command line ----------
function parseArgs(argv) {
  const o = { certs: null, scenario: process.env.DLK_APISERVER_SCENARIO || null, port: 0, log: null };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    const next = () => { if (i + 1 >= argv.length) die(`${a} needs a value`); return argv[++i]; };
    if (a === '--certs') o.certs = next();
    else if (a === '--scenario') o.scenario = next();
    else if (a === '--port') o.port = parseInt(next(), 10);
    else if (a === '--log') o.log = next();
    else if (a === '--watch-stdin') o.watchStdin = true;
    else if (a === '-h' || a === '--help') {
      process.stdout.write('usage: server.js --certs DIR [--scenario FILE] [--port N] [--log FILE] [--watch-stdin]\n');
      process.exit(0);
    } else die(`unknown option '${a}'`);
  }
  if (!o.certs) die('--certs DIR is required (ca.crt, server.crt, server.key)');
  return o;
}
function die(msg) { process.stderr.write(`apiserver: ${msg}\n`); process.exit(2); }

const opts = parseArgs(process.argv);
let scenario = {};
if (opts.scenario) {
  let file = opts.scenario;
  if (!fs.existsSync(file) && fs.existsSync(path.join(__dirname, 'scenarios', file))) file = path.join(__dirname, 'scenarios', file);
  if (!fs.existsSync(file) && fs.existsSync(path.join(__dirname, 'scenarios', file + '.json'))) file = path.join(__dirname, 'scenarios', file + '.json');
  try { scenario = JSON.parse(fs.readFileSync(file, 'utf8')); } catch (e) { die(`scenario '${opts.scenario}': ${e.message}`); }
}
// written synchronously so a test reading it right after a reply sees that request
const logFd = opts.log ? fs.openSync(opts.log, 'a') : null;
const timeScale = scenario.timeScale || 1; // multiply every timeline time (ms) by this

// ---------- resources ----------
const RESOURCES = [
  { kind: 'ConfigMap', group: '', version: 'v1', plural: 'configmaps', singular: 'configmap', short: ['cm'] },
  { kind: 'ServiceAccount', group: '', version: 'v1', plural: 'serviceaccounts', singular: 'serviceaccount', short: ['sa'] },
  { kind: 'Service', group: '', version: 'v1', plural: 'services', singular: 'service', short: ['svc'] },
  { kind: 'PersistentVolumeClaim', group: '', version: 'v1', plural: 'persistentvolumeclaims', singular: 'persistentvolumeclaim', short: ['pvc'] },
  { kind: 'Pod', group: '', version: 'v1', plural: 'pods', singular: 'pod', short: ['po'] },
  { kind: 'Event', group: '', version: 'v1', plural: 'events', singular: 'event', short: ['ev'] },
  { kind: 'Role', group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'roles', singular: 'role', short: [] },
  { kind: 'RoleBinding', group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'rolebindings', singular: 'rolebinding', short: [] },
  { kind: 'Job', group: 'batch', version: 'v1', plural: 'jobs', singular: 'job', short: [] },
  { kind: 'CronJob', group: 'batch', version: 'v1', plural: 'cronjobs', singular: 'cronjob', short: ['cj'] },
  { kind: 'Deployment', group: 'apps', version: 'v1', plural: 'deployments', singular: 'deployment', short: ['deploy'] },
  { kind: 'HorizontalPodAutoscaler', group: 'autoscaling', version: 'v2', plural: 'horizontalpodautoscalers', singular: 'horizontalpodautoscaler', short: ['hpa'] },
  { kind: 'PodDisruptionBudget', group: 'policy', version: 'v1', plural: 'poddisruptionbudgets', singular: 'poddisruptionbudget', short: ['pdb'] },
];
// "gatewayAPI": true in the scenario: the server also serves the Gateway API's HTTPRoutes
if (scenario.gatewayAPI) RESOURCES.push({ kind: 'HTTPRoute', group: 'gateway.networking.k8s.io', version: 'v1', plural: 'httproutes', singular: 'httproute', short: [] });
const gv = (r) => (r.group ? `${r.group}/${r.version}` : r.version);
const VERBS = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'];

// ---------- state ----------
let rv = 1;
const store = new Map(); // "plural/ns/name" -> object
const history = []; // {rv, type, res, ns, obj}
let oldestRV = (scenario.watch && scenario.watch.oldestResourceVersion) || 0;
const watchers = new Set();
const timers = new Map(); // job key -> [timeouts]
const podRuntime = new Map(); // pod key -> {start, logs:[{t,line,noNewline}], done:false, listeners:Set}
const faultCounts = new Map();
const key = (res, ns, name) => `${res.plural}/${ns || ''}/${name}`;
const now = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');
const HISTORY_MAX = 10000;

function nextRV() { rv += 1; return String(rv); }

function record(type, res, obj) {
  const ev = { rv: parseInt(obj.metadata.resourceVersion, 10), type, res, ns: obj.metadata.namespace, obj: clone(obj) };
  history.push(ev);
  if (history.length > HISTORY_MAX) { history.shift(); oldestRV = Math.max(oldestRV, history[0].rv - 1); }
  for (const w of watchers) w.push(ev);
}

function clone(o) { return JSON.parse(JSON.stringify(o)); }

function put(res, obj, type) {
  obj.metadata.resourceVersion = nextRV();
  store.set(key(res, obj.metadata.namespace, obj.metadata.name), obj);
  record(type, res, obj);
  return obj;
}

function remove(res, ns, name) {
  const k = key(res, ns, name);
  const obj = store.get(k);
  if (!obj) return null;
  store.delete(k);
  obj.metadata.resourceVersion = nextRV();
  record('DELETED', res, obj);
  return obj;
}

function newMeta(meta, ns) {
  meta.namespace = ns;
  meta.uid = crypto.randomUUID();
  meta.creationTimestamp = now();
  meta.generation = 1;
  return meta;
}

// ---------- Status ----------
function status(code, reason, message, details) {
  const s = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
  if (details) s.details = details;
  return s;
}
function sendJSON(res, code, body, headers) {
  const data = JSON.stringify(body);
  res.writeHead(code, Object.assign({ 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) }, headers || {}));
  res.end(data);
}
function fail(res, code, reason, message, details, headers) { sendJSON(res, code, status(code, reason, message, details), headers); }
const resName = (r) => (r.group ? `${r.plural}.${r.group}` : r.plural);

// ---------- selectors ----------
function splitTop(s) {
  const out = []; let depth = 0, cur = '';
  for (const ch of s) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) { out.push(cur); cur = ''; } else cur += ch;
  }
  if (cur.trim()) out.push(cur);
  return out.map((x) => x.trim()).filter(Boolean);
}
function parseLabelSelector(s) {
  const reqs = [];
  for (const part of splitTop(s || '')) {
    let m;
    if ((m = part.match(/^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$/))) reqs.push({ k: m[1], op: m[2], v: m[3].split(',').map((x) => x.trim()) });
    else if ((m = part.match(/^([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)$/))) reqs.push({ k: m[1], op: m[2] === '!=' ? '!=' : '=', v: [m[3]] });
    else if ((m = part.match(/^!([\w./-]+)$/))) reqs.push({ k: m[1], op: '!' });
    else if ((m = part.match(/^([\w./-]+)$/))) reqs.push({ k: m[1], op: 'exists' });
    else throw new Error(`unable to parse requirement: ${part}`);
  }
  return reqs;
}
function labelsMatch(reqs, labels) {
  labels = labels || {};
  return reqs.every((r) => {
    const has = Object.prototype.hasOwnProperty.call(labels, r.k), v = labels[r.k];
    switch (r.op) {
      case '=': return has && v === r.v[0];
      case '!=': return !has || v !== r.v[0];
      case 'in': return has && r.v.includes(v);
      case 'notin': return !has || !r.v.includes(v);
      case 'exists': return has;
      case '!': return !has;
    }
    return false;
  });
}
function getPath(obj, p) { return p.split('.').reduce((o, k) => (o == null ? undefined : o[k]), obj); }
function parseFieldSelector(s) {
  const reqs = [];
  for (const part of splitTop(s || '')) {
    const m = part.match(/^([\w.]+)\s*(==|=|!=)\s*(.*)$/);
    if (!m) throw new Error(`invalid field selector: ${part}`);
    reqs.push({ k: m[1], neg: m[2] === '!=', v: m[3] });
  }
  return reqs;
}
function fieldsMatch(reqs, obj) {
  return reqs.every((r) => { const v = String(getPath(obj, r.k) ?? ''); return r.neg ? v !== r.v : v === r.v; });
}

// ---------- merge ----------
function deepMerge(dst, src) {
  for (const [k, v] of Object.entries(src)) {
    if (v && typeof v === 'object' && !Array.isArray(v) && dst[k] && typeof dst[k] === 'object' && !Array.isArray(dst[k])) deepMerge(dst[k], v);
    else dst[k] = clone(v);
  }
  return dst;
}
function mergePatch(dst, patch) { // RFC 7386
  if (!patch || typeof patch !== 'object' || Array.isArray(patch)) return clone(patch);
  if (!dst || typeof dst !== 'object' || Array.isArray(dst)) dst = {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete dst[k];
    else dst[k] = mergePatch(dst[k], v);
  }
  return dst;
}

// ---------- validation ----------
function validate(r, obj) {
  const causes = [];
  const name = obj.metadata && obj.metadata.name;
  if (!name) causes.push({ reason: 'FieldValueRequired', message: 'Required value: name or generateName is required', field: 'metadata.name' });
  else if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(name) || name.length > 253)
    causes.push({ reason: 'FieldValueInvalid', message: `Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'`, field: 'metadata.name' });
  if (r.kind === 'Job') {
    const t = obj.spec && obj.spec.template;
    if (!t || !t.spec || !Array.isArray(t.spec.containers) || !t.spec.containers.length)
      causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: 'spec.template.spec.containers' });
    const rp = t && t.spec && t.spec.restartPolicy;
    if (t && t.spec && rp !== 'Never' && rp !== 'OnFailure')
      causes.push({ reason: 'FieldValueNotSupported', message: `Unsupported value: "${rp || 'Always'}": supported values: "OnFailure", "Never"`, field: 'spec.template.spec.restartPolicy' });
  }
  if (r.kind === 'Deployment') {
    const t = obj.spec && obj.spec.template;
    if (!t || !t.spec || !Array.isArray(t.spec.containers) || !t.spec.containers.length)
      causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: 'spec.template.spec.containers' });
    const sel = (obj.spec && obj.spec.selector && obj.spec.selector.matchLabels) || {};
    const tl = (t && t.metadata && t.metadata.labels) || {};
    if (!Object.keys(sel).length || Object.entries(sel).some(([k, v]) => tl[k] !== v))
      causes.push({ reason: 'FieldValueInvalid', message: 'Invalid value: `selector` does not match template `labels`', field: 'spec.template.metadata.labels' });
  }
  for (const rej of scenario.reject || []) {
    if (rej.kind === r.kind && (!rej.name || rej.name === name))
      causes.push({ reason: 'FieldValueInvalid', message: rej.message || 'Invalid value', field: rej.field });
  }
  if (!causes.length) return null;
  const msg = `${r.kind} "${name || ''}" is invalid: ` + causes.map((c) => `${c.field}: ${c.message}`).join(', ');
  return status(422, 'Invalid', msg, { name, group: r.group, kind: r.kind, causes });
}

// ---------- Job lifecycle ----------
function jobScript(jobName) {
  const jobs = scenario.jobs || {};
  return jobs[jobName] || jobs['*'] || null;
}

function startJob(r, job) {
  const ns = job.metadata.namespace, name = job.metadata.name;
  const n = job.spec.completions || job.spec.parallelism || 1;
  job.status = { active: 0, succeeded: 0, failed: 0, ready: 0, startTime: now() };
  if (job.spec.suspend) return;
  const script = jobScript(name) || {};
  const jt = [];
  timers.set(`${ns}/${name}`, jt);
  const podRes = RESOURCES.find((x) => x.kind === 'Pod');
  // A log line is stamped with the time its step is scripted for, not the time its timer fired:
  // on a loaded machine timers run late, and the ranks' lines must still merge in script order.
  const base = Date.now();
  for (let i = 0; i < n; i++) {
    const rand = crypto.randomBytes(3).toString('hex').slice(0, 5);
    const tmpl = clone(job.spec.template || {});
    const labels = Object.assign({}, (tmpl.metadata && tmpl.metadata.labels) || {}, {
      'batch.kubernetes.io/controller-uid': job.metadata.uid, 'batch.kubernetes.io/job-name': name,
      'controller-uid': job.metadata.uid, 'job-name': name, 'batch.kubernetes.io/job-completion-index': String(i),
    });
    const pod = {
      apiVersion: 'v1', kind: 'Pod',
      metadata: newMeta({
        name: `${name}-${i}-${rand}`, labels,
        annotations: Object.assign({}, (tmpl.metadata && tmpl.metadata.annotations) || {}, { 'batch.kubernetes.io/job-completion-index': String(i) }),
        ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name, uid: job.metadata.uid, controller: true, blockOwnerDeletion: true }],
      }, ns),
      spec: Object.assign({}, tmpl.spec || {}, { hostname: `${name}-${i}` }),
      status: { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False' }] },
    };
    put(podRes, pod, 'ADDED');
    addEvent(ns, { kind: 'Job', name, apiVersion: 'batch/v1', uid: job.metadata.uid }, 'Normal', 'SuccessfulCreate', `Created pod: ${pod.metadata.name}`);
    const pk = `${ns}/${pod.metadata.name}`;
    podRuntime.set(pk, { start: Date.now(), logs: [], previous: null, done: false, listeners: new Set() });
    const pods = script.pods || [];
    const timeline = (pods[i] && pods[i].timeline) || (pods[i] && Array.isArray(pods[i]) ? pods[i] : null) || script.timeline || [];
    const prev = pods[i] && pods[i].previousLogs;
    if (prev) podRuntime.get(pk).previous = prev;
    for (const step of timeline) {
      jt.push(setTimeout(() => playStep(ns, name, pod.metadata.name, i, step, base + (step.at || 0) * timeScale), (step.at || 0) * timeScale));
    }
  }
  refreshJob(ns, name);
}

// ---------- Deployment lifecycle (the Deployment and ReplicaSet controllers in one) ----------
// A Deployment gets spec.replicas pods (default 1) from its template, labelled with a
// pod-template-hash of the template; a changed template replaces them (generation + 1), a changed
// replica count adds or removes some. Pods play scenario.deployments[NAME or '*'] (default: Running
// at once). Status follows the pods: replicas, updatedReplicas, readyReplicas, availableReplicas,
// observedGeneration, and conditions Available and Progressing; a step's "deploymentCondition"
// sets a condition explicitly (e.g. Progressing False ProgressDeadlineExceeded).
function deployScript(name) {
  const d = scenario.deployments || {};
  return d[name] || d['*'] || { timeline: [{ at: 0, phase: 'Running' }] };
}
const templateHash = (t) => crypto.createHash('sha256').update(JSON.stringify(t || {})).digest('hex').slice(0, 10);
function deployPods(ns, dep) {
  return [...store.values()].filter((o) => o.kind === 'Pod' && o.metadata.namespace === ns && (o.metadata.ownerReferences || []).some((ref) => ref.uid === dep.metadata.uid));
}
function removePod(ns, name) {
  const podRes = RESOURCES.find((x) => x.kind === 'Pod');
  remove(podRes, ns, name);
  const rt = podRuntime.get(`${ns}/${name}`);
  if (rt) { rt.done = true; for (const fn of rt.listeners) fn(null); podRuntime.delete(`${ns}/${name}`); }
}
function syncDeployment(dep, prevTemplate) {
  const ns = dep.metadata.namespace, name = dep.metadata.name;
  const hash = templateHash(dep.spec.template);
  if (prevTemplate !== undefined && templateHash(prevTemplate) !== hash) dep.metadata.generation = (dep.metadata.generation || 1) + 1;
  const want = dep.spec.replicas !== undefined ? dep.spec.replicas : 1;
  const podRes = RESOURCES.find((x) => x.kind === 'Pod');
  let pods = deployPods(ns, dep);
  for (const p of pods) if (p.metadata.labels['pod-template-hash'] !== hash) removePod(ns, p.metadata.name);
  pods = deployPods(ns, dep);
  for (let i = want; i < pods.length; i++) removePod(ns, pods[i].metadata.name);
  const script = deployScript(name);
  const base = Date.now();
  for (let i = pods.length; i < want; i++) {
    const rand = crypto.randomBytes(3).toString('hex').slice(0, 5);
    const tmpl = clone(dep.spec.template || {});
    const labels = Object.assign({}, (tmpl.metadata && tmpl.metadata.labels) || {}, { 'pod-template-hash': hash });
    const pod = {
      apiVersion: 'v1', kind: 'Pod',
      metadata: newMeta({
        name: `${name}-${hash.slice(0, 8)}-${rand}`, labels,
        annotations: Object.assign({}, (tmpl.metadata && tmpl.metadata.annotations) || {}),
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: `${name}-${hash.slice(0, 8)}`, uid: dep.metadata.uid, controller: true, blockOwnerDeletion: true }],
      }, ns),
      spec: Object.assign({ restartPolicy: 'Always' }, tmpl.spec || {}),
      status: { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False' }] },
    };
    put(podRes, pod, 'ADDED');
    podRuntime.set(`${ns}/${pod.metadata.name}`, { start: Date.now(), logs: [], previous: null, done: false, listeners: new Set() });
    const timeline = (script.pods && script.pods[i] && script.pods[i].timeline) || script.timeline || [];
    for (const step of timeline)
      setTimeout(() => playStep(ns, { deployment: name }, pod.metadata.name, i, step, base + (step.at || 0) * timeScale), (step.at || 0) * timeScale);
  }
  refreshDeployment(ns, name);
}
function refreshDeployment(ns, name, explicit) {
  const depRes = RESOURCES.find((x) => x.kind === 'Deployment');
  const dep = store.get(key(depRes, ns, name));
  if (!dep) return;
  const hash = templateHash(dep.spec.template);
  const pods = deployPods(ns, dep);
  const ready = (p) => p.status.phase === 'Running' && (p.status.containerStatuses || []).every((c) => c.ready !== false);
  const st = dep.status || (dep.status = {});
  const want = dep.spec.replicas !== undefined ? dep.spec.replicas : 1;
  st.observedGeneration = dep.metadata.generation || 1;
  st.replicas = pods.length;
  st.updatedReplicas = pods.filter((p) => p.metadata.labels['pod-template-hash'] === hash).length;
  st.readyReplicas = pods.filter(ready).length;
  st.availableReplicas = st.readyReplicas;
  st.unavailableReplicas = Math.max(0, want - st.availableReplicas);
  const conds = (st.conditions || []).filter((c) => !(explicit && c.type === explicit.type));
  const set = (type, status, reason, message) => {
    const i = conds.findIndex((c) => c.type === type);
    const c = { type, status, reason, message, lastUpdateTime: now(), lastTransitionTime: now() };
    if (i < 0) conds.push(c); else if (!(conds[i].reason === 'ProgressDeadlineExceeded')) conds[i] = c;
  };
  if (explicit) conds.push({ type: explicit.type, status: explicit.status || 'False', reason: explicit.reason || '', message: explicit.message || '', lastUpdateTime: now(), lastTransitionTime: now() });
  set('Available', st.availableReplicas >= want ? 'True' : 'False', st.availableReplicas >= want ? 'MinimumReplicasAvailable' : 'MinimumReplicasUnavailable', st.availableReplicas >= want ? 'Deployment has minimum availability.' : 'Deployment does not have minimum availability.');
  const done = st.updatedReplicas === want && st.availableReplicas >= want && st.replicas === want;
  set('Progressing', 'True', done ? 'NewReplicaSetAvailable' : 'ReplicaSetUpdated', done ? `ReplicaSet "${name}-${hash.slice(0, 8)}" has successfully progressed.` : `ReplicaSet "${name}-${hash.slice(0, 8)}" is progressing.`);
  st.conditions = conds;
  put(depRes, dep, 'MODIFIED');
}

// A pod created on its own (not by a Job) plays the timeline of scenario.pods whose key is its
// name or a prefix ending in '*'. With "run": true its container's command really runs here, so
// that the API server's pod proxy has something to reach: "dlk" is $DLK_APISERVER_DLK, paths
// under /mnt/pvc/ are under $DLK_APISERVER_PVC_ROOT (where a test keeps its "claims"), and
// "--listen :PORT" becomes a free port on 127.0.0.1 ("--port N" that port: a model server). The pod turns Running when the process has
// started and Succeeded or Failed (with its exit code and the end of its stderr as the message)
// when it exits; deleting the pod stops it (SIGTERM).
function podScript(name) {
  const pods = scenario.pods || {};
  if (pods[name]) return pods[name];
  for (const k of Object.keys(pods)) if (k.endsWith('*') && name.startsWith(k.slice(0, -1))) return pods[k];
  return null;
}

const running = new Map(); // pod key -> {child, port}
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => { const port = srv.address().port; srv.close(() => resolve(port)); });
    srv.on('error', reject);
  });
}

async function runPod(ns, name) {
  const podRes = RESOURCES.find((x) => x.kind === 'Pod');
  const pod = store.get(key(podRes, ns, name));
  if (!pod) return;
  const c = (pod.spec.containers || [])[0] || {};
  const pvc = process.env.DLK_APISERVER_PVC_ROOT || '';
  const mapPath = (v) => (typeof v === 'string' && v.startsWith('/mnt/pvc/') && pvc ? pvc + v.slice('/mnt/pvc'.length) : v);
  const port = await freePort();
  const argv = (c.command || []).concat(c.args || []).map(mapPath);
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--listen' && i + 1 < argv.length) argv[i + 1] = `127.0.0.1:${port}`;
    else if (argv[i] === '--port' && i + 1 < argv.length) argv[i + 1] = `${port}`;
  }
  if (argv[0] === 'dlk') argv[0] = process.env.DLK_APISERVER_DLK || 'dlk';
  const env = { PATH: process.env.PATH, HOME: process.env.HOME || '/', NO_COLOR: '1' };
  for (const e of c.env || []) if (e.value !== undefined) env[e.name] = mapPath(e.value);
  const child = spawn(argv[0], argv.slice(1), { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr = (stderr + d.toString()).slice(-4096); });
  running.set(`${ns}/${name}`, { child, port });
  child.on('error', (e) => { stderr += e.message; });
  child.on('exit', (code, sig) => {
    running.delete(`${ns}/${name}`);
    const exitCode = code !== null ? code : 128 + (os.constants.signals[sig] || 0);
    playStep(ns, null, name, 0, { phase: exitCode === 0 ? 'Succeeded' : 'Failed', exitCode, message: stderr.trim().split('\n').slice(-3).join('\n') });
  });
  // Running once it answers on its port, as a readiness probe would see it
  for (let i = 0; i < 100 && running.has(`${ns}/${name}`); i++) {
    const up = await new Promise((r) => { const s2 = net.connect(port, '127.0.0.1', () => { s2.destroy(); r(true); }); s2.on('error', () => r(false)); });
    if (up) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  if (running.has(`${ns}/${name}`)) playStep(ns, null, name, 0, { phase: 'Running' });
}

function startPod(pod) {
  const ns = pod.metadata.namespace, name = pod.metadata.name;
  pod.status = { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False' }] };
  const pk = `${ns}/${name}`;
  podRuntime.set(pk, { start: Date.now(), logs: [], previous: null, done: false, listeners: new Set() });
  const script = podScript(name) || {};
  const jt = [];
  timers.set(`pod:${pk}`, jt);
  for (const step of script.timeline || []) jt.push(setTimeout(() => playStep(ns, null, name, 0, step), (step.at || 0) * timeScale));
  if (script.run) jt.push(setTimeout(() => { runPod(ns, name).catch(() => {}); }, (script.runAt || 0) * timeScale));
}

function stopPod(ns, name) {
  for (const t of timers.get(`pod:${ns}/${name}`) || []) clearTimeout(t);
  timers.delete(`pod:${ns}/${name}`);
  const r = running.get(`${ns}/${name}`);
  if (r) { running.delete(`${ns}/${name}`); r.child.removeAllListeners('exit'); r.child.kill('SIGTERM'); }
  const rt = podRuntime.get(`${ns}/${name}`);
  if (rt) { rt.done = true; for (const fn of rt.listeners) fn(null); podRuntime.delete(`${ns}/${name}`); }
}

// The API server's pod proxy (/api/v1/namespaces/NS/pods/NAME[:PORT]/proxy/PATH): the request
// goes, less the user's credentials, to the pod's process (see runPod); a pod that is not
// Running, or runs nothing, gets the real server's 503.
function podProxy(req, res, u, m, a) {
  const ns = decodeURIComponent(m[1]), name = decodeURIComponent(m[2]);
  const podRes = RESOURCES.find((x) => x.kind === 'Pod');
  const verb = { GET: 'get', HEAD: 'get', POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: 'delete' }[req.method] || 'get';
  for (const f of scenario.forbid || []) {
    if ((!f.verb || f.verb === verb) && f.resource === 'pods/proxy')
      return fail(res, 403, 'Forbidden', `pods "${name}" is forbidden: User "${a.user}" cannot ${verb} resource "pods/proxy" in API group "" in the namespace "${ns}"`, { name, kind: 'pods' });
  }
  const pod = store.get(key(podRes, ns, name));
  if (!pod) return fail(res, 404, 'NotFound', `pods "${name}" not found`, { name, kind: 'pods' });
  const r = running.get(`${ns}/${name}`);
  if (pod.status.phase !== 'Running' || !r) return fail(res, 503, 'ServiceUnavailable', `error trying to reach service: pod ${name} is not running`);
  const headers = Object.assign({}, req.headers);
  delete headers.authorization; delete headers.host;
  const up = http.request({ host: '127.0.0.1', port: r.port, method: req.method, path: (m[4] || '/') + u.search, headers }, (ur) => {
    res.writeHead(ur.statusCode, ur.headers);
    ur.pipe(res);
  });
  up.on('error', (e) => { if (!res.headersSent) fail(res, 503, 'ServiceUnavailable', `error trying to reach service: ${e.message}`); else res.destroy(); });
  req.pipe(up);
}

function containerName(pod) {
  const cs = (pod.spec && pod.spec.containers) || [];
  return cs.length ? cs[0].name : 'main';
}

function playStep(ns, jobName, podName, index, step, at) {
  const podRes = RESOURCES.find((x) => x.kind === 'Pod');
  const pod = store.get(key(podRes, ns, podName));
  const rt = podRuntime.get(`${ns}/${podName}`);
  if (!pod || !rt) return;
  const involved = { kind: 'Pod', name: podName, namespace: ns, apiVersion: 'v1', uid: pod.metadata.uid };
  if (step.log !== undefined) {
    const lines = Array.isArray(step.log) ? step.log : [step.log];
    for (const l of lines) {
      const entry = { t: at === undefined ? Date.now() : at, line: String(l), noNewline: !!step.noNewline, split: !!step.split };
      rt.logs.push(entry);
      for (const fn of rt.listeners) fn(entry);
    }
  }
  if (step.event) addEvent(ns, involved, step.event.type || 'Normal', step.event.reason, step.event.message);
  if (step.phase || step.waiting || step.restarts !== undefined) {
    const cname = containerName(pod);
    const cs = { name: cname, ready: step.phase === 'Running' && step.ready !== false, restartCount: step.restarts || 0, image: ((pod.spec.containers || [])[0] || {}).image || '' };
    if (step.waiting) cs.state = { waiting: { reason: step.waiting.reason, message: step.waiting.message || '' } };
    else if (step.phase === 'Running') cs.state = { running: { startedAt: now() } };
    else if (step.phase === 'Succeeded' || step.phase === 'Failed')
      cs.state = { terminated: { exitCode: step.exitCode !== undefined ? step.exitCode : (step.phase === 'Succeeded' ? 0 : 1), reason: step.reason || (step.phase === 'Succeeded' ? 'Completed' : 'Error'), message: step.message || '', finishedAt: now() } };
    if (step.lastState) cs.lastState = { terminated: step.lastState };
    if (step.phase) pod.status.phase = step.phase;
    pod.status.containerStatuses = [cs];
    if (step.phase && step.phase !== 'Pending') pod.status.conditions = [{ type: 'PodScheduled', status: 'True' }, { type: 'Ready', status: step.phase === 'Running' ? 'True' : 'False' }];
    if (step.reason && step.phase === 'Pending') pod.status.reason = step.reason;
    put(podRes, pod, 'MODIFIED');
    if (step.phase === 'Succeeded' || step.phase === 'Failed') {
      rt.done = true;
      for (const fn of rt.listeners) fn(null);
    }
  }
  if (step.annotations) {
    const jobRes = RESOURCES.find((x) => x.kind === 'Job');
    const job = store.get(key(jobRes, ns, jobName));
    if (job) { job.metadata.annotations = Object.assign(job.metadata.annotations || {}, step.annotations); put(jobRes, job, 'MODIFIED'); }
  }
  if (jobName && jobName.deployment) {
    if (step.phase || step.waiting || step.deploymentCondition || step.restarts !== undefined) refreshDeployment(ns, jobName.deployment, step.deploymentCondition);
    return;
  }
  if (step.phase || step.jobCondition) refreshJob(ns, jobName, step.jobCondition);
}

function refreshJob(ns, name, explicit) {
  const jobRes = RESOURCES.find((x) => x.kind === 'Job');
  const job = store.get(key(jobRes, ns, name));
  if (!job) return;
  const pods = [...store.values()].filter((o) => o.kind === 'Pod' && o.metadata.namespace === ns && o.metadata.labels && o.metadata.labels['job-name'] === name);
  const st = job.status || (job.status = {});
  st.active = pods.filter((p) => p.status.phase === 'Pending' || p.status.phase === 'Running').length;
  st.ready = pods.filter((p) => p.status.phase === 'Running').length;
  st.succeeded = pods.filter((p) => p.status.phase === 'Succeeded').length;
  st.failed = pods.filter((p) => p.status.phase === 'Failed').length;
  if (job.spec.completionMode === 'Indexed') st.completedIndexes = pods.filter((p) => p.status.phase === 'Succeeded').map((p) => p.metadata.labels['batch.kubernetes.io/job-completion-index']).sort().join(',');
  const conds = st.conditions || [];
  const has = (t) => conds.some((c) => c.type === t);
  const want = job.spec.completions || job.spec.parallelism || 1;
  const backoff = job.spec.backoffLimit !== undefined ? job.spec.backoffLimit : 6;
  const cond = (type, reason, message) => ({ type, status: 'True', reason, message, lastProbeTime: now(), lastTransitionTime: now() });
  if (explicit) {
    if (!has(explicit.type)) conds.push(cond(explicit.type, explicit.reason || '', explicit.message || ''));
  } else if (!has('Complete') && !has('Failed')) {
    if (st.succeeded >= want) {
      conds.push(cond('SuccessCriteriaMet', 'CompletionsReached', 'Reached expected number of succeeded pods'));
      conds.push(cond('Complete', 'CompletionsReached', 'Reached expected number of succeeded pods'));
      st.completionTime = now();
    } else if (st.failed > backoff) {
      conds.push(cond('FailureTarget', 'BackoffLimitExceeded', 'Job has reached the specified backoff limit'));
      conds.push(cond('Failed', 'BackoffLimitExceeded', 'Job has reached the specified backoff limit'));
    }
  }
  st.conditions = conds;
  put(jobRes, job, 'MODIFIED');
}

let eventSeq = 0;
function addEvent(ns, involved, type, reason, message) {
  const evRes = RESOURCES.find((x) => x.kind === 'Event');
  const t = now();
  const ev = {
    apiVersion: 'v1', kind: 'Event',
    metadata: newMeta({ name: `${involved.name}.${(++eventSeq).toString(16).padStart(12, '0')}` }, ns),
    involvedObject: involved, reason, message, type, count: 1, firstTimestamp: t, lastTimestamp: t,
    source: { component: involved.kind === 'Job' ? 'job-controller' : 'default-scheduler' },
  };
  put(evRes, ev, 'ADDED');
}

function stopJob(ns, name) {
  const t = timers.get(`${ns}/${name}`);
  if (t) t.forEach(clearTimeout);
  timers.delete(`${ns}/${name}`);
}

// ---------- faults ----------
function findFault(req, u, kind) {
  for (const [i, f] of (scenario.faults || []).entries()) {
    if (kind && !f[kind]) continue;
    if (!kind && (f.resetAfterEvents !== undefined || f.resetAfterLines !== undefined)) continue;
    if (f.method && f.method !== req.method) continue;
    if (f.path && !u.pathname.startsWith(f.path)) continue;
    if (f.query && !u.search.includes(f.query)) continue;
    const n = faultCounts.get(i) || 0;
    if (f.count !== undefined && n >= f.count) continue;
    faultCounts.set(i, n + 1);
    return f;
  }
  return null;
}

// ---------- auth ----------
const auth = scenario.auth || {};
const tokens = new Set(auth.tokens || ['test-token']);
function authenticate(req) {
  const h = req.headers.authorization || '';
  let user = null;
  if (h.startsWith('Bearer ')) {
    const t = h.slice(7).trim();
    if (tokens.has(t)) user = (auth.tokenUsers && auth.tokenUsers[t]) || 'token-user';
    else return { error: 'invalid bearer token' };
  } else if (h.startsWith('Basic ')) {
    const up = Buffer.from(h.slice(6), 'base64').toString();
    if ((auth.basic || []).includes(up)) user = up.split(':')[0];
    else return { error: 'invalid username or password' };
  } else if (req.socket.authorized) {
    const cert = req.socket.getPeerCertificate();
    user = cert && cert.subject && cert.subject.CN;
  }
  if (!user) return { error: 'no credentials' };
  if (auth.requireImpersonate) {
    const want = auth.requireImpersonate;
    const got = req.headers['impersonate-user'];
    const groups = req.rawHeaders.reduce((a, v, i, arr) => (i % 2 === 0 && v.toLowerCase() === 'impersonate-group' ? a.concat(arr[i + 1]) : a), []);
    if (got !== want.user || JSON.stringify(groups) !== JSON.stringify(want.groups || []))
      return { user, forbidden: `users "${user}" is forbidden: impersonation of "${got || ''}" with groups [${groups.join(' ')}] is not what this server expects` };
    user = got;
  }
  return { user };
}

// ---------- discovery ----------
function resourceList(group, version) {
  const rs = RESOURCES.filter((r) => r.group === group && r.version === version);
  const list = [];
  for (const r of rs) {
    list.push({ name: r.plural, singularName: r.singular, namespaced: true, kind: r.kind, verbs: VERBS.concat(['deletecollection']), shortNames: r.short.length ? r.short : undefined });
    if (r.kind === 'Pod') list.push({ name: 'pods/log', singularName: '', namespaced: true, kind: 'Pod', verbs: ['get'] });
    if (r.kind === 'Job' || r.kind === 'Pod' || r.kind === 'CronJob') list.push({ name: `${r.plural}/status`, singularName: '', namespaced: true, kind: r.kind, verbs: ['get', 'patch', 'update'] });
  }
  list.push(...(group === '' ? [{ name: 'namespaces', singularName: 'namespace', namespaced: false, kind: 'Namespace', verbs: ['get', 'list'], shortNames: ['ns'] }] : []));
  return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: group ? `${group}/${version}` : version, resources: list };
}
function groupList() {
  const gvs = [['batch', 'v1'], ['rbac.authorization.k8s.io', 'v1'], ['apps', 'v1'], ['autoscaling', 'v2'], ['policy', 'v1']];
  if (scenario.gatewayAPI) gvs.push(['gateway.networking.k8s.io', 'v1']);
  const groups = gvs.map(([g, v]) => ({ name: g, versions: [{ groupVersion: `${g}/${v}`, version: v }], preferredVersion: { groupVersion: `${g}/${v}`, version: v } }));
  return { kind: 'APIGroupList', apiVersion: 'v1', groups };
}

// ---------- OpenAPI v3 ----------
// kubectl asks the OpenAPI v3 document of a group/version whether PATCH takes the
// fieldValidation parameter; when it does, kubectl leaves validation to the server. Only the
// paths (with their group-version-kind) are published, no schemas.
const GV_PATHS = ['api/v1', 'apis/batch/v1', 'apis/rbac.authorization.k8s.io/v1', 'apis/apps/v1', 'apis/autoscaling/v2', 'apis/policy/v1']
  .concat(scenario.gatewayAPI ? ['apis/gateway.networking.k8s.io/v1'] : []);
function openapiRoot() {
  const paths = {};
  for (const p of GV_PATHS) paths[p] = { serverRelativeURL: `/openapi/v3/${p}?hash=0123456789ABCDEF` };
  return { paths };
}
function openapiGV(p) {
  if (!GV_PATHS.includes(p)) return null;
  const paths = {};
  for (const r of RESOURCES) {
    if (`${r.group ? 'apis/' + r.group : 'api'}/${r.version}` !== p) continue;
    const gvk = { group: r.group, version: r.version, kind: r.kind };
    const params = ['dryRun', 'fieldManager', 'fieldValidation', 'force'].map((n) => ({ name: n, in: 'query', schema: { type: n === 'force' ? 'boolean' : 'string' } }));
    paths[`/${p}/namespaces/{namespace}/${r.plural}/{name}`] = {
      get: { operationId: `read${r.kind}`, 'x-kubernetes-action': 'get', 'x-kubernetes-group-version-kind': gvk, responses: { 200: { description: 'OK' } } },
      patch: { operationId: `patch${r.kind}`, parameters: params, 'x-kubernetes-action': 'patch', 'x-kubernetes-group-version-kind': gvk, responses: { 200: { description: 'OK' } } },
    };
  }
  return { openapi: '3.0.0', info: { title: 'Kubernetes', version: 'v1.32.0' }, paths, components: { schemas: {} } };
}

// ---------- request routing ----------
function readBody(req, limit) {
  return new Promise((resolve, reject) => {
    const chunks = []; let n = 0;
    req.on('data', (c) => { n += c.length; if (n > limit) { reject(new Error('too large')); req.destroy(); } else chunks.push(c); });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function parsePath(p) {
  // /api/v1/namespaces/NS/PLURAL[/NAME[/SUB]]  or /apis/G/V/namespaces/NS/...
  const seg = p.split('/').filter(Boolean).map(decodeURIComponent);
  let group, version, rest;
  if (seg[0] === 'api' && seg.length >= 2) { group = ''; version = seg[1]; rest = seg.slice(2); } else if (seg[0] === 'apis' && seg.length >= 3) { group = seg[1]; version = seg[2]; rest = seg.slice(3); } else return null;
  let ns = null;
  if (rest[0] === 'namespaces' && rest.length >= 3) { ns = rest[1]; rest = rest.slice(2); }
  if (!rest.length) return { group, version, discovery: true };
  const r = RESOURCES.find((x) => x.group === group && x.version === version && x.plural === rest[0]);
  if (rest[0] === 'namespaces' && group === '') return { group, version, namespaces: true, name: rest[1] };
  return { group, version, res: r, plural: rest[0], ns, name: rest[1] || null, sub: rest[2] || null };
}

function logLine(req, u, code, user) {
  if (logFd === null) return;
  const h = {};
  for (const k of ['content-type', 'accept', 'impersonate-user', 'user-agent']) if (req.headers[k]) h[k] = req.headers[k];
  const groups = req.rawHeaders.filter((v, i, arr) => i % 2 === 1 && arr[i - 1].toLowerCase() === 'impersonate-group');
  if (groups.length) h['impersonate-group'] = groups;
  fs.writeSync(logFd, JSON.stringify({ method: req.method, path: u.pathname, query: u.search, code, user, headers: h, auth: (req.headers.authorization || '').split(' ')[0], port: req.socket.remotePort }) + '\n');
}

async function handle(req, res) {
  const u = new URL(req.url, 'https://x');
  const a = authenticate(req);
  let code = 0;
  const origWriteHead = res.writeHead.bind(res);
  res.writeHead = (c, ...rest) => { code = c; logLine(req, u, c, a.user); return origWriteHead(c, ...rest); };
  if (a.error) return fail(res, 401, 'Unauthorized', 'Unauthorized');
  if (a.forbidden) return fail(res, 403, 'Forbidden', a.forbidden);
  const fault = findFault(req, u, null);
  if (fault) {
    if (fault.delayMs) await new Promise((r) => setTimeout(r, fault.delayMs));
    if (fault.status) {
      const reasons = { 410: 'Expired', 429: 'TooManyRequests', 500: 'InternalError', 503: 'ServiceUnavailable', 504: 'Timeout' };
      const hdr = fault.retryAfter !== undefined ? { 'Retry-After': String(fault.retryAfter) } : {};
      const det = fault.retryAfter !== undefined ? { retryAfterSeconds: fault.retryAfter } : undefined;
      return fail(res, fault.status, reasons[fault.status] || 'InternalError', fault.message || `injected fault ${fault.status}`, det, hdr);
    }
    if (fault.truncate) {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': 1000 });
      res.write('{"kind":"Status","apiVers');
      return setTimeout(() => req.socket.destroy(), 20);
    }
    if (fault.reset) return req.socket.destroy();
  }
  if (u.pathname === '/version') return sendJSON(res, 200, { major: '1', minor: '32', gitVersion: 'v1.32.0-dlk-test', platform: 'linux/amd64' });
  if (u.pathname === '/healthz' || u.pathname === '/readyz' || u.pathname === '/livez') { res.writeHead(200, { 'Content-Type': 'text/plain' }); return res.end('ok'); }
  if (u.pathname === '/api') return sendJSON(res, 200, { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: req.socket.localAddress + ':' + req.socket.localPort }] });
  if (u.pathname === '/apis') return sendJSON(res, 200, groupList());
  if (u.pathname === '/openapi/v3') return sendJSON(res, 200, openapiRoot());
  if (u.pathname.startsWith('/openapi/v3/')) {
    const doc = openapiGV(u.pathname.slice('/openapi/v3/'.length));
    if (doc) return sendJSON(res, 200, doc);
  }
  if (u.pathname.startsWith('/openapi')) return fail(res, 404, 'NotFound', 'the server could not find the requested resource');
  if (u.pathname === '/_test/compact') { oldestRV = rv; return sendJSON(res, 200, { resourceVersion: String(rv) }); }

  const pm = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/:]+)(:[0-9]+)?\/proxy(\/.*)?$/.exec(u.pathname);
  if (pm) return podProxy(req, res, u, pm, a);
  const p = parsePath(u.pathname);
  if (!p) return fail(res, 404, 'NotFound', 'the server could not find the requested resource');
  if (p.discovery) {
    const known = (p.group === '' && p.version === 'v1') || RESOURCES.some((r) => r.group === p.group && r.version === p.version);
    if (!known) return fail(res, 404, 'NotFound', 'the server could not find the requested resource');
    return sendJSON(res, 200, resourceList(p.group, p.version));
  }
  if (p.namespaces) {
    if (p.name) return sendJSON(res, 200, { kind: 'Namespace', apiVersion: 'v1', metadata: { name: p.name }, status: { phase: 'Active' } });
    return sendJSON(res, 200, { kind: 'NamespaceList', apiVersion: 'v1', metadata: { resourceVersion: String(rv) }, items: [] });
  }
  if (!p.res) return fail(res, 404, 'NotFound', 'the server could not find the requested resource');
  const r = p.res;
  const verb = { GET: p.name ? 'get' : (u.searchParams.get('watch') === '1' || u.searchParams.get('watch') === 'true' ? 'watch' : 'list'), POST: 'create', PATCH: 'patch', PUT: 'update', DELETE: 'delete' }[req.method];
  for (const f of scenario.forbid || []) {
    if ((!f.verb || f.verb === verb) && (!f.resource || f.resource === r.plural))
      return fail(res, 403, 'Forbidden', `${r.plural}${r.group ? '.' + r.group : ''}${p.name ? ` "${p.name}"` : ''} is forbidden: User "${a.user}" cannot ${verb} resource "${r.plural}" in API group "${r.group}" in the namespace "${p.ns}"`, { name: p.name || undefined, group: r.group, kind: r.plural });
  }
  // across namespaces (kubectl get -A): lists and watches only, as for a namespaced resource
  if (!p.ns && (req.method !== 'GET' || p.name || p.sub)) return fail(res, 404, 'NotFound', 'the server could not find the requested resource');
  let body = '';
  if (req.method === 'POST' || req.method === 'PATCH' || req.method === 'PUT' || req.method === 'DELETE') {
    try { body = await readBody(req, 3 << 20); } catch (e) { return fail(res, 413, 'RequestEntityTooLarge', 'the request is too large'); }
  }
  if (p.sub === 'log' && r.kind === 'Pod' && req.method === 'GET') return podLog(req, res, u, p);
  if (p.sub) return fail(res, 404, 'NotFound', 'the server could not find the requested resource');
  switch (req.method) {
    case 'GET':
      if (p.name) {
        const o = store.get(key(r, p.ns, p.name));
        if (!o) return fail(res, 404, 'NotFound', `${resName(r)} "${p.name}" not found`, { name: p.name, group: r.group, kind: r.plural });
        return sendJSON(res, 200, wantsTable(req) ? tableFor(r, [o], o.metadata.resourceVersion) : o);
      }
      if (verb === 'watch') return watch(req, res, u, p);
      return list(res, u, p, req);
    case 'POST': return create(res, u, p, body);
    case 'PATCH': return patch(req, res, u, p, body);
    case 'DELETE': return del(res, u, p, body);
    default: return fail(res, 405, 'MethodNotAllowed', `${req.method} is not supported`);
  }
}

function parseObject(res, body) {
  try {
    const o = JSON.parse(body);
    if (!o || typeof o !== 'object' || Array.isArray(o)) throw new Error('not an object');
    return o;
  } catch (e) {
    fail(res, 400, 'BadRequest', `the body of the request was in an unknown format: ${e.message}`);
    return null;
  }
}

function checkKind(res, r, o, p) {
  if (o.kind && o.kind !== r.kind) { fail(res, 400, 'BadRequest', `the API version in the data (${o.apiVersion}) does not match the expected API version (${gv(r)}) or kind ${o.kind} != ${r.kind}`); return false; }
  if (o.metadata && o.metadata.namespace && o.metadata.namespace !== p.ns) { fail(res, 400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request'); return false; }
  return true;
}

function create(res, u, p, body) {
  const r = p.res;
  const o = parseObject(res, body);
  if (!o || !checkKind(res, r, o, p)) return;
  o.kind = r.kind; o.apiVersion = gv(r); o.metadata = o.metadata || {};
  const inv = validate(r, o);
  if (inv) return sendJSON(res, 422, inv);
  if (store.has(key(r, p.ns, o.metadata.name))) return fail(res, 409, 'AlreadyExists', `${resName(r)} "${o.metadata.name}" already exists`, { name: o.metadata.name, group: r.group, kind: r.plural });
  if (u.searchParams.get('dryRun') === 'All') return sendJSON(res, 201, o);
  newMeta(o.metadata, p.ns);
  if (r.kind === 'Pod') startPod(o);
  put(r, o, 'ADDED');
  if (r.kind === 'Job') startJob(r, o);
  if (r.kind === 'Deployment') syncDeployment(o);
  sendJSON(res, 201, store.get(key(r, p.ns, o.metadata.name)));
}

function patch(req, res, u, p, body) {
  const r = p.res;
  const ct = (req.headers['content-type'] || '').split(';')[0].trim();
  const k = key(r, p.ns, p.name);
  const cur = store.get(k);
  if (ct === 'application/apply-patch+yaml') {
    const fm = u.searchParams.get('fieldManager');
    if (!fm) return fail(res, 400, 'BadRequest', 'PATCH request is not valid: fieldManager is required for apply requests');
    const o = parseObject(res, body);
    if (!o || !checkKind(res, r, o, p)) return;
    if (!o.metadata || o.metadata.name !== p.name) return fail(res, 400, 'BadRequest', 'the name of the object does not match the name on the URL');
    o.kind = r.kind; o.apiVersion = gv(r);
    const inv = validate(r, cur ? deepMerge(clone(cur), o) : o);
    if (inv) return sendJSON(res, 422, inv);
    const mf = [{ manager: fm, operation: 'Apply', apiVersion: gv(r), time: now(), fieldsType: 'FieldsV1' }];
    if (u.searchParams.get('dryRun') === 'All') return sendJSON(res, cur ? 200 : 201, o);
    if (cur) {
      const prevTemplate = r.kind === 'Deployment' ? clone(cur.spec.template) : undefined;
      // apply owns the fields it sends: a Deployment's template and replicas are replaced, not merged
      if (r.kind === 'Deployment' && o.spec) cur.spec.template = o.spec.template;
      deepMerge(cur, o);
      cur.metadata.managedFields = mf;
      put(r, cur, 'MODIFIED');
      if (r.kind === 'Deployment') syncDeployment(cur, prevTemplate);
      return sendJSON(res, 200, store.get(k));
    }
    newMeta(o.metadata, p.ns);
    o.metadata.managedFields = mf;
    put(r, o, 'ADDED');
    if (r.kind === 'Job') startJob(r, o);
    if (r.kind === 'Deployment') syncDeployment(o);
    return sendJSON(res, 201, store.get(k));
  }
  if (ct !== 'application/merge-patch+json' && ct !== 'application/strategic-merge-patch+json')
    return fail(res, 415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`);
  if (!cur) return fail(res, 404, 'NotFound', `${resName(r)} "${p.name}" not found`, { name: p.name, group: r.group, kind: r.plural });
  const patchObj = parseObject(res, body);
  if (!patchObj) return;
  // a patch that carries a resourceVersion is a precondition, as in Kubernetes: stale is a 409
  const prv = patchObj.metadata && patchObj.metadata.resourceVersion;
  if (prv && prv !== cur.metadata.resourceVersion)
    return fail(res, 409, 'Conflict', `Operation cannot be fulfilled on ${resName(r)} "${p.name}": the object has been modified; please apply your changes to the latest version and try again`, { name: p.name, group: r.group, kind: r.plural });
  const merged = mergePatch(clone(cur), patchObj);
  merged.metadata.name = cur.metadata.name; merged.metadata.namespace = cur.metadata.namespace; merged.metadata.uid = cur.metadata.uid;
  put(r, merged, 'MODIFIED');
  sendJSON(res, 200, merged);
}

function del(res, u, p, body) {
  const r = p.res;
  let policy = u.searchParams.get('propagationPolicy');
  if (!policy && body) { try { policy = JSON.parse(body).propagationPolicy || null; } catch (e) { /* DeleteOptions is optional */ } }
  const cur = store.get(key(r, p.ns, p.name));
  if (!cur) return fail(res, 404, 'NotFound', `${resName(r)} "${p.name}" not found`, { name: p.name, group: r.group, kind: r.plural });
  const headers = {};
  if (r.kind === 'Job') {
    stopJob(p.ns, p.name);
    if (!policy) headers.Warning = '299 - "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning"';
    if (policy === 'Background' || policy === 'Foreground') {
      const podRes = RESOURCES.find((x) => x.kind === 'Pod');
      for (const o of [...store.values()]) {
        if (o.kind === 'Pod' && o.metadata.namespace === p.ns && (o.metadata.ownerReferences || []).some((ref) => ref.uid === cur.metadata.uid)) {
          remove(podRes, p.ns, o.metadata.name);
          const rt = podRuntime.get(`${p.ns}/${o.metadata.name}`);
          if (rt) { rt.done = true; for (const fn of rt.listeners) fn(null); podRuntime.delete(`${p.ns}/${o.metadata.name}`); }
        }
      }
    }
  }
  if (r.kind === 'Deployment') for (const o of deployPods(p.ns, cur)) removePod(p.ns, o.metadata.name);
  if (r.kind === 'Pod') stopPod(p.ns, p.name);
  const gone = remove(r, p.ns, p.name);
  sendJSON(res, 200, gone, headers);
}

function selected(u, p) {
  const ls = parseLabelSelector(u.searchParams.get('labelSelector'));
  const fsel = parseFieldSelector(u.searchParams.get('fieldSelector'));
  return (o) => o.kind === p.res.kind && (!p.ns || o.metadata.namespace === p.ns) && labelsMatch(ls, o.metadata.labels) && fieldsMatch(fsel, o);
}

// ---------- Table (what kubectl get prints) ----------
function age(ts) {
  const s = Math.max(0, Math.floor((Date.now() - Date.parse(ts)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  return `${Math.floor(s / 3600)}h`;
}
function wantsTable(req) { return /as=Table/.test(req.headers.accept || ''); }
function tableFor(r, objs, listRV) {
  const col = (name, type, description) => ({ name, type, format: name === 'Name' ? 'name' : '', description, priority: 0 });
  let cols, cells;
  if (r.kind === 'Pod') {
    cols = [col('Name', 'string', 'name'), col('Ready', 'string', 'ready containers'), col('Status', 'string', 'phase or reason'), col('Restarts', 'string', 'restarts'), col('Age', 'string', 'age')];
    cells = (o) => {
      const cs = (o.status && o.status.containerStatuses) || [];
      const n = ((o.spec && o.spec.containers) || []).length || 1;
      const st = cs[0] && cs[0].state;
      const reason = (st && st.waiting && st.waiting.reason) || (st && st.terminated && o.status.phase === 'Failed' && st.terminated.reason) || (o.status.phase === 'Succeeded' ? 'Completed' : o.status.phase);
      return [o.metadata.name, `${cs.filter((c) => c.ready).length}/${n}`, reason, String(cs.reduce((a, c) => a + (c.restartCount || 0), 0)), age(o.metadata.creationTimestamp)];
    };
  } else if (r.kind === 'Job') {
    cols = [col('Name', 'string', 'name'), col('Status', 'string', 'status'), col('Completions', 'string', 'completions'), col('Age', 'string', 'age')];
    cells = (o) => {
      const conds = ((o.status && o.status.conditions) || []).map((c) => c.type);
      const status = conds.includes('Complete') ? 'Complete' : conds.includes('Failed') ? 'Failed' : o.spec.suspend ? 'Suspended' : 'Running';
      return [o.metadata.name, status, `${(o.status && o.status.succeeded) || 0}/${o.spec.completions || 1}`, age(o.metadata.creationTimestamp)];
    };
  } else {
    cols = [col('Name', 'string', 'name'), col('Age', 'string', 'age')];
    cells = (o) => [o.metadata.name, age(o.metadata.creationTimestamp)];
  }
  const rows = objs.map((o) => ({ cells: cells(o), object: { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata } }));
  return { kind: 'Table', apiVersion: 'meta.k8s.io/v1', metadata: { resourceVersion: listRV }, columnDefinitions: cols, rows };
}

function list(res, u, p, req) {
  let match;
  try { match = selected(u, p); } catch (e) { return fail(res, 400, 'BadRequest', e.message); }
  const at = (o) => `${o.metadata.namespace || ''}/${o.metadata.name}`;
  const all = [...store.values()].filter(match).sort((x, y) => (at(x) < at(y) ? -1 : 1));
  const limit = parseInt(u.searchParams.get('limit') || '0', 10);
  let start = 0, listRV = String(rv);
  const cont = u.searchParams.get('continue');
  if (cont) {
    try { const c = JSON.parse(Buffer.from(cont, 'base64').toString()); start = c.start; listRV = c.rv; } catch (e) { return fail(res, 400, 'BadRequest', 'invalid continue token'); }
    if (parseInt(listRV, 10) <= oldestRV) return fail(res, 410, 'Expired', 'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.');
  }
  const items = limit > 0 ? all.slice(start, start + limit) : all.slice(start);
  const meta = { resourceVersion: listRV };
  if (limit > 0 && start + limit < all.length) {
    meta.continue = Buffer.from(JSON.stringify({ start: start + limit, rv: listRV })).toString('base64');
    meta.remainingItemCount = all.length - start - limit;
  }
  if (req && wantsTable(req)) {
    const t = tableFor(p.res, items, listRV);
    Object.assign(t.metadata, meta);
    return sendJSON(res, 200, t);
  }
  sendJSON(res, 200, { kind: `${p.res.kind}List`, apiVersion: gv(p.res), metadata: meta, items });
}

function watch(req, res, u, p) {
  let match;
  try { match = selected(u, p); } catch (e) { return fail(res, 400, 'BadRequest', e.message); }
  const from = u.searchParams.get('resourceVersion');
  const fromN = from ? parseInt(from, 10) : 0;
  const goneAs = (scenario.watch && scenario.watch.goneAs) || 'event';
  if (from && from !== '0' && fromN < oldestRV) {
    if (goneAs === 'http') return fail(res, 410, 'Expired', `too old resource version: ${from} (${oldestRV})`);
  }
  res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
  const send = (type, obj) => res.write(JSON.stringify({ type, object: obj }) + '\n');
  if (from && from !== '0' && fromN < oldestRV) {
    send('ERROR', status(410, 'Expired', `too old resource version: ${from} (${oldestRV})`));
    return res.end();
  }
  const reset = findFault(req, u, 'resetAfterEvents');
  let sent = 0;
  const deliver = (type, obj) => {
    send(type, obj);
    sent++;
    if (reset && sent >= reset.resetAfterEvents) { cleanup(); setTimeout(() => req.socket.destroy(), 30); return false; }
    return true;
  };
  const w = { push: null };
  const pending = [];
  let ready = false;
  w.push = (ev) => { if (ready) onEvent(ev); else pending.push(ev); };
  const onEvent = (ev) => {
    if (ev.res.plural !== p.res.plural) return;
    const o = ev.obj;
    if (!(o.metadata.namespace === p.ns && match(Object.assign({}, o, { kind: p.res.kind })))) return;
    deliver(ev.type, o);
  };
  watchers.add(w);
  let bm = null, tmo = null;
  const cleanup = () => { watchers.delete(w); if (bm) clearInterval(bm); if (tmo) clearTimeout(tmo); };
  req.on('close', cleanup);
  res.on('close', cleanup);
  if (!from || from === '0') {
    for (const o of [...store.values()].filter(match)) if (!deliver('ADDED', o)) return;
  } else {
    for (const ev of history) if (ev.rv > fromN && ev.res.plural === p.res.plural) { onEvent(ev); if (!watchers.has(w)) return; }
  }
  ready = true;
  for (const ev of pending) onEvent(ev);
  if (u.searchParams.get('allowWatchBookmarks') === 'true') {
    const bookmark = () => deliver('BOOKMARK', { kind: p.res.kind, apiVersion: gv(p.res), metadata: { resourceVersion: String(rv), annotations: { 'k8s.io/initial-events-end': 'true' } } });
    if (!bookmark()) return;
    bm = setInterval(bookmark, (scenario.watch && scenario.watch.bookmarkMs) || 1000);
  }
  const ts = parseInt(u.searchParams.get('timeoutSeconds') || '0', 10);
  if (ts > 0) tmo = setTimeout(() => { cleanup(); res.end(); }, ts * 1000);
}

function podLog(req, res, u, p) {
  const podRes = p.res;
  const pod = store.get(key(podRes, p.ns, p.name));
  if (!pod) return fail(res, 404, 'NotFound', `pods "${p.name}" not found`, { name: p.name, kind: 'pods' });
  const cname = u.searchParams.get('container');
  const names = ((pod.spec && pod.spec.containers) || []).map((c) => c.name);
  if (cname && names.length && !names.includes(cname)) return fail(res, 400, 'BadRequest', `container ${cname} is not valid for pod ${p.name}`);
  if (!cname && names.length > 1) return fail(res, 400, 'BadRequest', `a container name must be specified for pod ${p.name}, choose one of: [${names.join(' ')}]`);
  const rt = podRuntime.get(`${p.ns}/${p.name}`);
  if (pod.status.phase === 'Pending' && !(rt && rt.logs.length)) {
    const w = pod.status.containerStatuses && pod.status.containerStatuses[0] && pod.status.containerStatuses[0].state && pod.status.containerStatuses[0].state.waiting;
    return fail(res, 400, 'BadRequest', `container "${cname || names[0] || 'main'}" in pod "${p.name}" is waiting to start: ${w ? w.reason : 'ContainerCreating'}`);
  }
  const previous = u.searchParams.get('previous') === 'true';
  const follow = u.searchParams.get('follow') === 'true' && !previous;
  const stamps = u.searchParams.get('timestamps') === 'true';
  const tail = u.searchParams.has('tailLines') ? parseInt(u.searchParams.get('tailLines'), 10) : -1;
  const since = u.searchParams.has('sinceSeconds') ? parseInt(u.searchParams.get('sinceSeconds'), 10) : 0;
  let lines;
  if (previous) {
    if (!rt || !rt.previous) return fail(res, 400, 'BadRequest', `previous terminated container "${cname || names[0] || 'main'}" in pod "${p.name}" not found`);
    lines = rt.previous.map((l) => ({ t: rt.start, line: l }));
  } else lines = rt ? rt.logs.slice() : [];
  if (since > 0) lines = lines.filter((l) => l.t >= Date.now() - since * 1000);
  if (tail >= 0) lines = lines.slice(Math.max(0, lines.length - tail));
  res.writeHead(200, { 'Content-Type': 'text/plain', 'Transfer-Encoding': 'chunked' });
  const reset = findFault(req, u, 'resetAfterLines');
  let sent = 0, broken = false;
  // Writes go through one queue so a line flushed in two chunks (with a pause between, as a
  // kubelet does when the container writes half a line) never interleaves with the next one.
  let queue = Promise.resolve();
  const pause = (ms) => new Promise((r) => setTimeout(r, ms));
  const enqueue = (fn) => { queue = queue.then(() => (broken || res.destroyed ? null : fn())); };
  const fmt = (l) => (stamps ? new Date(l.t).toISOString().replace('Z', '000000Z') + ' ' : '') + l.line + (l.noNewline ? '' : '\n');
  const write = (l) => enqueue(async () => {
    const s = fmt(l);
    if (l.split && s.length > 1) {
      const half = Math.floor(s.length / 2);
      res.write(s.slice(0, half));
      await pause(30);
      if (res.destroyed) return;
      res.write(s.slice(half));
    } else res.write(s);
    sent++;
    if (reset && sent >= reset.resetAfterLines) {
      broken = true;
      await pause(30); // let the lines reach the client, then cut the connection
      req.socket.destroy();
    }
  });
  const finish = () => enqueue(() => res.end());
  for (const l of lines) write(l);
  if (!follow || !rt || rt.done) return finish();
  const listener = (entry) => {
    if (entry === null) { rt.listeners.delete(listener); return finish(); }
    write(entry);
  };
  rt.listeners.add(listener);
  req.on('close', () => rt.listeners.delete(listener));
}

// ---------- seed objects ----------
for (const o of scenario.objects || []) {
  const r = RESOURCES.find((x) => x.kind === o.kind);
  if (!r) die(`scenario: unknown kind '${o.kind}' in objects`);
  o.apiVersion = gv(r);
  newMeta(o.metadata, o.metadata.namespace || 'default');
  put(r, o, 'ADDED');
  if (r.kind === 'Job') startJob(r, o);
}

// ---------- start ----------
const certs = opts.certs;
const server = https.createServer({
  key: fs.readFileSync(path.join(certs, 'server.key')),
  cert: fs.readFileSync(path.join(certs, 'server.crt')),
  ca: fs.readFileSync(path.join(certs, 'ca.crt')),
  requestCert: true,
  rejectUnauthorized: false,
}, (req, res) => {
  handle(req, res).catch((e) => {
    if (!res.headersSent) fail(res, 500, 'InternalError', `test server bug: ${e.message}`);
    else res.destroy();
  });
});
server.keepAliveTimeout = 30000;
server.listen(opts.port, '127.0.0.1', () => {
  process.stdout.write(`https://127.0.0.1:${server.address().port}\n`);
});
const stop = () => { for (const r of running.values()) r.child.kill('SIGTERM'); server.close(); process.exit(0); };
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
// Never outlive the test that started us: stdin closing means our parent is gone.
if (opts.watchStdin) {
  process.stdin.on('end', stop);
  process.stdin.on('error', stop);
  process.stdin.resume();
}
const maxLife = parseInt(process.env.DLK_APISERVER_MAX_SECONDS || '300', 10);
setTimeout(stop, maxLife * 1000).unref();
