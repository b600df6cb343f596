// A compact one-line form of each op, "type(Slot=a,b Other=c)->(Out=d)", for tests that compare
// the structure of emitted programs (autodiff, optimizers) without their attributes.
#pragma once

#include <string>
#include <vector>

#include "ir/program.h"

namespace fleet::testing {

inline std::string SlotsText(const ir::SlotMap& slots) {
  std::string s;
  for (const auto& [slot, names] : slots) {
    s += (s.empty() ? "" : " ") + slot + "=";
    for (size_t k = 0; k < names.size(); ++k) s += (k ? "," : "") + names[k];
  }
  return s;
}

// The ops of the global block from index `from` on.
inline std::vector<std::string> DescribeOps(const ir::Program& p, size_t from = 0) {
  std::vector<std::string> out;
  const auto& ops = p.global().ops;
  for (size_t i = from; i < ops.size(); ++i) {
    out.push_back(ops[i].type + "(" + SlotsText(ops[i].inputs) + ")->(" +
                  SlotsText(ops[i].outputs) + ")");
  }
  return out;
}

}  // namespace fleet::testing
