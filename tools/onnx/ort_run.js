// Runs an ONNX model in ONNX Runtime (CPU, one thread, all graph optimisations) on one float32
// input and writes its outputs: the reference implementation beside spmd.
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
    intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: 'all'});
  const dims = dimsText.split(',').map(Number);
  const bytes = fs.readFileSync(input);
  const data = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  const expected = dims.reduce((a, b) => a * b, 1);
  if (data.length !== expected) throw new Error(`${input}: ${data.length} floats, dims ${dimsText} need ${expected}`);
  const feeds = {[session.inputNames[0]]: new ort.Tensor('float32', data, dims)};
  const result = await session.run(feeds);
  session.outputNames.forEach((name, k) => {
    const out = result[name];
    fs.writeFileSync(k ? `${output}.${k}` : output, Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength));
    console.log(`${name} ${out.dims.join(',')}`);
  });
}
main().catch((e) => { console.error(`ort_run: ${e.message}`); process.exit(1); });
