#include "spmd/sharding/pad_shard_unpad.hpp"

#include <algorithm>
#include <cstring>

namespace spmd::sharding {

const ConstHostView& Arg::array() const {
  if (!is_array_) throw Error("pad_shard_unpad: argument is an opaque " + held_type() + ", not an array");
  return array_;
}

std::string Arg::held_type() const {
  if (is_array_) return std::string("array ") + to_string(array_.dtype()) + to_string(array_.shape());
  return type_ ? type_->name() : "nothing";
}

const Arg& ShardedArgs::arg(std::size_t i) const {
  if (i >= args_.size())
    throw Error("pad_shard_unpad: the wrapped function asked for argument " + std::to_string(i) + " of " +
                std::to_string(args_.size()));
  return args_[i];
}

const Arg& ShardedArgs::kwarg(const std::string& name) const {
  const auto it = kwargs_.find(name);
  if (it == kwargs_.end()) throw Error("pad_shard_unpad: the wrapped function asked for keyword argument '" + name + "', which was not passed");
  return it->second;
}

PadShardUnpad::PadShardUnpad(Wrapped wrapped, PadShardUnpadOptions options)
    : wrapped_(std::move(wrapped)), options_(std::move(options)) {
  if (!wrapped_) throw Error("pad_shard_unpad: the wrapped function is empty");
  if (options_.devices < 1)
    throw Error("pad_shard_unpad: devices (local device count) must be >= 1, got " + std::to_string(options_.devices));
  for (const int i : options_.static_argnums)
    if (i < 0) throw Error("pad_shard_unpad: static_argnums entries must be >= 0, got " + std::to_string(i));
}

std::string PadShardUnpad::Batched::label() const {
  return name ? "keyword argument '" + *name + "'" : "argument " + std::to_string(position);
}

bool PadShardUnpad::is_static_position(std::size_t i) const {
  return std::find(options_.static_argnums.begin(), options_.static_argnums.end(), static_cast<int>(i)) !=
         options_.static_argnums.end();
}

bool PadShardUnpad::is_static_name(const std::string& name) const {
  return std::find(options_.static_argnames.begin(), options_.static_argnames.end(), name) != options_.static_argnames.end();
}

std::int64_t PadShardUnpad::device_batch_for(std::int64_t batch, std::int64_t min_device_batch) const {
  if (batch < 0) throw Error("pad_shard_unpad: negative batch size " + std::to_string(batch));
  if (min_device_batch < 0)
    throw Error("pad_shard_unpad: min_device_batch must be >= 0 (0 = no minimum), got " + std::to_string(min_device_batch));
  const std::int64_t d = options_.devices;
  return std::max((batch + d - 1) / d, min_device_batch);
}

ConstHostView PadShardUnpad::shard(const Arg& arg, std::size_t slot, std::int64_t device_batch) {
  const ConstHostView& array = arg.array();
  const std::int64_t d = options_.devices;
  const std::int64_t padded_rows = d * device_batch;
  // [d, b_dev, trailing...], built in place (this runs for every argument of every step).
  Shape sharded;
  sharded.push_back(d);
  sharded.push_back(device_batch);
  for (std::size_t k = 1; k < array.shape().size(); ++k) sharded.push_back(array.shape()[k]);
  if (array.rows() == padded_rows) return ConstHostView(array.dtype(), std::move(sharded), array.bytes());

  Shape padded_shape = array.shape();
  padded_shape[0] = padded_rows;
  if (padding_buffers_.size() <= slot) padding_buffers_.resize(slot + 1);
  HostArray& buffer = padding_buffers_[slot];
  if (buffer.dtype() != array.dtype() || buffer.shape() != padded_shape) buffer = HostArray(array.dtype(), padded_shape);
  // Real rows first, then the padding (zeros): the buffer may hold the previous call's rows.
  std::byte* dst = buffer.view().bytes();
  const std::size_t real_bytes = array.size_bytes();
  if (real_bytes > 0) std::memcpy(dst, array.bytes(), real_bytes);
  const std::size_t total_bytes = buffer.view().size_bytes();
  if (total_bytes > real_bytes) std::memset(dst + real_bytes, arg.padding_byte(), total_bytes - real_bytes);
  return ConstHostView(buffer.dtype(), std::move(sharded), buffer.view().bytes());
}

std::vector<HostArray> PadShardUnpad::operator()(const std::vector<Arg>& args, const NamedArgs& kwargs,
                                                 PadShardUnpadCallOptions call) {
  // Every list below is a member reused from call to call: this runs every step.
  batched_.clear();
  for (std::size_t i = 0; i < args.size(); ++i)
    if (!is_static_position(i)) batched_.push_back({i, nullptr, &args[i]});
  for (const auto& [name, arg] : kwargs)
    if (!is_static_name(name)) batched_.push_back({0, &name, &arg});
  const auto& batched = batched_;

  if (batched.empty())
    throw Error("pad_shard_unpad: no batched argument (every argument is listed in static_argnums/static_argnames), "
                "so there is no batch to pad and shard");
  for (const auto& b : batched) {
    if (!b.arg->is_array())
      throw Error("pad_shard_unpad: " + b.label() + " is an opaque " + b.arg->held_type() +
                  "; list it in static_argnums/static_argnames to pass it through");
    if (b.arg->array().rank() == 0)
      throw Error("pad_shard_unpad: " + b.label() + " is a scalar; batched arguments need a leading batch dimension "
                  "(list it in static_argnums/static_argnames to pass it through)");
  }
  const std::int64_t batch = batched.front().arg->array().rows();
  const bool consistent = std::all_of(batched.begin(), batched.end(),
                                      [&](const Batched& b) { return b.arg->array().rows() == batch; });
  if (!consistent) {
    std::string sizes;
    for (const auto& b : batched) sizes += (sizes.empty() ? "" : ", ") + b.label() + " has " + std::to_string(b.arg->array().rows());
    throw Error("pad_shard_unpad: inconsistent batch sizes: " + sizes +
                " rows; every argument not in static_argnums/static_argnames must have the same leading size");
  }

  const std::int64_t device_batch = device_batch_for(batch, call.min_device_batch);
  sharded_args_.clear();
  std::size_t slot = 0;
  for (std::size_t i = 0; i < args.size(); ++i)
    sharded_args_.push_back(is_static_position(i) ? args[i] : Arg(shard(args[i], slot++, device_batch)));
  sharded_kwargs_.clear();
  for (const auto& [name, arg] : kwargs)
    sharded_kwargs_.emplace(name, is_static_name(name) ? arg : Arg(shard(arg, slot++, device_batch)));

  const int d = options_.devices;
  std::vector<HostArray> outputs = wrapped_(ShardedArgs(sharded_args_, sharded_kwargs_, d, batch, device_batch));
  if (options_.static_return) return outputs;

  for (std::size_t k = 0; k < outputs.size(); ++k) {
    HostArray& out = outputs[k];
    const Shape& s = out.shape();
    if (s.size() < 2 || s[0] != d || s[1] != device_batch)
      throw Error("pad_shard_unpad: output " + std::to_string(k) + " has shape " + to_string(s) + "; expected [d=" +
                  std::to_string(d) + ", b_dev=" + std::to_string(device_batch) +
                  ", ...] from a per-device step (or set static_return to get outputs as they are)");
    Shape gathered(s.begin() + 1, s.end());
    gathered[0] = static_cast<std::int64_t>(d) * device_batch;
    out.reshape(std::move(gathered));
    out.truncate_rows(batch);
  }
  return outputs;
}

}  // namespace spmd::sharding
