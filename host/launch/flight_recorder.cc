#include "launch/flight_recorder.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "fleet/fleet_abi.h"
#include "fleet/fleet_comm.h"

namespace fleet {
namespace {

constexpr char kMagic[8] = {'F', 'L', 'E', 'E', 'T', 'F', 'R', '1'};
constexpr uint32_t kVersion = 1;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint32_t entry_bytes;
  uint32_t capacity;
  int32_t rank;
  int32_t world_size;
  int32_t pid;
  uint32_t reserved0;
  uint64_t written;
  int64_t created_ns;
  uint64_t reserved1;
};
static_assert(sizeof(Header) == 64);

// The checksum covers `stamp` through `call`: what identifies and describes the call. The rest
// changes after it is written.
struct Slot {
  uint64_t stamp;  // record index + 1; 0: never written
  int64_t entered_ns;
  PackedCall call;
  int64_t done_ns;
  int32_t state;
  int32_t reserved0;
  uint64_t check;
  uint64_t reserved1;
};
static_assert(sizeof(Slot) == 160);
constexpr size_t kChecked = offsetof(Slot, done_ns);

uint64_t Fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

// Never 0, so a zeroed slot never passes.
uint64_t Checksum(const Slot& s) { return Fnv1a(&s, kChecked) | 1; }

int64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

const char* ReduceText(int32_t op) {
  switch (op) {
    case FLEET_REDUCE_SUM: return "sum";
    case FLEET_REDUCE_PROD: return "prod";
    case FLEET_REDUCE_MAX: return "max";
    case FLEET_REDUCE_MIN: return "min";
    case FLEET_REDUCE_AVG: return "avg";
    default: return "reduce?";
  }
}

std::string Printable(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return out;
}

}  // namespace

PackedCall Pack(const CollectiveCall& call, uint64_t seq) {
  PackedCall p{};
  p.seq = seq;
  p.numel = call.numel;
  p.bytes = call.bytes;
  p.ring = call.ring;
  p.kind = static_cast<int32_t>(call.kind);
  p.flags = call.from_program ? 1 : 0;
  p.dtype = call.dtype;
  p.arg = call.arg;
  p.tensors = call.tensors;
  std::memcpy(p.var, call.var.data(), std::min(call.var.size(), sizeof(p.var) - 1));
  return p;
}

CollectiveCall Unpack(const PackedCall& p) {
  CollectiveCall c;
  c.kind = static_cast<CollectiveKind>(p.kind);
  c.from_program = (p.flags & 1) != 0;
  c.ring = p.ring;
  c.dtype = p.dtype;
  c.arg = p.arg;
  c.tensors = p.tensors;
  c.numel = p.numel;
  c.bytes = p.bytes;
  c.var = std::string_view(p.var, strnlen(p.var, sizeof(p.var)));
  return c;
}

uint64_t HashOf(const PackedCall& p) { return Fnv1a(&p, sizeof(p)); }

std::string DtypeText(int32_t dtype) {
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
    default: return "dtype " + std::to_string(dtype);
  }
}

std::string StateText(CallState state) {
  switch (state) {
    case CallState::kChecking: return "checking";
    case CallState::kInFlight: return "in flight";
    case CallState::kDone: return "done";
    case CallState::kFailed: return "failed";
    case CallState::kUnknown: break;
  }
  return "unknown";
}

std::string CallName(const CollectiveCall& call) {
  const bool program = call.from_program;
  switch (call.kind) {
    case CollectiveKind::kAllReduce:
      return std::string(program ? "c_allreduce_" : "host all_reduce_") + ReduceText(call.arg);
    case CollectiveKind::kBroadcast: return program ? "c_broadcast" : "host broadcast";
    case CollectiveKind::kAllGather: return program ? "c_allgather" : "host all_gather";
    case CollectiveKind::kReduceScatter:
      return program ? "c_reducescatter" : "host reduce_scatter";
    case CollectiveKind::kBarrier: return "barrier";
  }
  return "collective kind " + std::to_string(static_cast<int32_t>(call.kind));
}

std::string CallText(const CollectiveCall& call) {
  if (call.kind == CollectiveKind::kBarrier) return "barrier";
  std::string args;
  if (!call.var.empty()) {
    args = Printable(call.var);
    if (call.tensors > 1) args += " and " + std::to_string(call.tensors - 1) + " more";
    args += ": ";
  }
  args += std::to_string(call.numel) + " " + DtypeText(call.dtype);
  if (call.kind == CollectiveKind::kBroadcast) args += ", root " + std::to_string(call.arg);
  return CallName(call) + "(" + args + ")";
}

// ---- writing ------------------------------------------------------------------------------

StatusOr<std::unique_ptr<FlightRecorder>> FlightRecorder::Create(const std::string& path,
                                                                 int32_t rank, int32_t world_size,
                                                                 uint32_t capacity) {
  if (capacity == 0 || capacity > kMaxCapacity) {
    return InvalidArgument("flight recorder capacity " + std::to_string(capacity) +
                           " is outside 1.." + std::to_string(kMaxCapacity));
  }
  auto fail = [&](const std::string& what, int e) {
    return FailedPrecondition("flight recorder " + path + ": " + what + ": " + strerror(e));
  };
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return fail("cannot create it", errno);
  std::unique_ptr<FlightRecorder> r(new FlightRecorder());
  r->fd_ = fd;
  r->path_ = path;
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail("stat", errno);
  if (!S_ISREG(st.st_mode)) return FailedPrecondition("flight recorder " + path + " is not a file");
  // An existing file keeps its mode through O_TRUNC.
  if (::fchmod(fd, 0600) != 0) return fail("chmod", errno);
  r->capacity_ = capacity;
  r->map_bytes_ = sizeof(Header) + static_cast<size_t>(capacity) * sizeof(Slot);
  // Allocated up front: a write into a mapped hole on a full disk would be SIGBUS.
  if (int e = ::posix_fallocate(fd, 0, static_cast<off_t>(r->map_bytes_)); e != 0) {
    return fail("cannot allocate " + std::to_string(r->map_bytes_) + " bytes", e);
  }
  void* map = ::mmap(nullptr, r->map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return fail("mmap", errno);
  r->map_ = map;
  std::memset(map, 0, r->map_bytes_);
  auto* h = static_cast<Header*>(map);
  h->version = kVersion;
  h->header_bytes = sizeof(Header);
  h->entry_bytes = sizeof(Slot);
  h->capacity = capacity;
  h->rank = rank;
  h->world_size = world_size;
  h->pid = static_cast<int32_t>(::getpid());
  h->created_ns = NowNs();
  __atomic_thread_fence(__ATOMIC_RELEASE);
  std::memcpy(h->magic, kMagic, sizeof(kMagic));
  return r;
}

FlightRecorder::~FlightRecorder() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  if (fd_ >= 0) ::close(fd_);
}

uint64_t FlightRecorder::Begin(const CollectiveCall& call, uint64_t seq, CallState state) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t index = next_++;
  auto* header = static_cast<Header*>(map_);
  Slot* s = reinterpret_cast<Slot*>(static_cast<char*>(map_) + sizeof(Header)) +
            index % capacity_;
  // Invalidate first: a reader (or the rank's death) between here and the last store sees a
  // slot whose checksum fails, never a mix of two calls that passes.
  __atomic_store_n(&s->check, uint64_t{0}, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  s->stamp = index + 1;
  s->entered_ns = NowNs();
  s->call = Pack(call, seq);
  s->done_ns = 0;
  s->state = static_cast<int32_t>(state);
  const uint64_t check = Checksum(*s);
  __atomic_store_n(&s->check, check, __ATOMIC_RELEASE);
  __atomic_store_n(&header->written, next_, __ATOMIC_RELEASE);
  return index;
}

void FlightRecorder::Update(uint64_t index, CallState state) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot* s = reinterpret_cast<Slot*>(static_cast<char*>(map_) + sizeof(Header)) +
            index % capacity_;
  if (s->stamp != index + 1) return;
  if (state == CallState::kDone || state == CallState::kFailed) {
    __atomic_store_n(&s->done_ns, NowNs(), __ATOMIC_RELAXED);
  }
  __atomic_store_n(&s->state, static_cast<int32_t>(state), __ATOMIC_RELEASE);
}

// ---- reading ------------------------------------------------------------------------------

StatusOr<FlightRecord> ReadFlightRecord(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) return NotFound("no flight recorder file " + path);
    return FailedPrecondition("cannot open " + path + ": " + strerror(e));
  }
  struct stat st {};
  const size_t largest = sizeof(Header) + size_t{FlightRecorder::kMaxCapacity} * sizeof(Slot);
  std::vector<char> bytes;
  Status status = OkStatus();
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    status = DataLoss(path + " is not a regular file");
  } else if (static_cast<uint64_t>(st.st_size) < sizeof(Header) ||
             static_cast<uint64_t>(st.st_size) > largest) {
    status = DataLoss(path + " has " + std::to_string(st.st_size) +
                      " bytes, not the size of a flight recorder");
  } else {
    bytes.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t n = ::pread(fd, bytes.data() + got, bytes.size() - got,
                                static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    bytes.resize(got);  // a file cut short while we read is judged by what we got
  }
  ::close(fd);
  FLEET_RETURN_IF_ERROR(status);
  if (bytes.size() < sizeof(Header)) return DataLoss(path + " lost its header");

  Header h{};
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) {
    return DataLoss(path + " is not a flight recorder file (bad magic)");
  }
  if (h.version != kVersion || h.header_bytes != sizeof(Header) || h.entry_bytes != sizeof(Slot)) {
    return DataLoss(path + ": unknown flight recorder layout (version " +
                    std::to_string(h.version) + ")");
  }
  if (h.capacity == 0 || h.capacity > FlightRecorder::kMaxCapacity ||
      bytes.size() < sizeof(Header) + size_t{h.capacity} * sizeof(Slot)) {
    return DataLoss(path + ": capacity " + std::to_string(h.capacity) +
                    " does not fit the file's " + std::to_string(bytes.size()) + " bytes");
  }
  FlightRecord record;
  record.rank = h.rank;
  record.world_size = h.world_size;
  record.pid = h.pid;
  record.capacity = h.capacity;
  record.written = h.written;
  for (uint32_t i = 0; i < h.capacity; ++i) {
    Slot s{};
    std::memcpy(&s, bytes.data() + sizeof(Header) + size_t{i} * sizeof(Slot), sizeof(s));
    if (s.stamp == 0 && s.check == 0) continue;  // never written
    const bool ok = s.check == Checksum(s) && (s.stamp - 1) % h.capacity == i &&
                    s.call.kind >= static_cast<int32_t>(CollectiveKind::kAllReduce) &&
                    s.call.kind <= static_cast<int32_t>(CollectiveKind::kBarrier) &&
                    s.call.numel >= 0 && s.call.bytes >= 0 && s.call.tensors >= 0;
    if (!ok) {
      ++record.skipped;
      continue;
    }
    FlightEntry e;
    e.index = s.stamp - 1;
    e.call = s.call;
    e.call.var[sizeof(e.call.var) - 1] = '\0';
    e.entered_ns = s.entered_ns;
    e.done_ns = s.done_ns;
    e.state = s.state >= static_cast<int32_t>(CallState::kChecking) &&
                      s.state <= static_cast<int32_t>(CallState::kFailed)
                  ? static_cast<CallState>(s.state)
                  : CallState::kUnknown;
    record.entries.push_back(e);
  }
  std::sort(record.entries.begin(), record.entries.end(),
            [](const FlightEntry& a, const FlightEntry& b) { return a.index < b.index; });
  // Damage can leave a slot whose checksum passes by chance but whose index is far from the
  // others; only the newest `capacity` indices can be live.
  if (!record.entries.empty()) {
    const uint64_t newest = record.entries.back().index;
    const uint64_t oldest = newest + 1 >= h.capacity ? newest + 1 - h.capacity : 0;
    auto live = std::find_if(record.entries.begin(), record.entries.end(),
                             [&](const FlightEntry& e) { return e.index >= oldest; });
    record.skipped += static_cast<size_t>(live - record.entries.begin());
    record.entries.erase(record.entries.begin(), live);
  }
  return record;
}

}  // namespace fleet
