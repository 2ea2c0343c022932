#pragma once
// Graph ops: the op library's inference ops over N-d tensors, looked up by their ONNX names
// ("Conv", "Gemm", "Relu", ...) and run by a graph executor (models/onnx_model.hpp). Each op
// kind lives in a file of src/ops/graph_*.cpp with its one SPMD_REGISTER_GRAPH_OP line.
//
// Row independence: axis 0 is the batch. Every op computes an output row from its input row
// alone, in an order that does not depend on how many rows the call has, so a row's result is
// the same bits whichever rows share its batch (what eval promises on every layout). A graph
// that mixes rows (a reduction or normalisation over axis 0) computes correctly but breaks that
// promise: eval's trial runs at load find it and refuse the model (models/onnx_classifier.cpp).
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace spmd::ops {

enum class ElemType { Float32, Int64 };

// An allocator whose resize() leaves new floats uninitialised: an op writes every value of
// its output, and zero-filling a batch's activations first costs a memset per node.
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <class U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 0)
      ::new (static_cast<void*>(p)) U;
    else
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using FloatBuffer = std::vector<float, UninitializedAllocator<float>>;

// What Tensor::reset and scratch() throw for a size past 2^40 elements, a negative dimension, or
// more than the memory free now: a damaged or hand-edited model's (a pad of 2^20), refused
// before the allocator hands out pages that the OOM killer would take back with the rank.
struct TooLarge : std::length_error {
  using std::length_error::length_error;
};

// The most values an ONNX Range may make (the CLI's --max-range-length, one value for the
// process): its start, limit and delta come from the model's constants or its input, and a
// stranger's model can ask for 2^62 of them. Past it the node is refused naming the option.
inline constexpr std::int64_t kDefaultMaxRangeLength = std::int64_t{1} << 24;
void set_max_range_length(std::int64_t length);  // >= 1
std::int64_t max_range_length();

// While one lives, the sizes this thread's Tensor::reset and scratch() grant are counted
// together: an op's output is not yet written (its pages not yet taken from the node's free
// memory) when the op asks for its scratch. The graph runner opens one per op call.
class OpMemoryScope {
 public:
  OpMemoryScope();
  ~OpMemoryScope();
  OpMemoryScope(const OpMemoryScope&) = delete;
  OpMemoryScope& operator=(const OpMemoryScope&) = delete;

 private:
  double outer_granted_;
  bool outer_open_;
};

// A dense row-major tensor. Its buffers keep their capacity when resized, so an executor that
// reuses its tensors allocates only on the first call.
struct Tensor {
  ElemType type = ElemType::Float32;
  std::vector<std::int64_t> shape;
  FloatBuffer f;                 // Float32 data
  std::vector<std::int64_t> i;  // Int64 data (shapes, indices)

  std::int64_t size() const;
  // Sets the shape and type and sizes the data (values unspecified); TooLarge for a negative
  // dimension, past 2^40 elements, or growth past the memory free now.
  void reset(ElemType t, std::vector<std::int64_t> dims);
  // The values as int64 (Int64 as is, Float32 converted): for shape inputs.
  std::vector<std::int64_t> as_ints() const;
};

std::string to_string(const std::vector<std::int64_t>& shape);  // "[1, 28, 28]"

// A node's attributes (ONNX AttributeProto, read once at load).
struct Attrs {
  std::map<std::string, std::int64_t> ints;
  std::map<std::string, float> floats;
  std::map<std::string, std::vector<std::int64_t>> int_lists;
  std::map<std::string, std::string> strings;
  std::map<std::string, std::vector<std::string>> string_lists;  // an RNN's activations
  std::map<std::string, Tensor> tensors;  // TENSOR, and FLOATS as a 1-D float tensor

  std::int64_t i(const std::string& name, std::int64_t fallback) const;
  float f(const std::string& name, float fallback) const;
  std::vector<std::int64_t> ints_or(const std::string& name, std::vector<std::int64_t> fallback) const;
  std::string s(const std::string& name, const std::string& fallback) const;
};

struct GraphNode {
  std::string op;    // ONNX op_type
  std::string name;  // for messages: the node's name, or its first output's
  int opset = 13;    // of the default domain, for ops whose rules changed between opsets
  Attrs attrs;
  std::vector<int> inputs;   // tensor indices; -1 for an omitted optional input
  std::vector<int> outputs;  // tensor indices
};

// What an op prepares once from a node's constant inputs for the shapes it runs (a
// convolution's weights in its GEMM's order), kept from call to call by the caller.
struct Prepared {
  virtual ~Prepared() = default;
  virtual std::int64_t bytes() const = 0;  // what it holds (a model's memory estimate counts it)
};

// One call: the node's input tensors (nullptr where omitted) and its outputs to fill.
struct OpCall {
  const GraphNode& node;
  std::span<const Tensor* const> in;
  std::span<Tensor* const> out;
  // Input 0 when no later node reads its values: an op that passes its data on (Reshape,
  // Flatten, Squeeze, Identity, a Pad of zeros, ...) may take its storage instead of copying
  // it. nullptr otherwise. (A map writing over it measured slower than into another buffer.)
  Tensor* dying_input0 = nullptr;
  // Moves input 0's storage into `y` where it dies (y then holds input 0's values; input 0
  // keeps its shape, with y's old storage): true. Else false, and nothing changes.
  bool take_input0_storage(Tensor& y) const {
    if (dying_input0 == nullptr || dying_input0 == &y) return false;
    y.f.swap(dying_input0->f);
    y.i.swap(dying_input0->i);
    return true;
  }
  // The node's prepared state, kept by a graph runner per node (nullptr where none is kept),
  // and which inputs are the graph's constants (bit k: input k), whose values never change.
  std::unique_ptr<Prepared>* prepared = nullptr;
  std::uint64_t constant_inputs = 0;
  bool constant_input(std::size_t k) const { return k < 64 && (constant_inputs >> k & 1) != 0; }

  // Input k, or spmd::Error naming the node when it is absent.
  const Tensor& input(std::size_t k) const;
  // Input k, which must be float32 (the ops that compute in floats), or fail().
  const Tensor& float_input(std::size_t k) const;
  bool has_input(std::size_t k) const { return k < in.size() && in[k] != nullptr; }
  // spmd::Error "ONNX node NAME (OP): what".
  [[noreturn]] void fail(const std::string& what) const;
  // An axis attribute in [-rank, rank) as an index, or fail().
  std::size_t axis(std::int64_t value, std::size_t rank) const;
  // An ints attribute with `count` values (strides, pads, ...), each `fallback` when absent; or fail().
  std::vector<std::int64_t> ints_per_dim(const std::string& name, std::size_t count, std::int64_t fallback) const;
  // fail() where a window attribute (kernel_shape, strides, dilations, blocksize: >= 1; pads, output_padding: >= 0;
  // all <= 2^24) holds a value ONNX does not allow (a stride of 0 would divide by zero, a negative
  // pad write outside) or no model has (a kernel's span could overflow).
  void check_window_ints(const std::string& name, const std::vector<std::int64_t>& values) const;
  // fail() where a convolution's kernel_shape, when given, is not its weights' spatial shape.
  void check_kernel_shape(const Tensor& weights) const;
};

using GraphOpFn = void (*)(const OpCall& call);

// What a node run in training mode (BatchNormalization's training_mode, Dropout's) fails with.
inline constexpr const char* kTrainingModeRefusal =
    "training_mode: only inference is supported (exported with training=TrainingMode.TRAINING, or PRESERVE on a "
    "module in train mode? call model.eval() and export with the default, TrainingMode.EVAL)";

// Scratch buffers the ops keep per thread between calls (an im2col matrix, a convolution's
// padded planes): no allocation once the largest shape has run. scratch() sizes one to `floats`
// (values unspecified), or throws TooLarge as Tensor::reset does. scratch_bytes() is what the calling thread's hold now, which a
// model's memory estimate counts.
enum class Scratch { Im2col, ConvPlanes, ConvWide, TransposedB, Recurrent, PoolFrame, Count };
FloatBuffer& scratch(Scratch which, std::int64_t floats);
std::int64_t scratch_bytes();

// The op of an ONNX op_type, or nullptr when none is registered.
GraphOpFn find_graph_op(const std::string& op);
std::vector<std::string> graph_op_names();

namespace detail {
bool register_graph_op(const char* op, GraphOpFn fn);
}  // namespace detail

}  // namespace spmd::ops

#define SPMD_GRAPH_CONCAT2(a, b) a##b
#define SPMD_GRAPH_CONCAT(a, b) SPMD_GRAPH_CONCAT2(a, b)
// At namespace scope in the op's file: registered when the library loads.
#define SPMD_REGISTER_GRAPH_OP(op, fn)                                     \
  [[maybe_unused]] static const bool SPMD_GRAPH_CONCAT(spmd_graph_op_, __LINE__) = \
      ::spmd::ops::detail::register_graph_op(op, fn)
