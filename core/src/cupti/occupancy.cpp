// SPDX-License-Identifier: BSD-3-Clause
// The occupancy calculator for compute capability 7.0-12.x (what CUDA 13 supports), with the
// function state Kineto passes: default shared-memory limit (no opt-in), default carveout,
// partitioned global caching off. Each limit below is one of the calculator's per-SM limits.
#include "occupancy.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <span>

namespace kinetoscope::detail {
namespace {

constexpr int register_granularity = 256;   // registers are allocated per warp in units of 256
constexpr int max_registers_per_thread = 256;
constexpr int sub_partitions = 4;           // an SM's register file is split in four (CC >= 7)

int divide_round_up(std::int64_t x, std::int64_t y) { return static_cast<int>((x + y - 1) / y); }
std::int64_t round_up(std::int64_t x, std::int64_t y) { return (x + y - 1) / y * y; }

bool known_architecture(const device_properties& p) {
  return p.compute_major >= 7 && p.compute_major <= 12;
}

bool properties_filled(const device_properties& p) {
  return p.max_threads_per_block > 0 && p.max_threads_per_multiprocessor > 0 &&
         p.regs_per_block > 0 && p.regs_per_multiprocessor > 0 && p.warp_size > 0 &&
         p.shared_mem_per_block > 0 && p.shared_mem_per_multiprocessor > 0 && p.num_sms > 0;
}

/// Resident blocks per SM allowed by the hardware's block slots.
int block_slots(const device_properties& p) {
  switch (p.compute_major) {
    case 7: return p.compute_minor == 5 ? 16 : 32;  // Turing 16, Volta 32
    case 8: return p.compute_minor == 0 ? 32 : (p.compute_minor == 9 ? 24 : 16);
    case 9: return 32;
    case 10: return p.compute_minor == 1 ? 24 : 32;
    case 11: return p.compute_minor == 0 ? 24 : 32;
    default: return 24;  // 12.x
  }
}

/// The shared-memory sizes an SM can be configured to (the L1/shared carveouts), in KiB.
constexpr std::int64_t turing_kib[] = {32, 64};
constexpr std::int64_t volta_kib[] = {0, 8, 16, 32, 64, 96};
constexpr std::int64_t up_to_100_kib[] = {0, 8, 16, 32, 64, 100};
constexpr std::int64_t up_to_164_kib[] = {0, 8, 16, 32, 64, 100, 132, 164};
constexpr std::int64_t up_to_228_kib[] = {0, 8, 16, 32, 64, 100, 132, 164, 196, 228};

std::span<const std::int64_t> carveouts_kib(const device_properties& p) {
  switch (p.compute_major) {
    case 7:
      if (p.compute_minor == 5) return turing_kib;
      return volta_kib;
    case 8:
      if (p.compute_minor == 0 || p.compute_minor == 7) return up_to_164_kib;
      return up_to_100_kib;
    case 9: return up_to_228_kib;
    case 10:
    case 11:
      if (p.compute_minor == 0 || p.compute_minor == 1 || p.compute_minor == 3) return up_to_228_kib;
      return {};
    default:
      if (p.compute_minor == 0 || p.compute_minor == 1) return up_to_100_kib;
      return {};
  }
}

/// The smallest carveout holding `bytes`, or -1 when none does.
std::int64_t align_up_to_carveout(std::int64_t bytes, const device_properties& p) {
  for (const std::int64_t kib : carveouts_kib(p)) {
    if (bytes <= kib * 1024) return kib * 1024;
  }
  return -1;
}

int warps_limit(const device_properties& p, int block_size) {
  if (block_size > p.max_threads_per_block) return 0;
  return (p.max_threads_per_multiprocessor / p.warp_size) / divide_round_up(block_size, p.warp_size);
}

int registers_limit(const device_properties& p, const occupancy_launch& k) {
  const int warps_per_block = divide_round_up(k.block_size, p.warp_size);
  const std::int64_t per_warp =
      round_up(std::int64_t{k.registers_per_thread} * p.warp_size, register_granularity);
  const std::int64_t per_block = per_warp * warps_per_block;
  // The hardware checks a launch as if every sub-partition received the same number of warps.
  const std::int64_t assumed_per_block = per_warp * round_up(warps_per_block, sub_partitions);
  if (p.regs_per_block < assumed_per_block || p.regs_per_block < per_block ||
      k.registers_per_thread > max_registers_per_thread) {
    return 0;
  }
  if (per_warp == 0) return INT_MAX;
  const std::int64_t warps_per_sub_partition = (p.regs_per_multiprocessor / sub_partitions) / per_warp;
  return static_cast<int>(warps_per_sub_partition * sub_partitions / warps_per_block);
}

/// -1: the SM's preferred carveout is not a size this architecture has.
int shared_memory_limit(const occupancy_device& d, const occupancy_launch& k) {
  const device_properties& p = d.props;
  const std::int64_t granularity = p.compute_major >= 8 ? 128 : 256;
  const std::int64_t preferred = align_up_to_carveout(p.shared_mem_per_multiprocessor, p);
  if (preferred < 0) return -1;
  const std::int64_t per_block = round_up(
      k.static_shared_memory + d.reserved_shared_mem_per_block + k.dynamic_shared_memory, granularity);
  std::int64_t block_limit = p.shared_mem_per_block;  // no opt-in in the default function state
  if (p.compute_major >= 8) block_limit += d.reserved_shared_mem_per_block;
  if (per_block > block_limit) return 0;
  std::int64_t per_sm = preferred;
  if (preferred < per_block) {
    // A block needing more than the preferred carveout gets the next size up.
    per_sm = align_up_to_carveout(per_block, p);
    if (per_sm < 0) return -1;
  }
  if (per_block == 0) return INT_MAX;
  return static_cast<int>(per_sm / per_block);
}

}  // namespace

int occupancy_limits::active_blocks() const noexcept {
  return std::min({warps, registers, shared_memory, blocks});
}

int max_active_blocks_per_sm(const occupancy_device& device, const occupancy_launch& launch,
                             occupancy_limits* limits) {
  const device_properties& p = device.props;
  if (!known_architecture(p) || !properties_filled(p) || launch.block_size <= 0 ||
      launch.registers_per_thread < 0) {
    return -1;
  }
  occupancy_limits l;
  l.warps = warps_limit(p, launch.block_size);
  l.registers = registers_limit(p, launch);
  l.blocks = block_slots(p);
  l.shared_memory = shared_memory_limit(device, launch);
  if (l.shared_memory < 0) return -1;
  // The calculator's two other limits never bind here: block barriers (Kineto's function state
  // uses one per block; compute capability >= 9 has at least one per block slot) and virtual
  // resources (none declared).
  if (limits != nullptr) *limits = l;
  return l.active_blocks();
}

std::int32_t estimated_occupancy_pct(const occupancy_device& device, const occupancy_launch& launch,
                                     double blocks_per_sm) {
  const int active = max_active_blocks_per_sm(device, launch);
  if (active < 0) return 0;
  const double resident = std::min(static_cast<double>(active), blocks_per_sm);
  const double fraction = resident * launch.block_size / device.props.max_threads_per_multiprocessor;
  return static_cast<std::int32_t>(std::clamp(std::lround(fraction * 100.0), 0L, 100L));
}

}  // namespace kinetoscope::detail
