#include "data/file_list.h"

#include <glob.h>

#include <algorithm>

namespace fleet::data {

namespace fs = std::filesystem;

StatusOr<std::vector<fs::path>> ExpandFileList(const std::vector<std::string>& patterns) {
  std::vector<fs::path> files;
  for (const std::string& pattern : patterns) {
    if (pattern.empty()) return InvalidArgument("data.filelist: an entry is ''");
    glob_t g{};
    // GLOB_NOCHECK is off: a pattern that matches nothing (including a plain path that does not
    // exist) yields GLOB_NOMATCH, which is reported rather than read as an empty list.
    const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &g);
    if (rc == GLOB_NOMATCH) {
      ::globfree(&g);
      const bool is_pattern = pattern.find_first_of("*?[") != std::string::npos;
      return NotFound("data.filelist: " +
                      (is_pattern ? "'" + pattern + "' matches no file"
                                  : "'" + pattern + "': no such file"));
    }
    if (rc != 0) {
      ::globfree(&g);
      return Unavailable("data.filelist: cannot expand '" + pattern + "' (" +
                         (rc == GLOB_NOSPACE ? "out of memory" : "read error") + ")");
    }
    for (size_t i = 0; i < g.gl_pathc; ++i) files.emplace_back(g.gl_pathv[i]);
    ::globfree(&g);
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  for (const fs::path& f : files) {
    std::error_code ec;
    if (fs::is_directory(f, ec)) {
      return InvalidArgument("data.filelist: '" + f.string() +
                             "' is a directory (use a pattern such as DIR/*)");
    }
  }
  return files;
}

StatusOr<std::vector<fs::path>> ShardFiles(const std::vector<fs::path>& files, int64_t rank,
                                           int64_t trainers) {
  if (trainers < 1 || rank < 0 || rank >= trainers) {
    return InvalidArgument("cannot shard files for trainer " + std::to_string(rank) + " of " +
                           std::to_string(trainers));
  }
  const int64_t n = static_cast<int64_t>(files.size());
  const int64_t block = n / trainers, extra = n % trainers;
  // Blocks before `rank`: `rank` of them, the first min(rank, extra) one file longer.
  const int64_t begin = rank * block + std::min(rank, extra);
  const int64_t count = block + (rank < extra ? 1 : 0);
  if (count == 0) {
    return FailedPrecondition("trainer " + std::to_string(rank) + " of " +
                              std::to_string(trainers) + " has no file to read: the file list has " +
                              std::to_string(n) + (n == 1 ? " file" : " files") +
                              " for " + std::to_string(trainers) +
                              " trainers (give at least one file per trainer, or set "
                              "data.shard = false)");
  }
  return std::vector<fs::path>(files.begin() + begin, files.begin() + begin + count);
}

}  // namespace fleet::data
