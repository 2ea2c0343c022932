#pragma once
// What the graph reader (onnx_graph.cpp) and the runner (onnx_runner.cpp) share: how a node
// with sub-graphs (If, Loop) is marked, and how an op is called.
#include <new>
#include <stdexcept>
#include <string>

#include "spmd/ops/graph_op.hpp"

namespace spmd::models {

inline constexpr const char* kBranchesAttr = "spmd_branches";      // an If node's index into OnnxGraph::branches_
inline constexpr const char* kLoopAttr = "spmd_loop_body";         // a Loop node's index into OnnxGraph::branches_
inline constexpr const char* kLoopCarriedAttr = "spmd_loop_carried";  // its count of loop-carried values

// An op's call; a bounds or argument check of the standard library inside it (a malformed
// model's attribute, a tensor of a type the op does not read) becomes spmd::Error naming the
// node, as the ops' own checks do.
inline void call_op(ops::GraphOpFn fn, const ops::OpCall& call) {
  try {
    const ops::OpMemoryScope scope;
    fn(call);
  } catch (const ops::TooLarge& e) {
    call.fail(std::string("too large for this rank: ") + e.what());
  } catch (const std::logic_error& e) {
    call.fail(std::string("malformed for this op (") + e.what() + ")");
  } catch (const std::bad_alloc&) {
    call.fail("its outputs need more memory than this rank can allocate");
  }
}

}  // namespace spmd::models
