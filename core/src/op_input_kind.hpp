// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// What a recorded operator input is, for the two FLOPs counters (flops.cpp: PyTorch's
/// with_flops; deepspeed_flops.cpp: DeepSpeed's flops profiler).

#include <cstdint>
#include <string_view>
#include <vector>

#include "kinetoscope/trace_data.hpp"

namespace kinetoscope::detail {

/// A tensor input: a dtype name in "Input type" (not a scalar, list or None).
inline bool is_tensor(const op_input& in) {
  const std::string_view t = in.type;
  if (t.empty()) return false;  // None / undefined tensor
  return t != "Scalar" && t != "ScalarList" && t != "TensorList" && t != "String" &&
         t != "GenericList" && t != "Int" && t != "Bool" && t != "Double";
}

/// Π dims in unsigned 64-bit arithmetic (1 for a 0-dim tensor), as PyTorch's counters do.
inline std::uint64_t product(const std::vector<std::int64_t>& dims) {
  std::uint64_t p = 1;
  for (std::int64_t d : dims) p *= static_cast<std::uint64_t>(d);
  return p;
}

}  // namespace kinetoscope::detail
