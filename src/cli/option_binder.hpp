#pragma once
// A workload's declared options (workloads/option_list.hpp) as a command line: Boost flags
// whose --help shows the defaults of a default-constructed struct, the declared rules checked
// with the messages of command.hpp's helpers, the struct filled, then its validate().
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "command.hpp"
#include "commands.hpp"
#include "spmd/workloads/option_list.hpp"

namespace spmd::cli {

// Rank 0 of the checking node: the declared rule of one option, in this order: present,
// readable or writable, then the numeric constraints. A required option is checked first
// (check_required) so that a missing one is named before another's value.
inline void check_required(const std::string& name, const workloads::OptionRules& rules, const po::variables_map& vm) {
  if (rules.has(workloads::OptionRules::kRequired)) require_present(vm, name);
}

inline void check_rules(const std::string& name, const workloads::OptionRules& rules, const po::variables_map& vm) {
  using R = workloads::OptionRules;
  if (rules.has(R::kInputFile)) require_readable_file(vm, name);
  if (rules.has(R::kOutputFile)) require_writable_destination(vm, name);
  if (rules.has(R::kPositive)) require_positive(vm, name);
  if (rules.has(R::kNonNegative)) require_non_negative(vm, name);
  if (rules.has(R::kAtMost)) require_at_most(vm, name, rules.limit, rules.why);
}

template <class O>
po::options_description described(const std::string& title, const std::vector<workloads::Option<O>>& list) {
  O defaults{};
  po::options_description d(title);
  for (const auto& option : list) {
    const po::value_semantic* semantic = std::visit(
        [&](auto get) -> const po::value_semantic* {
          if constexpr (std::is_same_v<decltype(get), workloads::TextField<O>>) {
            return po::value<std::string>()->default_value(get.print(defaults));
          } else {
            using T = std::remove_reference_t<decltype(get(defaults))>;
            const T& v = get(defaults);
            if constexpr (std::is_same_v<T, bool>) return po::bool_switch();
            else if constexpr (std::is_same_v<T, std::optional<int>>) return po::value<int>();
            else if constexpr (std::is_floating_point_v<T>) return real_value(v);
            else if constexpr (std::is_same_v<T, std::string>)
              return v.empty() ? po::value<std::string>() : po::value<std::string>()->default_value(v);
            else return po::value<T>()->default_value(v);
          }
        },
        option.field);
    d.add_options()(option.name.c_str(), semantic, option.help.c_str());
  }
  return d;
}

template <class O>
O filled(const std::vector<workloads::Option<O>>& list, const po::variables_map& vm) {
  O o{};
  for (const auto& option : list) {
    if (!vm.count(option.name)) continue;
    const po::variable_value& value = vm[option.name];
    std::visit(
        [&](auto get) {
          if constexpr (std::is_same_v<decltype(get), workloads::TextField<O>>) {
            get.parse(o, value.as<std::string>());
          } else {
            using T = std::remove_reference_t<decltype(get(o))>;
            if constexpr (std::is_same_v<T, std::optional<int>>) get(o) = value.as<int>();
            else get(o) = value.as<T>();
          }
        },
        option.field);
  }
  return o;
}

template <class O>
FileOptions file_options(const std::vector<workloads::Option<O>>& list) {
  using R = workloads::OptionRules;
  FileOptions files;
  for (const auto& option : list) {
    if (option.rules.has(R::kInputFile)) files.inputs.push_back(option.name);
    if (option.rules.has(R::kOutputFile)) files.outputs.push_back(option.name);
    if (option.rules.has(R::kMpiIo)) files.mpi_io.push_back(option.name);
  }
  return files;
}

template <class O>
struct Bound {
  CommandLine cl;
  O options;
};

// The front half of a workload command (parse_validated) from O's declarations
// (O::declared()), with `more` (shared groups such as the dataset keys) and the common
// options. With --help (printed by parse_validated) the result is empty (exit 0).
template <class O>
std::optional<Bound<O>> bind(const std::string& command, const std::string& usage, const Args& args,
                             const std::vector<po::options_description>& more = {}) {
  const auto& list = O::declared();
  po::options_description options = described("spmd " + command + " options", list);
  for (const auto& group : more) options.add(group);
  options.add(common_options());
  Bound<O> b{parse_validated(command, usage, options, args, file_options(list),
                             [&](const po::variables_map& vm) {
                               for (const auto& o : list) check_required(o.name, o.rules, vm);
                               for (const auto& o : list) check_rules(o.name, o.rules, vm);
                               filled(list, vm).validate();
                             }),
             O{}};
  if (b.cl.help) return std::nullopt;
  b.options = filled(list, b.cl.vm);
  return b;
}

}  // namespace spmd::cli
