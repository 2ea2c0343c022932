// Images/s of an ONNX model in ONNX Runtime (CPU, one intra-op thread, all graph
// optimisations) on a batch of random float32 input: the reference tools/bench/onnx_speed.sh
// times spmd eval --model onnx against.
//   node tools/onnx/ort_bench.js MODEL.onnx DIM,DIM,...   (the first dimension is the batch)
const path = require('path');
const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));

(async () => {
  const [model, dimsText] = process.argv.slice(2);
  const dims = dimsText.split(',').map(Number);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: 'all'});
  const data = new Float32Array(dims.reduce((a, b) => a * b, 1)).map(() => Math.random());
  const feeds = {[session.inputNames[0]]: new ort.Tensor('float32', data, dims)};
  await session.run(feeds);
  const times = [];
  for (let r = 0; r < 7; ++r) {
    const t = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t) / 1e9);
  }
  times.sort((a, b) => a - b);
  console.log(JSON.stringify({model, batch: dims[0], median_seconds: times[3], images_per_second: dims[0] / times[3]}));
})().catch((e) => { console.error(`ort_bench: ${e.message}`); process.exit(1); });
