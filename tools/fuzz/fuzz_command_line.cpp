// libFuzzer target: spmd::cli::parse_command (src/cli/command.cpp) with the validation
// every command runs after it: context_options and the require_* helpers.
//
// Input layout: the arguments, one per line, up to the first empty line; whatever follows
// is written to a temporary INI file and passed as --config, so the command line, the
// config file and their precedence are fuzzed together. Every bad input must end in
// spmd::Error (what the CLI prints as "spmd <command>: error: ..."); any other exception,
// crash or sanitizer report is a finding.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cli_like_options.hpp"
#include "fuzz_input_file.hpp"
#include "spmd/runtime/error.hpp"

namespace {

const std::string& config_path() {
  static const std::string path = spmd::fuzz::input_file_path("config", ".ini");
  return path;
}

// Splits the input into argument lines and the config text after the first empty line.
std::vector<std::string> arguments(const std::string& input, std::string& config, bool& has_config) {
  std::vector<std::string> args;
  std::size_t pos = 0;
  has_config = false;
  while (pos <= input.size()) {
    const std::size_t end = std::min(input.find('\n', pos), input.size());
    std::string line = input.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() && end < input.size()) {
      config = input.substr(pos > input.size() ? input.size() : pos);
      has_config = true;
      break;
    }
    if (!line.empty()) args.push_back(std::move(line));
    if (end == input.size()) break;
  }
  return args;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace cli = spmd::cli;
  static const auto options = spmd::fuzz::cli_like_options();
  std::string config;
  bool has_config = false;
  auto args = arguments(std::string(reinterpret_cast<const char*>(data), size), config, has_config);
  if (has_config) {
    std::FILE* f = std::fopen(config_path().c_str(), "wb");
    if (!f) __builtin_trap();
    if (!config.empty() && std::fwrite(config.data(), 1, config.size(), f) != config.size()) __builtin_trap();
    std::fclose(f);
    args.push_back("--config");
    args.push_back(config_path());
  }
  try {
    auto cl = cli::parse_command("fuzz", "[options]", options, args, {"data"});
    cli::make_canonical(cl);
    if (cl.help) return 0;
    if (cl.canonical.rfind("command=fuzz\n", 0) != 0) __builtin_trap();
    (void)cli::context_options(cl.vm);
    cli::require_positive(cl.vm, "classes");
    cli::require_positive(cl.vm, "maxiter");
    cli::require_positive(cl.vm, "per-device-batch");
    cli::require_positive(cl.vm, "learning-rate");
    cli::require_non_negative(cl.vm, "tol");
    // require_readable_file / require_writable_destination are left out: they would touch
    // whatever paths the fuzzer invents.
  } catch (const spmd::Error& e) {
    if (!*e.what()) __builtin_trap();  // an error must say something
  }
  return 0;
}
