// OnnxRunner: runs an OnnxGraph's node table on the CPU, its tensors' storage pooled by
// liveness, If branches and Loop bodies by runners of their own.
#include <algorithm>
#include <atomic>
#include <limits>
#include <string_view>

#include "onnx_subgraphs.hpp"
#include "spmd/models/onnx_graph.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models {

OnnxRunner::OnnxRunner(std::shared_ptr<const OnnxGraph> graph)
    : graph_(std::move(graph)), tensors_(graph_->tensor_count_), last_size_(graph_->tensor_count_, 0),
      prepared_(graph_->nodes_.size()), constant_inputs_(graph_->nodes_.size(), 0) {
  for (std::size_t n = 0; n < graph_->nodes_.size(); ++n) {
    const auto& inputs = graph_->nodes_[n].inputs;
    for (std::size_t k = 0; k < inputs.size() && k < 64; ++k)
      if (inputs[k] >= 0 && static_cast<std::size_t>(inputs[k]) < graph_->constants_.size())
        constant_inputs_[n] |= 1ull << k;
  }
}

std::int64_t OnnxRunner::tensor_bytes() const {
  std::int64_t bytes = 0;
  for (const auto& t : tensors_)
    bytes += static_cast<std::int64_t>(t.f.capacity() * sizeof(float) + t.i.capacity() * sizeof(std::int64_t));
  for (const auto& v : pool_) bytes += static_cast<std::int64_t>(v.capacity() * sizeof(float));
  for (const auto& p : prepared_)
    if (p) bytes += p->bytes();
  for (const auto& pair : branch_runners_)
    for (const auto& r : pair)
      if (r) bytes += r->tensor_bytes();
  return bytes;
}

void OnnxRunner::take_from_pool(ops::FloatBuffer& f, std::size_t want) {
  // The smallest storage that holds what the tensor needed last time, else the largest (it
  // grows least): handing out whatever came last lets storage drift between tensors of
  // different sizes from run to run, each growing, until a run holds far more than it needs.
  std::size_t best = 0;
  for (std::size_t i = 1; i < pool_.size(); ++i) {
    const std::size_t c = pool_[i].capacity(), b = pool_[best].capacity();
    const bool fits = c >= want, best_fits = b >= want;
    if (fits ? !best_fits || c < b : !best_fits && c > b) best = i;
  }
  f.swap(pool_[best]);
  pool_[best].swap(pool_.back());
  pool_.pop_back();
}

void OnnxRunner::run_if(const ops::OpCall& call, std::size_t index) {
  const OnnxGraph::Branches& branches = graph_->branches_.at(index);
  const ops::Tensor& c = call.input(0);
  if (c.size() != 1) call.fail("its condition holds " + std::to_string(c.size()) + " values, not one");
  const int pick = (c.type == ops::ElemType::Int64 ? c.i[0] != 0 : c.f[0] != 0.0f) ? 0 : 1;
  branch_runners_.resize(graph_->branches_.size());
  auto& runner = branch_runners_[index][static_cast<std::size_t>(pick)];
  if (!runner) runner = std::make_unique<OnnxRunner>(branches.graph[pick]);
  // Inputs: the condition, then branch 0's captured values, then branch 1's.
  const std::size_t first = 1 + (pick == 0 ? 0 : branches.graph[0]->inputs().size());
  for (std::size_t k = 0; k < branches.graph[pick]->inputs().size(); ++k) runner->input(k) = *call.in[first + k];
  runner->run();
  for (std::size_t k = 0; k < call.out.size(); ++k) *call.out[k] = runner->output(k);
}

namespace {
std::atomic<std::int64_t> loop_limit{kDefaultMaxLoopIterations};
}  // namespace

void set_max_loop_iterations(std::int64_t iterations) {
  if (iterations < 1) throw Error("--max-loop-iterations must be >= 1 (got " + std::to_string(iterations) + ")");
  loop_limit.store(iterations);
}
std::int64_t max_loop_iterations() { return loop_limit.load(); }

// ONNX's Loop: while the iteration is below the trip count (where given) and the condition
// holds, the body runs on (iteration, condition, carried values, captured values); its outputs
// are the condition, the next carried values, then the scan outputs, stacked along a new first
// axis over the iterations.
void OnnxRunner::run_loop(const ops::OpCall& call, std::size_t index) {
  const auto& body = graph_->branches_.at(index).graph[0];
  branch_runners_.resize(graph_->branches_.size());
  auto& runner = branch_runners_[index][0];
  if (!runner) runner = std::make_unique<OnnxRunner>(body);
  const auto scalar = [&](std::size_t k, const char* what) {
    const ops::Tensor& t = call.input(k);
    if (t.size() != 1) call.fail(std::string(what) + " holds " + std::to_string(t.size()) + " values, not one");
    return t.type == ops::ElemType::Int64 ? t.i[0] : static_cast<std::int64_t>(t.f[0]);
  };
  const std::int64_t trips = call.has_input(0) ? scalar(0, "its trip count") : std::numeric_limits<std::int64_t>::max();
  bool go = !call.has_input(1) || scalar(1, "its condition") != 0;
  const std::int64_t limit = max_loop_iterations();
  if (trips > limit && call.has_input(0))
    call.fail("its trip count is " + std::to_string(trips) + ", over --max-loop-iterations " + std::to_string(limit) +
              " (raise it for a model you trust)");
  const auto carried = static_cast<std::size_t>(call.node.attrs.i(kLoopCarriedAttr, 0));
  const std::size_t scans = call.out.size() - carried;
  for (std::size_t k = 0; k < carried; ++k) *call.out[k] = *call.in[2 + k];
  std::vector<ops::Tensor*> stacked(call.out.begin() + static_cast<std::ptrdiff_t>(carried), call.out.end());
  std::vector<std::vector<std::int64_t>> step_shape(scans);
  // The captured values are the same in every iteration (no body node writes its inputs).
  for (std::size_t k = 2 + carried; k < call.in.size(); ++k) runner->input(k) = *call.in[k];
  std::int64_t i = 0;
  for (; i < trips && go; ++i) {
    if (i == limit)
      call.fail("ran " + std::to_string(limit) + " iterations (--max-loop-iterations) and its condition still holds " +
                "(raise the option for a model you trust)");
    runner->input(0).reset(ops::ElemType::Int64, {});
    runner->input(0).i[0] = i;
    runner->input(1).reset(ops::ElemType::Int64, {});
    runner->input(1).i[0] = go ? 1 : 0;
    for (std::size_t k = 0; k < carried; ++k) runner->input(2 + k) = *call.out[k];
    runner->run();
    const ops::Tensor& c = runner->output(0);
    go = c.size() == 1 && (c.type == ops::ElemType::Int64 ? c.i[0] != 0 : c.f[0] != 0.0f);
    for (std::size_t k = 0; k < carried; ++k) *call.out[k] = runner->output(1 + k);
    for (std::size_t k = 0; k < scans; ++k) {
      const ops::Tensor& y = runner->output(1 + carried + k);
      ops::Tensor& all = *stacked[k];
      if (i == 0) {
        step_shape[k] = y.shape;
        all.type = y.type;
        all.f.clear();
        all.i.clear();
      } else if (y.shape != step_shape[k] || y.type != all.type) {
        call.fail("scan output " + std::to_string(k) + " is " + ops::to_string(y.shape) + " in iteration " + std::to_string(i) +
                  " and " + ops::to_string(step_shape[k]) + " before");
      }
      all.f.insert(all.f.end(), y.f.begin(), y.f.end());
      all.i.insert(all.i.end(), y.i.begin(), y.i.end());
    }
  }
  for (std::size_t k = 0; k < scans; ++k) {
    stacked[k]->shape = step_shape[k];
    stacked[k]->shape.insert(stacked[k]->shape.begin(), i);
  }
}

void OnnxRunner::run(const NodeObserver& after_each) {
  try {
    run_nodes(after_each);
  } catch (const Error& e) {
    // The node names itself; the file, once (a subgraph's runner has said it already).
    const std::string said = "ONNX model '" + graph_->path() + "'";
    if (graph_->path().empty() || std::string_view(e.what()).starts_with(said)) throw;
    throw Error(said + ": " + e.what());
  }
}

void OnnxRunner::run_nodes(const NodeObserver& after_each) {
  const auto& g = *graph_;
  for (std::size_t n = 0; n < g.nodes_.size(); ++n) {
    const ops::GraphNode& node = g.nodes_[n];
    in_.clear();
    out_.clear();
    for (const int k : node.inputs) in_.push_back(k < 0 ? nullptr : &k_output(static_cast<std::size_t>(k)));
    for (const int k : node.outputs) {
      ops::Tensor& t = tensors_[static_cast<std::size_t>(k)];
      if (t.f.capacity() == 0 && !pool_.empty()) take_from_pool(t.f, last_size_[static_cast<std::size_t>(k)]);
      out_.push_back(&t);
    }
    ops::OpCall call{node, in_, out_};
    if (g.input0_dies_[n]) call.dying_input0 = &tensors_[static_cast<std::size_t>(node.inputs[0])];
    call.prepared = &prepared_[n];
    call.constant_inputs = constant_inputs_[n];
    if (const auto b = node.attrs.ints.find(kBranchesAttr); b != node.attrs.ints.end())
      run_if(call, static_cast<std::size_t>(b->second));
    else if (const auto l = node.attrs.ints.find(kLoopAttr); l != node.attrs.ints.end())
      run_loop(call, static_cast<std::size_t>(l->second));
    else
      call_op(g.fns_[n], call);
    if (after_each) after_each(call);
    for (const int k : node.outputs) last_size_[static_cast<std::size_t>(k)] = tensors_[static_cast<std::size_t>(k)].f.size();
    for (const int k : g.release_after_[n]) {
      auto& f = tensors_[static_cast<std::size_t>(k)].f;
      if (f.capacity() == 0) continue;
      pool_.push_back(std::move(f));
      f = {};
    }
  }
}

}  // namespace spmd::models
