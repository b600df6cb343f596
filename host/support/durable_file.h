// Files that survive a crash: written in pieces straight from the caller's memory, flushed to
// disk, and put in place by a rename, so a reader sees the old file or the whole new one and
// never a torn one. Checkpoints, exports and safetensors files are written through here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "support/status.h"

namespace fleet {

// Writes the concatenation of `pieces` to `file` (mode 0600) through `file` + ".tmp-PID": write,
// fsync, close, rename, then fsync the directory. Returns the CRC-32 (zlib's polynomial) of the bytes
// written, computed as they are written. On failure nothing is left at `file`'s temporary name
// and `file` is untouched; the message names the path and the system's reason (ENOSPC, EFBIG).
StatusOr<uint32_t> WriteFileDurably(const std::filesystem::path& file,
                                    const std::vector<std::span<const uint8_t>>& pieces);

// Creates `dir` and any missing parents; every directory it creates is 0700 (owner only),
// whatever the umask, since they hold checkpoints, exports and logs. Existing directories keep
// their modes. UNAVAILABLE naming the path and the system's reason.
Status MakePrivateDirectories(const std::filesystem::path& dir);

// fsyncs a directory, so the entries created or renamed in it are durable. Best effort on
// filesystems that refuse to open a directory.
void SyncDirectory(const std::filesystem::path& dir);

// The CRC-32 of `bytes` continuing from `crc` (0 to start).
uint32_t Crc32(std::span<const uint8_t> bytes, uint32_t crc = 0);

// Directories written whole or not at all: fill the directory TempDirBeside(out) makes (0700),
// then
// CommitDirectory puts it at `out`. An `out` that exists and is not empty is refused unless
// `replace`; it is then moved aside, and removed only once the new one is in place.
StatusOr<std::filesystem::path> TempDirBeside(const std::filesystem::path& out);
Status CommitDirectory(const std::filesystem::path& tmp, const std::filesystem::path& out,
                       bool replace);
// The refusal CommitDirectory would give for `out`, checked before any work is done.
Status CheckDirectoryTarget(const std::filesystem::path& out, bool replace);

}  // namespace fleet
