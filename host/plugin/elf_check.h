// A look at a plugin file before dlopen sees it. The dynamic loader maps a library's segments
// where its headers say they are; a file cut short (a half-copied or truncated .so) maps pages
// past its end, and the first touch of one kills the process with SIGBUS, inside dlopen, before
// any error can be reported. So the headers are checked against the file first.
#pragma once

#include <filesystem>

#include "support/status.h"

namespace fleet {

// OK when `file` is a 64-bit ELF shared object of this machine's byte order whose program
// headers, loadable segments and section headers all lie inside the file. Otherwise
// INVALID_ARGUMENT saying what is wrong (not ELF, another class or type, truncated: which
// segment ends where, and the file's size). Reads the headers only, with fixed-size buffers.
Status CheckElfImage(const std::filesystem::path& file);

}  // namespace fleet
