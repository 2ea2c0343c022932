#pragma once
// Logistic regression on a GPU: the eval predictor (class = argmax of x.W). The training
// side, make_logreg_shard_cuda, is declared with the other device models in
// models/device_models.hpp. Both are defined in src/models/logreg_cuda.cu.
#include <cstdint>
#include <memory>
#include <vector>

#include "spmd/models/classifier.hpp"
#include "spmd/runtime/devices.hpp"

namespace spmd::models {

#ifdef SPMD_HAVE_CUDA
// W [features, classes] row-major float32, copied to the device's GPU once. predict() takes
// up to max_rows host rows per call and works through them in tiles, so GPU memory stays
// bounded whatever max_rows is. The logits are logreg_predict's bit for bit (the
// arithmetic of logreg_kernel_spec.hpp), so the classes are the same, ties (lowest index)
// included. Throws spmd::Error for bad shapes (features < 1, classes < 1, W.size() !=
// features * classes, max_rows < 0) and, with a clear message, when the device is not a
// usable GPU.
std::unique_ptr<DevicePredictor> make_logreg_predictor_cuda(const runtime::DeviceInfo& device,
                                                            const std::vector<float>& W, int features, int classes,
                                                            std::int64_t max_rows);
#endif

}  // namespace spmd::models
