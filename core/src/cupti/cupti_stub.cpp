// SPDX-License-Identifier: BSD-3-Clause
// The cuda activity of a build without CUPTI (meson found no CUDA toolkit, or -Dcupti=disabled):
// never available, so profiler.cpp never calls the other three.
#include "../cuda_backend.hpp"

namespace kinetoscope::detail {

const std::string& cuda_unavailable_reason() {
  static const std::string reason =
      "this build has no CUPTI backend (built without the CUDA toolkit)";
  return reason;
}

bool cuda_start(bool /*profile_memory*/) { return false; }
void cuda_synchronize() {}
void cuda_stop(trace_data& /*out*/, const window_bounds& /*window*/, const tick_converter& /*clock*/) {}

}  // namespace kinetoscope::detail
