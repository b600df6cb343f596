// File lists of the text datasets (data.filelist): patterns expanded to files, and the share of
// them that one trainer reads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "support/status.h"

namespace fleet::data {

// Every pattern (a file path or a glob pattern with * ? [...]) expanded to the files it names;
// the union is sorted by path and has no duplicates, so every trainer of a job, given the same
// list, sees the same order. Errors: a pattern that names no file, a path that is a directory.
StatusOr<std::vector<std::filesystem::path>> ExpandFileList(
    const std::vector<std::string>& patterns);

// Paddle's fleet.util.get_file_shard: the files are cut into `trainers` contiguous blocks of
// len / trainers files, and the first len % trainers blocks get one file more; trainer `rank`
// reads block `rank`. A trainer whose block is empty is an error naming it and the file count.
StatusOr<std::vector<std::filesystem::path>> ShardFiles(
    const std::vector<std::filesystem::path>& files, int64_t rank, int64_t trainers);

}  // namespace fleet::data
