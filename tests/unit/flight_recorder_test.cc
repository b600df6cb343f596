// The flight recorder file (launch/flight_recorder.h): what a rank writes reads back, the ring
// keeps the newest calls, and a damaged or foreign file is read defensively (it is input); and
// the launcher's report of the recorders (launch/flight_report.h).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "fleet/fleet_abi.h"
#include "fleet/fleet_comm.h"
#include "launch/flight_recorder.h"
#include "launch/flight_report.h"

namespace fleet {
namespace {

namespace fs = std::filesystem;

class FlightRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fleet_flight_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name = "rank.flight") const { return (dir_ / name).string(); }

  static CollectiveCall Grad(std::string_view var, int64_t numel, bool program = true) {
    CollectiveCall c;
    c.kind = CollectiveKind::kAllReduce;
    c.from_program = program;
    c.dtype = FLEET_DTYPE_FLOAT32;
    c.arg = FLEET_REDUCE_SUM;
    c.numel = numel;
    c.bytes = numel * 4;
    c.var = var;
    return c;
  }

  std::vector<char> Bytes(const std::string& path) const {
    std::ifstream in(path, std::ios::binary);
    return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  void Write(const std::string& path, const std::vector<char>& bytes) const {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  fs::path dir_;
};

// Offsets of the format (flight_recorder.h): a 64-byte header, 160-byte slots.
constexpr size_t kHeader = 64;
constexpr size_t kSlot = 160;
constexpr size_t kCapacityAt = 20;
constexpr size_t kVarAt = 16 + 48;    // stamp, entered_ns, then PackedCall's 48 bytes of numbers
constexpr size_t kStateAt = 16 + 112 + 8;

TEST_F(FlightRecorderTest, WhatIsWrittenReadsBack) {
  auto rec = FlightRecorder::Create(Path(), 3, 4, 8);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  const uint64_t a = (*rec)->Begin(Grad("fc_0.w_0@GRAD", 4096), 1, CallState::kChecking);
  (*rec)->Update(a, CallState::kInFlight);
  (*rec)->Update(a, CallState::kDone);
  CollectiveCall b = Grad("fc_0.b_0@GRAD", 10);
  b.kind = CollectiveKind::kBroadcast;
  b.arg = 2;
  b.ring = 1;
  const uint64_t bi = (*rec)->Begin(b, 2, CallState::kInFlight);
  (*rec)->Update(bi, CallState::kFailed);
  CollectiveCall host = Grad("", 2, false);
  host.dtype = FLEET_DTYPE_FLOAT64;
  (*rec)->Begin(host, 3, CallState::kInFlight);

  struct stat st {};
  ASSERT_EQ(::stat(Path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  auto read = ReadFlightRecord(Path());
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->rank, 3);
  EXPECT_EQ(read->world_size, 4);
  EXPECT_EQ(read->pid, ::getpid());
  EXPECT_EQ(read->capacity, 8u);
  EXPECT_EQ(read->written, 3u);
  EXPECT_EQ(read->skipped, 0u);
  ASSERT_EQ(read->entries.size(), 3u);
  const FlightEntry& e0 = read->entries[0];
  EXPECT_EQ(e0.call.seq, 1u);
  EXPECT_EQ(e0.state, CallState::kDone);
  EXPECT_GT(e0.entered_ns, 0);
  EXPECT_GE(e0.done_ns, e0.entered_ns);
  EXPECT_EQ(CallText(Unpack(e0.call)), "c_allreduce_sum(fc_0.w_0@GRAD: 4096 float32)");
  EXPECT_EQ(read->entries[1].state, CallState::kFailed);
  EXPECT_EQ(read->entries[1].call.ring, 1);
  EXPECT_EQ(CallText(Unpack(read->entries[1].call)), "c_broadcast(fc_0.b_0@GRAD: 10 float32, root 2)");
  EXPECT_EQ(read->entries[2].state, CallState::kInFlight);
  EXPECT_EQ(read->entries[2].done_ns, 0);
  EXPECT_EQ(CallText(Unpack(read->entries[2].call)), "host all_reduce_sum(2 float64)");
}

TEST_F(FlightRecorderTest, TheRingKeepsTheNewestCalls) {
  auto rec = FlightRecorder::Create(Path(), 0, 2, 4);
  ASSERT_TRUE(rec.ok());
  std::vector<uint64_t> index;
  for (uint64_t seq = 1; seq <= 10; ++seq) {
    index.push_back((*rec)->Begin(Grad("g" + std::to_string(seq), static_cast<int64_t>(seq)), seq,
                                  CallState::kInFlight));
  }
  // A late update of a record already overwritten must not touch the one now in its slot.
  (*rec)->Update(index[5], CallState::kFailed);  // seq 6: slot 1, now seq 10's
  (*rec)->Update(index[8], CallState::kDone);
  auto read = ReadFlightRecord(Path());
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->written, 10u);
  ASSERT_EQ(read->entries.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(read->entries[i].call.seq, 7 + i);
    EXPECT_EQ(read->entries[i].index, 6 + i);
    EXPECT_EQ(std::string(read->entries[i].call.var), "g" + std::to_string(7 + i));
  }
  EXPECT_EQ(read->entries[2].state, CallState::kDone);
  EXPECT_EQ(read->entries[3].state, CallState::kInFlight);
}

TEST_F(FlightRecorderTest, LongNamesAreCutAndOddBytesAreNotPrinted) {
  auto rec = FlightRecorder::Create(Path(), 0, 2, 4);
  ASSERT_TRUE(rec.ok());
  const std::string long_name(200, 'a');
  (*rec)->Begin(Grad(long_name, 1), 1, CallState::kDone);
  (*rec)->Begin(Grad("bad\x1b[31m\xff", 1), 2, CallState::kDone);
  auto read = ReadFlightRecord(Path());
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read->entries.size(), 2u);
  EXPECT_EQ(std::string(read->entries[0].call.var), std::string(63, 'a'));
  EXPECT_EQ(CallText(Unpack(read->entries[1].call)), "c_allreduce_sum(bad?[31m?: 1 float32)");
}

TEST_F(FlightRecorderTest, ASymlinkIsRefusedBothWays) {
  const std::string target = Path("target");
  std::ofstream(target) << "x";
  ASSERT_EQ(::symlink(target.c_str(), Path("link").c_str()), 0);
  EXPECT_FALSE(FlightRecorder::Create(Path("link"), 0, 1).ok());
  EXPECT_FALSE(ReadFlightRecord(Path("link")).ok());
  EXPECT_EQ(std::ifstream(target).get(), 'x');  // not truncated through the link
}

TEST_F(FlightRecorderTest, DamagedFilesAreReportedNotTrusted) {
  EXPECT_EQ(ReadFlightRecord(Path("absent")).status().code(), Code::kNotFound);
  Write(Path("empty"), {});
  EXPECT_EQ(ReadFlightRecord(Path("empty")).status().code(), Code::kDataLoss);
  Write(Path("text"), std::vector<char>(kHeader + 4 * kSlot, 'z'));
  auto text = ReadFlightRecord(Path("text"));
  EXPECT_EQ(text.status().code(), Code::kDataLoss);
  EXPECT_NE(text.status().message().find("bad magic"), std::string::npos);

  {
    auto rec = FlightRecorder::Create(Path(), 0, 2, 4);
    ASSERT_TRUE(rec.ok());
    for (uint64_t seq = 1; seq <= 3; ++seq) (*rec)->Begin(Grad("g", 1), seq, CallState::kDone);
  }
  const std::vector<char> good = Bytes(Path());
  ASSERT_EQ(good.size(), kHeader + 4 * kSlot);

  // A capacity the file cannot hold, and a file cut short.
  std::vector<char> big = good;
  const uint32_t huge = 1u << 30;
  std::memcpy(big.data() + kCapacityAt, &huge, sizeof(huge));
  Write(Path("big"), big);
  EXPECT_EQ(ReadFlightRecord(Path("big")).status().code(), Code::kDataLoss);
  Write(Path("cut"), std::vector<char>(good.begin(), good.begin() + kHeader + kSlot + 7));
  EXPECT_EQ(ReadFlightRecord(Path("cut")).status().code(), Code::kDataLoss);

  // A slot torn mid-write (its var changed after the checksum) is skipped; the others stay.
  std::vector<char> torn = good;
  torn[kHeader + 1 * kSlot + kVarAt] ^= 0x20;
  Write(Path("torn"), torn);
  auto t = ReadFlightRecord(Path("torn"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->skipped, 1u);
  ASSERT_EQ(t->entries.size(), 2u);
  EXPECT_EQ(t->entries[0].call.seq, 1u);
  EXPECT_EQ(t->entries[1].call.seq, 3u);

  // The state is outside the checksum (it changes in place): an unknown value reads as unknown.
  std::vector<char> state = good;
  const int32_t odd = 99;
  std::memcpy(state.data() + kHeader + kStateAt, &odd, sizeof(odd));
  Write(Path("state"), state);
  auto s = ReadFlightRecord(Path("state"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->entries[0].state, CallState::kUnknown);
}

TEST_F(FlightRecorderTest, RandomDamageNeverBreaksTheReader) {
  {
    auto rec = FlightRecorder::Create(Path(), 1, 2, 8);
    ASSERT_TRUE(rec.ok());
    for (uint64_t seq = 1; seq <= 13; ++seq) (*rec)->Begin(Grad("v", 3), seq, CallState::kDone);
  }
  const std::vector<char> good = Bytes(Path());
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    std::vector<char> bad = good;
    const int flips = 1 + static_cast<int>(rng() % 16);
    for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] = static_cast<char>(rng());
    if (round % 5 == 0) bad.resize(rng() % bad.size());
    Write(Path("bad"), bad);
    auto r = ReadFlightRecord(Path("bad"));
    if (!r.ok()) continue;
    EXPECT_LE(r->entries.size(), r->capacity);
    for (const FlightEntry& e : r->entries) {
      EXPECT_GE(e.call.numel, 0);
      EXPECT_EQ(e.call.var[63], '\0');
      (void)CallText(Unpack(e.call));
    }
  }
}

// ---- the launcher's report ----

using launcher_internal::ChildRecord;
using launcher_internal::RankFlight;

TEST_F(FlightRecorderTest, TheReportNamesTheRankThatNeverEnteredTheCollective) {
  // Rank 0 is in #5 (it reached it and waits); rank 1 completed #4 and never came; rank 2's
  // file is garbage; rank 3 never made one.
  std::vector<ChildRecord> records(4);
  for (int r = 0; r < 4; ++r) {
    records[static_cast<size_t>(r)].rank = r;
    records[static_cast<size_t>(r)].flight_recorder = Path("trainer." + std::to_string(r));
  }
  for (int r = 0; r < 2; ++r) {
    auto rec = FlightRecorder::Create(records[static_cast<size_t>(r)].flight_recorder, r, 4);
    ASSERT_TRUE(rec.ok());
    for (uint64_t seq = 1; seq <= 4; ++seq) (*rec)->Begin(Grad("w@GRAD", 4), seq, CallState::kDone);
    if (r == 0) (*rec)->Begin(Grad("w@GRAD", 4), 5, CallState::kInFlight);
  }
  Write(records[2].flight_recorder, std::vector<char>(100, 'x'));

  const std::vector<RankFlight> flights = launcher_internal::ReadFlights(records);
  ASSERT_EQ(flights.size(), 4u);
  const std::vector<std::string> hints = launcher_internal::FlightHints(flights);
  ASSERT_EQ(hints.size(), 1u);
  EXPECT_EQ(hints[0],
            "rank 1 never entered collective #5 on ring 0, c_allreduce_sum(w@GRAD: 4 float32), "
            "which rank 0 is in (rank 1 last entered #4, done)");
  const std::vector<std::string> lines = launcher_internal::FlightLines(flights);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[0].find("rank 0: last collective #5 on ring 0"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("in flight since"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("last completed #4"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("rank 1: last collective #4 on ring 0"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("rank 2: unreadable flight record"), std::string::npos) << lines[2];
  EXPECT_NE(lines[3].find("rank 3: no flight record"), std::string::npos) << lines[3];

  const nlohmann::json j = launcher_internal::FlightJson(flights);
  ASSERT_EQ(j["ranks"].size(), 4u);
  EXPECT_EQ(j["hint"][0], hints[0]);
  EXPECT_EQ(j["ranks"][0]["last_enqueued"]["seq"], 5);
  EXPECT_EQ(j["ranks"][0]["last_enqueued"]["state"], "in flight");
  EXPECT_EQ(j["ranks"][0]["last_enqueued"]["op"], "c_allreduce_sum");
  EXPECT_EQ(j["ranks"][0]["last_enqueued"]["var"], "w@GRAD");
  EXPECT_EQ(j["ranks"][0]["last_enqueued"]["numel"], 4);
  EXPECT_EQ(j["ranks"][0]["last_enqueued"]["dtype"], "float32");
  EXPECT_TRUE(j["ranks"][0]["last_enqueued"]["done"].is_null());
  EXPECT_EQ(j["ranks"][0]["last_completed"]["seq"], 4);
  EXPECT_EQ(j["ranks"][0]["tail"].size(), 5u);
  EXPECT_EQ(j["ranks"][1]["last_enqueued"]["seq"], 4);
  EXPECT_TRUE(j["ranks"][2].contains("error"));
  EXPECT_TRUE(j["ranks"][3].contains("error"));

  // Ranks that made no recorder at all (they ran something without collectives): no report.
  std::vector<ChildRecord> none(2);
  none[0].flight_recorder = Path("none.0");
  none[1].flight_recorder = Path("none.1");
  EXPECT_TRUE(launcher_internal::ReadFlights(none).empty());

  // Ranks that all reached the same call name no one.
  {
    auto rec = FlightRecorder::Create(records[1].flight_recorder, 1, 4);
    ASSERT_TRUE(rec.ok());
    for (uint64_t seq = 1; seq <= 5; ++seq) (*rec)->Begin(Grad("w@GRAD", 4), seq, CallState::kDone);
  }
  EXPECT_TRUE(launcher_internal::FlightHints(launcher_internal::ReadFlights(records)).empty());
}

}  // namespace
}  // namespace fleet
