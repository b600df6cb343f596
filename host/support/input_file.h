// Opening an input file whose path came from the user or from another file (a program, a data
// file list, a checkpoint manifest, an export's model.json) as hostile input: opened
// O_NONBLOCK so a FIFO nobody writes to cannot block the host, checked with fstat on the file
// actually opened, and refused unless it is a regular file after following symlinks (a FIFO, a
// device such as /dev/zero, a directory, a socket). Whole-file reads are capped: nothing is
// allocated beyond what the cap allows, and a file larger than the cap is refused, not cut.
// ReadJobSecretFile (secret.h) applies the same rules plus its ownership checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "support/status.h"

namespace fleet {

// What a file of mode `mode` (st_mode) is, for messages: "a FIFO", "a directory", ...
std::string InputFileKind(unsigned mode);

// Opens `path` for reading and returns the descriptor (the caller closes it; blocking reads
// restored). `what` names the file in errors ("program file"). NOT_FOUND when it cannot be
// opened for a missing path, PERMISSION_DENIED for EACCES, FAILED_PRECONDITION otherwise and
// for anything but a regular file (naming what it is).
StatusOr<int> OpenInputFile(const std::filesystem::path& path, std::string_view what);

// The same as a stdio stream opened "rb" (the caller fcloses it).
StatusOr<std::FILE*> OpenInputStream(const std::filesystem::path& path, std::string_view what);

// Reads the whole regular file at `path`, at most `max_bytes` (larger: RESOURCE_EXHAUSTED,
// naming the file and the cap; nothing past the cap is read).
StatusOr<std::string> ReadInputFileText(const std::filesystem::path& path, std::string_view what,
                                        size_t max_bytes);
StatusOr<std::vector<uint8_t>> ReadInputFileBytes(const std::filesystem::path& path,
                                                  std::string_view what, size_t max_bytes);

// Default caps: text inputs (programs, manifests, model.json, file lists) and binary shards.
inline constexpr size_t kMaxInputTextBytes = size_t{64} << 20;
inline constexpr size_t kMaxInputShardBytes = size_t{1} << 40;

}  // namespace fleet
