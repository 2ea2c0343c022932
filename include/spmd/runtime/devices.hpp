#pragma once
// This rank's devices. A CPU device is a worker thread with its own buffers (like
// chex.set_n_cpu_devices); a CUDA device is a GPU chosen by node-local rank. Each device has
// one persistent worker thread, so per-device work runs concurrently and thread-local state
// (cudaSetDevice, BLAS threading) is set once.
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace spmd::runtime {

enum class Backend { Cpu, Cuda };
enum class BackendChoice { Auto, Cpu, Cuda };

const char* to_string(Backend b);
const char* to_string(BackendChoice b);
BackendChoice parse_backend_choice(const std::string& text);  // throws spmd::Error

struct DeviceInfo {
  int local_index = 0;   // 0 .. devices_per_rank-1
  int global_index = 0;  // rank * devices_per_rank + local_index
  Backend backend = Backend::Cpu;
  int cuda_ordinal = -1;  // index among the visible GPUs (CUDA_VISIBLE_DEVICES respected)
  std::string name;       // "cpu:0" or the GPU model
};

// Visible GPUs, 0 when the CUDA backend is not compiled in or no driver/GPU is present.
// why_none receives the reason when the count is 0 (e.g. "CUDA driver not found").
int visible_gpu_count(std::string* why_none = nullptr);
std::string gpu_name(int ordinal);
// "AMD EPYC ..." from /proc/cpuinfo, for the start-up table.
std::string cpu_model_name();

// k GPUs per rank: local_rank*k .. +k-1, modulo the visible count.
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
  // device runs fn(0) on the calling thread instead.
  void run(const std::function<void(int)>& fn);

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
};

}  // namespace spmd::runtime
