#pragma once
// A table of op implementations by kind, one per backend and interface. Keep instances as
// function-local statics: registrations run from other units' static initialisers.
#include <map>
#include <string>
#include <vector>

#include "spmd/runtime/error.hpp"

namespace spmd::ops {

template <class Fn>
class Registry {
 public:
  bool add(const char* kind, Fn fn) {
    if (!table_.emplace(kind, fn).second) throw Error(std::string("op kind '") + kind + "' registered twice");
    return true;
  }
  // spmd::Error naming the kind, `what` it lacks and the kinds there are.
  Fn find(const std::string& kind, const std::string& what) const {
    const auto it = table_.find(kind);
    if (it != table_.end()) return it->second;
    std::string known;
    for (const auto& [name, fn] : table_) known += (known.empty() ? "" : ", ") + name;
    throw Error("op kind '" + kind + "' has no " + what + " (registered: " + known + ")");
  }
  bool contains(const std::string& kind) const { return table_.count(kind) != 0; }
  std::vector<std::string> kinds() const {
    std::vector<std::string> k;
    for (const auto& [name, fn] : table_) k.push_back(name);
    return k;
  }

 private:
  std::map<std::string, Fn> table_;
};

}  // namespace spmd::ops
