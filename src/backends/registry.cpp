// The backend registry: the one place that names the backends. A new backend is a folder
// (src/backends/<name>/), one line in kBackends and, for a module, its target in CMake.
#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "cuda_driver_probe.hpp"
#include "spmd/backends/backend.hpp"
#include "spmd/backends/cpu/cpu_backend.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::backends {
namespace {

struct Registration {
  const char* name;            // the --backend value
  const Backend& (*builtin)();  // a backend inside libspmd, or nullptr for a module:
  const char* module_file;     //   the module, looked for next to libspmd.so,
  const char* entry;           //   its entry function (BackendEntry),
  int (*probe)(std::string*);  //   a check for devices that loads nothing big (nullptr: none),
  const char* device_kind;     //   what its devices are called in messages,
  bool built;                  //   whether this build made the module (CMake's SPMD_*_MODULE_BUILT)
};

const Registration kBackends[] = {
    {"cpu", &cpu::backend, nullptr, nullptr, nullptr, "CPU thread", true},
    {"cuda", nullptr, "libspmd_cuda.so", "spmd_cuda_backend_v1", &probe_cuda_driver, "GPU", SPMD_CUDA_MODULE_BUILT != 0},
};

const Registration* find_registration(std::string_view name) {
  for (const auto& r : kBackends)
    if (name == r.name) return &r;
  return nullptr;
}

// Where modules are: $SPMD_MODULE_DIR if set (tests, relocated installs), else the folder of
// the libspmd.so this code runs from (the build puts them side by side).
std::string module_directory() {
  if (const char* dir = std::getenv("SPMD_MODULE_DIR"); dir != nullptr && *dir) return dir;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&module_directory), &info) != 0 && info.dli_fname != nullptr) {
    std::string path = info.dli_fname;
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
  }
  return ".";
}

struct ModuleState {
  const Backend* backend = nullptr;
  std::string error;  // why it could not be loaded, naming the file
};

struct ModuleCache {
  std::mutex mutex;
  std::map<std::string, ModuleState> loaded;  // never erased: references stay valid
};

ModuleCache& module_cache() {
  static ModuleCache cache;
  return cache;
}

// Loads a module once per process; later calls return the first outcome.
const ModuleState& load_module(const Registration& r) {
  ModuleCache& cache = module_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (auto it = cache.loaded.find(r.name); it != cache.loaded.end()) return it->second;
  ModuleState& state = cache.loaded[r.name];
  const std::string path = module_directory() + "/" + r.module_file;
  if (!r.built) {
    state.error = std::string("this build has no ") + r.name + " backend (" + r.module_file +
                  " was not built: CMake found no compiler for it, or it was configured off)";
    return state;
  }
  // RTLD_LOCAL: the module's libraries serve the module only. RTLD_NOW: a missing symbol
  // is reported here, by name, not at the first call.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    state.error = "cannot load the " + std::string(r.name) + " backend module " + path + ": " + (err ? err : "dlopen failed");
    return state;
  }
  auto entry = reinterpret_cast<BackendEntry>(dlsym(handle, r.entry));
  if (entry == nullptr) {
    const char* err = dlerror();
    state.error = path + " is not an spmd " + r.name + " backend module (no " + r.entry + ": " + (err ? err : "?") + ")";
    return state;
  }
  const Backend* backend = entry();
  if (backend == nullptr || backend->abi() != kBackendAbi || backend->spmd_version() != SPMD_VERSION) {
    state.error = path + " was built for another spmd (backend ABI " + std::to_string(backend ? backend->abi() : -1) +
                  ", version " + std::string(backend ? backend->spmd_version() : "?") + "; this spmd: ABI " +
                  std::to_string(kBackendAbi) + ", version " SPMD_VERSION "): rebuild it with this spmd";
    return state;
  }
  state.backend = backend;
  return state;
}

std::string names_text() {
  std::string text;
  for (const auto& n : backend_names()) text += (text.empty() ? "" : ", ") + n;
  return text;
}

}  // namespace

std::vector<std::string> backend_names() {
  std::vector<std::string> names{"auto"};
  for (const auto& r : kBackends) names.emplace_back(r.name);
  return names;
}

void check_backend_name(const std::string& text) {
  if (text != "auto" && find_registration(text) == nullptr)
    throw Error("--backend must be one of " + names_text() + " (got '" + text + "')");
}

runtime::PlatformChoice select_platform(const std::string& requested) {
  runtime::PlatformChoice choice;
  if (requested == "auto") {
    std::string why_not;
    for (const auto& r : kBackends) {
      if (r.builtin != nullptr) continue;
      // Why this backend is not the one: not built, no device by its probe, its module
      // failing to load, or the loaded module seeing no device.
      std::string why = "not built";
      if (r.built && (r.probe == nullptr || r.probe(&why) > 0)) {
        const ModuleState& module = load_module(r);
        if (module.backend == nullptr) {
          why = module.error;
        } else if (const int devices = module.backend->platform().device_count(&why); devices > 0) {
          choice.platform = &module.backend->platform();
          choice.note = "--backend auto: " + std::to_string(devices) + " " + r.name + " device(s) visible, using " + r.name;
          return choice;
        }
      }
      why_not += std::string(why_not.empty() ? "" : "; ") + r.name + ": " + why;
    }
    choice.platform = &cpu::backend().platform();
    choice.note = "--backend auto: using CPU (" + why_not + ")";
    return choice;
  }
  const Registration* r = find_registration(requested);
  if (r == nullptr) {
    choice.error = "--backend must be one of " + names_text() + " (got '" + requested + "')";
  } else if (r->builtin != nullptr) {
    choice.platform = &r->builtin().platform();
    choice.note = requested == "cpu" ? "CPU" : requested;
  } else {
    std::string why;
    if (r->built && r->probe && r->probe(&why) == 0) {
      choice.error = "--backend " + requested + " but no " + r->device_kind + " is usable here (" + why +
                     "). Use --backend cpu or auto, or run on a GPU node (Slurm: --gpus-per-task).";
      return choice;
    }
    const ModuleState& module = load_module(*r);
    if (module.backend == nullptr) {
      choice.error = "--backend " + requested + ": " + module.error + ". Use --backend cpu or auto.";
    } else {
      choice.platform = &module.backend->platform();
      choice.note = r->name;
    }
  }
  return choice;
}

const Backend& backend_of(const runtime::DeviceInfo& device) {
  const Registration* r = find_registration(device.backend());
  if (r != nullptr && r->builtin != nullptr) return r->builtin();
  if (r != nullptr) {
    const ModuleState& module = load_module(*r);
    if (module.backend != nullptr) return *module.backend;
    throw Error(module.error);
  }
  throw Error("device " + device.name + " belongs to no registered backend ('" + std::string(device.backend()) + "')");
}

std::vector<std::string> compiled_backends() {
  std::vector<std::string> names;
  for (const auto& r : kBackends) {
    if (r.builtin != nullptr)
      names.emplace_back(r.name);
    else if (r.built)
      names.push_back(std::string(r.name) + " (module " + r.module_file + ")");
  }
  return names;
}

std::vector<std::pair<std::string, std::string>> backend_library_versions() {
  std::vector<std::pair<std::string, std::string>> lines;
  for (const auto& r : kBackends) {
    if (r.builtin != nullptr) {
      for (auto& line : r.builtin().library_versions()) lines.push_back(std::move(line));
      continue;
    }
    const ModuleState* module = nullptr;
    {
      ModuleCache& cache = module_cache();
      std::lock_guard<std::mutex> lock(cache.mutex);
      if (auto it = cache.loaded.find(r.name); it != cache.loaded.end()) module = &it->second;
    }
    if (module != nullptr && module->backend != nullptr) {
      for (auto& line : module->backend->library_versions()) lines.push_back(std::move(line));
    } else {
      lines.emplace_back(r.name, !r.built          ? std::string("not compiled in")
                                 : module != nullptr ? "not loaded: " + module->error
                                                     : "module " + std::string(r.module_file) + " not loaded (not asked for)");
    }
  }
  return lines;
}

}  // namespace spmd::backends

namespace spmd::models {

DeviceModels::~DeviceModels() = default;

bool DeviceModels::provides(std::string_view kind) const {
  for (const auto& [name, make] : factories_)
    if (name == kind) return true;
  return false;
}

void (*DeviceModels::find(std::string_view kind, std::string_view backend) const)() {
  for (const auto& [name, make] : factories_)
    if (name == kind) return make;
  std::string has;
  for (const auto& [name, make] : factories_) has += (has.empty() ? "" : "; ") + std::string(name);
  throw Error("the " + std::string(backend) + " backend has no " + std::string(kind) +
              " (it provides: " + (has.empty() ? std::string("nothing") : has) +
              "); run this model with --backend cpu, or with a build of the backend that provides it");
}

const DeviceModels& device_models(const runtime::DeviceInfo& device) { return backends::backend_of(device); }

}  // namespace spmd::models
