// A directory under /tmp for one test, removed with everything in it when the test is done.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace fleet::test_util {

class TempDir {
 public:
  // `prefix` names the directory (/tmp/<prefix>_XXXXXX), so a leftover says which test made it.
  explicit TempDir(const std::string& prefix = "fleet_test") {
    std::string tmpl = "/tmp/" + prefix + "_XXXXXX";
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Writes `text` to path()/name and returns that path.
  std::filesystem::path Write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name) << text;
    return path_ / name;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace fleet::test_util
