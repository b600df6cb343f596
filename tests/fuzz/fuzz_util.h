// Shared by the fuzz harnesses: the input as text, and as a file for readers that take a path.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "support/logging.h"

namespace fleet::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A private directory for this process, made once; readers that take a path read from it.
inline const std::filesystem::path& ScratchDir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path d = std::filesystem::temp_directory_path() /
                              ("fleet-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

// Writes the input to ScratchDir()/name and returns the path.
inline std::filesystem::path WriteInput(const std::string& name, const uint8_t* data,
                                        size_t size) {
  const std::filesystem::path file = ScratchDir() / name;
  std::ofstream(file, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return file;
}

// Errors are the expected outcome for most inputs; logging each one would drown the fuzzer.
inline void Quiet() {
  static const bool once = [] {
    (void)SetLogLevel("off");
    return true;
  }();
  (void)once;
}

}  // namespace fleet::fuzz
