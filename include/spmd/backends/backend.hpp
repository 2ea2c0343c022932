#pragma once
// A backend: the devices it drives (runtime::DevicePlatform, for the runtime) and the models
// it runs on them (models::DeviceModels, for the workloads). Each backend is one folder,
// src/backends/<name>/, and one line of the registry (src/backends/registry.cpp):
//  - built-in backends (cpu) are part of libspmd;
//  - module backends (cuda) are shared objects (libspmd_<name>.so next to libspmd.so) that
//    are loaded with dlopen only when a run asks for them and a cheap probe finds a device,
//    so that a CPU run never maps their libraries (cudart + cuBLAS: ~200 MiB per rank).
//
// A module exports one C function, its entry, returning its Backend (a static object that
// lives until the process exits: modules are never unloaded, as CUDA's runtime cannot be).
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "spmd/models/device_models.hpp"
#include "spmd/runtime/devices.hpp"

namespace spmd::backends {

// Changed whenever Backend, DeviceModels or the model interfaces change shape: a module
// built against another version is refused with a message, not called into.
inline constexpr int kBackendAbi = 5;

class Backend : public models::DeviceModels {
 public:
  virtual const runtime::DevicePlatform& platform() const = 0;
  // ("cuda", "runtime 13.0, cuBLAS 13.1, driver 12.8") for `spmd info` and --json.
  virtual std::vector<std::pair<std::string, std::string>> library_versions() const = 0;
  // kBackendAbi as the module was compiled; SPMD_VERSION likewise.
  virtual int abi() const { return kBackendAbi; }
  virtual std::string_view spmd_version() const { return SPMD_VERSION; }
};

// The signature of a module's entry function.
using BackendEntry = const Backend* (*)();

// Resolves --backend ("cpu", "auto" or a registered name) to a platform: the
// runtime::ContextOptions::select of every run. "auto" takes the first module backend whose
// probe finds a device and whose module loads, else the CPU, and says why in the note.
runtime::PlatformChoice select_platform(const std::string& requested);

// The backend that owns a device (its platform's name). Throws spmd::Error for a device of
// an unknown platform.
const Backend& backend_of(const runtime::DeviceInfo& device);

// "auto" and every registered name, for --backend's help and validation.
std::vector<std::string> backend_names();
// Throws spmd::Error naming --backend and the accepted values when text is none of them.
void check_backend_name(const std::string& text);

// The backends this build has, for `spmd --version`: the built-in ones by name ("cpu") and each
// module that was built with its file ("cuda (module libspmd_cuda.so)"). Loads nothing: a
// module built here may still fail to load on a machine without its libraries (spmd info).
std::vector<std::string> compiled_backends();

// One line per registered backend for `spmd info`: its name and either the libraries it
// runs with (loaded backends) or why it is not loaded ("not loaded (--backend cpu)").
std::vector<std::pair<std::string, std::string>> backend_library_versions();

}  // namespace spmd::backends
