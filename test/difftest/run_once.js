// Runs each generated model once in ONNX Runtime (onnxruntime-node) before
// the differential tester plans it: a model the runtime cannot load or run
// is the generator's fault, not Loom's, and must not count as a Loom case.
//
//   node run_once.js SPECS.json
// SPECS.json: [{"model": PATH, "inputs": [{"name", "dtype", "dims", "hi"}]}]
// Prints one JSON line per model: {"model", "ok", "error"}.
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

function tensor(spec, seed) {
  const n = spec.dims.reduce((a, b) => a * b, 1);
  let s = seed >>> 0;
  const next = () => { s = (s * 1664525 + 1013904223) >>> 0; return s / 4294967296; };
  if (spec.dtype === 'int64') {
    const a = new BigInt64Array(n);
    for (let i = 0; i < n; i++) a[i] = BigInt(Math.floor(next() * spec.hi));
    return new ort.Tensor('int64', a, spec.dims);
  }
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = 2 * next() - 1;
  return new ort.Tensor('float32', a, spec.dims);
}

async function main() {
  const specs = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  for (const m of specs) {
    try {
      const sess = await ort.InferenceSession.create(m.model, { logSeverityLevel: 3 });
      const feeds = {};
      m.inputs.forEach((spec, i) => { feeds[spec.name] = tensor(spec, 17 + i); });
      const out = await sess.run(feeds);
      for (const [name, t] of Object.entries(out))
        for (const v of t.data)
          if (typeof v === 'number' && !Number.isFinite(v)) throw new Error(`output '${name}' is not finite`);
      console.log(JSON.stringify({ model: m.model, ok: true }));
    } catch (e) {
      console.log(JSON.stringify({ model: m.model, ok: false, error: String(e.message || e) }));
    }
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
