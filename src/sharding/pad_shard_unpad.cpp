#include "spmd/sharding/pad_shard_unpad.hpp"

#include <cstring>
#include <string>

namespace spmd::sharding {

std::int64_t device_batch_for(std::int64_t batch, int devices, std::int64_t min_device_batch) {
  if (batch < 0) throw Error("pad_shard_unpad: negative batch size " + std::to_string(batch));
  if (min_device_batch < 0)
    throw Error("pad_shard_unpad: min_device_batch must be >= 0 (0 = no minimum), got " + std::to_string(min_device_batch));
  const std::int64_t d = devices;
  return std::max((batch + d - 1) / d, min_device_batch);
}

const ConstHostView& Shards::operator[](std::size_t i) const {
  if (i >= arrays_.size())
    throw Error("pad_shard_unpad: the step asked for argument " + std::to_string(i) + " of " +
                std::to_string(arrays_.size()));
  return arrays_[i];
}

PadShardUnpad::PadShardUnpad(int devices) {
  if (devices < 1)
    throw Error("pad_shard_unpad: devices (local device count) must be >= 1, got " + std::to_string(devices));
  shards_.devices_ = devices;
}

ConstHostView PadShardUnpad::shard_one(const Batched& arg, std::size_t slot, std::int64_t device_batch) {
  const ConstHostView& array = arg.rows;
  const std::int64_t d = shards_.devices_;
  const std::int64_t padded_rows = d * device_batch;
  // [d, b_dev, trailing...], built in place (this runs for every argument of every step).
  Shape sharded;
  sharded.push_back(d);
  sharded.push_back(device_batch);
  for (std::size_t k = 1; k < array.shape().size(); ++k) sharded.push_back(array.shape()[k]);
  // An unread argument without rows has nothing to view in place: its (all padding) shards
  // come from the buffer like a filled one's.
  if (array.rows() == padded_rows || (arg.padding == Batched::Padding::Unread && array.rows() > 0))
    return ConstHostView(array.dtype(), std::move(sharded), array.bytes());

  Shape padded_shape = array.shape();
  padded_shape[0] = padded_rows;
  if (padding_buffers_.size() <= slot) padding_buffers_.resize(slot + 1);
  HostArray& buffer = padding_buffers_[slot];
  if (buffer.dtype() != array.dtype() || buffer.shape() != padded_shape) buffer = HostArray(array.dtype(), padded_shape);
  // Real rows first, then the padding: the buffer may hold the previous call's rows.
  std::byte* dst = buffer.view().bytes();
  const std::size_t real_bytes = array.size_bytes();
  if (real_bytes > 0) std::memcpy(dst, array.bytes(), real_bytes);
  const std::size_t total_bytes = buffer.view().size_bytes();
  if (total_bytes > real_bytes) std::memset(dst + real_bytes, arg.padding_byte, total_bytes - real_bytes);
  return ConstHostView(buffer.dtype(), std::move(sharded), buffer.view().bytes());
}

const Shards& PadShardUnpad::shard(std::span<const Batched> args, std::int64_t min_device_batch) {
  if (args.empty()) throw Error("pad_shard_unpad: no batched argument, so there is no batch to pad and shard");
  for (std::size_t i = 0; i < args.size(); ++i)
    if (args[i].rows.rank() == 0)
      throw Error("pad_shard_unpad: argument " + std::to_string(i) +
                  " is a scalar; batched arguments need a leading batch dimension (capture it in the step instead)");
  const std::int64_t batch = args.front().rows.rows();
  const bool consistent = std::all_of(args.begin(), args.end(), [&](const Batched& a) { return a.rows.rows() == batch; });
  if (!consistent) {
    std::string sizes;
    for (std::size_t i = 0; i < args.size(); ++i)
      sizes += (i ? ", " : "") + std::string("argument ") + std::to_string(i) + " has " + std::to_string(args[i].rows.rows());
    throw Error("pad_shard_unpad: inconsistent batch sizes: " + sizes +
                " rows; every batched argument must have the same leading size (capture the others in the step)");
  }
  const std::int64_t device_batch = device_batch_for(batch, shards_.devices_, min_device_batch);
  shards_.batch_ = batch;
  shards_.device_batch_ = device_batch;
  shards_.arrays_.clear();  // keeps its capacity: no allocation once the first call has run
  std::size_t slot = 0;
  for (const Batched& a : args)
    shards_.arrays_.push_back(shard_one(a, slot++, device_batch));
  return shards_;
}

void PadShardUnpad::unpad(HostArray& out, std::size_t which) const {
  const std::int64_t d = shards_.devices_, device_batch = shards_.device_batch_;
  const Shape& s = out.shape();
  if (s.size() < 2 || s[0] != d || s[1] != device_batch)
    throw Error("pad_shard_unpad: output " + std::to_string(which) + " has shape " + to_string(s) + "; expected [d=" +
                std::to_string(d) + ", b_dev=" + std::to_string(device_batch) +
                ", ...] from a per-device step (a step whose result is not per example calls shard() itself)");
  Shape gathered(s.begin() + 1, s.end());
  gathered[0] = d * device_batch;
  out.reshape(std::move(gathered));
  out.truncate_rows(shards_.batch_);
}

}  // namespace spmd::sharding
