// The defaults of the byte-sample entry points (classifier.hpp, device_models.hpp): a model
// that does not say decodes_bytes() is given floats, so reaching these is a caller's bug.
#include <string>

#include "spmd/models/classifier.hpp"
#include "spmd/models/device_models.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models {

namespace {
[[noreturn]] void refuse(const char* call) {
  throw Error(std::string(call) +
              " on a model that decodes no bytes (decodes_bytes() is false): decode the samples on the host and "
              "call the float entry point");
}
}  // namespace

void DevicePredictor::predict_bytes(const std::uint8_t*, std::int64_t, const ByteTable&, std::int32_t*, float*) {
  refuse("DevicePredictor::predict_bytes");
}

void CnnMember::forward_bytes(const std::uint8_t*, int, const ByteTable&, float*) { refuse("CnnMember::forward_bytes"); }
float CnnMember::train_step_bytes(const std::uint8_t*, const std::int32_t*, int, const ByteTable&,
                                  const optim::SgdMomentum&, float*) {
  refuse("CnnMember::train_step_bytes");
}

}  // namespace spmd::models
