// run.js runs an ONNX model in onnxruntime-node (CPU) for export/onnx's tests.
//
//   node run.js MODEL.onnx OUTDIR NAME=FILE.npy ...
//
// feeds each named input from a .npy file, writes the i-th output of the
// session to OUTDIR/i.npy and prints {"inputs": [...], "outputs": [...]} (the
// session's names) as one JSON line. ORT_THREADS sets the intra-op threads
// (default 1); ORT_REPEAT=k runs the model k more times and adds
// "ms_per_run" to the JSON; ORT_OPTIMIZED=FILE saves the model as
// onnxruntime optimized it.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const byDescr = {
  '<f4': ['float32', Float32Array],
  '<f8': ['float64', Float64Array],
  '<i4': ['int32', Int32Array],
  '<i8': ['int64', BigInt64Array],
  '|u1': ['uint8', Uint8Array],
  '|b1': ['bool', Uint8Array],
};
const descrOf = { float32: '<f4', float64: '<f8', int32: '<i4', int64: '<i8', uint8: '|u1', bool: '|b1' };

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf.toString('latin1', 0, 6) !== '\x93NUMPY') {
    throw new Error(`${file}: not an .npy file`);
  }
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const off = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', off, off + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !shape || !byDescr[descr[1]] || /'fortran_order':\s*True/.test(header)) {
    throw new Error(`${file}: unsupported header ${header}`);
  }
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s !== '').map(Number);
  const [type, Arr] = byDescr[descr[1]];
  const bytes = buf.subarray(off + hlen);
  const ab = new ArrayBuffer(bytes.length); // aligned copy
  new Uint8Array(ab).set(bytes);
  return new ort.Tensor(type, new Arr(ab), dims);
}

function writeNpy(file, t) {
  const descr = descrOf[t.type];
  if (!descr) throw new Error(`output of type ${t.type} is not supported`);
  const shape = t.dims.join(', ') + (t.dims.length === 1 ? ',' : '');
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${shape}), }`;
  header += ' '.repeat((64 - ((10 + header.length + 1) % 64)) % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1;
  pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  let data = t.data;
  if (t.type === 'bool' && !(data instanceof Uint8Array)) data = Uint8Array.from(data, (v) => (v ? 1 : 0));
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

async function main() {
  const [model, outdir, ...feeds] = process.argv.slice(2);
  if (!model || !outdir) throw new Error('usage: node run.js MODEL.onnx OUTDIR NAME=FILE.npy ...');
  const threads = Number(process.env.ORT_THREADS || 1);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    ...(process.env.ORT_OPTIMIZED ? { optimizedModelFilePath: process.env.ORT_OPTIMIZED } : {}),
  });
  const inputs = {};
  for (const f of feeds) {
    const eq = f.indexOf('=');
    inputs[f.slice(0, eq)] = readNpy(f.slice(eq + 1));
  }
  const results = await session.run(inputs);
  session.outputNames.forEach((name, i) => writeNpy(path.join(outdir, `${i}.npy`), results[name]));
  const report = { inputs: session.inputNames, outputs: session.outputNames };
  const repeat = Number(process.env.ORT_REPEAT || 0);
  if (repeat > 0) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < repeat; i++) await session.run(inputs);
    report.ms_per_run = Number(process.hrtime.bigint() - start) / 1e6 / repeat;
  }
  process.stdout.write(JSON.stringify(report) + '\n');
}

main().catch((e) => {
  process.stderr.write(`${e.stack || e}\n`);
  process.exit(1);
});
