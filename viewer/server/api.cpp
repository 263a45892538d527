// SPDX-License-Identifier: BSD-3-Clause
// Placeholder until the API lands (helper H2 replaces this file).
#include "server/api.hpp"
namespace kinetoscope::server {
const std::string* api_request::param(std::string_view name) const {
  for (const auto& [k, v] : query) if (k == name) return &v;
  return nullptr;
}
api_response error_response(unsigned status, std::string_view message) {
  return {status, "application/json; charset=utf-8", "{\"error\":\"" + std::string(message) + "\"}"};
}
api_response api::handle(const api_request&) const { return error_response(501, "not implemented"); }
}  // namespace kinetoscope::server
