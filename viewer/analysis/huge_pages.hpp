// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file huge_pages.hpp
/// Transparent huge pages for the viewer's heap.
///
/// Loading a trace touches fresh memory at a high rate: the text windows, the model's columns as
/// they grow, the op tree and the views. With 4 KiB pages every first touch of a page is a fault,
/// and on a virtual machine a fault costs microseconds: measured on a 2-core VM, indexing one
/// 65 MB rank trace took 0.73 s, two thirds of it in 34 000 page faults. glibc's malloc can ask
/// the kernel for 2 MiB pages (madvise(MADV_HUGEPAGE) on the main arena's heap and on mmap()ed
/// blocks), which cuts the faults ~8x and the time to 0.26 s. That switch is the tunable
/// `glibc.malloc.hugetlb=1`, and glibc reads tunables only from the environment at start-up
/// (GLIBC_TUNABLES), so the program re-executes itself once with it set. The other arenas get
/// no huge pages, so with them on, malloc is limited to the main arena (M_ARENA_MAX = 1).
///
/// Nothing else changes: same pid, arguments, descriptors and environment (plus the tunable).
/// It is skipped when it cannot help or the user decided: KINETOSCOPE_HUGE_PAGES=0, a
/// GLIBC_TUNABLES that already names glibc.malloc.hugetlb, THP set to "never" (or absent), glibc
/// older than 2.35 (no such tunable), and sanitizer builds (their allocator is not glibc's).

#include <string>

namespace kinetoscope::analysis {

/// Call first thing in main() with main's argv, before any thread starts: returns when huge
/// pages are on already (then it also limits glibc to one arena, whose heap is the one that gets
/// them) or are not wanted (see above); otherwise exec()s this program again and does not
/// return, unless the exec fails, and then the process carries on with the default heap.
void configure_heap(char** argv) noexcept;

/// How this process's heap is set up, for `kinetoscope --version`: "transparent huge pages
/// (glibc.malloc.hugetlb=1, one malloc arena)" or "default pages (<why>)".
std::string heap_description();

}  // namespace kinetoscope::analysis
