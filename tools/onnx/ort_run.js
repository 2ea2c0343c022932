// Runs an ONNX model in ONNX Runtime (CPU, one thread, all graph optimisations) on one float32
// input and writes its first output: the reference implementation beside spmd.
//   node tools/onnx/ort_run.js MODEL.onnx INPUT.f32 DIM,DIM,... OUTPUT.f32
// INPUT.f32 / OUTPUT.f32: raw little-endian float32, row-major. Prints the output's dims.
const fs = require('fs');
const path = require('path');
const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));

async function main() {
  const [model, input, dimsText, output] = process.argv.slice(2);
  if (!output) throw new Error('usage: ort_run.js MODEL.onnx INPUT.f32 DIM,DIM,... OUTPUT.f32');
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: 'all'});
  const dims = dimsText.split(',').map(Number);
  const bytes = fs.readFileSync(input);
  const data = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  const expected = dims.reduce((a, b) => a * b, 1);
  if (data.length !== expected) throw new Error(`${input}: ${data.length} floats, dims ${dimsText} need ${expected}`);
  const feeds = {[session.inputNames[0]]: new ort.Tensor('float32', data, dims)};
  const result = await session.run(feeds);
  const out = result[session.outputNames[0]];
  fs.writeFileSync(output, Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength));
  console.log(`${session.outputNames[0]} ${out.dims.join(',')}`);
}
main().catch((e) => { console.error(`ort_run: ${e.message}`); process.exit(1); });
