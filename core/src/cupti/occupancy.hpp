// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file occupancy.hpp
/// The CUDA occupancy calculator, as Kineto uses it for a kernel's "est. achieved occupancy %".
///
/// Why our own: Kineto calls cudaOccMaxActiveBlocksPerMultiprocessor (cuda_occupancy.h) with a
/// default function state (no partitioned global cache, default shared-memory limit, default
/// carveout, one block barrier). That reduces to four limits per SM — warps, registers, shared
/// memory and resident blocks — each a few integer formulas of the device's properties, so a
/// plain function of device_properties computes the same numbers, needs no CUDA header, and can
/// be tested on any machine.

#include <cstdint>

#include "kinetoscope/trace_data.hpp"

namespace kinetoscope::detail {

/// What the calculator needs beyond the written deviceProperties: the shared memory the driver
/// reserves per block (1 KiB from compute capability 8.0, 0 before; a driver attribute).
struct occupancy_device {
  device_properties props;
  std::int64_t reserved_shared_mem_per_block = 0;
};

/// A kernel launch as the calculator sees it.
struct occupancy_launch {
  std::int32_t registers_per_thread = 0;
  std::int64_t static_shared_memory = 0;   ///< bytes per block
  std::int64_t dynamic_shared_memory = 0;  ///< bytes per block
  std::int32_t block_size = 0;             ///< threads per block (x * y * z)
};

/// Per-SM limits on resident blocks (the calculator's result).
struct occupancy_limits {
  int warps = 0;
  int registers = 0;
  int shared_memory = 0;
  int blocks = 0;
  /// min of the four: theoretical active blocks per SM
  int active_blocks() const noexcept;
};

/// Theoretical resident blocks per SM, or -1 when the device is unknown to the calculator
/// (compute capability outside 7.0-12.x) or its properties are not filled in.
int max_active_blocks_per_sm(const occupancy_device& device, const occupancy_launch& launch,
                             occupancy_limits* limits = nullptr);

/// Kineto's estimate: min(active blocks, blocks per SM) * block size / max threads per SM, as a
/// percentage rounded to an integer in [0, 100]; 0 when it cannot be computed.
std::int32_t estimated_occupancy_pct(const occupancy_device& device, const occupancy_launch& launch,
                                     double blocks_per_sm);

}  // namespace kinetoscope::detail
