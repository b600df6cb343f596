// A reader thread in front of a data source: batches are prepared ahead of the step that needs
// them, into a bounded queue, so a step waits for data only when reading is slower than
// training.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "data/source.h"

namespace fleet::data {

struct PrefetchOptions {
  int64_t depth = 4;  // ready batches held at most (>= 1)
  // How long Next waits for the reader thread before giving up with DeadlineExceeded.
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
};

// Wraps `inner` (owned). The reader thread starts at the first Next, with that call's batch
// size; every later Next must ask for the same size. Skip is passed to `inner` before the thread
// starts (so it must come first, as DataSource says).
//
// Batches come out in the order `inner` made them, so the result equals reading synchronously.
// An error of `inner` comes back from the Next that would have received that batch, and from
// every Next after it. Next swaps the prepared tensors into the caller's FeedMap and recycles the
// caller's old tensors for a later batch: in steady state nothing is allocated.
//
// Threading: Next/Skip from one thread; the reader thread is the only one touching `inner` once
// started. Destruction stops the reader after the batch it is making and joins it.
std::unique_ptr<DataSource> MakePrefetchSource(std::unique_ptr<DataSource> inner,
                                               const PrefetchOptions& options = {});

}  // namespace fleet::data
