// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file cnn/data_loader.hpp
/// A map-style dataset of synthetic images and a DataLoader that prepares batches ahead of the
/// training loop on a background thread ("dataloader") feeding a bounded queue.
///
/// What the profiler sees, mirroring a PyTorch input pipeline:
/// * main thread: `enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__` around each
///   fetch (the exact name torch-tb-profiler classifies as DataLoader time; it includes any wait
///   for the producer);
/// * dataloader thread: `_MapDatasetFetcher.fetch` per batch, `SyntheticImages.__getitem__` per
///   sample (aten::empty, aten::normal_, aten::roll, aten::add_) and `default_collate`
///   (aten::stack); the thread then sleeps while the queue is full (nothing recorded).

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "tensor.hpp"

namespace cnn::data {

struct batch {
  tensor images;       ///< [N, 3, S, S]
  long_tensor labels;  ///< [N]
};

/// Images whose class is learnable: class k owns a coarse 4x4 colour pattern (random signs,
/// fixed by the seed); a sample is its class pattern, cyclically shifted by up to ±3 pixels, plus
/// Gaussian noise. Deterministic in (seed, index), like a dataset on disk.
class synthetic_images {
 public:
  struct options {
    std::int64_t size = 4096;
    std::int64_t num_classes = 10;
    std::int64_t image_size = 32;  ///< a multiple of 4
    double noise_std = 1.0;
    std::uint32_t seed = 0;
  };
  explicit synthetic_images(const options& opt);

  std::int64_t size() const noexcept { return opt_.size; }
  std::int64_t num_classes() const noexcept { return opt_.num_classes; }
  /// dataset[index]: an image [3, S, S] and its label.
  std::pair<tensor, std::int64_t> get(std::int64_t index) const;

 private:
  options opt_;
  std::vector<tensor> patterns_;  // per class, [3, S, S]
};

/// DataLoader(dataset, batch_size, shuffle=True) with batches produced ahead of time.
class data_loader {
 public:
  struct options {
    std::int64_t batch_size = 16;
    std::int64_t num_batches = 12;  ///< batches to produce in all
    std::size_t prefetch = 2;       ///< queue capacity
    std::uint32_t seed = 0;         ///< shuffling
  };
  data_loader(const synthetic_images& dataset, const options& opt);
  ~data_loader();
  data_loader(const data_loader&) = delete;
  data_loader& operator=(const data_loader&) = delete;

  /// The next batch (blocks until produced), or nullopt once num_batches were handed out.
  /// Rethrows what the producer threw.
  std::optional<batch> next();

 private:
  void produce();
  batch fetch(std::span<const std::int64_t> indices) const;

  const synthetic_images& dataset_;
  options opt_;
  std::mutex mutex_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<batch> queue_;
  bool finished_ = false;  // the producer is done (all batches queued, or it failed)
  bool stopping_ = false;  // the loader is being destroyed
  std::exception_ptr error_;
  std::thread producer_;   // last: started once everything above exists
};

}  // namespace cnn::data
