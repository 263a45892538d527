// SPDX-License-Identifier: BSD-3-Clause
#include "data_loader.hpp"

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>

#include <kinetoscope/record_function.hpp>

#include "ops.hpp"

namespace cnn::data {
namespace {

using kinetoscope::arg;
using kinetoscope::record_op;

/// aten::normal_ on a fresh tensor: fills it with N(0, std).
void normal_(const tensor& self, double std, std::mt19937& rng) {
  record_op op("aten::normal_", {arg_of(self), arg::scalar(0.0), arg::scalar(std), arg::none()});
  std::normal_distribution<float> dist(0.0f, static_cast<float>(std));
  for (std::int64_t i = 0; i < self.numel(); ++i) self.data()[i] = dist(rng);
}

/// aten::roll over the two spatial dims of a [C, H, W] tensor: out[c][y][x] = self[c][y-dy][x-dx].
tensor roll(const tensor& self, std::int64_t dy, std::int64_t dx) {
  record_op op("aten::roll", {arg_of(self), arg::int_list({dy, dx}), arg::int_list({1, 2})});
  const std::int64_t c = self.size(0), h = self.size(1), w = self.size(2);
  tensor out = tensor::allocate(self.sizes());
  for (std::int64_t k = 0; k < c; ++k)
    for (std::int64_t y = 0; y < h; ++y)
      for (std::int64_t x = 0; x < w; ++x)
        out.data()[(k * h + y) * w + x] =
            self.data()[(k * h + (y - dy + h) % h) * w + (x - dx + w) % w];
  return out;
}

/// aten::stack(tensors, dim=0) of same-shaped [C, H, W] tensors.
tensor stack(const std::vector<tensor>& tensors) {
  record_op op("aten::stack");  // a TensorList input: shapes not recorded
  const tensor& first = tensors.front();
  tensor out = aten::empty({static_cast<std::int64_t>(tensors.size()), first.size(0),
                            first.size(1), first.size(2)});
  for (std::size_t i = 0; i < tensors.size(); ++i)
    std::copy_n(tensors[i].data(), first.numel(),
                out.data() + static_cast<std::int64_t>(i) * first.numel());
  return out;
}

}  // namespace

// ---- synthetic_images ----

synthetic_images::synthetic_images(const options& opt) : opt_(opt) {
  if (opt.image_size % 4 != 0 || opt.num_classes < 1 || opt.size < 1)
    throw std::invalid_argument(
        "synthetic_images: needs size >= 1, num_classes >= 1, image_size a multiple of 4");
  std::mt19937 rng(opt.seed);
  std::bernoulli_distribution sign(0.5);
  const std::int64_t s = opt.image_size, block = s / 4;
  for (std::int64_t k = 0; k < opt.num_classes; ++k) {
    float coarse[3][4][4];
    for (auto& plane : coarse)
      for (auto& row : plane)
        for (float& v : row) v = sign(rng) ? 1.0f : -1.0f;
    tensor pattern = tensor::allocate({3, s, s});
    for (std::int64_t c = 0; c < 3; ++c)
      for (std::int64_t y = 0; y < s; ++y)
        for (std::int64_t x = 0; x < s; ++x)
          pattern.data()[(c * s + y) * s + x] = coarse[c][y / block][x / block];
    patterns_.push_back(std::move(pattern));
  }
}

std::pair<tensor, std::int64_t> synthetic_images::get(std::int64_t index) const {
  KINETOSCOPE_RANGE("SyntheticImages.__getitem__");
  std::seed_seq seq{opt_.seed, static_cast<std::uint32_t>(index)};
  std::mt19937 rng(seq);
  const std::int64_t label = index % opt_.num_classes;
  std::uniform_int_distribution<std::int64_t> shift(-3, 3);
  const std::int64_t dy = shift(rng), dx = shift(rng);

  tensor image = aten::empty({3, opt_.image_size, opt_.image_size});
  normal_(image, opt_.noise_std, rng);
  aten::add_(image, roll(patterns_[static_cast<std::size_t>(label)], dy, dx));
  return {std::move(image), label};
}

// ---- data_loader ----

data_loader::data_loader(const synthetic_images& dataset, const options& opt)
    : dataset_(dataset), opt_(opt) {
  if (opt.batch_size < 1 || opt.prefetch < 1 || opt.batch_size > dataset.size())
    throw std::invalid_argument("data_loader: bad batch_size or prefetch");
  producer_ = std::thread([this] { produce(); });
}

data_loader::~data_loader() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  not_full_.notify_all();
  producer_.join();
}

std::optional<batch> data_loader::next() {
  // The name torch's DataLoader iterator gives this range; consumers classify it as data loading.
  KINETOSCOPE_RANGE("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
  std::unique_lock lock(mutex_);
  not_empty_.wait(lock, [this] { return !queue_.empty() || finished_; });
  if (queue_.empty()) {
    if (error_) std::rethrow_exception(error_);
    return std::nullopt;
  }
  batch b = std::move(queue_.front());
  queue_.pop_front();
  not_full_.notify_one();
  return b;
}

batch data_loader::fetch(std::span<const std::int64_t> indices) const {
  KINETOSCOPE_RANGE("_MapDatasetFetcher.fetch");
  std::vector<tensor> images;
  std::vector<std::int64_t> labels;
  for (std::int64_t index : indices) {
    auto [image, label] = dataset_.get(index);
    images.push_back(std::move(image));
    labels.push_back(label);
  }
  KINETOSCOPE_RANGE("default_collate");
  batch b{stack(images), aten::empty<std::int64_t>(std::vector<std::int64_t>{opt_.batch_size})};
  std::copy(labels.begin(), labels.end(), b.labels.data());
  return b;
}

void data_loader::produce() {
  kinetoscope::set_thread_name("dataloader");
  try {
    // RandomSampler: a fresh permutation of the dataset each epoch, consumed batch by batch.
    std::mt19937 rng(opt_.seed);
    std::vector<std::int64_t> order(static_cast<std::size_t>(dataset_.size()));
    std::size_t cursor = order.size();
    for (std::int64_t n = 0; n < opt_.num_batches; ++n) {
      std::vector<std::int64_t> indices;
      while (static_cast<std::int64_t>(indices.size()) < opt_.batch_size) {
        if (cursor == order.size()) {
          std::iota(order.begin(), order.end(), std::int64_t{0});
          std::shuffle(order.begin(), order.end(), rng);
          cursor = 0;
        }
        indices.push_back(order[cursor++]);
      }
      batch b = fetch(indices);
      // Waiting for room is idle time, not work: like PyTorch, nothing is recorded for it.
      std::unique_lock lock(mutex_);
      not_full_.wait(lock, [this] { return queue_.size() < opt_.prefetch || stopping_; });
      if (stopping_) break;
      queue_.push_back(std::move(b));
      not_empty_.notify_one();
    }
  } catch (...) {
    std::lock_guard lock(mutex_);
    error_ = std::current_exception();
  }
  std::lock_guard lock(mutex_);
  finished_ = true;
  not_empty_.notify_all();
}

}  // namespace cnn::data
