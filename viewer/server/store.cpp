// SPDX-License-Identifier: BSD-3-Clause
// Placeholder until the store lands (helper H2 replaces this file).
#include "server/store.hpp"
namespace kinetoscope::server {
struct store::impl { store_options options; };
double load_progress::percent() const { return bytes_total ? 100.0 * double(bytes_loaded) / double(bytes_total) : 100.0; }
store::store(store_options o) : impl_(std::make_unique<impl>()) { impl_->options = std::move(o); }
store::~store() = default;
void store::start() {}
bool store::wait_idle(std::chrono::milliseconds) const { return true; }
void store::rescan() {}
const store_options& store::options() const noexcept { return impl_->options; }
load_progress store::progress() const { load_progress p; p.loading = false; return p; }
}  // namespace kinetoscope::server
