#!/usr/bin/env node
// Validates Kubernetes objects against the official OpenAPI schemas (the npm package
// kubernetes-models) and checks what those schemas let through:
//   - unknown or misspelled field names anywhere (the schemas allow any extra property;
//     the API server would drop them silently, or reject them under strict field validation)
//   - DNS-1123 / DNS-1035 names, label keys and values, annotation keys
//   - container image references
//   - the rules of an Indexed Job that dlk relies on, and the Service its pods' subdomain names
//   - a served model's Deployment: selector, probe ports, preStop within the grace period, and
//     the Service, HorizontalPodAutoscaler and PodDisruptionBudget that find it
//
// Usage: node validate.mjs [FILE|-]...      (no FILE: read stdin)
// Each input holds a JSON array of objects, one object, a List ({"kind": "List", "items": [...]}),
// or one JSON object per line.
// All inputs together form one set: references (a Job's subdomain, service account and ConfigMap
// volumes) are looked up among all of them. Prints "ok: N objects" and exits 0 when everything is
// valid; otherwise prints one problem per line ("Kind/name: path: problem") and exits 1.
// Exit 2: unreadable input or bad usage.
//
//   dlk train --dry-run -o json | node tests/schema/validate.mjs
import { readFileSync } from "node:fs";

const problems = [];
const report = (obj, path, msg) => {
  const id = `${obj?.kind ?? "?"}/${obj?.metadata?.name ?? "?"}`;
  problems.push(`${id}: ${path || "/"}: ${msg}`);
};

// ---------------------------------------------------------------------------------------------
// input

function readInputs(args) {
  const files = args.length ? args : ["-"];
  const objects = [];
  for (const f of files) {
    let text;
    try {
      text = readFileSync(f === "-" ? 0 : f, "utf8");
    } catch (e) {
      console.error(`error: cannot read '${f}': ${e.message}`);
      process.exit(2);
    }
    let v;
    try {
      v = JSON.parse(text);
    } catch (e) {
      // one JSON object per line (a stream) is accepted too
      try {
        v = text.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
      } catch {
        console.error(`error: '${f}' is not JSON: ${e.message}`);
        process.exit(2);
      }
    }
    if (v && !Array.isArray(v) && v.kind === "List" && Array.isArray(v.items)) v = v.items;
    for (const o of Array.isArray(v) ? v : [v]) objects.push(o);
  }
  return objects;
}

// ---------------------------------------------------------------------------------------------
// schema validation, and unknown fields found by watching what the validator reads

// The generated validators read every property their schema defines (data.foo) and iterate the
// keys of free-form maps (labels, resources.limits, ...). A property of the input that the
// validator never read is therefore one that no schema knows: a misspelling or an invention.
function watch(value, path, seen) {
  if (value === null || typeof value !== "object") return value;
  const read = new Set();
  seen.push({ path, value, read });
  const inner = Array.isArray(value)
    ? value.map((x, i) => watch(x, `${path}/${i}`, seen))
    : Object.fromEntries(Object.entries(value).map(([k, x]) => [k, watch(x, `${path}/${escape(k)}`, seen)]));
  return new Proxy(inner, {
    get(target, key, receiver) {
      if (typeof key === "string") read.add(key);
      return Reflect.get(target, key, receiver);
    },
  });
}

function escape(key) {
  return key.replace(/~/g, "~0").replace(/\//g, "~1");
}

async function modelFor(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string") return null;
  if (!/^([a-z0-9.-]+\/)?v[0-9a-z]+$/.test(apiVersion) || !/^[A-Z][A-Za-z0-9]*$/.test(kind)) return null;
  try {
    const mod = await import(`kubernetes-models/${apiVersion}`);
    return typeof mod[kind] === "function" ? mod[kind] : null;
  } catch {
    return null;
  }
}

async function validateSchema(obj) {
  const Model = await modelFor(obj?.apiVersion, obj?.kind);
  if (!Model) {
    report(obj, "", `unknown apiVersion/kind '${obj?.apiVersion}/${obj?.kind}'`);
    return;
  }
  const seen = [];
  const watched = watch(obj, "", seen);
  const blind = []; // paths the validator could not look into
  try {
    Model.prototype.validate.call(watched);
  } catch (e) {
    for (const err of e.errors ?? [{ instancePath: "", message: e.message, keyword: "type" }]) {
      const extra = err.params?.allowedValues ? ` (${err.params.allowedValues.join(", ")})` : "";
      report(obj, err.instancePath, `${err.message}${extra}`);
      // a value of the wrong type is not looked into, so all its fields would look unknown
      if (["type", "oneOf", "anyOf", "not"].includes(err.keyword)) blind.push(err.instancePath);
    }
  }
  for (const { path, value, read } of seen) {
    if (Array.isArray(value)) continue;
    if (blind.some((b) => path === b || path.startsWith(`${b}/`))) continue;
    for (const key of Object.keys(value)) {
      if (!read.has(key)) report(obj, `${path}/${escape(key)}`, "unknown field");
    }
  }
}

// ---------------------------------------------------------------------------------------------
// what the schemas do not check

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const IANA_SVC_NAME = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

function checkLabel(name, max) {
  return typeof name === "string" && name.length <= max && DNS1123_LABEL.test(name);
}

function checkSubdomain(name) {
  return typeof name === "string" && name.length <= 253 && DNS1123_SUBDOMAIN.test(name);
}

function qualifiedNameProblem(key) {
  if (typeof key !== "string" || key === "") return "must not be empty";
  const parts = key.split("/");
  if (parts.length > 2) return "has more than one '/'";
  const [prefix, name] = parts.length === 2 ? parts : [null, parts[0]];
  if (prefix !== null && !checkSubdomain(prefix)) return `prefix '${prefix}' is not a DNS-1123 subdomain`;
  if (name.length > 63) return "name part is longer than 63 characters";
  if (!QUALIFIED_NAME.test(name)) return "name part must be alphanumerics, '-', '_' or '.', starting and ending alphanumeric";
  return null;
}

function labelValueProblem(v) {
  if (typeof v !== "string") return "must be a string";
  if (v === "") return null;
  if (v.length > 63) return "is longer than 63 characters";
  if (!QUALIFIED_NAME.test(v)) return "must be alphanumerics, '-', '_' or '.', starting and ending alphanumeric";
  return null;
}

function checkLabelMap(obj, path, map) {
  if (!map || typeof map !== "object") return;
  for (const [k, v] of Object.entries(map)) {
    const kp = qualifiedNameProblem(k);
    if (kp) report(obj, `${path}/${escape(k)}`, `label key '${k}' ${kp}`);
    const vp = labelValueProblem(v);
    if (vp) report(obj, `${path}/${escape(k)}`, `label value '${v}' ${vp}`);
  }
}

// distribution/reference grammar (docker image references), without IPv6 hosts
const ALNUM = "[a-z0-9]+";
const SEPARATOR = "(?:[._]|__|[-]+)";
const PATH_COMPONENT = `${ALNUM}(?:${SEPARATOR}${ALNUM})*`;
const DOMAIN_COMPONENT = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
const DOMAIN = `${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*(?::[0-9]+)?`;
const TAG = "[\\w][\\w.-]{0,127}";
const DIGEST = "[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}";
const IMAGE = new RegExp(`^(?:${DOMAIN}/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*(?::${TAG})?(?:@${DIGEST})?$`);

function checkImage(obj, path, image) {
  if (typeof image !== "string" || image === "") {
    report(obj, path, "a container needs an image");
    return;
  }
  if (image.length > 4096 || !IMAGE.test(image)) report(obj, path, `'${image}' is not a valid image reference`);
}

function checkMetadata(obj, path, md, nameRule) {
  if (!md || typeof md !== "object") return;
  if (nameRule) {
    const [ok, what] = nameRule;
    if (!ok(md.name)) report(obj, `${path}/name`, `'${md.name}' is not a valid name (${what})`);
  }
  if (md.namespace !== undefined && !checkLabel(md.namespace, 63))
    report(obj, `${path}/namespace`, `'${md.namespace}' is not a DNS-1123 label`);
  checkLabelMap(obj, `${path}/labels`, md.labels);
  for (const k of Object.keys(md.annotations ?? {})) {
    const kp = qualifiedNameProblem(k);
    if (kp) report(obj, `${path}/annotations/${escape(k)}`, `annotation key '${k}' ${kp}`);
  }
  const size = Object.entries(md.annotations ?? {}).reduce((n, [k, v]) => n + k.length + String(v).length, 0);
  if (size > 256 * 1024) report(obj, `${path}/annotations`, "annotations are larger than 256 KiB");
}

const NAME_RULES = {
  Service: [(n) => typeof n === "string" && n.length <= 63 && DNS1035_LABEL.test(n), "DNS-1035 label: a-z, 0-9, '-', starting with a letter, at most 63"],
  // An Indexed Job's pods are named <job>-<index> and its name is a label value on them.
  Job: [(n) => checkLabel(n, 63), "DNS-1123 label, at most 63 characters"],
  // A CronJob appends an 11-character suffix to name its Jobs.
  CronJob: [(n) => checkLabel(n, 52), "DNS-1123 label, at most 52 characters"],
  Namespace: [(n) => checkLabel(n, 63), "DNS-1123 label"],
};
const DEFAULT_NAME_RULE = [checkSubdomain, "DNS-1123 subdomain: a-z, 0-9, '-', '.', at most 253"];

function checkPodSpec(obj, path, spec) {
  if (!spec || typeof spec !== "object") return;
  checkLabelMap(obj, `${path}/nodeSelector`, spec.nodeSelector);
  for (const list of ["initContainers", "containers"]) {
    (spec[list] ?? []).forEach((c, i) => {
      const cp = `${path}/${list}/${i}`;
      if (!checkLabel(c?.name, 63)) report(obj, `${cp}/name`, `container name '${c?.name}' is not a DNS-1123 label`);
      checkImage(obj, `${cp}/image`, c?.image);
      (c?.ports ?? []).forEach((p, k) => {
        if (p?.name !== undefined && !(p.name.length <= 15 && IANA_SVC_NAME.test(p.name) && /[a-z]/.test(p.name)))
          report(obj, `${cp}/ports/${k}/name`, `port name '${p.name}' is not an IANA service name (at most 15 characters)`);
      });
    });
  }
  if (spec.subdomain !== undefined && !checkLabel(spec.subdomain, 63))
    report(obj, `${path}/subdomain`, `'${spec.subdomain}' is not a DNS-1123 label`);
}

// The rules of the Job API that dlk's gang of workers depends on.
function checkIndexedJob(obj, path, spec, all) {
  if (!spec || typeof spec !== "object") return;
  const pod = spec.template?.spec ?? {};
  const ns = obj.metadata?.namespace ?? "default";
  if (spec.completionMode !== "Indexed") report(obj, `${path}/completionMode`, "must be Indexed: every worker needs a rank");
  if (spec.completions === undefined || spec.completions !== spec.parallelism)
    report(obj, `${path}/parallelism`, `completions (${spec.completions}) and parallelism (${spec.parallelism}) must be equal: all workers run at once`);
  if (spec.backoffLimitPerIndex !== undefined && pod.restartPolicy !== "Never")
    report(obj, `${path}/backoffLimitPerIndex`, "requires template.spec.restartPolicy Never");
  if (spec.maxFailedIndexes !== undefined && spec.backoffLimitPerIndex === undefined)
    report(obj, `${path}/maxFailedIndexes`, "requires backoffLimitPerIndex");
  if (spec.podFailurePolicy !== undefined && pod.restartPolicy !== "Never")
    report(obj, `${path}/podFailurePolicy`, "requires template.spec.restartPolicy Never");
  if (spec.successPolicy !== undefined && spec.completionMode !== "Indexed")
    report(obj, `${path}/successPolicy`, "requires completionMode Indexed");
  // pod i of an Indexed Job has the hostname <job>-<i>, a DNS label
  const jobName = obj.kind === "CronJob" ? `${obj.metadata?.name}-12345678901` : obj.metadata?.name;
  const host = `${jobName}-${Math.max(0, (spec.completions ?? 1) - 1)}`;
  if (host.length > 63) report(obj, "/metadata/name", `pod hostname '${host}' is longer than 63 characters`);
  if (pod.subdomain === undefined) {
    report(obj, `${path}/template/spec/subdomain`, "must name the headless Service that gives the workers DNS names");
  } else {
    const svc = all.find((o) => o?.kind === "Service" && o.metadata?.name === pod.subdomain && (o.metadata?.namespace ?? "default") === ns);
    if (!svc) {
      report(obj, `${path}/template/spec/subdomain`, `no Service '${pod.subdomain}' among the objects`);
    } else {
      if (svc.spec?.clusterIP !== "None") report(obj, `${path}/template/spec/subdomain`, `Service '${pod.subdomain}' is not headless (clusterIP: None)`);
      if (svc.spec?.publishNotReadyAddresses !== true)
        report(obj, `${path}/template/spec/subdomain`, `Service '${pod.subdomain}' must set publishNotReadyAddresses: true (workers rendezvous before they are ready)`);
      const labels = spec.template?.metadata?.labels ?? {};
      const sel = svc.spec?.selector ?? {};
      if (!Object.keys(sel).length || !Object.entries(sel).every(([k, v]) => labels[k] === v))
        report(obj, `${path}/template/metadata/labels`, `the pods do not match the selector of Service '${pod.subdomain}'`);
    }
  }
  // references to objects a submit creates together with the job
  const sa = pod.serviceAccountName;
  if (sa !== undefined && !all.some((o) => o?.kind === "ServiceAccount" && o.metadata?.name === sa))
    report(obj, `${path}/template/spec/serviceAccountName`, `no ServiceAccount '${sa}' among the objects`);
  (pod.volumes ?? []).forEach((v, i) => {
    const cm = v?.configMap?.name;
    if (cm !== undefined && !all.some((o) => o?.kind === "ConfigMap" && o.metadata?.name === cm))
      report(obj, `${path}/template/spec/volumes/${i}/configMap/name`, `no ConfigMap '${cm}' among the objects`);
  });
}

// What a served model (dlk serve) relies on: its Deployment selects its own pods, its probes
// and its Service name ports the container has, the preStop sleep ends before the grace period,
// and the Service, autoscaler and disruption budget find the pods or the Deployment they are for.
const matches = (sel, labels) => Object.keys(sel ?? {}).length > 0 && Object.entries(sel).every(([k, v]) => (labels ?? {})[k] === v);
const templates = (all) => all.filter((o) => ["Deployment", "StatefulSet", "ReplicaSet"].includes(o?.kind)).map((o) => o.spec?.template);

function checkWorkload(obj, all) {
  const spec = obj.spec ?? {};
  const t = spec.template ?? {};
  if (!matches(spec.selector?.matchLabels, t.metadata?.labels))
    report(obj, "/spec/selector", "the selector does not match the pod template's labels");
  const pod = t.spec ?? {};
  (pod.containers ?? []).forEach((c, i) => {
    const names = new Set((c.ports ?? []).map((p) => p.name).filter(Boolean));
    for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
      const port = c[probe]?.httpGet?.port;
      if (typeof port === "string" && !names.has(port))
        report(obj, `/spec/template/spec/containers/${i}/${probe}/httpGet/port`, `no container port named '${port}'`);
    }
    const sleep = c.lifecycle?.preStop?.sleep?.seconds;
    if (sleep !== undefined && sleep >= (pod.terminationGracePeriodSeconds ?? 30))
      report(obj, `/spec/template/spec/containers/${i}/lifecycle/preStop/sleep/seconds`, `the preStop sleep (${sleep} s) does not end before the grace period (${pod.terminationGracePeriodSeconds ?? 30} s)`);
  });
  (pod.volumes ?? []).forEach((v, i) => {
    const cm = v?.configMap?.name;
    if (cm !== undefined && !all.some((o) => o?.kind === "ConfigMap" && o.metadata?.name === cm))
      report(obj, `/spec/template/spec/volumes/${i}/configMap/name`, `no ConfigMap '${cm}' among the objects`);
  });
}

function checkServingRefs(obj, all) {
  const tmpls = templates(all);
  if (obj.kind === "Service" && obj.spec?.clusterIP !== "None" && tmpls.length) {
    const mine = tmpls.filter((t) => matches(obj.spec?.selector, t?.metadata?.labels));
    if (!mine.length) report(obj, "/spec/selector", "selects the pods of no workload among the objects");
    (obj.spec?.ports ?? []).forEach((p, i) => {
      if (typeof p.targetPort === "string" && !mine.some((t) => (t?.spec?.containers ?? []).some((c) => (c.ports ?? []).some((cp) => cp.name === p.targetPort))))
        report(obj, `/spec/ports/${i}/targetPort`, `no selected container has a port named '${p.targetPort}'`);
    });
  }
  if (obj.kind === "HorizontalPodAutoscaler") {
    const ref = obj.spec?.scaleTargetRef ?? {};
    if (!all.some((o) => o?.kind === ref.kind && o.metadata?.name === ref.name))
      report(obj, "/spec/scaleTargetRef", `no ${ref.kind} '${ref.name}' among the objects`);
    if ((obj.spec?.minReplicas ?? 1) > obj.spec?.maxReplicas) report(obj, "/spec/minReplicas", "is above maxReplicas");
  }
  if (obj.kind === "PodDisruptionBudget" && !tmpls.some((t) => matches(obj.spec?.selector?.matchLabels, t?.metadata?.labels)))
    report(obj, "/spec/selector", "selects the pods of no workload among the objects");
}

function checkSemantics(obj, all) {
  if (!obj || typeof obj !== "object") return;
  checkMetadata(obj, "/metadata", obj.metadata, NAME_RULES[obj.kind] ?? DEFAULT_NAME_RULE);
  if (obj.kind === "Service") checkLabelMap(obj, "/spec/selector", obj.spec?.selector);
  if (obj.kind === "Job") {
    checkMetadata(obj, "/spec/template/metadata", obj.spec?.template?.metadata, null);
    checkPodSpec(obj, "/spec/template/spec", obj.spec?.template?.spec);
    checkIndexedJob(obj, "/spec", obj.spec, all);
  }
  if (obj.kind === "CronJob") {
    const jt = obj.spec?.jobTemplate;
    checkMetadata(obj, "/spec/jobTemplate/metadata", jt?.metadata, null);
    checkMetadata(obj, "/spec/jobTemplate/spec/template/metadata", jt?.spec?.template?.metadata, null);
    checkPodSpec(obj, "/spec/jobTemplate/spec/template/spec", jt?.spec?.template?.spec);
    checkIndexedJob(obj, "/spec/jobTemplate/spec", jt?.spec, all);
    const schedule = typeof obj.spec?.schedule === "string" ? obj.spec.schedule.trim() : "";
    const fiveFields = schedule.split(/\s+/).length === 5;
    const macro = /^@(yearly|annually|monthly|weekly|daily|midnight|hourly)$/.test(schedule);
    if (!fiveFields && !macro) report(obj, "/spec/schedule", `'${obj.spec?.schedule}' is not a five-field cron schedule`);
  }
  if (["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"].includes(obj.kind)) {
    checkMetadata(obj, "/spec/template/metadata", obj.spec?.template?.metadata, null);
    checkPodSpec(obj, "/spec/template/spec", obj.spec?.template?.spec);
    checkWorkload(obj, all);
  }
  checkServingRefs(obj, all);
  if (obj.kind === "Pod") checkPodSpec(obj, "/spec", obj.spec);
}

// ---------------------------------------------------------------------------------------------

const objects = readInputs(process.argv.slice(2));
if (!objects.length) {
  console.error("error: no objects to validate");
  process.exit(2);
}
const names = new Set();
for (const obj of objects) {
  if (!obj || typeof obj !== "object" || Array.isArray(obj)) {
    problems.push(`?: /: not an object: ${JSON.stringify(obj)?.slice(0, 60)}`);
    continue;
  }
  const id = `${obj.kind}/${obj.metadata?.namespace ?? "default"}/${obj.metadata?.name}`;
  if (names.has(id)) report(obj, "/metadata/name", "the same object appears twice");
  names.add(id);
  await validateSchema(obj);
  checkSemantics(obj, objects);
}
if (problems.length) {
  for (const p of problems) console.log(`invalid: ${p}`);
  console.log(`${problems.length} problem${problems.length === 1 ? "" : "s"} in ${objects.length} objects`);
  process.exit(1);
}
console.log(`ok: ${objects.length} objects`);
