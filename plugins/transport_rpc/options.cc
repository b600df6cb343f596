// Option parsing and small helpers of the rpc transport (no gRPC here).
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "common.h"

namespace fleet_rpc {

FleetStatus* MakeStatus(int32_t code, const std::string& message) {
  return g_host->status_new(code, message.c_str());
}

namespace {

[[noreturn]] void Bad(const std::string& where, const std::string& what) {
  throw RpcError(FLEET_CODE_INVALID_ARGUMENT, where + ": " + what);
}

int64_t IntOption(const FleetAttr& a, const std::string& where) {
  if (a.type != FLEET_ATTR_INT && a.type != FLEET_ATTR_INT64) {
    Bad(where, std::string("option '") + a.name + "' must be an integer");
  }
  return a.i;
}

std::string StringOption(const FleetAttr& a, const std::string& where) {
  if (a.type != FLEET_ATTR_STRING || a.s == nullptr) {
    Bad(where, std::string("option '") + a.name + "' must be a string");
  }
  return std::string(a.s, a.s_len);
}

bool BoolOption(const FleetAttr& a, const std::string& where) {
  if (a.type != FLEET_ATTR_BOOL && a.type != FLEET_ATTR_INT && a.type != FLEET_ATTR_INT64) {
    Bad(where, std::string("option '") + a.name + "' must be a bool");
  }
  return a.i != 0;
}

}  // namespace

Options ParseOptions(size_t n, const FleetAttr* const* attrs, const std::string& where) {
  Options o;
  for (size_t i = 0; i < n; ++i) {
    const FleetAttr* a = attrs != nullptr ? attrs[i] : nullptr;
    if (a == nullptr || a->name == nullptr) {
      Bad(where, "option " + std::to_string(i) + " is NULL or has no name");
    }
    const std::string key = a->name;
    if (key == "timeout_ms") {
      o.timeout_ms = IntOption(*a, where);
      if (o.timeout_ms <= 0) Bad(where, "option 'timeout_ms' must be > 0");
    } else if (key == "retries") {
      o.retries = IntOption(*a, where);
      if (o.retries < 0 || o.retries > 100) Bad(where, "option 'retries' must be in [0, 100]");
    } else if (key == "max_message_bytes") {
      o.max_message_bytes = IntOption(*a, where);
      // gRPC caps a message at INT_MAX bytes; below twice the header slack no payload fits.
      if (o.max_message_bytes < 2 * kHeaderSlack ||
          o.max_message_bytes > std::numeric_limits<int32_t>::max() - kHeaderSlack) {
        Bad(where, "option 'max_message_bytes' must lie in [" +
                       std::to_string(2 * kHeaderSlack) + ", " +
                       std::to_string(std::numeric_limits<int32_t>::max() - kHeaderSlack) +
                       "], got " + std::to_string(o.max_message_bytes));
      }
    } else if (key == "token") {
      o.token = StringOption(*a, where);
    } else if (key == "tls") {
      o.tls = BoolOption(*a, where);
    } else if (key == "tls_cert") {
      o.tls_cert = StringOption(*a, where);
    } else if (key == "tls_key") {
      o.tls_key = StringOption(*a, where);
    } else if (key == "tls_ca") {
      o.tls_ca = StringOption(*a, where);
    } else if (key == "tls_client_cert") {
      o.tls_client_cert = StringOption(*a, where);
    } else if (key == "tls_client_key") {
      o.tls_client_key = StringOption(*a, where);
    } else {
      Bad(where, "unknown option '" + key +
                     "' (known: timeout_ms, retries, max_message_bytes, token, tls, tls_cert, "
                     "tls_key, tls_ca, tls_client_cert, tls_client_key)");
    }
  }
  return o;
}

std::string ReadPemFile(const std::string& path, const char* option, const std::string& where) {
  if (path.empty()) Bad(where, std::string("option '") + option + "' is required with tls");
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    Bad(where, std::string("cannot read ") + option + " '" + path + "': " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) Bad(where, std::string("cannot read ") + option + " '" + path + "'");
  std::string pem = text.str();
  if (pem.find("-----BEGIN") == std::string::npos) {
    Bad(where, std::string(option) + " '" + path + "' is not a PEM file");
  }
  return pem;
}

int64_t DtypeSize(int32_t dtype) {
  switch (dtype) {
    case FLEET_DTYPE_BOOL:
    case FLEET_DTYPE_INT8:
    case FLEET_DTYPE_UINT8: return 1;
    case FLEET_DTYPE_INT16:
    case FLEET_DTYPE_FLOAT16:
    case FLEET_DTYPE_BFLOAT16: return 2;
    case FLEET_DTYPE_INT32:
    case FLEET_DTYPE_FLOAT32: return 4;
    case FLEET_DTYPE_INT64:
    case FLEET_DTYPE_FLOAT64: return 8;
    default: return 0;
  }
}

const char* DtypeName(int32_t dtype) {
  switch (dtype) {
    case FLEET_DTYPE_BOOL: return "bool";
    case FLEET_DTYPE_INT8: return "int8";
    case FLEET_DTYPE_UINT8: return "uint8";
    case FLEET_DTYPE_INT16: return "int16";
    case FLEET_DTYPE_INT32: return "int32";
    case FLEET_DTYPE_INT64: return "int64";
    case FLEET_DTYPE_FLOAT16: return "float16";
    case FLEET_DTYPE_BFLOAT16: return "bfloat16";
    case FLEET_DTYPE_FLOAT32: return "float32";
    case FLEET_DTYPE_FLOAT64: return "float64";
    default: return "invalid";
  }
}

int64_t DenseBytes(int32_t dtype, const std::vector<int64_t>& dims) {
  int64_t bytes = DtypeSize(dtype);
  if (bytes == 0) return -1;
  for (int64_t d : dims) {
    if (d < 0) return -1;
    if (d != 0 && bytes > std::numeric_limits<int64_t>::max() / d) return -1;
    bytes *= d;
  }
  return bytes;
}

bool LayoutSelectedRows(int32_t dtype, const std::vector<int64_t>& dims,
                        SelectedRowsLayout* out) {
  if (dims.empty()) return false;
  const int64_t values = DenseBytes(dtype, dims);
  if (values < 0) return false;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  // Each step subtracts from the limit rather than adding to a size, so none can wrap. With a
  // zero dim past the first, the values are empty however large dims[0] is: the rows still
  // count.
  if (values > kMax - 7) return false;
  const int64_t rows_offset = (values + 7) / 8 * 8;
  if (dims[0] > (kMax - rows_offset) / 8) return false;
  out->values = values;
  out->rows_offset = rows_offset;
  out->total = rows_offset + 8 * dims[0];
  return true;
}

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

void SplitEndpoint(const std::string& endpoint, const std::string& where, std::string* host,
                   int* port) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == endpoint.size()) {
    Bad(where, "endpoint '" + endpoint + "' is not host:port");
  }
  const std::string port_text = endpoint.substr(colon + 1);
  int64_t value = 0;
  for (char c : port_text) {
    if (c < '0' || c > '9' || value > 65535) {
      Bad(where, "endpoint '" + endpoint + "' has a bad port '" + port_text + "'");
    }
    value = value * 10 + (c - '0');
  }
  if (value > 65535) Bad(where, "endpoint '" + endpoint + "' has a bad port '" + port_text + "'");
  *host = endpoint.substr(0, colon);
  *port = static_cast<int>(value);
}

}  // namespace fleet_rpc
