// The run-time desync check: ranks whose collectives go out of step (one runs another step,
// another host exchange, another size) are stopped together with an error naming the first call
// where they part, instead of meeting inside the communicator with mismatched buffers, where Gloo
// aborts the process and NCCL hangs until the timeout.
//
// Every call a Communicator makes is numbered (seq, from 1 per communicator) and folded into a
// running fingerprint (collective, ring, dtype, element count, reduction or root, tensors, var).
// At check points the ranks all-gather three words each (the fingerprint, seq and the check
// mode) before the call: one hop of a ring per peer, half an all-reduce's. The check is itself a
// collective of fixed shape, so it cannot desync as long as every rank reaches it. When the
// fingerprints differ, two more fixed-shape all-gathers find the first call since the ranks last
// agreed where they differ and hand every rank every rank's version of it, so each reports the
// same FAILED_PRECONDITION.
//
// Check points ([comm] check of fleet.toml, or FLEET_COLLECTIVE_CHECK where set, which
// overrides it; the same on every rank, compared when a communicator forms):
//   - "step" (default): before every call the host makes itself (job figures, replica checks,
//     the final barrier) and before a program op that already ran since the last check, i.e. the
//     first collective of each new step. Ranks that part at a step boundary (a rank runs more
//     steps, logs or checks at other steps, takes another branch between steps) are caught
//     before the first mismatched call. Calls inside one run of a program are fingerprinted but
//     not checked one by one: a difference there is named at the next check only if the
//     communicator survived the mismatch.
//   - "every" (or "1"): before every call: exact, one small all-gather per collective.
//   - "off" (or "0"): only the comparison when the communicator forms.
// Both rules depend only on what a rank itself has run, so ranks that agree so far reach the
// same check points.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "launch/flight_recorder.h"
#include "support/status.h"

namespace fleet {

enum class DesyncCheck : int32_t { kOff = 0, kStep = 1, kEvery = 2 };

inline constexpr const char* kDesyncCheckEnv = "FLEET_COLLECTIVE_CHECK";
inline constexpr const char* kDesyncCheckKey = "comm.check";

// "" and "step" -> kStep, "every"/"1" -> kEvery, "off"/"0" -> kOff; INVALID_ARGUMENT otherwise,
// naming FLEET_COLLECTIVE_CHECK (the config reader checks comm.check itself).
StatusOr<DesyncCheck> ParseDesyncCheck(std::string_view text);
std::string_view DesyncCheckName(DesyncCheck mode);

// This process's check mode: FLEET_COLLECTIVE_CHECK when `env` sets it to something other than
// "", else `config_value` (Config::comm_check, as the config reader checked it). Logs which of
// the two applies. Errors name the variable or the key.
StatusOr<DesyncCheck> ResolveDesyncCheck(std::string_view config_value,
                                         const std::map<std::string, std::string>& env);

// One communicator's calls: numbers, the running fingerprint, the calls since the ranks last
// agreed (the window, the first kWindow kept) and the flight recorder's records of them. Not
// thread-safe: its communicator makes one call at a time.
class CallLedger {
 public:
  static constexpr size_t kWindow = 128;
  static constexpr size_t kFingerprintWords = 3;
  static constexpr size_t kWindowWords = 2 + kWindow;
  static constexpr size_t kEntryWords = 1 + sizeof(PackedCall) / sizeof(int64_t);

  // `recorder` may be null; it must outlive the ledger.
  CallLedger(DesyncCheck mode, FlightRecorder* recorder) : mode_(mode), recorder_(recorder) {}

  struct Ticket {
    uint64_t seq = 0;
    uint64_t record = 0;  // the recorder's index
    bool check = false;   // compare fingerprints before the call
  };
  // Registers the next call. `repeat`: a program op that already ran since the ranks last
  // agreed, so a new run of its program (a step) began.
  Ticket Enter(const CollectiveCall& call, bool repeat);
  void Started(const Ticket& t);
  void Finished(const Ticket& t, bool ok);
  // The ranks' fingerprints agreed: the next call opens a new window.
  void Agreed();
  // How many times the ranks agreed so far (a program op compares it with the value after its
  // last call to tell whether it repeats).
  uint64_t agreements() const { return agreements_; }
  DesyncCheck mode() const { return mode_; }

  // This rank's row of each exchange (kFingerprintWords, kWindowWords, kEntryWords words); the
  // exchanges gather every rank's row, rank by rank.
  std::array<int64_t, kFingerprintWords> FingerprintRow() const;
  void WindowRow(int64_t* row) const;
  void EntryRow(size_t i, int64_t* row) const;

  enum class Verdict { kAgree, kModesDiffer, kCallsDiffer };
  // From every rank's FingerprintRow (world * kFingerprintWords words).
  static Verdict Judge(const std::vector<int64_t>& rows, int world);

 private:
  DesyncCheck mode_;
  FlightRecorder* recorder_;
  uint64_t seq_ = 0;
  uint64_t hash_ = 1469598103934665603ull;
  uint64_t agreements_ = 0;
  uint64_t window_first_ = 1;  // seq of the window's first call
  size_t window_count_ = 0;    // calls in the window (may exceed kWindow)
  std::array<PackedCall, kWindow> window_{};
};

// The first position of the windows (every rank's WindowRow, world * kWindowWords) where some
// rank's call differs from rank 0's, or kWindow when none of the compared calls differs.
size_t FirstDifference(const std::vector<int64_t>& windows, int world);

// The error every rank reports, from the gathered rows: the first differing call's number,
// each group of ranks with what it runs there, and which ranks differ from rank 0's group.
std::string DescribeDesync(const std::vector<int64_t>& windows,
                           const std::vector<int64_t>& entries, int world, int rank, int ring,
                           size_t first);

// The error when ranks run with different check modes, from the gathered
// fingerprint rows: which ranks run with which.
std::string DescribeModes(const std::vector<int64_t>& rows, int world);

}  // namespace fleet
