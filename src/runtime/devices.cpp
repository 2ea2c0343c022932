#include "spmd/runtime/devices.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>

#include "spmd/runtime/error.hpp"
#include "spmd/runtime/time_account.hpp"

namespace spmd::runtime {

DevicePlatform::~DevicePlatform() = default;

namespace {

class HostPlatform final : public DevicePlatform {
 public:
  std::string_view name() const override { return "cpu"; }
  // Informational: a CPU device is a worker thread, and a rank may run more of them than cores.
  int device_count(std::string*) const override { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }
  std::string device_name(int ordinal) const override { return "cpu:" + std::to_string(ordinal); }
  void bind_thread(int) const override {}
};

}  // namespace

const DevicePlatform& host_platform() {
  static const HostPlatform platform;
  return platform;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      auto pos = line.find(':');
      if (pos != std::string::npos) return line.substr(line.find_first_not_of(' ', pos + 1));
    }
  }
  return "cpu";
}

std::vector<int> assign_gpus(int local_rank, int gpus_per_rank, int visible) {
  std::vector<int> out;
  if (visible <= 0) return out;
  for (int k = 0; k < gpus_per_rank; ++k) out.push_back((local_rank * gpus_per_rank + k) % visible);
  return out;
}

DevicePool::DevicePool(std::vector<DeviceInfo> devices) : devices_(std::move(devices)) {
  errors_.resize(devices_.size());
  transfer_ticks_.resize(devices_.size());
  for (int i = 0; i < size(); ++i) threads_.emplace_back([this, i] { worker(i); });
}

DevicePool::~DevicePool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void DevicePool::run(const std::function<void(int)>& fn) {
  TimeScope compute(TimeCategory::Compute);
  if (simulated_delay_s_ > 0) std::this_thread::sleep_for(std::chrono::duration<double>(simulated_delay_s_));
  // One CPU device: run on the caller's thread. Nothing is gained by a hand-off, and the
  // results stay in this core's cache for the caller (the eval step reads them next).
  if (devices_.size() == 1 && devices_[0].is_host()) {
    fn(0);
    return;
  }
  {
    std::unique_lock<std::mutex> lock(mutex_);
    job_ = &fn;
    pending_ = size();
    for (auto& e : errors_) e = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
  // The devices ran side by side: the wait is the slowest one's, copies included, so the
  // most any device spent copying is what the wait owes to host_device.
  compute.reclassify(TimeCategory::HostDevice, *std::max_element(transfer_ticks_.begin(), transfer_ticks_.end()));
  for (auto& e : errors_)
    if (e) std::rethrow_exception(e);
}

void DevicePool::worker(int index) {
  // A failure here surfaces at the device's first call (which checks its device again).
  try {
    devices_[index].platform->bind_thread(devices_[index].ordinal);
  } catch (...) {
  }
  std::uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    std::exception_ptr error;
    try {
      (*job)(index);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      errors_[index] = error;
      transfer_ticks_[index] = take_thread_transfer_ticks();
      if (--pending_ == 0) done_.notify_all();
    }
  }
}

}  // namespace spmd::runtime
