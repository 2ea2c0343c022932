// libFuzzer target: Boost.Program_options' INI reader as `spmd <command> --config FILE`
// uses it (parse_config_file with unregistered keys refused, then store and notify).
// Boost reports every malformed file as a po::error; anything else is a finding. The
// message is formatted too (what()), as the CLI prints it: Boost builds it lazily, and
// that is where a value holding one of its own placeholders ("%value%") made it loop.
#include <cstdint>
#include <sstream>
#include <string>

#include "cli_like_options.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace po = boost::program_options;
  static const po::options_description options = spmd::fuzz::cli_like_options();
  const std::string text(reinterpret_cast<const char*>(data), size);
  // The CLI refuses a file holding one of Boost's own placeholders before Boost reads it
  // (parse_command in src/cli/command.cpp): Boost 1.74 loops forever on those, a known
  // finding kept in tests/fuzz_regressions/fuzz_config_file/. Look for other ones.
  for (const char* token :
       {"%canonical_option%", "%value%", "%option%", "%original_token%", "%prefix%", "%invalid_line%"})
    if (text.find(token) != std::string::npos) return 0;
  std::istringstream in(text);
  try {
    po::variables_map vm;
    po::store(po::parse_config_file(in, options, /*allow_unregistered=*/false), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    if (!*e.what()) __builtin_trap();  // an error must say something
  }
  return 0;
}
