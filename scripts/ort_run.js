#!/usr/bin/env node
// ONNX Runtime (CPU, via npm onnxruntime-node) as a peer for Kiln: runs a model on .npy inputs and
// writes one .npy per output, named like `kiln run` does (characters outside [A-Za-z0-9_.-] -> '_').
// onnxruntime-node is looked up in $KILN_ORT_DIR, else .cache/ort (scripts/fetch_npm_assets.sh).
//
//   node scripts/ort_run.js MODEL.onnx --input x=in.npy [--input ...] [--output-dir DIR]
//        [--threads N] [--iterations N]      (N > 1: also prints the median latency)
'use strict';
const fs = require('fs');
const path = require('path');

function loadOrt() {
  const dirs = [process.env.KILN_ORT_DIR, path.join(__dirname, '..', '.cache', 'ort')].filter(Boolean);
  for (const d of dirs) {
    const p = path.join(d, 'node_modules', 'onnxruntime-node');
    if (fs.existsSync(p)) return require(p);
  }
  throw new Error(`onnxruntime-node not found in ${dirs.join(', ')}: run scripts/fetch_npm_assets.sh`);
}

// ---- .npy (NumPy format 1.0-3.0, C order, little-endian) ----
// descr -> [ORT tensor type, TypedArray]; bool is stored one byte per element in both.
const NPY_TYPES = {
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '<f2': ['float16', Uint16Array],
  '<i8': ['int64', BigInt64Array], '<i4': ['int32', Int32Array], '<i2': ['int16', Int16Array],
  '|i1': ['int8', Int8Array], '<u8': ['uint64', BigUint64Array], '<u4': ['uint32', Uint32Array],
  '<u2': ['uint16', Uint16Array], '|u1': ['uint8', Uint8Array], '|b1': ['bool', Uint8Array],
};
const ORT_TO_DESCR = Object.fromEntries(Object.entries(NPY_TYPES).map(([d, [t]]) => [t, d]));

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const lenBytes = major === 1 ? 2 : 4;
  const headerLen = lenBytes === 2 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = 8 + lenBytes + headerLen;
  const header = buf.toString(major === 3 ? 'utf8' : 'latin1', 8 + lenBytes, start);
  const descr = /'descr':\s*'([^']+)'/.exec(header);
  const fortran = /'fortran_order':\s*(True|False)/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shape) throw new Error(`${file}: malformed header ${header}`);
  if (fortran[1] === 'True') throw new Error(`${file}: Fortran-order arrays are not supported`);
  const d = descr[1].replace(/^=/, '<');
  if (!NPY_TYPES[d]) throw new Error(`${file}: dtype ${descr[1]} not supported`);
  const [type, Ctor] = NPY_TYPES[d];
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  const bytes = count * Ctor.BYTES_PER_ELEMENT;
  if (buf.length - start < bytes) throw new Error(`${file}: truncated (${buf.length - start} of ${bytes} data bytes)`);
  // Copy into a fresh, aligned buffer: the data offset inside the file need not be aligned.
  const data = new Ctor(count);
  Buffer.from(data.buffer).set(buf.subarray(start, start + bytes));
  return { type, data: type === 'bool' ? Uint8Array.from(data, (v) => (v ? 1 : 0)) : data, dims };
}

function writeNpy(file, type, data, dims) {
  const descr = ORT_TO_DESCR[type];
  if (!descr) throw new Error(`${file}: cannot write ORT type ${type}`);
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';  // pad so the data starts 64-byte aligned
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1; pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const raw = type === 'bool' ? Uint8Array.from(data, (v) => (v ? 1 : 0)) : data;
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'),
    Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength)]));
}

function parseArgs(argv) {
  const a = { model: null, inputs: [], outputDir: '.', threads: 0, iterations: 1 };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const next = () => { if (i + 1 >= argv.length) throw new Error(`${flag} needs a value`); return argv[++i]; };
    if (flag === '--input') {
      const v = next(); const eq = v.indexOf('=');
      if (eq <= 0) throw new Error(`--input wants name=FILE.npy, got ${v}`);
      a.inputs.push([v.slice(0, eq), v.slice(eq + 1)]);
    } else if (flag === '--output-dir') a.outputDir = next();
    else if (flag === '--threads') a.threads = Number(next());
    else if (flag === '--iterations') a.iterations = Math.max(1, Number(next()));
    else if (flag === '-h' || flag === '--help') { a.help = true; }
    else if (flag.startsWith('--')) throw new Error(`unknown option ${flag}`);
    else if (!a.model) a.model = flag;
    else throw new Error(`unexpected argument ${flag}`);
  }
  return a;
}

const sanitize = (name) => name.replace(/[^A-Za-z0-9_.-]/g, '_');

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (args.help || !args.model) {
    console.log('usage: ort_run.js MODEL.onnx --input name=FILE.npy ... [--output-dir DIR] [--threads N] [--iterations N]');
    process.exit(args.help ? 0 : 2);
  }
  const ort = loadOrt();
  const opts = { graphOptimizationLevel: 'all' };
  if (args.threads > 0) opts.intraOpNumThreads = args.threads;
  const session = await ort.InferenceSession.create(args.model, opts);
  const feeds = {};
  for (const [name, file] of args.inputs) {
    if (!session.inputNames.includes(name)) throw new Error(`model has no input '${name}' (inputs: ${session.inputNames.join(', ')})`);
    const t = readNpy(file);
    feeds[name] = new ort.Tensor(t.type, t.data, t.dims);
  }
  const missing = session.inputNames.filter((n) => !(n in feeds));
  if (missing.length) throw new Error(`missing --input for ${missing.join(', ')}`);

  const times = [];
  let results;
  for (let it = 0; it < args.iterations; it++) {
    const t0 = process.hrtime.bigint();
    results = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  fs.mkdirSync(args.outputDir, { recursive: true });
  for (const name of session.outputNames) {
    const t = results[name];
    const file = path.join(args.outputDir, `${sanitize(name)}.npy`);
    writeNpy(file, t.type, t.data, t.dims);
    let maxAbs = 0;
    if (t.type === 'float32' || t.type === 'float64') for (const v of t.data) maxAbs = Math.max(maxAbs, Math.abs(v));
    console.log(`[ort] ${name}: ${t.type} [${t.dims.join('x')}] max|y| ${maxAbs.toPrecision(4)} -> ${file}`);
  }
  // The first run includes one-time setup; report it apart from the steady state.
  const steady = times.length > 1 ? times.slice(1).sort((x, y) => x - y) : times;
  const median = steady[Math.floor(steady.length / 2)];
  console.log(`[ort] onnxruntime-node ${ort.env.versions ? ort.env.versions.common : ''} ` +
    `first run ${times[0].toFixed(2)} ms, median ${median.toFixed(2)} ms over ${steady.length} run(s)`);
}

main().catch((e) => { console.error(`[ort] error: ${e.message}`); process.exit(1); });
