// TEMPORARY (being replaced by the CUDA backend work in progress): the CUDA device models.
#include "spmd/models/device_models.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models {
std::unique_ptr<CnnMember> make_cnn_member_cuda(const runtime::DeviceInfo&, int, int) {
  throw Error("the CUDA CNN member is not available in this build yet");
}
std::unique_ptr<LogregShard> make_logreg_shard_cuda(const runtime::DeviceInfo&, const float*, const std::int32_t*,
                                                    std::int64_t, int, int, std::int64_t) {
  throw Error("the CUDA logreg shard is not available in this build yet");
}
}  // namespace spmd::models
