#pragma once
// An options_description shaped like the spmd commands' (src/cli/cmd_*.cpp): every value
// type they use (string, int, int64, uint64, float, double, bool switch) plus the
// common options, so the fuzz targets reach every conversion Boost.Program_options
// performs for the real commands.
#include <boost/program_options.hpp>

#include <cstdint>

#include "../../src/cli/command.hpp"
#include "../../src/cli/commands.hpp"

// The spmd program's (src/cli/main.cpp, not in the library): the parser prints --help through
// it. Each target is a program of its own, including this once.
void spmd::cli::print_root(const std::string&) {}

namespace spmd::fuzz {

inline boost::program_options::options_description cli_like_options() {
  namespace po = boost::program_options;
  po::options_description d("fuzzed command options");
  d.add_options()("data", po::value<std::string>(), "input file")(
      "features-key", po::value<std::string>()->default_value("images"), "")(
      "strategy", po::value<std::string>()->default_value("pad"), "")(
      "classes", po::value<int>()->default_value(10), "")(
      "maxiter", po::value<int>()->default_value(100), "")(
      "per-device-batch", po::value<std::int64_t>()->default_value(512), "")(
      "seed", po::value<std::uint64_t>()->default_value(0), "")(
      "learning-rate", po::value<float>()->default_value(0.1f), "")(
      "tol", po::value<double>()->default_value(1e-3), "")(
      "dry-run", po::bool_switch(), "")(
      "weights-out", po::value<std::string>(), "");
  d.add(cli::common_options());
  return d;
}

}  // namespace spmd::fuzz
