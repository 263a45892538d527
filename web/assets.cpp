// SPDX-License-Identifier: BSD-3-Clause
#include "assets.hpp"

namespace kinetoscope::web {

const asset* find_asset(std::string_view path) {
  if (path.empty()) path = "index.html";
  for (const asset& a : assets())
    if (a.path == path) return &a;
  return nullptr;
}

}  // namespace kinetoscope::web
