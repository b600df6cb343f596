#include "checkpoint/convert.h"

#include <algorithm>
#include <vector>

#include "support/durable_file.h"
#include "data/npy.h"
#include "ir/program.h"
#include "support/text.h"

namespace fleet::checkpoint {

namespace fs = std::filesystem;

StatusOr<SafeTensors> ReadTensors(const fs::path& src) {
  std::error_code ec;
  if (!fs::exists(src, ec)) return NotFound("convert: '" + src.string() + "' does not exist");
  if (!fs::is_directory(src, ec)) return ReadSafeTensors(src);
  for (const char* name : {"persistables.safetensors", "params.safetensors"}) {
    if (fs::is_regular_file(src / name, ec)) return ReadSafeTensors(src / name);
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(src, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".npy") files.push_back(e.path());
  }
  if (files.empty()) {
    return NotFound("convert: '" + src.string() +
                    "' holds no persistables.safetensors, params.safetensors or .npy file");
  }
  std::sort(files.begin(), files.end());
  SafeTensors st;
  for (const fs::path& f : files) {
    FLEET_ASSIGN_OR_RETURN(data::NpyArray a, data::ReadNpy(f));
    NamedTensor t;
    t.name = f.stem().string();
    t.tensor.dtype = a.dtype;
    t.tensor.dims = std::move(a.dims);
    t.tensor.bytes = std::move(a.bytes);
    st.tensors.push_back(std::move(t));
  }
  return st;
}

Status WriteNpyDirectory(const fs::path& dir, const SafeTensors& st, bool replace) {
  for (const NamedTensor& t : st.tensors) {
    // Each var becomes a file named after it: a name a program could not hold, or one that
    // would be a hidden file, has no file of its own.
    if (Status bad = ir::CheckVarName(t.name); !bad.ok()) {
      return InvalidArgument("convert: var " + QuoteForMessage(t.name) +
                             " has no file name of its own (" + bad.message() +
                             "); keep it in safetensors form");
    }
    if (t.name[0] == '.') {
      return InvalidArgument("convert: var " + QuoteForMessage(t.name) +
                             " would be a hidden file (a leading '.'); keep it in safetensors "
                             "form");
    }
  }
  FLEET_RETURN_IF_ERROR(CheckDirectoryTarget(dir, replace).WithContext("convert"));
  FLEET_ASSIGN_OR_RETURN(const fs::path tmp, TempDirBeside(dir));
  for (const NamedTensor& t : st.tensors) {
    data::NpyArray a;
    a.dtype = t.tensor.dtype;
    a.dims = t.tensor.dims;
    a.bytes = t.tensor.bytes;
    if (Status s = data::WriteNpy(tmp / (t.name + ".npy"), a); !s.ok()) {
      std::error_code ec;
      fs::remove_all(tmp, ec);
      return s.WithContext("convert");
    }
  }
  return CommitDirectory(tmp, dir, replace).WithContext("convert");
}

}  // namespace fleet::checkpoint
