#pragma once
// This rank's devices. A CPU device is a worker thread with its own buffers (like
// chex.set_n_cpu_devices); a GPU device is chosen by node-local rank. Each device has one
// persistent worker thread, so per-device work runs concurrently and thread-local state
// (the current GPU, BLAS threading) is set once, by the device's platform.
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace spmd::runtime {

// What the runtime needs of a backend: its devices. The backends (src/backends/) implement
// it together with their model factories; the runtime only names, counts and binds devices,
// so it never loads a backend's libraries itself.
class DevicePlatform {
 public:
  virtual ~DevicePlatform();
  virtual std::string_view name() const = 0;  // "cpu", "cuda": what --backend says
  virtual std::string_view device_kind() const { return "device"; }  // "GPU", for messages
  // Devices this process can use; 0 with the reason in why_none when there are none.
  virtual int device_count(std::string* why_none) const = 0;
  // For the start-up table: "cpu:0", "cuda:1 NVIDIA H100 80GB HBM3".
  virtual std::string device_name(int ordinal) const = 0;
  // Runs once on a device's worker thread before any work (CUDA: makes the GPU current).
  virtual void bind_thread(int ordinal) const = 0;
};

// CPU worker threads: always available, built into the runtime so that it works alone.
const DevicePlatform& host_platform();

struct DeviceInfo {
  int local_index = 0;   // 0 .. devices_per_rank-1
  int global_index = 0;  // rank * devices_per_rank + local_index
  const DevicePlatform* platform = &host_platform();
  int ordinal = 0;        // the platform's device index (a CUDA ordinal; CUDA_VISIBLE_DEVICES respected)
  std::string name;       // "cpu:0" or the GPU model
  std::string_view backend() const { return platform->name(); }
  bool is_host() const { return backend() == "cpu"; }
};

// The backend a run asked for (--backend): resolved to a platform by a selector, which the
// backends layer provides (backends::select_platform); `note` says why this one ("--backend
// auto: no CUDA driver (...), using CPU"), `error` why the request cannot be met.
struct PlatformChoice {
  const DevicePlatform* platform = nullptr;
  std::string note;
  std::string error;
};
using PlatformSelector = PlatformChoice (*)(const std::string& requested);

// "AMD EPYC ..." from /proc/cpuinfo, for the start-up table.
std::string cpu_model_name();

// k devices per rank: local_rank*k .. +k-1, modulo the visible count (GPUs on a node).
std::vector<int> assign_gpus(int local_rank, int gpus_per_rank, int visible);

class DevicePool {
 public:
  explicit DevicePool(std::vector<DeviceInfo> devices);
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  int size() const { return static_cast<int>(devices_.size()); }
  const std::vector<DeviceInfo>& devices() const { return devices_; }

  // Runs fn(local_index) on every device's thread and waits for all. If any throws, the
  // first exception (lowest device) is rethrown here after all have finished. A single CPU
  // device runs fn(0) on the calling thread instead. The time account (time_account.hpp)
  // charges the call to compute, less the copies the devices timed (DeviceTransferTimer;
  // the slowest device's), which go to host_device.
  void run(const std::function<void(int)>& fn);

  // Testing aid (--simulate-slow): every run() takes `seconds` longer, as on a slower device.
  void set_simulated_delay(double seconds) { simulated_delay_s_ = seconds; }

 private:
  void worker(int index);

  std::vector<DeviceInfo> devices_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int)>* job_ = nullptr;
  std::uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::int64_t> transfer_ticks_;  // per device: its copies during the last job (account ticks)
  double simulated_delay_s_ = 0;
};

}  // namespace spmd::runtime
