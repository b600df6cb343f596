// The safetensors format: the file format of checkpoints, exported parameters and initial
// weights, readable by the tools of other frameworks.
//
// Layout: an 8-byte little-endian unsigned header length N, N bytes of UTF-8 JSON, then the data.
// The JSON is an object mapping each tensor name to
//   {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
// (offsets relative to the start of the data, `end` exclusive), plus an optional
// "__metadata__" object of string values. Tensors are little-endian, row-major, and together
// cover the data exactly: no gaps, no overlaps, nothing after the last.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "executor/tensor.h"
#include "ir/program.h"
#include "support/status.h"

namespace fleet::checkpoint {

struct NamedTensor {
  std::string name;
  exec::HostTensor tensor;
};

struct SafeTensors {
  std::vector<NamedTensor> tensors;            // read: in data order; written: in this order
  std::map<std::string, std::string> metadata; // "__metadata__"
};

// "F32", "BF16", ... for the dtypes the format and ir::DataType share (BOOL, U8, I8, I16, I32,
// I64, F16, BF16, F32, F64); "" for kInvalid.
std::string_view SafeTensorsDtypeName(ir::DataType dtype);
// The inverse; kInvalid for any other name (including the format's dtypes Fleet lacks, such as
// U16 or F8_E4M3).
ir::DataType ParseSafeTensorsDtype(std::string_view name);

// Decodes a whole file's bytes. Everything is validated: the header length fits the buffer,
// the header is a JSON object, every entry has exactly dtype/shape/data_offsets of the right
// kinds, the dtype is known, offsets lie in the data with end - begin = numel * element size,
// the tensors tile the data with no gap or overlap, and no name appears twice. Errors start
// with `source` (a file name) and name the tensor at fault.
StatusOr<SafeTensors> ParseSafeTensors(std::span<const uint8_t> bytes, std::string_view source);

// Reads and decodes `file`.
StatusOr<SafeTensors> ReadSafeTensors(const std::filesystem::path& file);

// The first bytes of a file holding `st`: the length and the JSON header, which the tensors'
// bytes follow in order. Errors as EncodeSafeTensors.
StatusOr<std::vector<uint8_t>> SafeTensorsHeader(const SafeTensors& st);

// The bytes of a file holding `st`: tensors in the order given, the header padded with spaces to
// a multiple of 8 bytes so the data starts aligned. Duplicate or empty names, an unsupported
// dtype or a tensor whose bytes disagree with its shape are INVALID_ARGUMENT naming the tensor.
StatusOr<std::vector<uint8_t>> EncodeSafeTensors(const SafeTensors& st);

// Writes `st` to `file` through a temporary file beside it that is fsynced and renamed into
// place (and the directory fsynced), so a reader sees the old file or the whole new one.
// Returns the CRC-32 of the file's bytes (durable_file.h).
StatusOr<uint32_t> WriteSafeTensors(const std::filesystem::path& file, const SafeTensors& st);

}  // namespace fleet::checkpoint
