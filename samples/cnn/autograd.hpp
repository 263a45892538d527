// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file cnn/autograd.hpp
/// A small reverse-mode autograd shaped like PyTorch's, so that the trace shows the same
/// forward/backward linkage:
///
/// * Every forward op that creates a graph node takes the next *sequence number* of the forward
///   thread (at::sequence_number) and records it on its op ("Sequence number", "Fwd thread id"
///   0). The node keeps the number.
/// * backward() runs the graph on a separate engine thread named "pt_autograd_0" while the
///   calling thread waits, like torch.autograd's engine. Each node is recorded twice, nested:
///   `autograd::engine::evaluate_function: AddmmBackward0` around `AddmmBackward0`, both with the
///   forward op's sequence number and "Fwd thread id" 1.
/// * Nodes run in PyTorch's ready-queue order: AccumulateGrad first, then the highest sequence
///   number (the most recent forward op). Saved tensors are released as each node finishes
///   (retain_graph = False), so their frees show up on the autograd thread.

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <kinetoscope/record_function.hpp>

#include "tensor.hpp"

namespace cnn::autograd {

/// The two names the profiler shows for one backward node.
struct node_names {
  kinetoscope::static_name evaluate;  ///< "autograd::engine::evaluate_function: <node>"
  kinetoscope::static_name node;      ///< "<node>", e.g. "AddmmBackward0"
};

/// Both names of a node class from its bare name, as string literals (static names are free).
#define CNN_AUTOGRAD_NODE(node_class)                                               \
  ::cnn::autograd::node_names {                                                     \
    "autograd::engine::evaluate_function: " #node_class, #node_class                \
  }

struct node;
using node_ptr = std::shared_ptr<node>;

/// A backward function (torch::autograd::Node).
struct node {
  /// Gradient of the node's output -> gradients of its inputs, one per next edge (undefined
  /// where no gradient flows).
  using backward_fn = std::function<std::vector<tensor>(const tensor& grad_output)>;

  node_names names;
  std::int64_t sequence_nr = -1;     ///< the forward op's; -1 for AccumulateGrad
  bool accumulates_grad = false;     ///< an AccumulateGrad (runs first, keeps its function)
  std::vector<node_ptr> next_edges;  ///< the nodes of the inputs (nullptr: input needs no grad)
  backward_fn apply;                 ///< captures the saved tensors
};

/// A tensor together with the node that produced it (its grad_fn), or the AccumulateGrad of a
/// parameter, or nothing for data that needs no gradient.
struct variable {
  tensor data;
  node_ptr grad_fn;
};

/// A learnable tensor (nn.Parameter): data, gradient (undefined until the first backward and
/// after zero_grad(set_to_none=True)) and the AccumulateGrad node that fills the gradient.
class parameter {
 public:
  parameter(std::string name, tensor data);
  parameter(const parameter&) = delete;  // the AccumulateGrad node points at this object
  parameter& operator=(const parameter&) = delete;

  const std::string& name() const noexcept { return name_; }
  const tensor& data() const noexcept { return data_; }
  const tensor& grad() const noexcept { return grad_; }
  void set_grad(tensor g) noexcept { grad_ = std::move(g); }
  /// The parameter as a graph input.
  variable var() const { return {data_, accumulator_}; }

 private:
  std::string name_;
  tensor data_;
  tensor grad_;
  node_ptr accumulator_;
};

/// The next sequence number of the calling (forward) thread, as at::sequence_number::get_and_increment.
std::int64_t next_sequence_nr() noexcept;

/// op_links for a forward op that creates the node numbered `sequence_nr`.
inline kinetoscope::op_links forward_links(std::int64_t sequence_nr) noexcept {
  return {sequence_nr, 0};
}

/// Creates a node for the forward op numbered `sequence_nr`, whose inputs came from `inputs`.
node_ptr make_node(node_names names, std::int64_t sequence_nr, std::vector<node_ptr> inputs,
                   node::backward_fn apply);

/// PyTorch's autograd engine, reduced to one CPU worker thread.
class engine {
 public:
  /// PyTorch's small internal id of the forward (main) thread, written as "Fwd thread id".
  static constexpr std::int64_t forward_thread_id = 1;

  engine();   ///< starts the "pt_autograd_0" worker
  ~engine();  ///< stops and joins it
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  /// loss.backward(): seeds the gradient with ones_like(root) on the calling thread, then runs
  /// the graph on the worker and waits. Rethrows what a backward function threw. The wait
  /// records nothing, so in key_averages() it is self time of the enclosing ProfilerStep#N.
  void backward(const variable& root);

 private:
  struct job {
    node_ptr root;
    tensor seed;
  };
  void worker_main();
  static void execute(const node_ptr& root, tensor seed);

  std::mutex mutex_;
  std::condition_variable cv_;
  job job_;
  bool has_job_ = false;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace cnn::autograd
