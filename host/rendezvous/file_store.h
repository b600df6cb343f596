// A rendezvous store in a directory, shared by the processes of one machine (DESIGN.md §6).
//
// Layout: each key is a file "k_<encoded key>", where the encoding keeps [A-Za-z0-9_-] and writes
// every other byte as "%XX", so any byte string (with '/', '\0', "..") is one safe file name.
// A value is written to a temporary file in the directory, fsynced, then renamed over the key's
// file, so a reader never sees half a value. Set and Add take an flock on "lock" in the
// directory, which makes Add atomic across threads and processes. Get and Wait poll (1 ms,
// growing to 20 ms) until their deadline. Encoded keys are capped at 240 bytes (a file name);
// a longer key is INVALID_ARGUMENT naming it. See store.h for the contract.
#pragma once

#include <memory>
#include <string>

#include "rendezvous/store.h"

namespace fleet {

class FileStore final : public Store {
 public:
  // Opens (creating it and its parents if needed) the store in directory `dir`.
  static StatusOr<std::unique_ptr<FileStore>> Open(const std::string& dir);

  const std::string& dir() const { return dir_; }

  // The file name holding `key` (without the directory); exposed for tests.
  static std::string EncodeKey(std::string_view key);

 protected:
  Status DoSet(const std::string& key, std::string_view value) override;
  StatusOr<std::string> DoGet(const std::string& key,
                              std::chrono::milliseconds timeout) override;
  StatusOr<int64_t> DoAdd(const std::string& key, int64_t delta) override;
  Status DoWait(const std::vector<std::string>& keys,
                std::chrono::milliseconds timeout) override;

 private:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}

  StatusOr<std::string> PathOf(const std::string& key) const;
  // Writes value to the key's file through a temporary file and a rename.
  Status WriteValue(const std::string& key, const std::string& path, std::string_view value);
  // Reads the key's file; nullopt when it does not exist yet.
  StatusOr<std::optional<std::string>> ReadValue(const std::string& key,
                                                 const std::string& path);
  std::string Name() const { return "file store " + dir_; }

  std::string dir_;
};

}  // namespace fleet
