#pragma once
// A workload's options, each stated once: a declaration list next to the options struct,
// one line per option (flag name, the member it sets, help, rules), with the member's
// initializer as its default. The CLI (src/cli/option_binder.hpp) turns a list into
// Boost.Program_options flags (--help shows the default of a default-constructed struct),
// checks the rules with messages that name the option, and fills the struct; the struct's
// validate() then checks the rules between members (LBFGSpp's check_param). A checkpoint's
// defining options are the members marked `defines` (defining_lines), so a member that
// changes results cannot be left out of a resume check by forgetting a hand-kept list.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "spmd/workloads/report.hpp"

namespace spmd::workloads {

struct OptionRules {
  enum : unsigned {
    kRequired = 1u << 0,
    kPositive = 1u << 1,
    kNonNegative = 1u << 2,
    kAtMost = 1u << 3,
    kInputFile = 1u << 4,   // read by the run: must be readable, stat'ed and hashed with the options
    kOutputFile = 1u << 5,  // written at the end: its folder must be writable, it may not be an input
    kMpiIo = 1u << 6,       // opened by every rank through MPI-IO
    kDefines = 1u << 7,     // changes the results: part of what a checkpoint must agree on
  };
  unsigned flags = 0;
  double limit = 0;        // kAtMost
  const char* why = "";    // kAtMost: the reason the message gives
  bool has(unsigned f) const { return (flags & f) != 0; }
  friend OptionRules operator|(OptionRules a, const OptionRules& b) {
    a.flags |= b.flags;
    if (b.has(kAtMost)) a.limit = b.limit, a.why = b.why;
    return a;
  }
};

namespace rule {
inline constexpr OptionRules required{OptionRules::kRequired}, positive{OptionRules::kPositive},
    non_negative{OptionRules::kNonNegative}, input_file{OptionRules::kInputFile},
    output_file{OptionRules::kOutputFile}, mpi_io{OptionRules::kMpiIo}, defines{OptionRules::kDefines};
inline constexpr OptionRules at_most(double limit, const char* why) { return {OptionRules::kAtMost, limit, why}; }
}  // namespace rule

// A member held as text on the command line: an enum, a list, a scale. parse throws
// spmd::Error naming the option; print gives the text of the member's value.
template <class O>
struct TextField {
  std::string (*print)(const O&);
  void (*parse)(O&, const std::string&);
};
// What SPMD_TEXT makes: generic lambdas, made a TextField<O> by Option.
template <class Print, class Parse>
struct Text {
  Print print;
  Parse parse;
};

template <class O>
using OptionField = std::variant<int& (*)(O&), std::int64_t& (*)(O&), std::uint64_t& (*)(O&), float& (*)(O&),
                                 double& (*)(O&), bool& (*)(O&), std::string& (*)(O&), std::optional<int>& (*)(O&),
                                 TextField<O>>;

template <class O>
struct Option {
  std::string name;  // the long flag, without "--"
  OptionField<O> field;
  std::string help;
  OptionRules rules;

  // get: SPMD_MEMBER(member) or SPMD_TEXT(member, print, parse).
  template <class Get>
  Option(std::string name, Get get, std::string help, OptionRules rules = {})
      : name(std::move(name)), field(to_field(get)), help(std::move(help)), rules(rules) {}

 private:
  template <class P, class Q>
  static OptionField<O> to_field(Text<P, Q> t) {
    return TextField<O>{static_cast<std::string (*)(const O&)>(t.print), static_cast<void (*)(O&, const std::string&)>(t.parse)};
  }
  template <class Get>
  static OptionField<O> to_field(Get get) {
    using T = std::remove_reference_t<decltype(get(std::declval<O&>()))>;
    return static_cast<T& (*)(O&)>(get);
  }
};

// The member an option sets (nested ones too: SPMD_MEMBER(sgd.learning_rate)).
#define SPMD_MEMBER(member) [](auto& o) -> auto& { return o.member; }
// A member written as text: print(member) gives its text, parse(text) its value.
#define SPMD_TEXT(member, print, parse)                                    \
  ::spmd::workloads::Text {                                                \
    [](const auto& o) { return std::string(print(o.member)); },            \
    [](auto& o, const std::string& t) { o.member = parse(t); }             \
  }

// The text of an option's value in o: numbers as they read back exactly (float with 9
// significant digits, double 17), text fields as printed, switches true/false.
template <class O>
std::string option_text(const Option<O>& option, O o) {
  return std::visit(
      [&](auto get) -> std::string {
        if constexpr (std::is_same_v<decltype(get), TextField<O>>) {
          return get.print(o);
        } else {
          const auto& v = get(o);
          using T = std::remove_cvref_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) return v;
          else if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
          else if constexpr (std::is_same_v<T, std::optional<int>>) return v ? std::to_string(*v) : "";
          else if constexpr (std::is_same_v<T, float>) return format("%.9g", static_cast<double>(v));
          else if constexpr (std::is_same_v<T, double>) return format("%.17g", v);
          else return std::to_string(v);
        }
      },
      option.field);
}

// "name=value" lines of the options marked `defines`, in declaration order; an input
// file's value is file(path) (what identifies it beyond its name).
template <class O, class File>
std::string defining_lines(const std::vector<Option<O>>& list, const O& o, File file) {
  std::string text;
  for (const auto& option : list)
    if (option.rules.has(OptionRules::kDefines)) {
      const std::string value = option_text(option, o);
      text += option.name + "=" + (option.rules.has(OptionRules::kInputFile) ? file(value) : value) + "\n";
    }
  return text;
}

}  // namespace spmd::workloads
