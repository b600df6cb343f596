// `fleet-host launch` end to end: real launcher, real child processes (fixtures/fake_rank.cc),
// real signals and log files. Every wait has its own deadline; whatever a test started is
// SIGKILLed in TearDown.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "launch/flight_recorder.h"
#include "rendezvous/tcp_store.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::map<std::string, std::string> ReadEnvFile(const fs::path& p) {
  std::map<std::string, std::string> env;
  std::istringstream in(ReadFile(p));
  std::string line;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

// Whether `pid` still runs. A zombie counts as gone: an orphan waits for init to reap it, and
// some containers' init is slow to.
bool Alive(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return false;
  return stat[paren + 2] != 'Z' && stat[paren + 2] != 'X';
}

// One run of fleet-host as a separate process, in its own process group.
struct Launcher {
  pid_t pid = -1;
  fs::path out, err;
  int exit_code = -1;  // after Wait: the exit code, 1000+signal when killed, -1 on timeout
  std::string stdout_text, stderr_text;
  double seconds = 0;
  Clock::time_point started;
};

class LaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(FLEET_HOST_EXE)) << "build fleet-host first: " << FLEET_HOST_EXE;
    ASSERT_TRUE(fs::exists(FLEET_FAKE_RANK_EXE)) << FLEET_FAKE_RANK_EXE;
    char tmpl[] = "/tmp/fleet_launch_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    fs::create_directories(dir_ / "pids");
    fs::create_directories(dir_ / "env");
  }

  void TearDown() override {
    // Nothing a test started may outlive it.
    for (Launcher* l : started_) {
      if (l->pid > 0 && l->exit_code == -1) {
        ::kill(-l->pid, SIGKILL);
        ::kill(l->pid, SIGKILL);
        int status;
        ::waitpid(l->pid, &status, 0);
      }
    }
    if (dir_.empty()) return;
    for (pid_t pid : ChildPids()) ::kill(pid, SIGKILL);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Starts `fleet-host ARGS` in dir_ with extra environment variables `env` (NAME=VALUE).
  void Start(Launcher& l, const std::vector<std::string>& args,
             const std::vector<std::string>& env = {}) {
    static int counter = 0;
    ++counter;
    l.out = dir_ / ("out." + std::to_string(counter));
    l.err = dir_ / ("err." + std::to_string(counter));
    std::vector<std::string> argv = {FLEET_HOST_EXE};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    std::vector<std::string> env_copy = env;
    l.started = Clock::now();
    l.pid = ::fork();
    ASSERT_GE(l.pid, 0);
    if (l.pid == 0) {
      ::setpgid(0, 0);
      if (::chdir(dir_.c_str()) != 0) _exit(120);
      int o = ::open(l.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int e = ::open(l.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (o < 0 || e < 0) _exit(121);
      ::dup2(o, 1);
      ::dup2(e, 2);
      for (std::string& kv : env_copy) ::putenv(kv.data());
      ::execv(cargv[0], cargv.data());
      _exit(122);
    }
    started_.push_back(&l);
  }

  // Waits up to `deadline` for the launcher to exit.
  void Wait(Launcher& l, milliseconds deadline = milliseconds(30000)) {
    auto until = Clock::now() + deadline;
    while (true) {
      int status = 0;
      pid_t r = ::waitpid(l.pid, &status, WNOHANG);
      if (r == l.pid) {
        l.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
        break;
      }
      if (Clock::now() >= until) {
        ::kill(-l.pid, SIGKILL);
        ::kill(l.pid, SIGKILL);
        ::waitpid(l.pid, &status, 0);
        l.exit_code = -1;
        ADD_FAILURE() << "the launcher did not exit within " << deadline.count() << " ms";
        break;
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    l.seconds = std::chrono::duration<double>(Clock::now() - l.started).count();
    l.stdout_text = ReadFile(l.out);
    l.stderr_text = ReadFile(l.err);
  }

  Launcher Run(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    Launcher l;
    Start(l, args, env);
    Wait(l);
    return l;
  }

  // The pids the fake ranks wrote into dir_/pids.
  std::vector<pid_t> ChildPids() const {
    std::vector<pid_t> pids;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir_ / "pids", ec)) {
      if (entry.path().filename().string().starts_with("pid.") &&
          entry.path().extension() != ".tmp") {
        pids.push_back(static_cast<pid_t>(std::stol(ReadFile(entry.path()))));
      }
    }
    return pids;
  }

  // Waits (bounded) until `n` ranks have written their pid.
  bool WaitForPids(size_t n, milliseconds deadline = milliseconds(15000)) {
    auto until = Clock::now() + deadline;
    while (Clock::now() < until) {
      if (ChildPids().size() >= n) return true;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return false;
  }

  bool WaitForText(const fs::path& file, const std::string& text,
                   milliseconds deadline = milliseconds(10000)) {
    auto until = Clock::now() + deadline;
    while (Clock::now() < until) {
      if (Contains(ReadFile(file), text)) return true;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return false;
  }

  std::string Pids() const { return (dir_ / "pids").string(); }
  std::string Envs() const { return (dir_ / "env").string(); }
  fs::path JobDir(const std::string& job = "fleet") const { return dir_ / "log" / job; }

  fs::path dir_;
  std::vector<Launcher*> started_;
};

std::string Output(const Launcher& l) {
  return "exit " + std::to_string(l.exit_code) + "\n--- stdout:\n" + l.stdout_text +
         "--- stderr:\n" + l.stderr_text;
}

TEST_F(LaunchTest, EveryChildGetsItsRoleAndALiveStore) {
  // Variables from some other launcher in the user's shell must not reach the ranks.
  Launcher l = Run({"launch", "--nproc", "3", "--job-id", "envjob", "--", FLEET_FAKE_RANK_EXE,
                    "--dump-env", Envs(), "--store-check"},
                   {"RANK=7", "WORLD_SIZE=9", "OMPI_COMM_WORLD_RANK=5", "LOCAL_RANK=4",
                    "http_proxy=http://proxy.invalid:1", "https_proxy=http://proxy.invalid:1",
                    "FLEET_TEST_KEEP=yes", "FLEET_FLIGHT_RECORDER=/tmp/not-the-launchers"});
  ASSERT_EQ(l.exit_code, 0) << Output(l);
  std::set<std::string> ports, secrets;
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    auto env = ReadEnvFile(dir_ / "env" / ("env." + std::to_string(r)));
    EXPECT_EQ(env["PADDLE_TRAINER_ID"], std::to_string(r));
    EXPECT_EQ(env["PADDLE_TRAINERS_NUM"], "3");
    EXPECT_EQ(env["TRAINING_ROLE"], "TRAINER");
    EXPECT_EQ(env["LOCAL_RANK"], std::to_string(r));
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "3");
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(env["FLEET_MASTER_SERVED"], "1");
    EXPECT_EQ(env["FLEET_JOB_ID"], "envjob");
    // One secret for the whole job, made by the launcher: 32 random bytes in hex.
    EXPECT_EQ(env["FLEET_JOB_SECRET"].size(), 64u);
    secrets.insert(env["FLEET_JOB_SECRET"]);
    EXPECT_EQ(env["FLEET_TEST_KEEP"], "yes");
    // Where the rank records its collectives: the launcher's choice, not the shell's.
    EXPECT_EQ(env["FLEET_FLIGHT_RECORDER"],
              (JobDir("envjob") / ("trainer." + std::to_string(r) + ".flight")).string());
    for (const char* gone : {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "http_proxy",
                             "https_proxy"}) {
      EXPECT_EQ(env.count(gone), 0u) << gone;
    }
    ASSERT_TRUE(env.count("MASTER_PORT"));
    EXPECT_NE(env["MASTER_PORT"], "0");
    ports.insert(env["MASTER_PORT"]);
    // The store check ran against the launcher's store and saw all three ranks' keys.
    EXPECT_TRUE(Contains(ReadFile(JobDir("envjob") / ("trainer." + std::to_string(r) + ".log")),
                         "store ok: 3 keys"));
  }
  EXPECT_EQ(ports.size(), 1u);
  EXPECT_EQ(secrets.size(), 1u);
  EXPECT_TRUE(Contains(l.stderr_text, "127.0.0.1:" + *ports.begin())) << Output(l);
  EXPECT_TRUE(Contains(l.stderr_text, "all 3 ranks finished")) << Output(l);
}

TEST_F(LaunchTest, OtherNodesUseTheMasterStoreAndGlobalRanks) {
  // The test plays node 0 by serving the store itself; the launcher is node 1 of 2.
  auto server = fleet::TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status().message();
  std::string master = "127.0.0.1:" + std::to_string((*server)->port());
  Launcher l = Run({"launch", "--nproc", "2", "--nnodes", "2", "--node-rank", "1", "--master",
                    master, "--", FLEET_FAKE_RANK_EXE, "--dump-env", Envs(), "--store-check"});
  ASSERT_EQ(l.exit_code, 0) << Output(l);
  for (int r : {2, 3}) {
    auto env = ReadEnvFile(dir_ / "env" / ("env." + std::to_string(r)));
    EXPECT_EQ(env["PADDLE_TRAINER_ID"], std::to_string(r));
    EXPECT_EQ(env["PADDLE_TRAINERS_NUM"], "4");
    EXPECT_EQ(env["LOCAL_RANK"], std::to_string(r - 2));
    EXPECT_EQ(env["MASTER_PORT"], std::to_string((*server)->port()));
    EXPECT_TRUE(fs::exists(JobDir() / ("trainer." + std::to_string(r) + ".log")));
  }
  // The ranks wrote into the test's store, so it is the one they were given.
  auto client = fleet::TcpStore::Connect("127.0.0.1", (*server)->port());
  ASSERT_TRUE(client.ok());
  for (int r : {2, 3}) {
    auto v = (*client)->Get("hello/" + std::to_string(r), milliseconds(1000));
    EXPECT_TRUE(v.ok()) << "rank " << r;
  }
  EXPECT_TRUE(Contains(l.stdout_text, "[trainer.2] store ok")) << Output(l);
}

TEST_F(LaunchTest, LogsEveryRankAndEchoesRankZero) {
  Launcher l = Run({"launch", "--nproc", "2", "--", FLEET_FAKE_RANK_EXE, "--print", "5"});
  ASSERT_EQ(l.exit_code, 0) << Output(l);
  for (int r = 0; r < 2; ++r) {
    std::string log = ReadFile(JobDir() / ("trainer." + std::to_string(r) + ".log"));
    std::string expected;
    for (int i = 0; i < 5; ++i) expected += "rank " + std::to_string(r) + " line " +
                                            std::to_string(i) + "\n";
    expected += "rank " + std::to_string(r) + " stderr\n";
    EXPECT_EQ(log, expected) << "rank " << r;
  }
  // Rank 0 on the console, every line prefixed; rank 1 only in its file.
  std::string expected;
  for (int i = 0; i < 5; ++i) expected += "[trainer.0] rank 0 line " + std::to_string(i) + "\n";
  expected += "[trainer.0] rank 0 stderr\n";
  EXPECT_EQ(l.stdout_text, expected);
  EXPECT_FALSE(Contains(l.stdout_text + l.stderr_text, "rank 1 line"));
  // The absolute log directory is printed at start.
  EXPECT_TRUE(Contains(l.stderr_text, "logs in " + fs::weakly_canonical(JobDir()).string()))
      << Output(l);
  EXPECT_TRUE(Contains(l.stderr_text, "all 2 ranks finished")) << Output(l);
  EXPECT_FALSE(fs::exists(JobDir() / "failure.json"));
}

TEST_F(LaunchTest, LotsOfOutputLosesNothing) {
  Launcher l = Run({"launch", "--nproc", "3", "--", FLEET_FAKE_RANK_EXE, "--print", "20000"});
  ASSERT_EQ(l.exit_code, 0) << l.stderr_text;
  for (int r = 0; r < 3; ++r) {
    std::string log = ReadFile(JobDir() / ("trainer." + std::to_string(r) + ".log"));
    EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 20001) << "rank " << r;
    EXPECT_TRUE(Contains(log, "rank " + std::to_string(r) + " line 19999\n"));
  }
  EXPECT_EQ(std::count(l.stdout_text.begin(), l.stdout_text.end(), '\n'), 20001);
}

TEST_F(LaunchTest, FailingRankIsNamedAndTheOthersAreCollateral) {
  Launcher l = Run({"launch", "--nproc", "4", "--", FLEET_FAKE_RANK_EXE, "--pid-dir", Pids(),
                    "--print", "40", "--fail-rank", "2", "--exit-code", "7", "--after-ms", "300",
                    "--sleep-ms", "60000"});
  EXPECT_EQ(l.exit_code, 7) << Output(l);
  EXPECT_LT(l.seconds, 15.0);
  const std::string& e = l.stderr_text;
  std::string log2 = fs::weakly_canonical(JobDir() / "trainer.2.log").string();
  EXPECT_TRUE(Contains(e, "first failure: rank 2")) << Output(l);
  EXPECT_TRUE(Contains(e, "exited with code 7")) << Output(l);
  EXPECT_TRUE(Contains(e, log2)) << Output(l);
  // The last 30 lines of its log, and nothing before them.
  EXPECT_TRUE(Contains(e, "| rank 2 line 39\n")) << Output(l);
  EXPECT_TRUE(Contains(e, "| rank 2 failing with exit code 7\n")) << Output(l);
  EXPECT_TRUE(Contains(e, "| rank 2 line 12\n")) << Output(l);
  EXPECT_FALSE(Contains(e, "| rank 2 line 11\n")) << Output(l);
  for (int r : {0, 1, 3}) {
    EXPECT_TRUE(Contains(e, "rank " + std::to_string(r) + ": stopped by the launcher"))
        << Output(l);
  }
  // Exactly one summary block.
  size_t first = e.find("first failure:");
  EXPECT_EQ(e.find("first failure:", first + 1), std::string::npos);

  auto j = nlohmann::json::parse(ReadFile(JobDir() / "failure.json"), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << ReadFile(JobDir() / "failure.json");
  EXPECT_EQ(j["exit_code"], 7);
  EXPECT_EQ(j["job_id"], "fleet");
  EXPECT_EQ(j["first_failure"]["rank"], 2);
  EXPECT_EQ(j["first_failure"]["exit_code"], 7);
  EXPECT_TRUE(j["first_failure"]["signal"].is_null());
  EXPECT_EQ(j["first_failure"]["log"], log2);
  ASSERT_EQ(j["first_failure"]["tail"].size(), 30u);
  EXPECT_EQ(j["first_failure"]["tail"][0], "rank 2 line 12");
  EXPECT_EQ(j["first_failure"]["tail"][29], "rank 2 failing with exit code 7");
  std::set<int> collateral;
  for (const auto& c : j["collateral"]) {
    collateral.insert(c["rank"].get<int>());
    EXPECT_EQ(c["reason"], "stopped by the launcher");
  }
  EXPECT_EQ(collateral, (std::set<int>{0, 1, 3}));
  for (pid_t pid : ChildPids()) EXPECT_FALSE(Alive(pid)) << pid;
}

TEST_F(LaunchTest, RanksFailingOnTheirWayDownAreCollateralToo) {
  // Every rank exits 5 when told to stop; rank 1 fails first with 3 and alone is to blame.
  Launcher l = Run({"launch", "--nproc", "3", "--", FLEET_FAKE_RANK_EXE, "--exit-on-term", "5",
                    "--fail-rank", "1", "--exit-code", "3", "--after-ms", "300", "--sleep-ms",
                    "60000"});
  EXPECT_EQ(l.exit_code, 3) << Output(l);
  EXPECT_TRUE(Contains(l.stderr_text, "first failure: rank 1")) << Output(l);
  for (int r : {0, 2}) {
    EXPECT_TRUE(Contains(l.stderr_text, "rank " + std::to_string(r) +
                                            ": failed after the first failure, exited with code 5"))
        << Output(l);
  }
  auto j = nlohmann::json::parse(ReadFile(JobDir() / "failure.json"), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["first_failure"]["rank"], 1);
  ASSERT_EQ(j["collateral"].size(), 2u);
  for (const auto& c : j["collateral"]) {
    EXPECT_EQ(c["reason"], "failed after the first failure");
    EXPECT_EQ(c["exit_code"], 5);
  }
}

TEST_F(LaunchTest, RankKilledBySignalIsReportedAsSignal) {
  Launcher l = Run({"launch", "--nproc", "2", "--", FLEET_FAKE_RANK_EXE, "--signal-rank", "1",
                    "9", "--after-ms", "200", "--sleep-ms", "60000"});
  EXPECT_EQ(l.exit_code, 128 + 9) << Output(l);
  EXPECT_TRUE(Contains(l.stderr_text, "first failure: rank 1")) << Output(l);
  EXPECT_TRUE(Contains(l.stderr_text, "was killed by SIGKILL (signal 9)")) << Output(l);
  auto j = nlohmann::json::parse(ReadFile(JobDir() / "failure.json"), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["first_failure"]["signal"], "SIGKILL");
  EXPECT_EQ(j["first_failure"]["signal_number"], 9);
  EXPECT_TRUE(j["first_failure"]["exit_code"].is_null());
  EXPECT_EQ(j["exit_code"], 137);
}

// The report reads every rank's flight recorder: a rank whose file says it waits in a
// collective, one whose file says it never entered it (named in the summary), a rank that wrote
// garbage there and one that wrote nothing (a file an earlier run left is not taken for its).
// The ranks here copy files the test made, so what the report must say is known exactly.
TEST_F(LaunchTest, FailureReportCarriesEachRanksLastCollectives) {
  const fs::path prep = dir_ / "prep";
  fs::create_directories(prep);
  for (int r = 0; r < 2; ++r) {
    auto rec = fleet::FlightRecorder::Create((prep / ("rec." + std::to_string(r))).string(), r, 4);
    ASSERT_TRUE(rec.ok()) << rec.status().ToString();
    fleet::CollectiveCall call;
    call.from_program = true;
    call.dtype = 9;  // FLEET_DTYPE_FLOAT32
    call.numel = 4;
    call.bytes = 16;
    call.var = "w@GRAD";
    for (uint64_t seq = 1; seq <= 4; ++seq) {
      (*rec)->Begin(call, seq, fleet::CallState::kDone);
    }
    if (r == 0) (*rec)->Begin(call, 5, fleet::CallState::kInFlight);
  }
  fs::create_directories(JobDir());
  fs::copy_file(prep / "rec.1", JobDir() / "trainer.3.flight");  // stale
  const fs::path script = dir_ / "rank.sh";
  {
    std::ofstream f(script);
    f << "#!/bin/sh\n"
         "D=$(dirname \"$FLEET_FLIGHT_RECORDER\")\n"
         "case $PADDLE_TRAINER_ID in\n"
         "0) cp " << prep.string() << "/rec.0 \"$FLEET_FLIGHT_RECORDER\"\n"
         "   i=0\n"
         "   while [ ! -s \"$D/trainer.1.flight\" ] || [ ! -s \"$D/trainer.2.flight\" ]; do\n"
         "     sleep 0.05; i=$((i+1)); [ $i -gt 200 ] && break\n"
         "   done\n"
         "   exit 4;;\n"
         "1) cp " << prep.string() << "/rec.1 \"$FLEET_FLIGHT_RECORDER\"; sleep 60;;\n"
         "2) printf 'not a recorder' > \"$FLEET_FLIGHT_RECORDER\"; sleep 60;;\n"
         "*) sleep 60;;\n"
         "esac\n";
  }
  fs::permissions(script, fs::perms::owner_all);
  Launcher l = Run({"launch", "--nproc", "4", "--", script.string()});
  EXPECT_EQ(l.exit_code, 4) << Output(l);
  const std::string& e = l.stderr_text;
  EXPECT_TRUE(Contains(e, "collectives (each rank's flight recorder):")) << Output(l);
  EXPECT_TRUE(Contains(e, "  rank 0: last collective #5 on ring 0, c_allreduce_sum(w@GRAD: 4 "
                          "float32): in flight since "))
      << Output(l);
  EXPECT_TRUE(Contains(e, "  rank 1: last collective #4 on ring 0, c_allreduce_sum(w@GRAD: 4 "
                          "float32): done\n"))
      << Output(l);
  EXPECT_TRUE(Contains(e, "  rank 2: unreadable flight record")) << Output(l);
  EXPECT_TRUE(Contains(e, "  rank 3: no flight record")) << Output(l);
  const std::string hint =
      "rank 1 never entered collective #5 on ring 0, c_allreduce_sum(w@GRAD: 4 float32), which "
      "rank 0 is in (rank 1 last entered #4, done)";
  EXPECT_TRUE(Contains(e, "  => " + hint + "\n")) << Output(l);

  auto j = nlohmann::json::parse(ReadFile(JobDir() / "failure.json"), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  const auto& c = j["collectives"];
  ASSERT_EQ(c["hint"].size(), 1u) << j.dump(2);
  EXPECT_EQ(c["hint"][0], hint);
  ASSERT_EQ(c["ranks"].size(), 4u);
  EXPECT_EQ(c["ranks"][0]["last_enqueued"]["seq"], 5);
  EXPECT_EQ(c["ranks"][0]["last_enqueued"]["state"], "in flight");
  EXPECT_EQ(c["ranks"][0]["last_completed"]["seq"], 4);
  EXPECT_EQ(c["ranks"][0]["tail"].size(), 5u);
  EXPECT_EQ(c["ranks"][1]["last_enqueued"]["seq"], 4);
  EXPECT_EQ(c["ranks"][1]["recorder"], (JobDir() / "trainer.1.flight").string());
  EXPECT_TRUE(Contains(c["ranks"][2]["error"].get<std::string>(), "unreadable")) << j.dump(2);
  EXPECT_TRUE(Contains(c["ranks"][3]["error"].get<std::string>(), "no flight record"))
      << j.dump(2);
}

TEST_F(LaunchTest, RankIgnoringSigtermIsKilledAfterTheGracePeriod) {
  Launcher l = Run({"launch", "--nproc", "3", "--grace-s", "1", "--", FLEET_FAKE_RANK_EXE,
                    "--pid-dir", Pids(), "--ignore-term", "--fail-rank", "0", "--after-ms", "500",
                    "--sleep-ms", "60000"});
  EXPECT_EQ(l.exit_code, 1) << Output(l);
  EXPECT_GE(l.seconds, 1.4);  // 0.5 s to fail + 1 s of grace
  EXPECT_LT(l.seconds, 10.0);
  EXPECT_TRUE(Contains(l.stderr_text, "rank 1: stopped by the launcher, was killed by SIGKILL"))
      << Output(l);
  EXPECT_TRUE(Contains(l.stderr_text, "sending SIGKILL")) << Output(l);
  ASSERT_EQ(ChildPids().size(), 3u);
  for (pid_t pid : ChildPids()) EXPECT_FALSE(Alive(pid)) << pid;
}

TEST_F(LaunchTest, CtrlCStopsEveryRankWithExit130) {
  Launcher l;
  Start(l, {"launch", "--nproc", "3", "--", FLEET_FAKE_RANK_EXE, "--pid-dir", Pids(),
            "--sleep-ms", "60000"});
  ASSERT_TRUE(WaitForPids(3));
  std::vector<pid_t> pids = ChildPids();
  for (pid_t pid : pids) EXPECT_TRUE(Alive(pid));
  ::kill(l.pid, SIGINT);
  Wait(l, milliseconds(15000));
  EXPECT_EQ(l.exit_code, 130) << Output(l);
  EXPECT_LT(l.seconds, 10.0);
  EXPECT_TRUE(Contains(l.stderr_text, "stopping (press Ctrl-C again to kill)")) << Output(l);
  EXPECT_FALSE(Contains(l.stderr_text, "first failure")) << Output(l);
  for (pid_t pid : pids) EXPECT_FALSE(Alive(pid)) << pid;
}

// --max-restarts: a failed job starts again whole, each start told which it is and logging
// apart; a job that keeps failing ends with its last start's failure.
TEST_F(LaunchTest, AFailedJobIsRestartedWholeUpToMaxRestarts) {
  Launcher l = Run({"launch", "--nproc", "2", "--max-restarts", "2", "--", FLEET_FAKE_RANK_EXE,
                    "--dump-env", Envs(), "--fail-rank", "1", "--first-start-only",
                    "--exit-code", "5", "--sleep-ms", "300"});
  EXPECT_EQ(l.exit_code, 0) << Output(l);
  EXPECT_TRUE(Contains(l.stderr_text, "first failure: rank 1")) << Output(l);
  EXPECT_TRUE(Contains(l.stderr_text, "restarting the whole job (restart 1 of 2)")) << Output(l);
  EXPECT_FALSE(Contains(l.stderr_text, "restart 2 of 2")) << Output(l);
  // The first start's failure report stays; the second start logs into restart.1/.
  EXPECT_TRUE(fs::exists(JobDir() / "failure.json"));
  EXPECT_TRUE(Contains(ReadFile(JobDir() / "trainer.1.log"), "failing with exit code 5"));
  EXPECT_TRUE(fs::exists(JobDir() / "restart.1" / "trainer.1.log"));
  EXPECT_FALSE(fs::exists(JobDir() / "restart.1" / "failure.json"));
  for (int r = 0; r < 2; ++r) {  // the last dump is the second start's
    EXPECT_TRUE(Contains(ReadFile(dir_ / "env" / ("env." + std::to_string(r))),
                         "FLEET_RESTART_COUNT=1\n"))
        << r;
  }

  Launcher always = Run({"launch", "--nproc", "2", "--max-restarts", "1", "--job-id", "again",
                         "--", FLEET_FAKE_RANK_EXE, "--fail-rank", "0", "--exit-code", "6"});
  EXPECT_EQ(always.exit_code, 6) << Output(always);
  EXPECT_TRUE(Contains(always.stderr_text, "restart 1 of 1")) << Output(always);
  EXPECT_TRUE(fs::exists(JobDir("again") / "restart.1" / "failure.json"));

  Launcher multi = Run({"launch", "--nproc", "1", "--nnodes", "2", "--node-rank", "0",
                        "--master", "127.0.0.1:1", "--max-restarts", "1", "--",
                        FLEET_FAKE_RANK_EXE});
  EXPECT_EQ(multi.exit_code, 2) << Output(multi);
  EXPECT_TRUE(Contains(multi.stderr_text, "--max-restarts needs a job of one node"))
      << Output(multi);
}

TEST_F(LaunchTest, CtrlCIsNotRestarted) {
  Launcher l;
  Start(l, {"launch", "--nproc", "2", "--max-restarts", "3", "--", FLEET_FAKE_RANK_EXE,
            "--pid-dir", Pids(), "--sleep-ms", "60000"});
  ASSERT_TRUE(WaitForPids(2));
  ::kill(l.pid, SIGINT);
  Wait(l, milliseconds(15000));
  EXPECT_EQ(l.exit_code, 130) << Output(l);
  EXPECT_FALSE(Contains(l.stderr_text, "restarting")) << Output(l);
}

TEST_F(LaunchTest, SecondCtrlCKillsRanksThatIgnoreSigterm) {
  Launcher l;
  Start(l, {"launch", "--nproc", "2", "--grace-s", "60", "--", FLEET_FAKE_RANK_EXE, "--pid-dir",
            Pids(), "--ignore-term", "--sleep-ms", "60000"});
  ASSERT_TRUE(WaitForPids(2));
  std::vector<pid_t> pids = ChildPids();
  ::kill(l.pid, SIGINT);
  ASSERT_TRUE(WaitForText(l.err, "press Ctrl-C again"));
  std::this_thread::sleep_for(milliseconds(300));
  for (pid_t pid : pids) EXPECT_TRUE(Alive(pid)) << "SIGTERM is ignored, so still running";
  ::kill(l.pid, SIGINT);
  Wait(l, milliseconds(10000));
  EXPECT_EQ(l.exit_code, 130) << Output(l);
  EXPECT_LT(l.seconds, 10.0);  // far below the 60 s grace
  for (pid_t pid : pids) EXPECT_FALSE(Alive(pid)) << pid;
}

TEST_F(LaunchTest, SigtermToTheLauncherExits143) {
  Launcher l;
  Start(l, {"launch", "--nproc", "2", "--", FLEET_FAKE_RANK_EXE, "--pid-dir", Pids(),
            "--sleep-ms", "60000"});
  ASSERT_TRUE(WaitForPids(2));
  std::vector<pid_t> pids = ChildPids();
  ::kill(l.pid, SIGTERM);
  Wait(l, milliseconds(15000));
  EXPECT_EQ(l.exit_code, 128 + 15) << Output(l);
  for (pid_t pid : pids) EXPECT_FALSE(Alive(pid)) << pid;
}

TEST_F(LaunchTest, RanksDieWithAKilledLauncher) {
  // SIGKILL gives the launcher no chance to clean up: PR_SET_PDEATHSIG must.
  Launcher l;
  Start(l, {"launch", "--nproc", "2", "--", FLEET_FAKE_RANK_EXE, "--pid-dir", Pids(),
            "--ignore-term", "--sleep-ms", "60000"});
  ASSERT_TRUE(WaitForPids(2));
  std::vector<pid_t> pids = ChildPids();
  ::kill(l.pid, SIGKILL);
  Wait(l, milliseconds(5000));
  EXPECT_EQ(l.exit_code, 1000 + SIGKILL);
  auto until = Clock::now() + milliseconds(5000);
  for (pid_t pid : pids) {
    while (Alive(pid) && Clock::now() < until) std::this_thread::sleep_for(milliseconds(20));
    EXPECT_FALSE(Alive(pid)) << pid;
  }
}

TEST_F(LaunchTest, MasterPortInUseIsAClearError) {
  // The test holds the port, as another job would.
  auto holder = fleet::TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(holder.ok());
  std::string master = "127.0.0.1:" + std::to_string((*holder)->port());
  Launcher l = Run({"launch", "--nproc", "2", "--master", master, "--", FLEET_FAKE_RANK_EXE,
                    "--pid-dir", Pids()});
  EXPECT_EQ(l.exit_code, 1) << Output(l);
  EXPECT_TRUE(Contains(l.stderr_text, master)) << Output(l);
  EXPECT_TRUE(Contains(l.stderr_text, "in use")) << Output(l);
  EXPECT_TRUE(Contains(l.stderr_text, "choose another port")) << Output(l);
  EXPECT_TRUE(ChildPids().empty());
  EXPECT_FALSE(fs::exists(dir_ / "log"));
}

TEST_F(LaunchTest, BadArgumentsExit2AndStartNothing) {
  const std::vector<std::vector<std::string>> cases = {
      {"launch", "--nproc", "2", FLEET_FAKE_RANK_EXE},
      {"launch", "--nproc", "0", "--", FLEET_FAKE_RANK_EXE},
      {"launch", "--nproc", "two", "--", FLEET_FAKE_RANK_EXE},
      {"launch", "--", FLEET_FAKE_RANK_EXE},
      {"launch", "--nproc", "2", "--master", "localhost", "--", FLEET_FAKE_RANK_EXE},
      {"launch", "--nproc", "2", "--master", "127.0.0.1:70000", "--", FLEET_FAKE_RANK_EXE},
      {"launch", "--nproc", "2", "--nnodes", "2", "--node-rank", "2", "--master",
       "127.0.0.1:6170", "--", FLEET_FAKE_RANK_EXE},
      {"launch", "--nproc", "2", "--nnodes", "2", "--", FLEET_FAKE_RANK_EXE},
      {"launch", "--nproc", "2", "--frobnicate", "--", FLEET_FAKE_RANK_EXE},
      {"launch", "--nproc", "2", "--job-id", "../x", "--", FLEET_FAKE_RANK_EXE},
      {"launch", "--nproc", "2", "--job-id", std::string(129, 'j'), "--", FLEET_FAKE_RANK_EXE},
      {"launch", "--nproc", "2", "--nproc", "3", "--", FLEET_FAKE_RANK_EXE},
      {"launch", "--nproc", "2", "--nproc_per_node=2", "--", FLEET_FAKE_RANK_EXE},
      {"launch", "--nproc", "2", "--grace-s", "-1", "--", FLEET_FAKE_RANK_EXE},
      {"launch", "--nproc", "2", "--"},
  };
  for (const auto& args : cases) {
    std::string joined;
    for (const std::string& a : args) joined += a + " ";
    SCOPED_TRACE(joined);
    Launcher l = Run(args);
    EXPECT_EQ(l.exit_code, 2) << Output(l);
    EXPECT_TRUE(Contains(l.stderr_text, "fleet-host launch: ")) << Output(l);
    EXPECT_FALSE(fs::exists(dir_ / "log"));
  }
  // The message says what is wrong.
  EXPECT_TRUE(Contains(Run({"launch", "--nproc", "2", "--log_dir", "a", "--log-dir", "b", "--",
                            "/bin/true"})
                           .stderr_text,
                       "--log-dir is given twice"));
  EXPECT_TRUE(Contains(Run({"launch", "--nproc", "2", "x"}).stderr_text, "missing '--'"));
  EXPECT_TRUE(Contains(Run({"launch", "--nproc", "2", "--bogus", "--", "/bin/true"}).stderr_text,
                       "unknown option '--bogus'"));
  EXPECT_TRUE(Contains(Run({"launch", "--nproc", "2", "--nnodes", "3", "--node-rank", "3",
                            "--master", "127.0.0.1:6170", "--", "/bin/true"})
                           .stderr_text,
                       "--node-rank 3 is not below --nnodes 3"));
}

TEST_F(LaunchTest, FleetHostCommandRunsWithThisBinary) {
  // A command word without '/' is a fleet-host command line: here `env`, which prints the role
  // each rank resolves from the launcher's variables.
  Launcher l = Run({"launch", "--nproc", "2", "--", "env", "--json"});
  ASSERT_EQ(l.exit_code, 0) << Output(l);
  for (int r = 0; r < 2; ++r) {
    auto j = nlohmann::json::parse(ReadFile(JobDir() / ("trainer." + std::to_string(r) + ".log")),
                                   nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "rank " << r;
    EXPECT_EQ(j["rank"], r);
    EXPECT_EQ(j["world_size"], 2);
    EXPECT_EQ(j["local_rank"], r);
    EXPECT_EQ(j["role"], "trainer");
    EXPECT_EQ(j["master_addr"], "127.0.0.1");
  }
}

// A rank's output is whatever bytes it wrote; the report must survive what is not UTF-8.
TEST_F(LaunchTest, FailureWithNonUtf8OutputIsStillReported) {
  const fs::path script = dir_ / "bytes.sh";
  {
    std::ofstream f(script);
    f << "#!/bin/sh\nprintf 'bad \\377\\376 bytes\\n'\nexit 3\n";
  }
  fs::permissions(script, fs::perms::owner_all);
  Launcher l = Run({"launch", "--nproc", "1", "--", script.string()});
  EXPECT_EQ(l.exit_code, 3) << Output(l);
  EXPECT_TRUE(Contains(l.stderr_text, "first failure: rank 0")) << Output(l);
  auto j = nlohmann::json::parse(ReadFile(JobDir() / "failure.json"), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["exit_code"], 3);
  ASSERT_EQ(j["first_failure"]["tail"].size(), 1u);
  EXPECT_TRUE(Contains(j["first_failure"]["tail"][0].get<std::string>(), "bytes"));
}

TEST_F(LaunchTest, MissingProgramIsAFailureOfItsRanks) {
  Launcher l = Run({"launch", "--nproc", "2", "--", "/nonexistent/program"});
  EXPECT_EQ(l.exit_code, 127) << Output(l);
  EXPECT_TRUE(Contains(l.stderr_text, "cannot execute /nonexistent/program")) << Output(l);
}

// ---- parameter-server jobs (--servers/--workers) ----

// A socket listening on 127.0.0.1 at a port the kernel picked; closed by the destructor.
struct HeldPort {
  int fd = -1;
  int port = 0;
  explicit HeldPort(bool listen) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
        (!listen || ::listen(fd, 1) == 0)) {
      port = ntohs(addr.sin_port);
    }
  }
  ~HeldPort() {
    if (fd >= 0) ::close(fd);
  }
};

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

TEST_F(LaunchTest, PsJobGivesServersAndWorkersTheirRoles) {
  // Leftovers in the user's shell, POD_IP/PADDLE_PORT included, must reach no process.
  Launcher l = Run({"launch", "--servers", "2", "--workers", "2", "--job-id", "psjob", "--",
                    FLEET_FAKE_RANK_EXE, "--dump-env", Envs(), "--ps-done", dir_.string(),
                    "--bind", "--print", "3"},
                   {"RANK=7", "POD_IP=10.9.9.9", "PADDLE_PORT=1", "PADDLE_PSERVER_ID=3",
                    "MASTER_ADDR=elsewhere", "FLEET_MPI_SYMMETRIC=1", "FLEET_TEST_KEEP=yes"});
  ASSERT_EQ(l.exit_code, 0) << Output(l);
  EXPECT_TRUE(Contains(l.stderr_text, "all 2 workers and 2 servers finished")) << Output(l);

  auto s0 = ReadEnvFile(dir_ / "env" / "env.server.0");
  const std::string list = s0["PADDLE_PSERVERS_IP_PORT_LIST"];
  std::vector<std::string> endpoints = SplitCommas(list);
  ASSERT_EQ(endpoints.size(), 2u) << list;
  EXPECT_NE(endpoints[0], endpoints[1]);
  EXPECT_TRUE(Contains(l.stderr_text, "2 servers (" + list + ") and 2 workers")) << Output(l);
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE("server " + std::to_string(i));
    auto env = ReadEnvFile(dir_ / "env" / ("env.server." + std::to_string(i)));
    const std::string& ep = endpoints[static_cast<size_t>(i)];
    ASSERT_TRUE(ep.starts_with("127.0.0.1:")) << ep;
    const std::string port = ep.substr(10);
    EXPECT_NE(port, "0");
    EXPECT_EQ(env["TRAINING_ROLE"], "PSERVER");
    EXPECT_EQ(env["PADDLE_PSERVERS_IP_PORT_LIST"], list);
    EXPECT_EQ(env["PADDLE_PSERVER_ID"], std::to_string(i));
    EXPECT_EQ(env["POD_IP"], "127.0.0.1");
    EXPECT_EQ(env["PADDLE_PORT"], port);
    EXPECT_EQ(env["PADDLE_TRAINERS_NUM"], "2");
    EXPECT_EQ(env["FLEET_JOB_ID"], "psjob");
    EXPECT_EQ(env["FLEET_TEST_KEEP"], "yes");
    EXPECT_EQ(env.count("FLEET_FLIGHT_RECORDER"), 0u);  // a parameter-server job has no rings
    for (const char* gone : {"PADDLE_TRAINER_ID", "RANK", "MASTER_ADDR", "MASTER_PORT",
                             "FLEET_MPI_SYMMETRIC"}) {
      EXPECT_EQ(env.count(gone), 0u) << gone;
    }
    // The server listened on its endpoint, and left once both workers had finished.
    std::string log = ReadFile(JobDir("psjob") / ("serverlog." + std::to_string(i)));
    EXPECT_TRUE(Contains(log, "server " + std::to_string(i) + " listening on " + ep)) << log;
    EXPECT_TRUE(Contains(log, "server " + std::to_string(i) + ": all 2 workers done")) << log;
  }
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE("worker " + std::to_string(i));
    auto env = ReadEnvFile(dir_ / "env" / ("env.worker." + std::to_string(i)));
    EXPECT_EQ(env["TRAINING_ROLE"], "TRAINER");
    EXPECT_EQ(env["PADDLE_PSERVERS_IP_PORT_LIST"], list);
    EXPECT_EQ(env["PADDLE_TRAINER_ID"], std::to_string(i));
    EXPECT_EQ(env["PADDLE_TRAINERS_NUM"], "2");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "4");
    EXPECT_EQ(env["FLEET_JOB_ID"], "psjob");
    // Unlike Paddle's launch_ps, no server's address leaks into a worker. The master is the
    // workers' own store, served by the launcher (the caller's MASTER_ADDR is replaced).
    for (const char* gone : {"POD_IP", "PADDLE_PORT", "PADDLE_PSERVER_ID", "RANK",
                             "FLEET_MPI_SYMMETRIC"}) {
      EXPECT_EQ(env.count(gone), 0u) << gone;
    }
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_GT(std::atoi(env["MASTER_PORT"].c_str()), 0) << env["MASTER_PORT"];
    EXPECT_EQ(env["FLEET_MASTER_SERVED"], "1");
    std::string expected;
    for (int k = 0; k < 3; ++k) {
      expected += "worker " + std::to_string(i) + " line " + std::to_string(k) + "\n";
    }
    expected += "worker " + std::to_string(i) + " stderr\n";
    EXPECT_EQ(ReadFile(JobDir("psjob") / ("workerlog." + std::to_string(i))), expected);
  }
  // Only worker 0 is echoed.
  EXPECT_EQ(l.stdout_text,
            "[worker.0] worker 0 line 0\n[worker.0] worker 0 line 1\n[worker.0] worker 0 line 2\n"
            "[worker.0] worker 0 stderr\n");
  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(JobDir("psjob"))) {
    files.insert(entry.path().filename().string());
  }
  EXPECT_EQ(files, (std::set<std::string>{"serverlog.0", "serverlog.1", "workerlog.0",
                                          "workerlog.1"}));
}

TEST_F(LaunchTest, PsEndpointListIsUsedAndAServerThatCannotBindIsTheFailure) {
  // The test holds the second endpoint's port, as a process winning the race for it would.
  HeldPort free_port(false), taken(true);
  ASSERT_GT(free_port.port, 0);
  ASSERT_GT(taken.port, 0);
  ::close(free_port.fd);
  free_port.fd = -1;
  const std::string ep0 = "127.0.0.1:" + std::to_string(free_port.port);
  const std::string ep1 = "127.0.0.1:" + std::to_string(taken.port);
  Launcher l = Run({"launch", "--servers", ep0 + "," + ep1, "--workers", "2", "--",
                    FLEET_FAKE_RANK_EXE, "--dump-env", Envs(), "--pid-dir", Pids(), "--bind",
                    "--ps-done", dir_.string(), "--sleep-ms", "60000"});
  EXPECT_EQ(l.exit_code, 96) << Output(l);
  EXPECT_LT(l.seconds, 15.0);
  // Server 1 wrote its variables before trying to bind (server 0 may have been stopped before
  // it wrote anything).
  auto env1 = ReadEnvFile(dir_ / "env" / "env.server.1");
  EXPECT_EQ(env1["PADDLE_PSERVERS_IP_PORT_LIST"], ep0 + "," + ep1);
  EXPECT_EQ(env1["POD_IP"], "127.0.0.1");
  EXPECT_EQ(env1["PADDLE_PORT"], std::to_string(taken.port));
  const std::string& e = l.stderr_text;
  EXPECT_TRUE(Contains(e, "first failure: server 1 (pid ")) << Output(l);
  EXPECT_TRUE(Contains(e, "Address already in use")) << Output(l);
  EXPECT_TRUE(Contains(e, fs::weakly_canonical(JobDir() / "serverlog.1").string())) << Output(l);
  for (const char* other : {"server 0", "worker 0", "worker 1"}) {
    EXPECT_TRUE(Contains(e, std::string(other) + ": stopped by the launcher")) << Output(l);
  }
  for (pid_t pid : ChildPids()) EXPECT_FALSE(Alive(pid)) << pid;
}

TEST_F(LaunchTest, PsFailingWorkerStopsTheServersAndIsNamed) {
  Launcher l = Run({"launch", "--servers", "2", "--workers", "2", "--", FLEET_FAKE_RANK_EXE,
                    "--pid-dir", Pids(), "--ps-done", dir_.string(), "--fail-rank", "1",
                    "--exit-code", "7", "--after-ms", "300", "--sleep-ms", "60000"});
  EXPECT_EQ(l.exit_code, 7) << Output(l);
  EXPECT_LT(l.seconds, 15.0);
  const std::string& e = l.stderr_text;
  const std::string log = fs::weakly_canonical(JobDir() / "workerlog.1").string();
  EXPECT_TRUE(Contains(e, "worker 1 exited with code 7; stopping the other processes"))
      << Output(l);
  EXPECT_TRUE(Contains(e, "first failure: worker 1 (pid ")) << Output(l);
  EXPECT_TRUE(Contains(e, "its log: " + log)) << Output(l);
  EXPECT_TRUE(Contains(e, "| worker 1 failing with exit code 7")) << Output(l);
  for (const char* other : {"server 0", "server 1", "worker 0"}) {
    EXPECT_TRUE(Contains(e, std::string(other) + ": stopped by the launcher")) << Output(l);
  }
  auto j = nlohmann::json::parse(ReadFile(JobDir() / "failure.json"), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["exit_code"], 7);
  EXPECT_EQ(j["servers"], 2);
  EXPECT_EQ(j["workers"], 2);
  EXPECT_EQ(j["first_failure"]["name"], "worker 1");
  EXPECT_EQ(j["first_failure"]["role"], "worker");
  EXPECT_EQ(j["first_failure"]["index"], 1);
  EXPECT_EQ(j["first_failure"]["log"], log);
  std::set<std::string> collateral;
  for (const auto& c : j["collateral"]) collateral.insert(c["name"].get<std::string>());
  EXPECT_EQ(collateral, (std::set<std::string>{"server 0", "server 1", "worker 0"}));
  ASSERT_EQ(ChildPids().size(), 4u);
  for (pid_t pid : ChildPids()) EXPECT_FALSE(Alive(pid)) << pid;
}

TEST_F(LaunchTest, PsServersThatDoNotExitAfterTheWorkersAreStoppedAndNamed) {
  Launcher l = Run({"launch", "--servers", "2", "--workers", "2", "--server-exit-s", "1",
                    "--grace-s", "1", "--", FLEET_FAKE_RANK_EXE, "--pid-dir", Pids(),
                    "--server-hang"});
  EXPECT_EQ(l.exit_code, 1) << Output(l);
  EXPECT_GE(l.seconds, 1.0);
  EXPECT_LT(l.seconds, 10.0);
  const std::string& e = l.stderr_text;
  EXPECT_TRUE(Contains(e, "servers 0 and 1 did not exit after every worker finished (waited 1 s)"))
      << Output(l);
  EXPECT_TRUE(Contains(e, "FAILED (exit code 1)")) << Output(l);
  EXPECT_TRUE(Contains(e, "first failure: server 0 (pid ")) << Output(l);
  EXPECT_TRUE(Contains(e, ") did not exit after every worker finished (was killed by SIGTERM"))
      << Output(l);
  EXPECT_TRUE(Contains(e, fs::weakly_canonical(JobDir() / "serverlog.0").string())) << Output(l);
  EXPECT_TRUE(Contains(e, "server 1: did not exit after every worker finished, stopped by the "
                          "launcher"))
      << Output(l);
  EXPECT_TRUE(Contains(e, "finished before the failure: workers 0 and 1")) << Output(l);
  auto j = nlohmann::json::parse(ReadFile(JobDir() / "failure.json"), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_EQ(j["first_failure"]["name"], "server 0");
  EXPECT_EQ(j["first_failure"]["reason"], "did not exit after every worker finished");
  EXPECT_EQ(j["finished"], nlohmann::json({"worker 0", "worker 1"}));
  for (pid_t pid : ChildPids()) EXPECT_FALSE(Alive(pid)) << pid;

  // One server alone is named in the singular.
  Launcher one = Run({"launch", "--servers", "1", "--workers", "1", "--server-exit-s", "0.5",
                      "--job-id", "one", "--", FLEET_FAKE_RANK_EXE, "--server-hang"});
  EXPECT_EQ(one.exit_code, 1) << Output(one);
  EXPECT_TRUE(Contains(one.stderr_text,
                       "fleet-host launch: server 0 did not exit after every worker finished"))
      << Output(one);
}

TEST_F(LaunchTest, PsServerDyingMidRunIsNamed) {
  Launcher l = Run({"launch", "--servers", "2", "--workers", "2", "--", FLEET_FAKE_RANK_EXE,
                    "--pid-dir", Pids(), "--ps-done", dir_.string(), "--fail-server", "1",
                    "--exit-code", "5", "--after-ms", "300", "--sleep-ms", "60000"});
  EXPECT_EQ(l.exit_code, 5) << Output(l);
  EXPECT_LT(l.seconds, 15.0);
  const std::string& e = l.stderr_text;
  EXPECT_TRUE(Contains(e, "first failure: server 1 (pid ")) << Output(l);
  EXPECT_TRUE(Contains(e, "exited with code 5")) << Output(l);
  EXPECT_TRUE(Contains(e, "its log: " + fs::weakly_canonical(JobDir() / "serverlog.1").string()))
      << Output(l);
  EXPECT_TRUE(Contains(e, "| server 1 failing with exit code 5")) << Output(l);
  for (const char* other : {"server 0", "worker 0", "worker 1"}) {
    EXPECT_TRUE(Contains(e, std::string(other) + ": stopped by the launcher")) << Output(l);
  }
  for (pid_t pid : ChildPids()) EXPECT_FALSE(Alive(pid)) << pid;
}

TEST_F(LaunchTest, PsServerExitingZeroWhileWorkersRunIsAFailure) {
  Launcher l = Run({"launch", "--servers", "2", "--workers", "2", "--server-exit-s", "2", "--",
                    FLEET_FAKE_RANK_EXE, "--pid-dir", Pids(), "--ps-done", dir_.string(),
                    "--fail-server", "0", "--exit-code", "0", "--after-ms", "200", "--sleep-ms",
                    "60000"});
  EXPECT_EQ(l.exit_code, 1) << Output(l);
  EXPECT_GE(l.seconds, 2.0);  // workers get server_exit_s to finish before the server is blamed
  EXPECT_LT(l.seconds, 15.0);
  const std::string& e = l.stderr_text;
  EXPECT_TRUE(Contains(e, "fleet-host launch: server 0 exited while workers were running"))
      << Output(l);
  EXPECT_TRUE(Contains(e, "first failure: server 0 (pid ")) << Output(l);
  EXPECT_TRUE(Contains(e, "exited while workers were running (exited with code 0)")) << Output(l);
  for (const char* other : {"server 1", "worker 0", "worker 1"}) {
    EXPECT_TRUE(Contains(e, std::string(other) + ": stopped by the launcher")) << Output(l);
  }
  auto j = nlohmann::json::parse(ReadFile(JobDir() / "failure.json"), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_EQ(j["first_failure"]["exit_code"], 0);
  EXPECT_EQ(j["first_failure"]["reason"], "exited while workers were running");
  for (pid_t pid : ChildPids()) EXPECT_FALSE(Alive(pid)) << pid;
}

TEST_F(LaunchTest, PsRolesResolveInFleetHostEnv) {
  // Each process resolves its role from what the launcher set: the servers' POD_IP:PADDLE_PORT
  // and PADDLE_PSERVER_ID must agree, and workers see no server address.
  Launcher l = Run({"launch", "--servers", "2", "--workers", "2", "--", "env", "--json"});
  ASSERT_EQ(l.exit_code, 0) << Output(l);
  std::vector<std::string> endpoints;
  for (int i = 0; i < 2; ++i) {
    auto j = nlohmann::json::parse(ReadFile(JobDir() / ("serverlog." + std::to_string(i))),
                                   nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "server " << i;
    EXPECT_EQ(j["role"], "pserver");
    EXPECT_EQ(j["rank"], i);
    EXPECT_EQ(j["world_size"], 2);
    ASSERT_EQ(j["pserver_endpoints"].size(), 2u);
    EXPECT_EQ(j["current_endpoint"], j["pserver_endpoints"][i]);
    endpoints = j["pserver_endpoints"].get<std::vector<std::string>>();
  }
  for (int i = 0; i < 2; ++i) {
    auto j = nlohmann::json::parse(ReadFile(JobDir() / ("workerlog." + std::to_string(i))),
                                   nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "worker " << i;
    EXPECT_EQ(j["role"], "trainer");
    EXPECT_EQ(j["rank"], i);
    EXPECT_EQ(j["world_size"], 2);
    EXPECT_EQ(j["current_endpoint"], "");
    EXPECT_EQ(j["pserver_endpoints"], nlohmann::json(endpoints));
  }
}

TEST_F(LaunchTest, PsBadArgumentsExit2AndStartNothing) {
  const std::vector<std::vector<std::string>> cases = {
      {"launch", "--servers", "2", "--workers", "2", "--nproc", "2", "--", FLEET_FAKE_RANK_EXE},
      {"launch", "--servers", "2", "--", FLEET_FAKE_RANK_EXE},
      {"launch", "--workers", "2", "--", FLEET_FAKE_RANK_EXE},
      {"launch", "--servers", "0", "--workers", "1", "--", FLEET_FAKE_RANK_EXE},
      {"launch", "--servers", "1", "--workers", "0", "--", FLEET_FAKE_RANK_EXE},
      {"launch", "--servers", "two", "--workers", "1", "--", FLEET_FAKE_RANK_EXE},
      {"launch", "--servers", "127.0.0.1:7000,127.0.0.1:7000", "--workers", "1", "--",
       FLEET_FAKE_RANK_EXE},
      {"launch", "--servers", "127.0.0.1:99999", "--workers", "1", "--", FLEET_FAKE_RANK_EXE},
      {"launch", "--servers", "1", "--workers", "1", "--nnodes", "2", "--node-rank", "0",
       "--master", "127.0.0.1:6170", "--", FLEET_FAKE_RANK_EXE},
      {"launch", "--servers", "1", "--workers", "1", "--server-exit-s", "-1", "--",
       FLEET_FAKE_RANK_EXE},
  };
  for (const auto& args : cases) {
    std::string joined;
    for (const std::string& a : args) joined += a + " ";
    SCOPED_TRACE(joined);
    Launcher l = Run(args);
    EXPECT_EQ(l.exit_code, 2) << Output(l);
    EXPECT_TRUE(Contains(l.stderr_text, "fleet-host launch: ")) << Output(l);
    EXPECT_FALSE(fs::exists(dir_ / "log"));
  }
  EXPECT_TRUE(Contains(Run(cases[0]).stderr_text,
                       "--nproc cannot be combined with --servers/--workers"));
  EXPECT_TRUE(Contains(Run(cases[1]).stderr_text, "--servers needs --workers"));
  EXPECT_TRUE(Contains(Run(cases[6]).stderr_text, "'127.0.0.1:7000' appears more than once"));
  EXPECT_TRUE(Contains(Run(cases[7]).stderr_text, "--servers: '127.0.0.1:99999'"));
}

}  // namespace
