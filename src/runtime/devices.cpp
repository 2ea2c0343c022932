#include "spmd/runtime/devices.hpp"

#include <fstream>

#include "spmd/runtime/error.hpp"

#ifdef SPMD_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace spmd::runtime {

const char* to_string(Backend b) { return b == Backend::Cuda ? "cuda" : "cpu"; }
const char* to_string(BackendChoice b) {
  switch (b) {
    case BackendChoice::Auto: return "auto";
    case BackendChoice::Cpu: return "cpu";
    case BackendChoice::Cuda: return "cuda";
  }
  return "?";
}

BackendChoice parse_backend_choice(const std::string& text) {
  if (text == "auto") return BackendChoice::Auto;
  if (text == "cpu") return BackendChoice::Cpu;
  if (text == "cuda") return BackendChoice::Cuda;
  throw Error("--backend must be one of auto, cpu, cuda (got '" + text + "')");
}

int visible_gpu_count(std::string* why_none) {
#ifdef SPMD_HAVE_CUDA
  int n = 0;  // cudaGetDeviceCount leaves it untouched on failure
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    if (why_none) *why_none = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(rc);
    cudaGetLastError();
    return 0;
  }
  if (n == 0 && why_none) *why_none = "no CUDA device visible (CUDA_VISIBLE_DEVICES?)";
  return n;
#else
  if (why_none) *why_none = "this build has no CUDA backend (configured with SPMD_CUDA=OFF or without nvcc)";
  return 0;
#endif
}

std::string gpu_name(int ordinal) {
#ifdef SPMD_HAVE_CUDA
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, ordinal) == cudaSuccess) return prop.name;
  cudaGetLastError();
#endif
  return "gpu " + std::to_string(ordinal);
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
  // One CPU device: run on the caller's thread. Nothing is gained by a hand-off, and the
  // results stay in this core's cache for the caller (the eval step reads them next).
  if (devices_.size() == 1 && devices_[0].backend == Backend::Cpu) {
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
  for (auto& e : errors_)
    if (e) std::rethrow_exception(e);
}

void DevicePool::worker(int index) {
#ifdef SPMD_HAVE_CUDA
  if (devices_[index].backend == Backend::Cuda) cudaSetDevice(devices_[index].cuda_ordinal);
#endif
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
      if (--pending_ == 0) done_.notify_all();
    }
  }
}

}  // namespace spmd::runtime
