#include "option_binder.hpp"

namespace spmd::cli {

using workloads::OptionRules;

void check_required(const std::string& name, const OptionRules& rules, const po::variables_map& vm) {
  if (rules.has(OptionRules::kRequired)) require_present(vm, name);
}

void check_rules(const std::string& name, const OptionRules& rules, const po::variables_map& vm) {
  if (rules.has(OptionRules::kInputFile)) require_readable_file(vm, name);
  if (rules.has(OptionRules::kOutputFile)) require_writable_destination(vm, name);
  if (rules.has(OptionRules::kPositive)) require_positive(vm, name);
  if (rules.has(OptionRules::kNonNegative)) require_non_negative(vm, name);
  if (rules.has(OptionRules::kAtMost)) require_at_most(vm, name, rules.limit, rules.why);
}

}  // namespace spmd::cli
