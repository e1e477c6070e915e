#!/usr/bin/env node
// loom-run's runner (tools/loom-run/loom-run calls it; the e2e tests run
// loom-run): executes every rank of an emitted output directory
// (include/loom/Shard/OutputFormat.md) in ONNX Runtime, performing the hccl operations
// between ranks, and compares the last pipeline stage's outputs with the
// original model run at the global batch on the same random inputs (or,
// with --reference micro-batch, run on each micro-batch's samples alone:
// the semantics of data parallelism for a model whose result depends on
// the batch it sees, e.g. MoE capacity computed from the token count).
//
//   node harness.js --outdir OUT --work WORK --model MODEL.onnx
//        [--seed N] [--int-range LO:HI] [--reference global|micro-batch]
//        [--json] [--diagnose] [--step OUTDIR,WORK,MODEL]...
// (--step: decode steps after OUT, each fed the previous step's KV cache
// outputs; see runStep.)
// (onnxruntime-node must be resolvable: loom-run sets NODE_PATH.)
//
// --diagnose: when outputs differ, name per failing rank the first value (in
// program order) that differs from the original model's value of the same
// name (WORK/reference_all.onnx from split_graphs.py --reference), comparing
// a sharded value with its slice where one dim is tp (or ep) times smaller.
// Inputs of AllReduce/ReduceScatter are skipped (partial sums by design).
//
// WORK holds program.json and the plain-ONNX segments written by
// split_graphs.py. Ranks run as cooperative async tasks: a rank blocks on a
// collective until every member of its group instance reached the same node
// (matched by group members + node name + how many times this rank ran it),
// and on a Receive until the matching Send (group members + sr_tag + src +
// dst, FIFO) happened; when every unfinished rank is blocked the harness
// reports the deadlock. Exit status: 0 match, 1 mismatch or error.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

function parseArgs(argv) {
  const a = { seed: 1234, intRange: [0, 16], json: false, reference: 'global', steps: [] };
  for (let i = 2; i < argv.length; i++) {
    const k = argv[i];
    const v = () => argv[++i];
    if (k === '--outdir') a.outdir = v();
    else if (k === '--work') a.work = v();
    else if (k === '--model') a.model = v();
    else if (k === '--seed') a.seed = Number(v());
    else if (k === '--int-range') a.intRange = v().split(':').map(Number);
    else if (k === '--reference') a.reference = v();
    else if (k === '--json') a.json = true;
    else if (k === '--diagnose') a.diagnose = true;
    else if (k === '--step') {
      // a decode step after the first: OUTDIR,WORK,MODEL (loom-run --decode)
      const [outdir, work, model] = v().split(',');
      a.steps.push({ outdir, work, model });
    }
    else throw new Error(`harness: unknown argument ${k}`);
  }
  if (!a.outdir || !a.work || !a.model) throw new Error('usage: harness.js --outdir OUT --work WORK --model MODEL');
  if (a.reference !== 'global' && a.reference !== 'micro-batch')
    throw new Error(`harness: --reference ${a.reference}: expected global or micro-batch`);
  return a;
}

// ---------------------------------------------------------------- tensors
// A tensor is an ort.Tensor; helpers work on (type, dims, data).
const F16 = 'float16';
function numel(dims) { return dims.reduce((a, b) => a * b, 1); }
function ctorFor(type) {
  return {
    float32: Float32Array, float64: Float64Array, float16: Uint16Array, int64: BigInt64Array,
    int32: Int32Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array,
  }[type];
}
function mk(type, data, dims) { return new ort.Tensor(type, data, dims); }

function normAxis(axis, rank) { return axis < 0 ? axis + rank : axis; }

function sliceAxis(t, axis, start, len) {
  const dims = t.dims.slice();
  axis = normAxis(axis, dims.length);
  if (start < 0 || start + len > dims[axis]) throw new Error(`slice [${start},${start + len}) out of dim ${dims[axis]}`);
  const outer = numel(dims.slice(0, axis)), inner = numel(dims.slice(axis + 1));
  const C = ctorFor(t.type);
  const out = new C(outer * len * inner);
  for (let o = 0; o < outer; o++) {
    const src = (o * dims[axis] + start) * inner;
    out.set(t.data.subarray(src, src + len * inner), o * len * inner);
  }
  dims[axis] = len;
  return mk(t.type, out, dims);
}

function concatAxis(ts, axis) {
  const r = ts[0].dims.length;
  axis = normAxis(axis, r);
  for (const t of ts) {
    if (t.type !== ts[0].type || t.dims.length !== r ||
        t.dims.some((d, i) => i !== axis && d !== ts[0].dims[i]))
      throw new Error(`concat of mismatched tensors ${ts.map(x => x.type + '[' + x.dims + ']').join(', ')}`);
  }
  const dims = ts[0].dims.slice();
  dims[axis] = ts.reduce((s, t) => s + t.dims[axis], 0);
  const outer = numel(dims.slice(0, axis)), inner = numel(dims.slice(axis + 1));
  const C = ctorFor(ts[0].type);
  const out = new C(numel(dims));
  let off = 0;
  for (let o = 0; o < outer; o++)
    for (const t of ts) {
      const n = t.dims[axis] * inner;
      out.set(t.data.subarray(o * n, o * n + n), off);
      off += n;
    }
  return mk(ts[0].type, out, dims);
}

// IEEE half <-> float
const f32buf = new Float32Array(1), u32buf = new Uint32Array(f32buf.buffer);
function halfToFloat(h) {
  const s = (h & 0x8000) ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}
function floatToHalf(v) {
  f32buf[0] = v;
  const x = u32buf[0];
  const sign = (x >> 16) & 0x8000;
  let e = ((x >> 23) & 0xff) - 127 + 15;
  let m = x & 0x7fffff;
  if (((x >> 23) & 0xff) === 0xff) return sign | 0x7c00 | (m ? 0x200 : 0);
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    m = (m | 0x800000) >> (1 - e);
    if (m & 0x1000) m += 0x2000;
    return sign | (m >> 13);
  }
  let h = sign | (e << 10) | (m >> 13);
  if ((m & 0x1fff) > 0x1000 || ((m & 0x1fff) === 0x1000 && (h & 1))) h++;
  return h;
}
function toNumbers(t) {
  if (t.type === F16) return Float64Array.from(t.data, halfToFloat);
  if (t.type === 'int64') return t.data;
  return t.data;
}

function reduceTensors(ts, op) {
  const t0 = ts[0];
  for (const t of ts)
    if (t.type !== t0.type || t.dims.join() !== t0.dims.join())
      throw new Error(`reduction over mismatched tensors ${ts.map(x => x.type + '[' + x.dims + ']').join(', ')}`);
  const n = t0.data.length;
  const arrs = ts.map(toNumbers);
  const big = t0.type === 'int64';
  const acc = big ? new BigInt64Array(n) : new Float64Array(n);
  for (let i = 0; i < n; i++) {
    let v = arrs[0][i];
    for (let k = 1; k < arrs.length; k++) {
      const w = arrs[k][i];
      if (op === 'sum') v += w;
      else if (op === 'prod') v *= w;
      else if (op === 'max') v = w > v ? w : v;
      else if (op === 'min') v = w < v ? w : v;
      else throw new Error(`unknown reduction ${op}`);
    }
    acc[i] = v;
  }
  if (t0.type === F16) return mk(F16, Uint16Array.from(acc, floatToHalf), t0.dims.slice());
  // fp32 sums in fp64 then round once: the ring/tree order on a device differs anyway
  const C = ctorFor(t0.type);
  return mk(t0.type, C.from(acc), t0.dims.slice());
}

function chunkAxis(t, axis, n, i, what) {
  axis = normAxis(axis, t.dims.length);
  if (t.dims[axis] % n) throw new Error(`${what}: dim ${axis} of [${t.dims}] is not divisible by ${n}`);
  const c = t.dims[axis] / n;
  return sliceAxis(t, axis, i * c, c);
}

// ------------------------------------------------------------- random data
function mulberry32(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
function randomTensor(spec, rnd, intRange) {
  const n = numel(spec.shape);
  const [lo, hi] = intRange;
  switch (spec.dtype) {
    case 'float32': return mk('float32', Float32Array.from({ length: n }, () => rnd() * 2 - 1), spec.shape);
    case 'float16': return mk(F16, Uint16Array.from({ length: n }, () => floatToHalf(rnd() * 2 - 1)), spec.shape);
    case 'float64': return mk('float64', Float64Array.from({ length: n }, () => rnd() * 2 - 1), spec.shape);
    case 'int64': return mk('int64', BigInt64Array.from({ length: n }, () => BigInt(lo + Math.floor(rnd() * (hi - lo)))), spec.shape);
    case 'int32': return mk('int32', Int32Array.from({ length: n }, () => lo + Math.floor(rnd() * (hi - lo))), spec.shape);
    case 'bool': return mk('bool', Uint8Array.from({ length: n }, () => (rnd() < 0.5 ? 1 : 0)), spec.shape);
    default: throw new Error(`input ${spec.name}: dtype ${spec.dtype} not supported by the harness`);
  }
}

// ---------------------------------------------------------------- sessions
const sessionCache = new Map();
const sessionOpts = { intraOpNumThreads: 1, interOpNumThreads: 1, logSeverityLevel: 3 };
function session(file) {
  if (!sessionCache.has(file)) sessionCache.set(file, ort.InferenceSession.create(file, sessionOpts));
  return sessionCache.get(file);
}

// ------------------------------------------------------------- simulation
class Deadlock extends Error {}

class World {
  constructor() {
    this.running = 0;
    this.waiters = new Map();   // id -> {desc, resolve, reject}
    this.nextId = 0;
    this.rendezvous = new Map();
    this.mailboxes = new Map(); // key -> {queue:[], waiter:id|null}
    this.failed = null;
  }
  block(desc) {
    const id = this.nextId++;
    const p = new Promise((resolve, reject) => this.waiters.set(id, { desc, resolve, reject }));
    this.running--;
    this.checkDeadlock();
    return { id, p };
  }
  wake(id, value) {
    const w = this.waiters.get(id);
    this.waiters.delete(id);
    this.running++;
    w.resolve(value);
  }
  finish() { this.running--; this.checkDeadlock(); }
  checkDeadlock() {
    if (this.running > 0 || this.waiters.size === 0) return;
    const lines = [...this.waiters.values()].map(w => '  ' + w.desc);
    const err = new Deadlock(`deadlock: every unfinished rank is blocked:\n${lines.join('\n')}`);
    this.fail(err);
  }
  fail(err) {
    if (!this.failed) this.failed = err;
    const ws = [...this.waiters.values()];
    this.waiters.clear();
    for (const w of ws) w.reject(this.failed);
  }
}

async function collective(world, ctx, step, x) {
  const { rank, manifestRank } = ctx;
  const a = step.attrs;
  const group = a.group;
  const members = manifestRank.groups[group];
  if (!members) throw new Error(`${step.op} ${step.name}: rank ${rank} has no group '${group}' in the manifest`);
  const me = members.indexOf(rank);
  if (me < 0) throw new Error(`${step.op} ${step.name}: rank ${rank} is not in its own ${group} group [${members}]`);
  if (a.rank_size !== undefined && a.rank_size !== members.length)
    throw new Error(`${step.op} ${step.name}: rank_size ${a.rank_size} but group ${group} has ${members.length} members`);
  const inst = `${group}[${members}]`;
  const seqKey = `${inst}|${step.name}`;
  const seq = ctx.seen.get(seqKey) || 0;
  ctx.seen.set(seqKey, seq + 1);
  const key = `${seqKey}#${seq}`;
  let rv = world.rendezvous.get(key);
  if (!rv) { rv = { op: step.op, arrivals: new Array(members.length), count: 0, waiters: [] }; world.rendezvous.set(key, rv); }
  if (rv.op !== step.op) throw new Error(`${step.name}: rank ${rank} runs ${step.op}, another member of ${inst} ran ${rv.op}`);
  rv.arrivals[me] = { rank, x, attrs: a, mb: ctx.mb };
  rv.count++;
  if (rv.count < members.length) {
    const { id, p } = world.block(`rank ${rank} (mb ${ctx.mb}) in ${step.op} '${step.name}' on ${inst}: ` +
      `${rv.count}/${members.length} arrived (missing ranks ${members.filter((m, i) => !rv.arrivals[i])})`);
    rv.waiters.push(id);
    return (await p)[me];
  }
  world.rendezvous.delete(key);
  for (const arr of rv.arrivals)
    if (arr.mb !== ctx.mb)
      throw new Error(`${step.op} '${step.name}' on ${inst}: rank ${arr.rank} is at micro-batch ${arr.mb}, rank ${rank} at ${ctx.mb}`);
  const outs = computeCollective(step, rv.arrivals.map(r => r.x), members.length);
  for (const id of rv.waiters) world.wake(id, outs);
  return outs[me];
}

function computeCollective(step, xs, n) {
  const a = step.attrs;
  const what = `${step.op} '${step.name}'`;
  try {
    switch (step.op) {
      case 'HcomAllReduce': {
        const y = reduceTensors(xs.map(x => x[0]), a.reduction || 'sum');
        return xs.map(() => [y]);
      }
      case 'HcomAllGather': {
        const y = concatAxis(xs.map(x => x[0]), a.axis || 0);
        return xs.map(() => [y]);
      }
      case 'HcomReduceScatter': {
        const s = reduceTensors(xs.map(x => x[0]), a.reduction || 'sum');
        return xs.map((_, i) => [chunkAxis(s, a.axis || 0, n, i, what)]);
      }
      case 'HcomAllToAllV': {
        const sa = a.split_axis || 0, ca = a.concat_axis || 0;
        for (const x of xs) checkCounts(x, n, sa, what);
        return xs.map((_, j) => [concatAxis(xs.map(x => chunkAxis(x[0], sa, n, j, what)), ca)]);
      }
      case 'HcomBroadcast': {
        const root = a.root_rank || 0;
        return xs.map(() => xs[root]);
      }
      default: throw new Error(`unsupported hccl op ${step.op}`);
    }
  } catch (e) {
    throw new Error(`${what}: ${e.message}`);
  }
}

function checkCounts(x, n, axis, what) {
  // x = [data, send_counts, send_displacements, recv_counts, recv_displacements]:
  // element counts per peer must match the even split of the data.
  const t = x[0];
  if (x.length < 2 || !x[1]) return;
  const per = numel(t.dims) / n;
  const sc = Array.from(x[1].data, Number);
  if (sc.length !== n || sc.some(c => c !== per))
    throw new Error(`send_counts [${sc}] do not match an even split of [${t.dims}] into ${n} (${per} elements each)`);
  if (x[2]) {
    const sd = Array.from(x[2].data, Number);
    if (sd.some((d, i) => d !== i * per)) throw new Error(`send_displacements [${sd}] are not 0, ${per}, ...`);
  }
}

async function sendRecv(world, ctx, step, x) {
  const { rank, manifestRank } = ctx;
  const a = step.attrs;
  const members = manifestRank.groups[a.group];
  if (!members) throw new Error(`${step.op} ${step.name}: rank ${rank} has no group '${a.group}'`);
  const me = members.indexOf(rank);
  const inst = `${a.group}[${members}]`;
  if (step.op === 'HcomSend') {
    const dst = members[a.dest_rank];
    if (dst === undefined) throw new Error(`HcomSend ${step.name}: dest_rank ${a.dest_rank} outside ${inst}`);
    const key = `${inst}|tag ${a.sr_tag}|${rank}->${dst}`;
    let mbx = world.mailboxes.get(key);
    if (!mbx) world.mailboxes.set(key, mbx = { queue: [], waiter: null });
    mbx.queue.push({ t: x[0], mb: ctx.mb, name: step.name });
    if (mbx.waiter !== null) { const id = mbx.waiter; mbx.waiter = null; world.wake(id); }
    return [];
  }
  const src = members[a.src_rank];
  if (src === undefined) throw new Error(`HcomReceive ${step.name}: src_rank ${a.src_rank} outside ${inst}`);
  const key = `${inst}|tag ${a.sr_tag}|${src}->${rank}`;
  let mbx = world.mailboxes.get(key);
  if (!mbx) world.mailboxes.set(key, mbx = { queue: [], waiter: null });
  while (mbx.queue.length === 0) {
    const { id, p } = world.block(`rank ${rank} (mb ${ctx.mb}) in HcomReceive '${step.name}' sr_tag ${a.sr_tag} from rank ${src} on ${inst}`);
    mbx.waiter = id;
    await p;
  }
  const m = mbx.queue.shift();
  if (m.mb !== ctx.mb)
    throw new Error(`HcomReceive '${step.name}' on rank ${rank}: got micro-batch ${m.mb} from rank ${src} while running micro-batch ${ctx.mb} (schedule orders differ)`);
  if (a.shape && a.shape.join() !== m.t.dims.join())
    throw new Error(`HcomReceive '${step.name}' on rank ${rank}: shape attribute [${a.shape}] but rank ${src} sent [${m.t.dims}] (HcomSend '${m.name}')`);
  const ONNX_TYPES = { 1: 'float32', 2: 'uint8', 3: 'int8', 6: 'int32', 7: 'int64', 9: 'bool', 10: 'float16', 11: 'float64' };
  if (a.dtype !== undefined && typeof a.dtype === 'number' && ONNX_TYPES[a.dtype] && ONNX_TYPES[a.dtype] !== m.t.type)
    throw new Error(`HcomReceive '${step.name}' on rank ${rank}: dtype attribute ${a.dtype} (${ONNX_TYPES[a.dtype]}) but rank ${src} sent ${m.t.type}`);
  return [m.t];
}

async function runRank(world, ctx, prog, feedsFor, onOutputs) {
  for (const mb of ctx.order) {
    ctx.mb = mb;
    const env = new Map(Object.entries(feedsFor(mb)));
    for (const step of prog.steps) {
      if (world.failed) throw world.failed;
      const where = `rank ${ctx.rank} (${ctx.role}, dp ${ctx.coords.dp}, mb ${mb})`;
      const get = (n) => {
        if (!n) return null;
        if (!env.has(n)) throw new Error(`${where}: value '${n}' is not available before step ${step.name || step.file}`);
        return env.get(n);
      };
      if (step.kind === 'const') {
        env.set(step.name, ctx.consts.get(step.file));
      } else if (step.kind === 'segment') {
        const feeds = {};
        for (const n of step.inputs) feeds[n] = get(n);
        let res;
        try {
          res = await (await session(path.join(ctx.work, step.file))).run(feeds);
        } catch (e) {
          throw new Error(`${where}: segment ${step.file} failed in ONNX Runtime: ${e.message}`);
        }
        for (const o of step.outputs) env.set(o, res[o]);
        if (ctx.trace && mb === ctx.order[0]) for (const o of step.outputs) ctx.trace.push({ name: o, t: res[o] });
      } else {
        const xs = step.inputs.map(get);
        let ys;
        try {
          if (step.op === 'HcomSend' || step.op === 'HcomReceive') ys = await sendRecv(world, ctx, step, xs);
          else ys = await collective(world, ctx, step, xs);
        } catch (e) {
          if (e instanceof Deadlock || e === world.failed) throw e;
          throw new Error(`${where}: ${e.message}`);
        }
        step.outputs.forEach((o, i) => { if (o) env.set(o, ys[i]); });
        if (ctx.trace && mb === ctx.order[0]) step.outputs.forEach((o, i) => { if (o) ctx.trace.push({ name: o, t: ys[i], after: step.op }); });
      }
    }
    const outs = {};
    for (const o of ctx.outputs) outs[o] = env.get(o);
    onOutputs(mb, outs);
  }
}

function loadConsts(work, prog) {
  const m = new Map();
  for (const s of prog.steps) {
    if (s.kind !== 'const') continue;
    const buf = fs.readFileSync(path.join(work, s.file));
    const C = ctorFor(s.dtype);
    const data = new C(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
    m.set(s.file, mk(s.dtype, data, s.dims));
  }
  return m;
}

function compare(ref, got) {
  const r = toNumbers(ref), g = toNumbers(got);
  let maxErr = 0, at = -1;
  for (let i = 0; i < r.length; i++) {
    const e = Math.abs(Number(r[i]) - Number(g[i]));
    if (!(e <= maxErr)) { maxErr = e; at = i; if (Number.isNaN(e)) break; }
  }
  return { maxErr, at };
}

async function diagnose(args, manifest, program, inputs, ctxs, failures, g) {
  const file = path.join(args.work, 'reference_all.onnx');
  if (!fs.existsSync(file)) return ['diagnosis: no reference_all.onnx (split_graphs.py --reference)'];
  const sess = await ort.InferenceSession.create(file, { logSeverityLevel: 3 });
  const feeds = {};
  for (const n of sess.inputNames) feeds[n] = inputs[n];
  const ref = await sess.run(feeds);
  const failing = new Set(failures.map(f => /^(?:step \d+: )?rank (\d+) /.exec(f)).filter(Boolean).map(m => Number(m[1])));
  const out = [];
  const plan = manifest.plan;
  for (const ctx of ctxs) {
    if (failing.size && !failing.has(ctx.rank)) continue;
    if (out.length >= 4) break;
    const prog = program.roles[ctx.role];
    const partial = new Set();
    for (const st of prog.steps)
      if (st.kind === 'hccl' && (st.op === 'HcomAllReduce' || st.op === 'HcomReduceScatter')) st.inputs.forEach(i => partial.add(i));
    const mb = ctx.order[0];
    const first = ctx.coords.dp * g.perReplica + mb * g.mbs;
    let compared = 0, found = null;
    for (const { name, t } of ctx.trace) {
      const R = ref[name];
      if (!R || !t || partial.has(name) || R.type !== t.type || R.dims.length !== t.dims.length) continue;
      let want = R;
      if (R.dims.length && R.dims[0] % g.B === 0 && R.dims[0] !== t.dims[0]) {
        const k = R.dims[0] / g.B;
        want = sliceAxis(R, 0, first * k, g.mbs * k);
      }
      if (want.dims.join() !== t.dims.join()) {
        const diff = want.dims.map((d, i) => i).filter(i => want.dims[i] !== t.dims[i]);
        if (diff.length !== 1) continue;
        const a = diff[0], n = want.dims[a] / t.dims[a];
        const idx = n === plan.tp ? ctx.coords.tp : n === plan.ep ? ctx.coords.ep : -1;
        if (idx < 0 || !Number.isInteger(n)) continue;
        want = sliceAxis(want, a, idx * t.dims[a], t.dims[a]);
      }
      const { maxErr } = compare(want, t);
      compared++;
      const tl = 1e-4 * Math.max(1, maxAbs(want));
      if (!(maxErr <= tl)) { found = `'${name}' (max abs error ${maxErr.toExponential(3)}, shape [${t.dims}])`; break; }
    }
    out.push(`diagnosis: rank ${ctx.rank} (${ctx.role}, mb ${mb}): ` + (found ? `first value differing from the original model's: ${found}` :
      `no value with an original name differs (${compared} compared)`));
  }
  return out;
}

function maxAbs(t) { let m = 0; for (const v of toNumbers(t)) m = Math.max(m, Math.abs(Number(v))); return m; }

// ------------------------------------------------------------- KV cache
// roles[].kv_cache of manifest.json (OutputFormat.md): each cache input
// ("past") and output ("present") of a role, with the tp slice it holds.
function kvOfRole(role) {
  return Object.fromEntries(((role && role.kv_cache) || []).map(e => [e.name, e]));
}
function kvSlice(t, e) {
  return e && e.split ? sliceAxis(t, e.split.axis, e.split.start, e.split.end - e.split.start) : t;
}
function sameSplit(a, b) {
  if (!a || !b) return !a && !b;
  return a.axis === b.axis && a.start === b.start && a.end === b.end;
}
function splitStr(s) { return s ? `[${s.start},${s.end}) of axis ${s.axis}` : 'whole'; }

// One step: OUTDIR run against MODEL. With `prev` (the step before, run
// on another output directory of the same plan), every past cache input
// of the model is the previous step's present of the same layer and kind:
// the reference takes the previous reference's, and each rank takes the
// slice its own role graph returned at the previous step (a serving loop
// keeps the cache where it was made), which must be the slice this step's
// manifest says the rank takes.
async function runStep(args, st, prev, rnd) {
  const stepName = st.index ? `step ${st.index}: ` : '';
  const manifest = JSON.parse(fs.readFileSync(path.join(st.outdir, 'manifest.json')));
  const program = JSON.parse(fs.readFileSync(path.join(st.work, 'program.json')));
  args = Object.assign({}, args, { outdir: st.outdir, work: st.work, model: st.model });
  const schedPath = path.join(args.outdir, 'schedule.json');
  const schedule = fs.existsSync(schedPath) ? JSON.parse(fs.readFileSync(schedPath)) : null;
  const plan = manifest.plan;
  const B = manifest.batch;
  const dp = plan.dp, mbs = plan.micro_batch_size;
  const perReplica = B / dp;
  const nmb = perReplica / mbs;
  if (!Number.isInteger(perReplica) || !Number.isInteger(nmb))
    throw new Error(`batch ${B} is not divisible by dp ${dp} x micro_batch_size ${mbs}`);
  if (plan.num_micro_batches !== undefined && plan.num_micro_batches !== nmb)
    throw new Error(`manifest: num_micro_batches ${plan.num_micro_batches} but batch / (dp * mb) = ${nmb}`);

  // inputs and references
  const pastOf = {};         // past input name -> its kv_cache entry (any role)
  for (const r of manifest.roles) for (const e of r.kv_cache || []) if (e.io === 'past') pastOf[e.name] = e;
  const inputs = {};
  for (const spec of manifest.inputs) {
    const e = pastOf[spec.name];
    if (prev && e) {
      const from = prev.presentOf[`${e.layer}/${e.kind}`];
      if (!from) throw new Error(`${stepName}past '${spec.name}' (layer ${e.layer} ${e.kind}): the previous step returns no present of that layer and kind`);
      const t = prev.ref[from];
      if (t.dims.join() !== spec.shape.join())
        throw new Error(`${stepName}past '${spec.name}' has shape [${spec.shape}] but the previous step's present '${from}' has [${t.dims}]`);
      inputs[spec.name] = t;
    } else {
      inputs[spec.name] = randomTensor(spec, rnd, args.intRange);
    }
  }
  const refSess = await ort.InferenceSession.create(args.model, { logSeverityLevel: 3 });
  const refFeeds = {};
  for (const n of refSess.inputNames) {
    if (!inputs[n]) throw new Error(`model input '${n}' is not in manifest.inputs`);
    refFeeds[n] = inputs[n];
  }
  const ref = await refSess.run(refFeeds);
  const inSpec = Object.fromEntries(manifest.inputs.map(s => [s.name, s]));
  const outSpec = Object.fromEntries(manifest.outputs.map(s => [s.name, s]));
  for (const o of manifest.outputs) {
    if (!ref[o.name]) throw new Error(`manifest output '${o.name}' is not an output of ${args.model}`);
    if (ref[o.name].dims.join() !== o.shape.join())
      throw new Error(`manifest output '${o.name}' shape [${o.shape}] but the model gives [${ref[o.name].dims}]`);
  }
  // A flattened value ([batch*seq, V] with batch_axis 0) holds rows/B rows
  // per sample along its batch axis, sample-major (what Reshape makes of
  // [batch, seq, V]).
  const sampleSlice = (t, spec, dpIdx, mb) => {
    if (spec.batch_axis === null || spec.batch_axis === undefined) return t;
    const rows = t.dims[spec.batch_axis];
    if (rows % B !== 0)
      throw new Error(`'${spec.name}' has ${rows} rows along its batch axis ${spec.batch_axis}, not a multiple of the global batch ${B}`);
    const per = rows / B;
    return sliceAxis(t, spec.batch_axis, (dpIdx * perReplica + mb * mbs) * per, mbs * per);
  };
  // --reference micro-batch: the original model on each micro-batch alone.
  const refOfMB = new Map();
  if (args.reference === 'micro-batch')
    for (let d = 0; d < dp; d++)
      for (let m = 0; m < nmb; m++) {
        const f = {};
        for (const n of refSess.inputNames) f[n] = sampleSlice(inputs[n], inSpec[n], d, m);
        refOfMB.set(`${d}/${m}`, await refSess.run(f));
      }
  const wanted = (name, spec, dpIdx, mb) =>
    refOfMB.size ? refOfMB.get(`${dpIdx}/${mb}`)[name] : sampleSlice(ref[name], spec, dpIdx, mb);

  // micro-batch order per rank from the schedule's forward events
  // (schedule.json: one program per role; `ranks` maps each rank to its role)
  const orderOf = new Map();
  if (schedule) {
    if (!Array.isArray(schedule.programs) || !Array.isArray(schedule.roles) || !Array.isArray(schedule.ranks))
      throw new Error('schedule.json: expected format_version 2 (roles, ranks, programs)');
    schedule.ranks.forEach((role, rank) => {
      const r = schedule.roles[role];
      const prog = r && schedule.programs[r.program];
      if (!prog) throw new Error(`schedule.json: rank ${rank} has role ${role} without a program`);
      const seen = [], have = new Set();
      for (const e of prog.events)
        if (e.kind === 'forward' && !have.has(e.micro_batch)) { have.add(e.micro_batch); seen.push(e.micro_batch); }
      orderOf.set(rank, seen);
    });
  }
  const defaultOrder = Array.from({ length: nmb }, (_, i) => i);

  const world = new World();
  const rankOutputs = new Map(); // rank -> {kv, byMb: mb -> outputs}
  const results = [];       // {rank, name, mb, maxErr, tol}
  const failures = [];
  const covered = new Map(); // output -> Set(sample)
  const scale = {}, tol = {};
  for (const o of manifest.outputs) {
    scale[o.name] = maxAbs(ref[o.name]);
    // fp32: 1e-4 relative to the output's scale. fp16: 1e-2 relative -- the
    // sharded graph sums partial products in a different order (per-rank
    // partial sums then AllReduce), and fp16 keeps ~3 decimal digits, so
    // reordering a sum of k terms moves the result by ~k * 2^-11 * scale.
    const rel = o.dtype === 'float16' ? 1e-2 : 1e-4;
    tol[o.name] = rel * Math.max(1, scale[o.name]);
    covered.set(o.name, new Set());
  }
  const roleOf = Object.fromEntries(manifest.roles.map(r => [r.graph, r]));
  const consts = new Map();
  const tasks = [], starts = [];
  const ctxs = [];
  for (const mr of manifest.ranks) {
    const role = roleOf[mr.graph];
    const prog = program.roles[mr.graph];
    if (!role || !prog) throw new Error(`rank ${mr.rank}: graph ${mr.graph} is not a role of the manifest/program`);
    if (!consts.has(mr.graph)) consts.set(mr.graph, loadConsts(args.work, prog));
    let order = orderOf.has(mr.rank) ? orderOf.get(mr.rank) : defaultOrder;
    if (order.length !== nmb || [...order].sort((a, b) => a - b).some((m, i) => m !== i))
      throw new Error(`schedule.json: rank ${mr.rank} runs forward micro-batches [${order}], expected each of 0..${nmb - 1} once`);
    for (const n of prog.inputs)
      if (!inSpec[n]) throw new Error(`rank ${mr.rank} (${mr.graph}): graph input '${n}' is not a model input of the manifest`);
    if (role.inputs && [...role.inputs].sort().join() !== [...prog.inputs].sort().join())
      throw new Error(`manifest role ${mr.graph} declares inputs [${role.inputs}] but the graph takes [${prog.inputs}]`);
    const outputs = (role.outputs || []).filter(o => prog.outputs.includes(o));
    const kv = kvOfRole(role);
    for (const o of role.outputs || [])
      if (!prog.outputs.includes(o)) throw new Error(`rank ${mr.rank}: manifest says ${mr.graph} outputs '${o}' but the graph has no such output`);
    const ctx = {
      rank: mr.rank, role: mr.graph, coords: mr.coords, manifestRank: mr, order, mb: -1, seen: new Map(),
      work: args.work, consts: consts.get(mr.graph), outputs,
      trace: args.diagnose ? [] : null,
    };
    ctxs.push(ctx);
    const dpIdx = mr.coords.dp;
    const feedsFor = (mb) => {
      const f = {};
      for (const n of prog.inputs) {
        const e = kv[n];
        if (prev && e && e.io === 'past') {
          const got = prev.rankOutputs.get(mr.rank);
          const pe = got && got.kv[prev.presentOf[`${e.layer}/${e.kind}`]];
          const t = got && got.byMb.get(mb) && pe && got.byMb.get(mb)[pe.name];
          if (!t) throw new Error(`${stepName}rank ${mr.rank} (${mr.graph}): past '${n}' (layer ${e.layer} ${e.kind}) was not returned by this rank at the previous step`);
          if (!sameSplit(pe.split, e.split))
            throw new Error(`${stepName}rank ${mr.rank} (${mr.graph}): past '${n}' takes ${splitStr(e.split)} but the rank's present '${pe.name}' of the previous step holds ${splitStr(pe.split)}`);
          f[n] = t;
        } else {
          f[n] = kvSlice(sampleSlice(inputs[n], inSpec[n], dpIdx, mb), e);
        }
      }
      return f;
    };
    const mine = { kv, byMb: new Map() };
    rankOutputs.set(mr.rank, mine);
    const onOutputs = (mb, outs) => {
      mine.byMb.set(mb, outs);
      for (const [name, got] of Object.entries(outs)) {
        const spec = outSpec[name];
        if (!spec) continue;
        if (!got) { failures.push(`${stepName}rank ${mr.rank} (${mr.graph}, dp ${dpIdx}, mb ${mb}): output '${name}' was not produced`); continue; }
        const want = kvSlice(wanted(name, spec, dpIdx, mb), kv[name]);
        if (got.dims.join() !== want.dims.join()) {
          failures.push(`${stepName}rank ${mr.rank} (${mr.graph}, dp ${dpIdx}, mb ${mb}): output '${name}' has shape [${got.dims}], expected [${want.dims}]`);
          continue;
        }
        const { maxErr, at } = compare(want, got);
        results.push({ rank: mr.rank, name, mb, maxErr });
        if (!(maxErr <= tol[name])) {
          failures.push(`${stepName}rank ${mr.rank} (${mr.graph}, dp ${dpIdx}, mb ${mb}): output '${name}' max abs error ${maxErr.toExponential(3)} > tolerance ${tol[name].toExponential(3)} ` +
            `(first worst element ${at}: got ${Number(toNumbers(got)[at])}, want ${Number(toNumbers(want)[at])})`);
        }
        if (spec.batch_axis !== null && spec.batch_axis !== undefined)
          for (let i = 0; i < mbs; i++) covered.get(name).add(dpIdx * perReplica + mb * mbs + i);
        else covered.get(name).add(-1);
      }
    };
    starts.push(() => runRank(world, ctx, prog, feedsFor, onOutputs).then(
      () => world.finish(),
      (e) => { world.fail(e); world.running--; throw e; }));
  }
  // Every rank counts as running before any starts: a rank whose first
  // step is a collective on a weight (a const step, no segment before it)
  // blocks without yielding, and must not be taken for a deadlock while
  // the other members have not started yet.
  world.running = starts.length;
  for (const start of starts) tasks.push(start());
  const settled = await Promise.allSettled(tasks);
  const errs = settled.filter(s => s.status === 'rejected').map(s => s.reason);
  if (world.failed || errs.length) {
    const e = world.failed || errs[0];
    throw e;
  }
  for (const o of manifest.outputs) {
    const s = covered.get(o.name);
    const want = o.batch_axis === null || o.batch_axis === undefined ? 1 : B;
    if (s.size !== want) failures.push(`output '${o.name}': ranks produced ${s.size} of ${want} samples`);
  }
  const rankOf = (f) => { const m = /^(?:step \d+: )?rank (\d+) /.exec(f); return m ? Number(m[1]) : 1e9; };
  failures.sort((a, b) => rankOf(a) - rankOf(b));
  if (failures.length && args.diagnose) {
    try {
      failures.push(...await diagnose(args, manifest, program, inputs, ctxs, failures, { B, perReplica, mbs }));
    } catch (e) {
      failures.push(`diagnosis failed: ${e.message}`);
    }
  }
  const summary = {};
  for (const o of manifest.outputs) {
    const errsO = results.filter(r => r.name === o.name).map(r => r.maxErr);
    summary[o.name] = { max_abs_err: errsO.length ? Math.max(...errsO) : null, tol: tol[o.name], scale: scale[o.name] };
  }
  const line = {
    ok: failures.length === 0, ranks: manifest.ranks.length, roles: manifest.roles.length,
    micro_batches: nmb, outputs: summary, failures,
  };
  for (const [n, s] of Object.entries(summary))
    console.log(`harness: ${stepName}${n}: max abs err ${s.max_abs_err === null ? 'n/a' : s.max_abs_err.toExponential(3)} (tol ${s.tol.toExponential(3)}) over ${manifest.ranks.length} ranks, ${nmb} micro-batch(es)`);
  for (const f of failures) console.log(`harness: FAIL ${f}`);
  if (st.index) line.step = st.index;
  if (args.json) console.log(JSON.stringify(line));
  const presentOf = {};
  for (const r of manifest.roles) for (const e of r.kv_cache || []) if (e.io === 'present') presentOf[`${e.layer}/${e.kind}`] = e.name;
  return { code: failures.length ? 1 : 0, ref, rankOutputs, presentOf };
}

async function main() {
  const args = parseArgs(process.argv);
  const rnd = mulberry32(args.seed);
  const steps = [{ outdir: args.outdir, work: args.work, model: args.model, index: 0 }];
  args.steps.forEach((s, i) => steps.push(Object.assign({ index: i + 1 }, s)));
  let prev = null, code = 0;
  for (const st of steps) {
    prev = await runStep(args, st, prev, rnd);
    code = Math.max(code, prev.code);
    if (prev.code) break;
  }
  return code;
}

main().then(code => { process.exitCode = code; }, err => {
  console.log(`harness: ERROR ${err.message}`);
  if (process.env.LOOM_E2E_DEBUG) console.error(err.stack);
  process.exitCode = 1;
});
