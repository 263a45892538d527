// SPDX-License-Identifier: BSD-3-Clause
// The autograd graph and engine: sequence numbers, AccumulateGrad, dependency counting and a
// priority ready queue, run on one worker thread ("pt_autograd_0").
#include "autograd.hpp"

#include <limits>
#include <queue>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "ops.hpp"

namespace cnn::autograd {
namespace {

thread_local std::int64_t t_sequence_nr = 0;

/// Ready-queue priority, as torch's ReadyQueue: AccumulateGrad nodes first (their sequence
/// number is UINT64_MAX there), then later forward ops before earlier ones.
std::int64_t priority(const node& n) {
  return n.accumulates_grad ? std::numeric_limits<std::int64_t>::max() : n.sequence_nr;
}

/// Runs one node as PyTorch's engine does: the evaluate_function wrapper around the node call,
/// both carrying the forward op's sequence number; then releases the saved tensors.
std::vector<tensor> evaluate_function(node& n, const tensor& grad) {
  const kinetoscope::op_links links =
      n.sequence_nr >= 0 ? kinetoscope::op_links{n.sequence_nr, engine::forward_thread_id}
                         : kinetoscope::op_links{};
  kinetoscope::record_op evaluate(n.names.evaluate, {arg_of(grad)}, links);
  std::vector<tensor> grads;
  {
    kinetoscope::record_op call(n.names.node, {arg_of(grad)}, links);
    grads = n.apply(grad);
  }
  if (!n.accumulates_grad) n.apply = nullptr;  // retain_graph=False: free what it saved
  return grads;
}

}  // namespace

std::int64_t next_sequence_nr() noexcept { return t_sequence_nr++; }

node_ptr make_node(node_names names, std::int64_t sequence_nr, std::vector<node_ptr> inputs,
                   node::backward_fn apply) {
  return std::make_shared<node>(
      node{names, sequence_nr, false, std::move(inputs), std::move(apply)});
}

parameter::parameter(std::string name, tensor data)
    : name_(std::move(name)), data_(std::move(data)) {
  // torch::autograd::AccumulateGrad: the first gradient is taken over (stolen with a detach if
  // its layout matches the parameter's, else copied in the parameter's layout); later ones are
  // added in place.
  accumulator_ = std::make_shared<node>(node{
      CNN_AUTOGRAD_NODE(torch::autograd::AccumulateGrad), -1, true, {},
      [this](const tensor& g) -> std::vector<tensor> {
        if (!grad_.defined())
          grad_ = g.is_contiguous() ? aten::detach(g) : aten::contiguous_copy(g);
        else
          aten::add_(grad_, g);
        return {};
      }});
}

// ---- engine ----

engine::engine() : worker_([this] { worker_main(); }) {}

engine::~engine() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void engine::backward(const variable& root) {
  if (!root.grad_fn) throw std::invalid_argument("backward: the tensor does not require grad");
  // torch.autograd.backward's implicit gradient for a scalar loss: ones_like(loss).
  tensor seed = aten::ones_like(root.data);
  std::unique_lock lock(mutex_);
  job_ = {root.grad_fn, std::move(seed)};
  has_job_ = true;
  cv_.notify_all();
  cv_.wait(lock, [this] { return !has_job_; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void engine::worker_main() {
  kinetoscope::set_thread_name("pt_autograd_0");
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [this] { return has_job_ || stopping_; });
    if (!has_job_) return;  // stopping, nothing pending
    job j = std::move(job_);
    job_ = {};
    lock.unlock();
    std::exception_ptr error;
    try {
      execute(j.root, std::move(j.seed));
    } catch (...) {
      error = std::current_exception();
    }
    j = {};  // drop the graph reference here, not on the waiting thread
    lock.lock();
    error_ = error;
    has_job_ = false;
    cv_.notify_all();
  }
}

void engine::execute(const node_ptr& root, tensor seed) {
  // Dependencies: how many edges point at each node (torch's compute_dependencies).
  std::unordered_map<node*, int> dependencies;
  std::vector<node*> stack{root.get()};
  while (!stack.empty()) {
    node* n = stack.back();
    stack.pop_back();
    for (const node_ptr& next : n->next_edges)
      if (next && dependencies[next.get()]++ == 0) stack.push_back(next.get());
  }

  auto runs_later = [](const node* a, const node* b) { return priority(*a) < priority(*b); };
  std::priority_queue<node*, std::vector<node*>, decltype(runs_later)> ready(runs_later);
  std::unordered_map<node*, tensor> input_buffers;  // gradients waiting for their node
  input_buffers[root.get()] = std::move(seed);
  ready.push(root.get());

  while (!ready.empty()) {
    node* n = ready.top();
    ready.pop();
    std::vector<tensor> grads;
    if (auto buffer = input_buffers.extract(n); !buffer.empty()) {
      grads = evaluate_function(*n, buffer.mapped());
    }  // else no gradient reached this node: it does not run, its inputs get none from it
    for (std::size_t i = 0; i < n->next_edges.size(); ++i) {
      node* next = n->next_edges[i].get();
      if (next == nullptr) continue;
      if (i < grads.size() && grads[i].defined()) {
        tensor& slot = input_buffers[next];
        // InputBuffer::accumulate: a second gradient for the same input is summed.
        slot = slot.defined() ? aten::add(slot, grads[i]) : std::move(grads[i]);
      }
      if (--dependencies[next] == 0) ready.push(next);
    }
  }
}

}  // namespace cnn::autograd
