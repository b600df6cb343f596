#include "checkpoint/safetensors.h"

#include "support/input_file.h"
#include "support/durable_file.h"
#include "support/text.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

namespace fleet::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The reference implementation refuses headers above 100 MB; so does Fleet, so a corrupt length
// cannot make it allocate gigabytes before it finds out.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

constexpr std::array<std::pair<ir::DataType, std::string_view>, 10> kDtypes = {{
    {ir::DataType::kBool, "BOOL"},
    {ir::DataType::kUInt8, "U8"},
    {ir::DataType::kInt8, "I8"},
    {ir::DataType::kInt16, "I16"},
    {ir::DataType::kInt32, "I32"},
    {ir::DataType::kInt64, "I64"},
    {ir::DataType::kFloat16, "F16"},
    {ir::DataType::kBFloat16, "BF16"},
    {ir::DataType::kFloat32, "F32"},
    {ir::DataType::kFloat64, "F64"},
}};

// Names and values from the file go into messages escaped and cut (support/text.h).
std::string Quote(std::string_view s) { return QuoteForMessage(s); }

// A non-negative JSON integer, or nothing.
bool AsCount(const json& j, uint64_t& out) {
  if (j.is_number_unsigned()) {
    out = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer() && j.get<int64_t>() >= 0) {
    out = static_cast<uint64_t>(j.get<int64_t>());
    return true;
  }
  return false;
}

// The element count of `dims`, or false when it overflows 2^62.
bool Numel(const std::vector<int64_t>& dims, uint64_t& out) {
  out = 1;
  for (int64_t d : dims) {
    const auto u = static_cast<uint64_t>(d);
    if (u != 0 && out > (uint64_t{1} << 62) / u) return false;
    out *= u;
  }
  return true;
}

struct Entry {
  std::string name;
  ir::DataType dtype = ir::DataType::kInvalid;
  std::vector<int64_t> dims;
  uint64_t begin = 0, end = 0;
};

// One tensor's header entry, checked against a data section of `data_len` bytes.
StatusOr<Entry> ParseEntry(const std::string& name, const json& j, uint64_t data_len,
                           std::string_view source) {
  const std::string where = std::string(source) + ": tensor " + Quote(name);
  // No var can have a longer name, so such a tensor could never be loaded; refusing it here
  // keeps it out of every later message and file name.
  if (name.size() > ir::kMaxVarNameBytes) {
    return InvalidArgument(where + ": a name of " + std::to_string(name.size()) +
                           " bytes, longer than any var's (" +
                           std::to_string(ir::kMaxVarNameBytes) + ")");
  }
  if (!j.is_object()) return InvalidArgument(where + ": the entry is not a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets") {
      return InvalidArgument(where + ": unknown key " + Quote(it.key()) +
                             " (expected dtype, shape, data_offsets)");
    }
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!j.contains(key)) return InvalidArgument(where + ": missing " + Quote(key));
  }
  Entry e;
  e.name = name;
  const json& dtype = j["dtype"];
  if (!dtype.is_string()) return InvalidArgument(where + ": dtype is not a string");
  e.dtype = ParseSafeTensorsDtype(dtype.get<std::string>());
  if (e.dtype == ir::DataType::kInvalid) {
    return InvalidArgument(where + ": unsupported dtype " + Quote(dtype.get<std::string>()) +
                           " (Fleet reads BOOL, U8, I8, I16, I32, I64, F16, BF16, F32, F64)");
  }
  const json& shape = j["shape"];
  if (!shape.is_array()) return InvalidArgument(where + ": shape is not an array");
  for (const json& d : shape) {
    uint64_t n = 0;
    if (!AsCount(d, n) || n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return InvalidArgument(where + ": shape " + shape.dump() +
                             " has an entry that is not a non-negative integer");
    }
    e.dims.push_back(static_cast<int64_t>(n));
  }
  const json& offsets = j["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !AsCount(offsets[0], e.begin) ||
      !AsCount(offsets[1], e.end)) {
    return InvalidArgument(where + ": data_offsets " + offsets.dump() +
                           " is not [begin, end] of non-negative integers");
  }
  if (e.begin > e.end) {
    return InvalidArgument(where + ": data_offsets " + offsets.dump() + " ends before it begins");
  }
  if (e.end > data_len) {
    return InvalidArgument(where + ": data_offsets " + offsets.dump() +
                           " lie past the end of the data (" + std::to_string(data_len) +
                           " bytes)");
  }
  uint64_t numel = 0;
  if (!Numel(e.dims, numel)) {
    return InvalidArgument(where + ": shape " + ir::ShapeText(e.dims) + " is too large");
  }
  const uint64_t want = numel * ir::DataTypeSize(e.dtype);
  if (e.end - e.begin != want) {
    return InvalidArgument(where + ": data_offsets " + offsets.dump() + " hold " +
                           std::to_string(e.end - e.begin) + " bytes but " +
                           std::string(dtype.get<std::string>()) + " " + ir::ShapeText(e.dims) +
                           " needs " + std::to_string(want));
  }
  return e;
}

// Parses the header, refusing a name that appears twice in any object: nlohmann's parser keeps
// the last value silently, which would hide a tensor.
StatusOr<json> ParseHeader(std::string_view text, std::string_view source) {
  std::vector<std::set<std::string>> keys;  // one set per object being parsed
  std::string duplicate;
  auto callback = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (event == json::parse_event_t::key && !keys.empty()) {
      const std::string key = parsed.get<std::string>();
      if (!keys.back().insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  json header = json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/false);
  if (header.is_discarded()) {
    return InvalidArgument(std::string(source) + ": the header is not well-formed JSON");
  }
  if (!duplicate.empty()) {
    return InvalidArgument(std::string(source) + ": the header names " + Quote(duplicate) +
                           " twice");
  }
  if (!header.is_object()) {
    return InvalidArgument(std::string(source) + ": the header is not a JSON object");
  }
  return header;
}

}  // namespace

std::string_view SafeTensorsDtypeName(ir::DataType dtype) {
  for (const auto& [t, name] : kDtypes) {
    if (t == dtype) return name;
  }
  return "";
}

ir::DataType ParseSafeTensorsDtype(std::string_view name) {
  for (const auto& [t, n] : kDtypes) {
    if (n == name) return t;
  }
  return ir::DataType::kInvalid;
}

StatusOr<SafeTensors> ParseSafeTensors(std::span<const uint8_t> bytes, std::string_view source) {
  const std::string src(source);
  if (bytes.size() < 8) {
    return InvalidArgument(src + ": " + std::to_string(bytes.size()) +
                           " bytes is too short for a safetensors file (the header length "
                           "alone takes 8)");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[static_cast<size_t>(i)];
  if (n > bytes.size() - 8) {
    return InvalidArgument(src + ": the header length " + std::to_string(n) +
                           " runs past the end of the file (" + std::to_string(bytes.size()) +
                           " bytes)");
  }
  if (n > kMaxHeaderBytes) {
    return InvalidArgument(src + ": the header length " + std::to_string(n) +
                           " exceeds the format's limit of 100 MB");
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8,
                              static_cast<size_t>(n));
  FLEET_ASSIGN_OR_RETURN(json header, ParseHeader(text, source));
  const uint64_t data_len = bytes.size() - 8 - n;
  const uint8_t* data = bytes.data() + 8 + n;

  SafeTensors out;
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return InvalidArgument(src + ": __metadata__ is not a JSON object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) {
          return InvalidArgument(src + ": __metadata__ value of " + Quote(m.key()) +
                                 " is not a string");
        }
        out.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    FLEET_ASSIGN_OR_RETURN(Entry e, ParseEntry(it.key(), *it, data_len, source));
    entries.push_back(std::move(e));
  }
  // Sorted by offset the tensors must tile [0, data_len): each begins where the last ended.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
  });
  uint64_t at = 0;
  const Entry* last = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < at) {
      return InvalidArgument(src + ": tensor " + Quote(e.name) + " at bytes [" +
                             std::to_string(e.begin) + ", " + std::to_string(e.end) +
                             ") overlaps tensor " + Quote(last->name) + " (ends at " +
                             std::to_string(at) + ")");
    }
    if (e.begin > at) {
      return InvalidArgument(src + ": bytes [" + std::to_string(at) + ", " +
                             std::to_string(e.begin) + ") before tensor " + Quote(e.name) +
                             " belong to no tensor");
    }
    at = e.end;
    last = &e;
  }
  if (at != data_len) {
    return InvalidArgument(src + ": the last " + std::to_string(data_len - at) +
                           " bytes of the data belong to no tensor");
  }
  for (Entry& e : entries) {
    NamedTensor t;
    t.name = std::move(e.name);
    t.tensor.dtype = e.dtype;
    t.tensor.dims = std::move(e.dims);
    t.tensor.bytes.assign(data + e.begin, data + e.end);
    out.tensors.push_back(std::move(t));
  }
  return out;
}

StatusOr<SafeTensors> ReadSafeTensors(const fs::path& file) {
  FLEET_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadInputFileBytes(file, "safetensors file", kMaxInputShardBytes));
  return ParseSafeTensors(bytes, file.string());
}

StatusOr<std::vector<uint8_t>> SafeTensorsHeader(const SafeTensors& st) {
  json header = json::object();
  if (!st.metadata.empty()) header["__metadata__"] = st.metadata;
  uint64_t at = 0;
  for (const NamedTensor& t : st.tensors) {
    const std::string where = "safetensors: tensor " + Quote(t.name);
    if (t.name.empty()) return InvalidArgument("safetensors: a tensor has an empty name");
    if (t.name == "__metadata__" || header.contains(t.name)) {
      return InvalidArgument(where + " is given twice (or is the reserved name)");
    }
    const std::string_view dtype = SafeTensorsDtypeName(t.tensor.dtype);
    if (dtype.empty()) return InvalidArgument(where + " has no safetensors dtype");
    uint64_t numel = 0;
    for (int64_t d : t.tensor.dims) {
      if (d < 0) return InvalidArgument(where + " has shape " + ir::ShapeText(t.tensor.dims));
    }
    if (!Numel(t.tensor.dims, numel) ||
        numel * ir::DataTypeSize(t.tensor.dtype) != t.tensor.bytes.size()) {
      return InvalidArgument(where + ": " + std::to_string(t.tensor.bytes.size()) +
                             " bytes do not hold " + std::string(dtype) + " " +
                             ir::ShapeText(t.tensor.dims));
    }
    header[t.name] = {{"dtype", dtype},
                      {"shape", t.tensor.dims},
                      {"data_offsets", {at, at + t.tensor.bytes.size()}}};
    at += t.tensor.bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<uint8_t> out(8);
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  out.insert(out.end(), text.begin(), text.end());
  return out;
}

StatusOr<std::vector<uint8_t>> EncodeSafeTensors(const SafeTensors& st) {
  FLEET_ASSIGN_OR_RETURN(std::vector<uint8_t> out, SafeTensorsHeader(st));
  for (const NamedTensor& t : st.tensors) {
    out.insert(out.end(), t.tensor.bytes.begin(), t.tensor.bytes.end());
  }
  return out;
}

StatusOr<uint32_t> WriteSafeTensors(const fs::path& file, const SafeTensors& st) {
  auto header = SafeTensorsHeader(st);
  if (!header.ok()) return header.status().WithContext(file.string());
  // The tensors go to disk from their own memory: no second copy of a whole checkpoint.
  std::vector<std::span<const uint8_t>> pieces{*header};
  for (const NamedTensor& t : st.tensors) pieces.emplace_back(t.tensor.bytes);
  return WriteFileDurably(file, pieces);
}

}  // namespace fleet::checkpoint
