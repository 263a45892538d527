// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file assets.hpp
/// The web app compiled into the binary. web/build.mjs bundles web/src into web/dist (committed);
/// web/embed.cpp writes those files as a C++ table, each with its gzip-9 form; the server serves
/// them from memory, so the executable is self-contained and nothing is fetched from a CDN.

#include <span>
#include <string_view>

namespace kinetoscope::web {

struct asset {
  std::string_view path;          ///< URL path below the app root, e.g. "index.html", "assets/app.3f2a9c1e.js"
  std::string_view content_type;  ///< e.g. "text/javascript; charset=utf-8"
  std::string_view data;          ///< the bytes
  std::string_view gzip;          ///< the same bytes gzip-compressed (level 9); empty when not smaller
  std::string_view etag;          ///< quoted strong validator (content hash)
  bool immutable = false;         ///< true for content-hashed names: cache for a year
};

/// Every embedded asset (the table web/embed.cpp generates).
std::span<const asset> assets();

/// The asset at `path` (no leading slash); "" gives index.html. nullptr when unknown.
const asset* find_asset(std::string_view path);

}  // namespace kinetoscope::web
