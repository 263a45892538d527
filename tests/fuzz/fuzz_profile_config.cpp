// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: the profile configuration parser (JSON file form); anything it does not
// accept must come back as config_error, nothing else.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kinetoscope/writer/profile_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const kinetoscope::profile_config c = kinetoscope::parse_profile_config(text, "fuzz");
    (void)c.any_option();
  } catch (const kinetoscope::config_error&) {
  }
  return 0;
}
