// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// Serialisation of operator inputs into a thread queue (record_shapes) and back.

#include <span>

#include "kinetoscope/record_function.hpp"
#include "kinetoscope/trace_data.hpp"

namespace kinetoscope::detail {

/// Appends an inputs entry for op `external_id`.
void push_inputs(thread_buffer* b, std::int64_t external_id, std::span<const arg> inputs) noexcept;

/// Decodes an inputs entry: returns the op's External id and appends its inputs to `out`.
std::int64_t decode_inputs(const entry_header* e, std::vector<op_input>& out);

}  // namespace kinetoscope::detail
