// Runs an ONNX model in ONNX Runtime (CPU, one thread, all graph optimisations, or the level in
// $ORT_GRAPH_OPTIMIZATION: disabled, basic, extended) on one float32 input and writes its
// outputs: the reference implementation beside spmd.
//   node tools/onnx/ort_run.js MODEL.onnx INPUT.f32 DIM,DIM,... OUTPUT.f32
// INPUT.f32 / OUTPUT.f32: raw little-endian float32, row-major; outputs after the first go to
// OUTPUT.f32.1, OUTPUT.f32.2, ... Prints each output's name and dims, one line each.
const fs = require('fs');
const path = require('path');
const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));

async function main() {
  const [model, input, dimsText, output] = process.argv.slice(2);
  if (!output) throw new Error('usage: ort_run.js MODEL.onnx INPUT.f32 DIM,DIM,... OUTPUT.f32');
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: process.env.ORT_GRAPH_OPTIMIZATION || 'all'});
  const dims = dimsText.split(',').map(Number);
  const bytes = fs.readFileSync(input);
  const data = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  const expected = dims.reduce((a, b) => a * b, 1);
  if (data.length !== expected) throw new Error(`${input}: ${data.length} floats, dims ${dimsText} need ${expected}`);
  // $ORT_ROWS_PER_RUN: runs of that many rows (a model quantized per request, whose result
  // depends on the rows run with it), their outputs concatenated; else one run.
  const per = Number(process.env.ORT_ROWS_PER_RUN || dims[0]) || 1;
  const rowSize = expected / dims[0];
  const parts = session.outputNames.map(() => []);
  let outDims = [];
  for (let at = 0; at < dims[0]; at += per) {
    const rows = Math.min(per, dims[0] - at);
    const slice = data.subarray(at * rowSize, (at + rows) * rowSize);
    const result = await session.run({[session.inputNames[0]]: new ort.Tensor('float32', slice, [rows, ...dims.slice(1)])});
    outDims = session.outputNames.map((name, k) => {
      const out = result[name];
      parts[k].push(Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength));
      return [out.dims[0] === rows ? dims[0] : out.dims[0], ...out.dims.slice(1)];
    });
  }
  session.outputNames.forEach((name, k) => {
    fs.writeFileSync(k ? `${output}.${k}` : output, Buffer.concat(parts[k]));
    console.log(`${name} ${outDims[k].join(',')}`);
  });
}
main().catch((e) => { console.error(`ort_run: ${e.message}`); process.exit(1); });
