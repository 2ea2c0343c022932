#include "option_checks.hpp"

#include "spmd/runtime/small_text_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <cmath>
#include <sstream>

#include "spmd/runtime/error.hpp"

namespace spmd::cli {

namespace {
std::string trimmed(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

template <class T>
bool stores(const po::option_description& d) {
  return dynamic_cast<const po::typed_value<T>*>(d.semantic().get()) != nullptr;
}

std::string real_text(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}
}  // namespace

void refuse_negative_unsigned(const po::parsed_options& parsed, const po::options_description& options) {
  for (const auto& o : parsed.options) {
    const po::option_description* d = o.unregistered ? nullptr : options.find_nothrow(o.string_key, false);
    if (!d || !(stores<std::uint64_t>(*d) || stores<unsigned>(*d))) continue;
    for (const auto& v : o.value)
      if (trimmed(v).rfind('-', 0) == 0)
        throw Error("--" + o.string_key + " must be a whole number >= 0 (got '" + v + "')");
  }
}

void require_finite_reals(const po::variables_map& vm) {
  for (const auto& [name, v] : vm) {
    double x = 0;
    if (const auto* d = boost::any_cast<double>(&v.value()))
      x = *d;
    else if (const auto* f = boost::any_cast<float>(&v.value()))
      x = *f;
    else
      continue;
    if (!std::isfinite(x)) throw Error("--" + name + " must be a finite number (got " + real_text(x) + ")");
  }
}

void check_hang_timeout(const po::variables_map& vm) {
  if (!vm.count("hang-timeout")) return;
  const double t = vm["hang-timeout"].as<double>();
  // Below a second, healthy work looks hung: a start-up collective over many ranks takes
  // seconds (2.4 s for an MPI hello at 64 ranks here), a stat on a busy parallel file system
  // hundreds of milliseconds.
  if (t == 0 || (t >= kMinHangTimeout && std::isfinite(t))) return;
  throw Error("--hang-timeout must be 0 (no watchdog) or at least " + real_text(kMinHangTimeout) +
              " second (got " + real_text(t) + "): shorter, a slow but healthy collective or file-system call is "
              "reported as a hang");
}

std::string shortened(const std::string& text, std::size_t limit) {
  if (text.size() <= limit) return text;
  // Both ends kept: Boost's messages name the option after the value.
  const std::size_t head = limit / 2, tail = limit - head;
  return text.substr(0, head) + "[... " + std::to_string(text.size() - limit) + " bytes ...]" +
         text.substr(text.size() - tail);
}

std::string read_config_file(const std::string& path) {
  return runtime::read_small_text_file(path, "--config '" + shortened(path) + "'", kMaxConfigBytes,
                                       "a config is read from a file of key = value lines");
}

po::parsed_options parse_config(const std::string& text, const std::string& path, const po::options_description& options) {
  if (const auto nul = text.find('\0'); nul != std::string::npos)
    throw Error("--config '" + shortened(path) + "' line " +
                std::to_string(1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(nul), '\n')) +
                " holds a NUL byte: not a text file (a value would be cut there)");
  po::parsed_options parsed(&options);
  std::istringstream in(text.rfind("\xEF\xBB\xBF", 0) == 0 ? text.substr(3) : text);
  std::string line, prefix;
  for (int number = 1; std::getline(in, line); ++number) {
    for (std::size_t i = 0; i < line.size(); ++i)
      if (line[i] == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
        line.resize(i);
        break;
      }
    line = trimmed(line);
    if (line.empty()) continue;
    const std::string where = "--config '" + path + "' line " + std::to_string(number);
    if (line.front() == '[' && line.back() == ']') {
      prefix = trimmed(line.substr(1, line.size() - 2));
      if (!prefix.empty()) prefix += ".";
      continue;
    }
    const auto eq = line.find('=');
    if (eq == std::string::npos) throw Error(where + ": expected 'key = value' (got '" + shortened(line) + "')");
    po::option o;
    o.string_key = prefix + trimmed(line.substr(0, eq));
    o.value.push_back(trimmed(line.substr(eq + 1)));
    o.original_tokens = {o.string_key, o.value.back()};
    if (o.string_key == "config")
      throw Error(where + ": 'config' names another file, which a config cannot: give each file with --config on the "
                          "command line, or merge them");
    if (!options.find_nothrow(o.string_key, false))
      throw Error(where + ": unrecognised option '" + shortened(o.string_key) + "' (the keys are the long option names)");
    parsed.options.push_back(std::move(o));
  }
  return parsed;
}

}  // namespace spmd::cli
