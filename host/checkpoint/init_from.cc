#include "checkpoint/init_from.h"

#include <algorithm>
#include <map>
#include <system_error>
#include <utility>

#include "checkpoint/safetensors.h"
#include "data/npy.h"

namespace fleet::checkpoint {

namespace fs = std::filesystem;

namespace {

struct Loaded {
  fs::path file;  // where the value came from, for error messages
  exec::HostTensor tensor;
};

// The persistable vars of every program's global block (the blocks below it hold temporaries
// of control flow, never state), the first declaration winning.
std::map<std::string, const ir::Var*> Persistables(
    const std::vector<const ir::Program*>& programs) {
  std::map<std::string, const ir::Var*> out;
  for (const ir::Program* p : programs) {
    if (p == nullptr) continue;
    for (const auto& [name, var] : p->global().vars) {
      if (var.persistable) out.emplace(name, &var);
    }
  }
  return out;
}

// Checks one value against what the scope (or else the program) says the var is.
Status Check(const std::string& name, const Loaded& value, const exec::Scope& scope,
             const std::map<std::string, const ir::Var*>& persistables) {
  auto it = persistables.find(name);
  if (it == persistables.end()) {
    return InvalidArgument("init_from: '" + value.file.string() + "' holds '" + name +
                           "', which is not a persistable var of the program");
  }
  ir::DataType dtype = it->second->dtype;
  std::vector<int64_t> dims = it->second->shape;
  if (const exec::ScopeVar* v = scope.Find(name)) {
    dtype = v->dtype;
    dims = v->dims;
  } else if (std::any_of(dims.begin(), dims.end(), [](int64_t d) { return d < 0; })) {
    return InvalidArgument("init_from: var '" + name + "' (from '" + value.file.string() +
                           "') has shape " + ir::ShapeText(dims) +
                           " in the program, with dims known only at run time, and startup "
                           "did not create it");
  }
  if (value.tensor.dtype != dtype || value.tensor.dims != dims) {
    return InvalidArgument("init_from: var '" + name + "' is " + ir::TypeShapeText(dtype, dims) +
                           " but '" + value.file.string() + "' holds " +
                           ir::TypeShapeText(value.tensor.dtype, value.tensor.dims));
  }
  return OkStatus();
}

Status Add(std::string name, Loaded value, std::map<std::string, Loaded>& values) {
  auto it = values.find(name);
  if (it != values.end()) {
    return InvalidArgument("init_from: var '" + name + "' is given twice, in '" +
                           it->second.file.string() + "' and in '" + value.file.string() + "'");
  }
  values.emplace(std::move(name), std::move(value));
  return OkStatus();
}

using Weights = std::map<std::string, Loaded>;  // by var name

// Every tensor of the .npy and .safetensors files in `dir`.
StatusOr<Weights> ReadWeightFiles(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return NotFound("init_from: '" + dir.string() + "' is not a directory");
  }
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string ext = it->path().extension().string();
    if (ext == ".npy" || ext == ".safetensors") files.push_back(it->path());
  }
  if (ec) return Unavailable("init_from: cannot list '" + dir.string() + "': " + ec.message());
  // Sorted, so which of two files giving one var is named first does not depend on the
  // filesystem's order.
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    return NotFound("init_from: '" + dir.string() +
                    "' holds no .npy or .safetensors file to load weights from");
  }

  std::map<std::string, Loaded> values;
  for (const fs::path& file : files) {
    if (file.extension() == ".npy") {
      auto array = data::ReadNpy(file);
      if (!array.ok()) return array.status().WithContext("init_from");
      Loaded v;
      v.file = file;
      v.tensor.dtype = array->dtype;
      v.tensor.dims = std::move(array->dims);
      v.tensor.bytes = std::move(array->bytes);
      FLEET_RETURN_IF_ERROR(Add(file.stem().string(), std::move(v), values));
      continue;
    }
    auto st = ReadSafeTensors(file);
    if (!st.ok()) return st.status().WithContext("init_from");
    for (NamedTensor& t : st->tensors) {
      FLEET_RETURN_IF_ERROR(Add(std::move(t.name), Loaded{file, std::move(t.tensor)}, values));
    }
  }
  return values;
}

}  // namespace

StatusOr<std::vector<std::string>> LoadInitialWeights(
    const fs::path& dir, exec::Scope& scope, const std::vector<const ir::Program*>& programs) {
  FLEET_ASSIGN_OR_RETURN(Weights values, ReadWeightFiles(dir));
  const std::map<std::string, const ir::Var*> persistables = Persistables(programs);
  for (const auto& [name, value] : values) {
    FLEET_RETURN_IF_ERROR(Check(name, value, scope, persistables));
  }
  std::vector<std::string> loaded;
  for (const auto& [name, value] : values) {
    if (Status s = scope.Write(name, value.tensor); !s.ok()) {
      return s.WithContext("init_from: var '" + name + "' from '" + value.file.string() + "'");
    }
    loaded.push_back(name);
  }
  return loaded;
}

StatusOr<std::vector<std::string>> LoadInitialWeightsForServer(
    const fs::path& dir, exec::Scope& scope, const std::vector<const ir::Program*>& programs,
    const RowBlocks& blocks) {
  FLEET_ASSIGN_OR_RETURN(Weights values, ReadWeightFiles(dir));
  // What the job's state is made of: its persistables, and the whole vars servers cut into
  // blocks (their startups create them whole, then split them).
  std::map<std::string, const ir::Var*> wholes = Persistables(programs);
  for (const auto& [name, parts] : blocks) {
    for (const ir::Program* p : programs) {
      auto it = p->global().vars.find(name);
      if (it != p->global().vars.end()) wholes.emplace(name, &it->second);
    }
  }
  // Checked against the whole var as declared, not against this server's scope: every server
  // checks every file alike, whatever share it holds.
  for (const auto& [name, value] : values) {
    auto it = wholes.find(name);
    if (it == wholes.end()) {
      return InvalidArgument("init_from: '" + value.file.string() + "' holds '" + name +
                             "', which is not a persistable var of the program");
    }
    const ir::Var& var = *it->second;
    if (value.tensor.dtype != var.dtype || value.tensor.dims != var.shape) {
      return InvalidArgument("init_from: var '" + name + "' is " +
                             ir::TypeShapeText(var.dtype, var.shape) + " but '" +
                             value.file.string() + "' holds " +
                             ir::TypeShapeText(value.tensor.dtype, value.tensor.dims));
    }
  }
  std::vector<std::string> loaded;
  for (const auto& [name, value] : values) {
    const std::string where = "init_from: var '" + name + "' from '" + value.file.string() + "'";
    auto it = blocks.find(name);
    if (it == blocks.end()) {
      if (scope.Find(name) == nullptr) continue;  // another server's
      FLEET_RETURN_IF_ERROR(scope.Write(name, value.tensor).WithContext(where));
      loaded.push_back(name);
      continue;
    }
    const exec::HostTensor& whole = value.tensor;
    const size_t row_bytes =
        whole.dims.empty() || whole.dims[0] == 0 ? 0 : whole.bytes.size() / whole.dims[0];
    bool wrote = false;
    for (const RowBlock& b : it->second) {
      if (scope.Find(b.block) == nullptr) continue;  // a block another server keeps
      if (b.first_row < 0 || b.rows < 0 || whole.dims.empty() ||
          b.first_row + b.rows > whole.dims[0]) {
        return Internal(where + ": block '" + b.block + "' (rows " +
                        std::to_string(b.first_row) + " + " + std::to_string(b.rows) +
                        ") does not lie in " + ir::ShapeText(whole.dims));
      }
      exec::HostTensor part;
      std::vector<int64_t> dims = whole.dims;
      dims[0] = b.rows;
      part.Reshape(whole.dtype, dims);
      std::copy_n(whole.bytes.begin() + static_cast<std::ptrdiff_t>(b.first_row * row_bytes),
                  part.bytes.size(), part.bytes.begin());
      FLEET_RETURN_IF_ERROR(scope.Write(b.block, part).WithContext(where));
      wrote = true;
    }
    if (wrote) loaded.push_back(name);
  }
  return loaded;
}

}  // namespace fleet::checkpoint
