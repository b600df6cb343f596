// [train] tensorboard_dir: the logged steps' scalars as a TensorBoard event file, which
// TensorBoard and VisualDL-style tools read as curves.
//
// The file is `events.out.tfevents.<unix seconds>.<host name>` (a numbered suffix when a file of
// that name exists already), a sequence of records in TensorBoard's format:
//   uint64 length, uint32 masked CRC-32C of those 8 bytes, `length` bytes of data,
//   uint32 masked CRC-32C of the data
// (little-endian; mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8; CRC-32C is Castagnoli's).
// The data is an Event protobuf: wall_time (1, double), step (2, int64), file_version
// (3, string: "brain.Event:2" in the first record, which has no summary), summary (5) holding
// Summary.value (1, repeated) messages of tag (1, string) and simple_value (2, float).
//
// The protobuf is written by hand: five fields of two messages do not justify linking the
// protobuf runtime into the host (only the RPC transport plugin has it).
//
// Every record goes to the file in one write(2), unbuffered, so a job killed at any moment
// leaves a file whose records up to the last complete one read back.
//
// Threading: one writer per thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "support/status.h"

namespace fleet {

// The masked CRC-32C of `size` bytes at `data`, as TensorBoard's records carry it.
uint32_t MaskedCrc32c(const uint8_t* data, size_t size);

class EventFileWriter {
 public:
  // Creates `dir` (and its parents) when missing and the event file in it, and writes the
  // file-version record. UNAVAILABLE naming the path when either cannot be made.
  static StatusOr<std::unique_ptr<EventFileWriter>> Open(const std::filesystem::path& dir);
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // One Event of `step` at the current wall time, with a simple_value per (tag, value).
  Status WriteScalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars);

 private:
  EventFileWriter(std::filesystem::path path, int fd) : path_(std::move(path)), fd_(fd) {}
  Status WriteRecord(const std::string& event);

  std::filesystem::path path_;
  int fd_ = -1;
  std::string record_;  // reused from record to record
};

}  // namespace fleet
