// SPDX-License-Identifier: BSD-3-Clause
// Return address -> source frames through libdw (elfutils). Inlined calls are expanded the way
// `eu-addr2line -i` does: the innermost line comes from the line table, each enclosing frame's
// line from the DW_AT_call_file / DW_AT_call_line of the inlined_subroutine it contains.
#include "symbolizer.hpp"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

namespace kinetoscope::detail {
namespace {

/// Trailing qualifiers a demangled member function may carry after its parameter list.
constexpr std::string_view trailing_qualifiers[] = {" const", " volatile", " &&", " &", " noexcept"};

std::string_view strip_trailing_qualifiers(std::string_view s) {
  for (bool again = true; again;) {
    again = false;
    for (std::string_view q : trailing_qualifiers) {
      if (s.ends_with(q)) {
        s.remove_suffix(q.size());
        again = true;
      }
    }
  }
  return s;
}

bool is_entry_function(std::string_view f) {
  return f == "_start" || f == "__libc_start_main" || f == "__libc_start_main_impl" ||
         f == "__libc_start_call_main" ||
         f == "start_thread" || f == "clone" || f == "clone3";
}

std::string module_file_name(const char* module_name) {
  if (module_name == nullptr || *module_name == '\0') return "<unknown>";
  return std::filesystem::path(module_name).filename().string();
}

std::string hex(std::uintptr_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

/// The linkage (mangled) name of a subprogram or inlined_subroutine, following
/// DW_AT_abstract_origin and DW_AT_specification; else its plain DW_AT_name.
std::string die_function_name(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  const char* linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
  if (linkage == nullptr)
    linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
  if (linkage != nullptr) return function_name(linkage);
  const char* name = dwarf_diename(die);
  return name != nullptr ? std::string(name) : std::string("<unknown>");
}

bool die_udata(Dwarf_Die* die, unsigned int name, Dwarf_Word& out) {
  Dwarf_Attribute attr;
  return dwarf_formudata(dwarf_attr(die, name, &attr), &out) == 0;
}

}  // namespace

std::string frame_text(std::string_view file, int line, std::string_view function) {
  std::string out;
  out.reserve(file.size() + function.size() + 16);
  out.append(file);
  out += '(';
  out += std::to_string(line);
  out += "): ";
  out.append(function);
  return out;
}

std::string strip_parameters(std::string_view demangled) {
  const std::string_view s = strip_trailing_qualifiers(demangled);
  if (!s.ends_with(')')) return std::string(demangled);
  int depth = 0;
  for (std::size_t i = s.size(); i-- > 0;) {
    if (s[i] == ')') ++depth;
    if (s[i] == '(' && --depth == 0) return i == 0 ? std::string(demangled) : std::string(s.substr(0, i));
  }
  return std::string(demangled);  // unbalanced: keep what the demangler gave
}

std::string function_name(const char* symbol) {
  if (symbol == nullptr) return "<unknown>";
  int status = -1;
  std::unique_ptr<char, decltype(&std::free)> d(abi::__cxa_demangle(symbol, nullptr, nullptr, &status),
                                                &std::free);
  if (status != 0 || d == nullptr) return symbol;
  return strip_parameters(d.get());
}

std::string display_path(std::string_view path, std::string_view cwd) {
  namespace fs = std::filesystem;
  const fs::path p = fs::path(path).lexically_normal();
  if (p.is_absolute() && !cwd.empty()) {
    const fs::path rel = p.lexically_relative(fs::path(cwd));
    if (!rel.empty() && *rel.begin() != "..") return rel.generic_string();
  }
  return p.generic_string();
}

/// The libdw view of the process: every mapped module, reported from /proc/self/maps.
struct symbolizer::session {
  Dwfl* dwfl = nullptr;
  ~session() {
    if (dwfl != nullptr) dwfl_end(dwfl);
  }
  static std::unique_ptr<session> open() {
    // dwfl keeps a pointer to the callbacks: they must outlive every session.
    static char* debuginfo_path = nullptr;
    static const Dwfl_Callbacks callbacks = {
        .find_elf = dwfl_linux_proc_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .section_address = nullptr,
        .debuginfo_path = &debuginfo_path,
    };
    auto s = std::make_unique<session>();
    s->dwfl = dwfl_begin(&callbacks);
    if (s->dwfl == nullptr) return s;
    dwfl_report_begin(s->dwfl);
    const int rc = dwfl_linux_proc_report(s->dwfl, ::getpid());
    dwfl_report_end(s->dwfl, nullptr, nullptr);
    if (rc != 0) {
      dwfl_end(s->dwfl);
      s->dwfl = nullptr;
    }
    return s;
  }
};

symbolizer::symbolizer() {
  std::error_code ec;
  cwd_ = std::filesystem::current_path(ec).string();
}

symbolizer::~symbolizer() { delete session_; }

symbolizer& symbolizer::instance() {
  // Never destroyed: a profile stopped from a static destructor may still symbolize.
  static symbolizer* s = new symbolizer();
  return *s;
}

const std::vector<source_frame>& symbolizer::frames(std::uintptr_t pc) {
  std::lock_guard lock(mutex_);
  auto it = cache_.find(pc);
  if (it != cache_.end()) return it->second;
  return cache_.emplace(pc, resolve(pc)).first->second;
}

std::vector<source_frame> symbolizer::resolve(std::uintptr_t pc) {
  // A return address points after the call; pc - 1 lies inside the call instruction, whose
  // line is the caller's line (the next instruction may already belong to the next line).
  const Dwarf_Addr addr = pc - 1;
  if (session_ == nullptr) session_ = session::open().release();
  Dwfl_Module* mod = session_->dwfl != nullptr ? dwfl_addrmodule(session_->dwfl, addr) : nullptr;
  if (mod == nullptr && session_->dwfl != nullptr) {
    // Code loaded (dlopen) after the session was built: report the modules again, once.
    delete session_;
    session_ = session::open().release();
    mod = session_->dwfl != nullptr ? dwfl_addrmodule(session_->dwfl, addr) : nullptr;
  }
  if (mod == nullptr) return {source_frame{hex(pc), false, false}};

  std::vector<source_frame> out;
  Dwarf_Addr bias = 0;
  Dwarf_Die* cudie = dwfl_module_addrdie(mod, addr, &bias);
  // Line tables name files relative to the compilation directory when the compiler was given
  // relative paths (Meson builds: "../src/a.cpp" from the build directory).
  Dwarf_Attribute comp_dir_attr;
  const char* comp_dir =
      cudie != nullptr ? dwarf_formstring(dwarf_attr(cudie, DW_AT_comp_dir, &comp_dir_attr)) : nullptr;
  const auto add = [&](std::string_view file, int line, std::string function) {
    source_frame f;
    f.own = function.starts_with("kinetoscope::");
    f.entry = is_entry_function(function);
    std::string path(file);
    if (comp_dir != nullptr && !path.empty() && path.front() != '/' && path.front() != '<')
      path = std::string(comp_dir) + "/" + path;
    f.text = frame_text(display_path(path, cwd_), line, function);
    out.push_back(std::move(f));
  };

  Dwarf_Line* dline = cudie != nullptr ? dwarf_getsrc_die(cudie, addr - bias) : nullptr;
  Dwarf_Die* scopes = nullptr;
  const int nscopes = dline != nullptr ? dwarf_getscopes(cudie, addr - bias, &scopes) : 0;
  if (nscopes > 0) {
    // dwarf_getscopes continues into an inlined function's abstract scopes; the concrete
    // nesting (inlined call sites up to the real function) comes from the innermost DIE.
    Dwarf_Die innermost = scopes[0];
    std::free(scopes);
    scopes = nullptr;
    const int n = dwarf_getscopes_die(&innermost, &scopes);
    const char* file = dwarf_linesrc(dline, nullptr, nullptr);
    int line = 0;
    dwarf_lineno(dline, &line);
    Dwarf_Files* files = nullptr;
    std::size_t nfiles = 0;
    if (dwarf_getsrcfiles(cudie, &files, &nfiles) != 0) files = nullptr;
    for (int i = 0; i < n; ++i) {
      Dwarf_Die* die = &scopes[i];
      const int tag = dwarf_tag(die);
      if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine) continue;
      add(file != nullptr ? file : "<unknown>", line, die_function_name(die));
      if (tag == DW_TAG_subprogram) break;
      Dwarf_Word call_file = 0, call_line = 0;
      file = files != nullptr && die_udata(die, DW_AT_call_file, call_file) && call_file < nfiles
                 ? dwarf_filesrc(files, call_file, nullptr, nullptr)
                 : nullptr;
      line = die_udata(die, DW_AT_call_line, call_line) ? static_cast<int>(call_line) : 0;
    }
  }
  std::free(scopes);
  if (!out.empty()) return out;

  // No debug information: the ELF symbol, else the module and offset.
  Dwarf_Addr start = 0;
  const char* module_name = dwfl_module_info(mod, nullptr, &start, nullptr, nullptr, nullptr, nullptr, nullptr);
  if (const char* sym = dwfl_module_addrname(mod, addr)) {
    std::string function = function_name(sym);
    source_frame f{module_file_name(module_name) + ": " + function, function.starts_with("kinetoscope::"),
                   is_entry_function(function)};
    return {std::move(f)};
  }
  return {source_frame{module_file_name(module_name) + "+" + hex(pc - start), false, false}};
}

}  // namespace kinetoscope::detail
