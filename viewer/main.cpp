// SPDX-License-Identifier: BSD-3-Clause
// The kinetoscope command: the viewer server (`kinetoscope --logdir DIR`) and the
// `analyze`, `index` and `scalars` sub-commands.
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/analyze.hpp"
#include "cli/cache.hpp"
#include "cli/index.hpp"
#include "cli/scalars.hpp"
#include "analysis/huge_pages.hpp"
#include "server/serve.hpp"

namespace {
void usage(std::ostream& out) {
  out << kinetoscope::server::serve_usage()
      << "other commands:\n"
         "  kinetoscope analyze PATH   torch-tb-profiler's numbers for a trace file or run folder\n"
         "                             (kinetoscope analyze --help for its options)\n"
         "  kinetoscope index PATH...  build the persisted index of trace files without a server\n"
         "                             (kinetoscope index --help for its options)\n"
         "  kinetoscope cache [list|prune|clear]  the index cache: what it holds, prune, empty\n"
         "                             (kinetoscope cache --help for its options)\n"
         "  kinetoscope scalars PATH   scalar series of TensorBoard event files under a logdir\n"
         "                             (kinetoscope scalars --help for its options)\n"
         "environment:\n"
         "  KINETOSCOPE_HUGE_PAGES=0   keep the default heap pages (kinetoscope --version says\n"
         "                             what the heap uses; see README \"Huge pages\")\n";
}
}  // namespace

int main(int argc, char** argv) {
  kinetoscope::analysis::configure_heap(argv);  // (see huge_pages.hpp: loads are ~3x faster)
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    usage(args.empty() ? std::cerr : std::cout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    std::cout << "kinetoscope " << kinetoscope::server::version << '\n'
              << "heap: " << kinetoscope::analysis::heap_description() << '\n';
    return 0;
  }
  if (args[0] == "analyze") {
    args.erase(args.begin());
    if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
      std::cout << kinetoscope::cli::analyze_usage();
      return 0;
    }
    return kinetoscope::cli::run_analyze(args, std::cout, std::cerr);
  }
  if (args[0] == "index") {
    args.erase(args.begin());
    return kinetoscope::cli::run_index(args, std::cout, std::cerr);
  }
  if (args[0] == "cache") {
    args.erase(args.begin());
    return kinetoscope::cli::run_cache(args, std::cout, std::cerr);
  }
  if (args[0] == "scalars") {
    args.erase(args.begin());
    return kinetoscope::cli::run_scalars(args, std::cout, std::cerr);
  }
  // Every other word that looks like a flag belongs to the server (`--logdir DIR ...`).
  if (std::string_view(args[0]).starts_with("--"))
    return kinetoscope::server::run_serve(args, std::cout, std::cerr);
  std::cerr << "kinetoscope: unknown command '" << args[0] << "'\n";
  usage(std::cerr);
  return 2;
}
