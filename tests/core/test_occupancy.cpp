// SPDX-License-Identifier: BSD-3-Clause
// The occupancy calculator behind "est. achieved occupancy %", against values computed by hand
// from the CUDA occupancy rules for an H100 SXM (9.0) and an A100 (8.0).
#include <doctest/doctest.h>

#include "cupti/occupancy.hpp"

using kinetoscope::detail::estimated_occupancy_pct;
using kinetoscope::detail::max_active_blocks_per_sm;
using kinetoscope::detail::occupancy_device;
using kinetoscope::detail::occupancy_launch;
using kinetoscope::detail::occupancy_limits;

namespace {

occupancy_device h100() {
  occupancy_device d;
  d.props = {0, "NVIDIA H100 80GB HBM3", 85029158912, 9, 0, 1024, 2048, 65536, 32, 49152, 132,
             65536, 232448, 233472};
  d.reserved_shared_mem_per_block = 1024;
  return d;
}

occupancy_device a100() {
  occupancy_device d;
  d.props = {0, "NVIDIA A100-SXM4-80GB", 84974239744, 8, 0, 1024, 2048, 65536, 32, 49152, 108,
             65536, 166912, 167936};
  d.reserved_shared_mem_per_block = 1024;
  return d;
}

}  // namespace

TEST_CASE("occupancy: H100, warps and registers both allow 8 blocks of 256 threads") {
  // 256 threads = 8 warps: 64 warp slots / 8 = 8. 32 regs: 1024 per warp, 16 warps per
  // sub-partition (16384 / 1024) * 4 / 8 = 8. Shared: 1 KiB reserved -> 228 KiB / 1 KiB = 228.
  occupancy_limits l;
  CHECK(max_active_blocks_per_sm(h100(), {32, 0, 0, 256}, &l) == 8);
  CHECK(l.warps == 8);
  CHECK(l.registers == 8);
  CHECK(l.shared_memory == 228);
  CHECK(l.blocks == 32);
  // 264 blocks on 132 SMs = 2 per SM: 2 * 256 / 2048 = 25 %.
  CHECK(estimated_occupancy_pct(h100(), {32, 0, 0, 256}, 264.0 / 132) == 25);
  // 1056 blocks = 8 per SM: every slot used.
  CHECK(estimated_occupancy_pct(h100(), {32, 0, 0, 256}, 1056.0 / 132) == 100);
}

TEST_CASE("occupancy: H100, registers limit before shared memory") {
  // 128 threads (4 warps), 64 regs: 2048 per warp, 8 warps per sub-partition -> 32 / 4 = 8.
  // Shared: 16384 + 8192 + 1024 reserved = 25600 per block -> 233472 / 25600 = 9.
  occupancy_limits l;
  const occupancy_launch k{64, 16384, 8192, 128};
  CHECK(max_active_blocks_per_sm(h100(), k, &l) == 8);
  CHECK(l.warps == 16);
  CHECK(l.registers == 8);
  CHECK(l.shared_memory == 9);
  // 100 blocks per SM wanted, 8 resident: 8 * 128 / 2048 = 50 %.
  CHECK(estimated_occupancy_pct(h100(), k, 100.0) == 50);
  // 3 blocks of 192 threads per SM: 3 * 192 / 2048 = 28.125 % -> 28.
  CHECK(estimated_occupancy_pct(h100(), {32, 0, 0, 192}, 3.0) == 28);
}

TEST_CASE("occupancy: A100, registers rounded to the sub-partitions, shared memory granularity") {
  // 96 threads = 3 warps; 40 regs = 1280 per warp; 16384 / 1280 = 12 warps per sub-partition,
  // 48 per SM / 3 = 16 blocks; warps 64 / 3 = 21; shared 167936 / 1024 = 164.
  occupancy_limits l;
  CHECK(max_active_blocks_per_sm(a100(), {40, 0, 0, 96}, &l) == 16);
  CHECK(l.warps == 21);
  CHECK(l.registers == 16);
  CHECK(l.shared_memory == 164);
  // 20 blocks per SM wanted, 16 resident: 16 * 96 / 2048 = 75 %.
  CHECK(estimated_occupancy_pct(a100(), {40, 0, 0, 96}, 20.0) == 75);

  // 40000 B dynamic + 1024 reserved = 41024, rounded to 128 B = 41088: 167936 / 41088 = 4.
  CHECK(max_active_blocks_per_sm(a100(), {32, 0, 40000, 256}, &l) == 4);
  CHECK(l.shared_memory == 4);
  CHECK(estimated_occupancy_pct(a100(), {32, 0, 40000, 256}, 10.0) == 50);
}

TEST_CASE("occupancy: launches that cannot be resident, unknown devices") {
  // 255 regs x 32 threads -> 8192 per warp x 32 warps > 65536 registers per block.
  CHECK(max_active_blocks_per_sm(a100(), {255, 0, 0, 1024}) == 0);
  CHECK(estimated_occupancy_pct(a100(), {255, 0, 0, 1024}, 4.0) == 0);
  // More shared memory than the default per-block limit (48 KiB + 1 KiB reserved): Kineto's
  // function state has no opt-in, so such a kernel shows 0.
  CHECK(max_active_blocks_per_sm(h100(), {32, 0, 60000, 128}) == 0);
  // Block larger than the device allows.
  CHECK(max_active_blocks_per_sm(h100(), {32, 0, 0, 1025}) == 0);
  // Pascal (6.1) is outside what CUDA 13 and this calculator know.
  occupancy_device pascal = a100();
  pascal.props.compute_major = 6;
  pascal.props.compute_minor = 1;
  CHECK(max_active_blocks_per_sm(pascal, {32, 0, 0, 256}) == -1);
  CHECK(estimated_occupancy_pct(pascal, {32, 0, 0, 256}, 2.0) == 0);
  // A device table entry without properties (driver did not answer).
  occupancy_device empty;
  empty.props.compute_major = 9;
  CHECK(max_active_blocks_per_sm(empty, {32, 0, 0, 256}) == -1);
  CHECK(max_active_blocks_per_sm(h100(), {32, 0, 0, 0}) == -1);
}
