// The [data] source a trainer reads: synthetic, npy, or a csv/multislot dataset over its share
// of the file list (data.shard), read ahead by the reader thread (data.queue_batches).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "data/source.h"
#include "frontend/frontend.h"
#include "ir/program.h"
#include "support/status.h"

namespace fleet {

// The [data] source of trainer `rank` of `trainers` (a collective rank, a parameter-server
// trainer's id, or 0 of 1) for the feeds of `programs`. Errors name the source and the config
// key that chose it.
StatusOr<std::unique_ptr<data::DataSource>> MakeDataSource(const Config& config,
                                                           const frontend::ParsedProgram& programs,
                                                           const std::vector<data::FeedSpec>& feeds,
                                                           int64_t rank, int64_t trainers);

// The host memory that train.batch_size and data.queue_batches size, checked before a batch is
// drawn: a draw is train.batch_size * `copies` samples (`copies_text` says what they are: the
// trainers sharing a global batch, the devices of one process), the reader thread of a text
// dataset holds data.queue_batches more and data.last_batch = "pad" one more. RESOURCE_EXHAUSTED
// naming the key and the bytes it would need when that overflows or exceeds what the process can
// use (support/host_memory.h). A sequence feed's length is not known before its data is read: a
// sample's sequence is counted as one row plus its offset, so data whose sequences average more
// rows than one can need more than the check allowed for (the message says so).
// `key` names the batch size in messages: an evaluation's is config.train.batch_size of a copy,
// named "eval.batch_size".
Status CheckBatchMemory(const Config& config, const std::vector<data::FeedSpec>& feeds,
                        int64_t copies, const std::string& copies_text,
                        std::string_view key = "train.batch_size");

// `status` from preparing a program for batches of train.batch_size * `copies` rows: when it is
// RESOURCE_EXHAUSTED (the program's tensors do not fit), the key that sized them is named too.
Status NameBatchSize(const Status& status, const Config& config, int64_t copies,
                     const std::string& copies_text, std::string_view key = "train.batch_size");

// The width of the prediction a label is compared with: the last dim of the other input of the
// first op in `main` that reads `label` (e.g. cross_entropy's X). 0 when it cannot be told.
int64_t PredictionWidth(const ir::Program& main, const std::string& label);

}  // namespace fleet
