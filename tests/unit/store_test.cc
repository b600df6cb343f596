// Tests of the rendezvous stores (store.h): the shared contract for every kind, then FileStore
// and TcpStore across real processes and the TCP server's failure modes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "rendezvous/abortable_store.h"
#include "rendezvous/file_store.h"
#include "rendezvous/memory_store.h"
#include "rendezvous/store.h"
#include "rendezvous/tcp_store.h"

namespace fleet {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// A plain TCP connection to 127.0.0.1:port, for tests that speak to the store byte by byte;
// -1 when it cannot be made.
int ConnectRaw(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string MakeTempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "fleet_store_XXXXXX").string();
  char* made = ::mkdtemp(tmpl.data());
  EXPECT_NE(made, nullptr);
  return tmpl;
}

TcpStoreOptions FastOptions() {
  TcpStoreOptions o;
  o.connect_timeout = milliseconds(2000);
  o.io_timeout = milliseconds(1000);
  return o;
}

// One store of each kind, behind the Store interface.
class StoreFixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string& kind = GetParam();
    if (kind == "memory") {
      owned_ = std::make_unique<MemoryStore>();
    } else if (kind == "file") {
      dir_ = MakeTempDir();
      auto s = FileStore::Open(dir_ + "/store");
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      owned_ = std::move(*s);
    } else if (kind == "tcp") {
      auto server = TcpStoreServer::Start("127.0.0.1", 0);
      ASSERT_TRUE(server.ok()) << server.status().ToString();
      server_ = std::move(*server);
      auto client = TcpStore::Connect("127.0.0.1", server_->port(), FastOptions());
      ASSERT_TRUE(client.ok()) << client.status().ToString();
      owned_ = std::move(*client);
    } else {  // scoped view over a memory store
      base_ = std::make_unique<MemoryStore>();
      owned_ = std::make_unique<ScopedStore>(base_.get(), "job7");
    }
    store_ = owned_.get();
  }
  void TearDown() override {
    owned_.reset();
    server_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::string dir_;
  std::unique_ptr<MemoryStore> base_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<Store> owned_;
  Store* store_ = nullptr;
};

TEST_P(StoreFixture, SetThenGetReplacesValues) {
  ASSERT_TRUE(store_->Set("a", "1").ok());
  ASSERT_TRUE(store_->Set("a", "two").ok());
  auto v = store_->Get("a", milliseconds(100));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, "two");
  ASSERT_TRUE(store_->Set("empty", "").ok());
  EXPECT_EQ(*store_->Get("empty", milliseconds(100)), "");
}

TEST_P(StoreFixture, ArbitraryBytesInKeysAndValues) {
  const std::string key = std::string("a/../b\0c%2F", 11);
  std::string value;
  for (int i = 0; i < 256; ++i) value.push_back(static_cast<char>(i));
  value += std::string("/\0/", 3);
  ASSERT_TRUE(store_->Set(key, value).ok());
  ASSERT_TRUE(store_->Set("a/../b", "other").ok());  // must not collide with `key`
  auto v = store_->Get(key, milliseconds(100));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, value);
  EXPECT_EQ(*store_->Get("a/../b", milliseconds(100)), "other");
}

TEST_P(StoreFixture, GetWaitsForSetFromAnotherThread) {
  std::thread writer([&] {
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_TRUE(store_->Set("uid", "abc").ok());
  });
  auto v = store_->Get("uid", milliseconds(3000));
  writer.join();
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, "abc");
}

TEST_P(StoreFixture, MissingKeyFailsAtDeadlineNamingIt) {
  auto start = Clock::now();
  auto v = store_->Get("never", milliseconds(100));
  auto took = Clock::now() - start;
  EXPECT_EQ(v.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(v.status().message().find("never'"), std::string::npos) << v.status().message();
  EXPECT_GE(took, milliseconds(95));
  EXPECT_LT(took, milliseconds(1500));
}

TEST_P(StoreFixture, WaitNamesOnlyMissingKeys) {
  ASSERT_TRUE(store_->Set("rank0", "x").ok());
  EXPECT_TRUE(store_->Wait({"rank0"}, milliseconds(100)).ok());
  Status s = store_->Wait({"rank0", "rank1", "rank2"}, milliseconds(60));
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded);
  EXPECT_NE(s.message().find("rank1'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rank2'"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("rank0'"), std::string::npos) << s.message();
}

TEST_P(StoreFixture, AddIsAtomicAcrossThreads) {
  EXPECT_EQ(*store_->Add("n", 5), 5);
  EXPECT_EQ(*store_->Add("n", -2), 3);
  constexpr int kThreads = 4, kAdds = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kAdds; ++i) EXPECT_TRUE(store_->Add("n", 1).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(*store_->Get("n", milliseconds(100)), std::to_string(3 + kThreads * kAdds));
  ASSERT_TRUE(store_->Set("s", "text").ok());
  auto bad = store_->Add("s", 1);
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("s' does not hold an integer"), std::string::npos) << bad.status().message();
}

INSTANTIATE_TEST_SUITE_P(Kinds, StoreFixture,
                         ::testing::Values("memory", "file", "tcp", "scoped"),
                         [](const auto& info) { return info.param; });

TEST(ScopedStoreTest, PrefixesKeysAndSeparatesScopes) {
  MemoryStore base;
  ScopedStore job(&base, "job1");
  ScopedStore comm(&job, "comm0");
  ScopedStore other(&base, "job2");
  ASSERT_TRUE(comm.Set("uid", "u").ok());
  EXPECT_EQ(*base.Get("job1/comm0/uid", milliseconds(10)), "u");
  EXPECT_EQ(*job.Get("comm0/uid", milliseconds(10)), "u");
  Status s = other.Wait({"comm0/uid"}, milliseconds(20));
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded);
  EXPECT_NE(s.message().find("'job2/comm0/uid'"), std::string::npos) << s.message();
}

TEST(FileStoreTest, KeysStayInsideTheDirectory) {
  std::string dir = MakeTempDir();
  auto store = FileStore::Open(dir + "/s");
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Set("../../escape", "x").ok());
  ASSERT_TRUE((*store)->Set("/abs/path", "y").ok());
  EXPECT_FALSE(std::filesystem::exists(dir + "/escape"));
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/s")) {
    std::string name = e.path().filename().string();
    EXPECT_EQ(name.find("tmp."), std::string::npos) << "leftover temporary " << name;
    ++files;
  }
  EXPECT_EQ(files, 3);  // two keys and the lock file
  EXPECT_EQ(FileStore::EncodeKey(std::string("a/\0", 3)), "k_a%2F%00");
  auto too_long = (*store)->Set(std::string(200, '/'), "v");
  EXPECT_EQ(too_long.code(), Code::kInvalidArgument);
  std::filesystem::remove_all(dir);
}

// Runs `body(rank)` in `n` forked children and returns their exit codes. Children never return
// into the test framework.
std::vector<int> RunProcesses(int n, const std::function<int(int)>& body) {
  std::vector<pid_t> pids;
  for (int rank = 0; rank < n; ++rank) {
    pid_t pid = ::fork();
    if (pid == 0) _exit(body(rank));
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status));
  }
  return codes;
}

// What every rank does: count itself in, publish a value with awkward bytes, wait for every
// rank's value and check them. Exit codes say which step failed.
int RankBody(Store& store, int rank, int n) {
  if (!store.Add("counter", rank + 1).ok()) return 2;
  std::string mine = std::string("v/\0", 3) + std::to_string(rank);
  if (!store.Set("rank/" + std::to_string(rank), mine).ok()) return 3;
  std::vector<std::string> keys;
  for (int r = 0; r < n; ++r) keys.push_back("rank/" + std::to_string(r));
  if (!store.Wait(keys, milliseconds(3000)).ok()) return 4;
  for (int r = 0; r < n; ++r) {
    auto v = store.Get(keys[r], milliseconds(100));
    if (!v.ok() || *v != std::string("v/\0", 3) + std::to_string(r)) return 5;
  }
  return 0;
}

TEST(FileStoreTest, ThreeProcessesRendezvous) {
  std::string dir = MakeTempDir();
  constexpr int kRanks = 3;
  auto codes = RunProcesses(kRanks, [&](int rank) {
    auto store = FileStore::Open(dir + "/shared");
    if (!store.ok()) return 1;
    return RankBody(**store, rank, kRanks);
  });
  EXPECT_EQ(codes, std::vector<int>(kRanks, 0));
  auto store = FileStore::Open(dir + "/shared");
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(*(*store)->Get("counter", milliseconds(10)), "6");  // 1 + 2 + 3
  std::filesystem::remove_all(dir);
}

TEST(TcpStoreTest, ThreeProcessesRendezvous) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  int port = (*server)->port();
  ASSERT_GT(port, 0);
  constexpr int kRanks = 3;
  auto codes = RunProcesses(kRanks, [&](int rank) {
    auto store = TcpStore::Connect("127.0.0.1", port, FastOptions());
    if (!store.ok()) return 1;
    return RankBody(**store, rank, kRanks);
  });
  EXPECT_EQ(codes, std::vector<int>(kRanks, 0));
  auto client = TcpStore::Connect("127.0.0.1", port, FastOptions());
  ASSERT_TRUE(client.ok());
  EXPECT_EQ(*(*client)->Get("counter", milliseconds(10)), "6");
}

TEST(TcpStoreTest, SecondServerOnSamePortFailsClearly) {
  auto first = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(first.ok());
  int port = (*first)->port();
  auto second = TcpStoreServer::Start("127.0.0.1", port);
  ASSERT_FALSE(second.ok());
  const std::string& msg = second.status().message();
  EXPECT_NE(msg.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << msg;
  EXPECT_NE(msg.find("in use"), std::string::npos) << msg;
}

TEST(TcpStoreTest, ClientWaitsForALateServer) {
  int port = 0;
  {
    auto probe = TcpStoreServer::Start("127.0.0.1", 0);
    ASSERT_TRUE(probe.ok());
    port = (*probe)->port();
  }
  std::unique_ptr<TcpStoreServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(milliseconds(150));
    auto s = TcpStoreServer::Start("127.0.0.1", port);
    if (s.ok()) server = std::move(*s);
  });
  auto client = TcpStore::Connect("127.0.0.1", port, FastOptions());
  starter.join();
  ASSERT_TRUE(server != nullptr) << "port was taken meanwhile";
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_EQ(*(*client)->Add("k", 4), 4);
}

TEST(TcpStoreTest, ClientWithoutServerFailsWithinItsDeadline) {
  int port = 0;
  {
    auto probe = TcpStoreServer::Start("127.0.0.1", 0);
    ASSERT_TRUE(probe.ok());
    port = (*probe)->port();
  }
  TcpStoreOptions options = FastOptions();
  options.connect_timeout = milliseconds(300);
  auto start = Clock::now();
  auto client = TcpStore::Connect("127.0.0.1", port, options);
  auto took = Clock::now() - start;
  ASSERT_FALSE(client.ok());
  EXPECT_TRUE(client.status().code() == Code::kDeadlineExceeded ||
              client.status().code() == Code::kUnavailable);
  EXPECT_NE(client.status().message().find(std::to_string(port)), std::string::npos);
  EXPECT_LT(took, milliseconds(1500));
}

TEST(TcpStoreTest, ServerStopWakesABlockedGet) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto client = TcpStore::Connect("127.0.0.1", (*server)->port(), FastOptions());
  ASSERT_TRUE(client.ok());
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(100));
    (*server)->Stop();
  });
  auto start = Clock::now();
  auto v = (*client)->Get("never", milliseconds(4000));
  auto took = Clock::now() - start;
  stopper.join();
  EXPECT_EQ(v.status().code(), Code::kUnavailable) << v.status().ToString();
  EXPECT_NE(v.status().message().find((*client)->address()), std::string::npos);
  EXPECT_LT(took, milliseconds(1500));
  // Later calls fail fast too.
  EXPECT_FALSE((*client)->Set("k", "v").ok());
}

TEST(TcpStoreTest, OversizedMessagesAreRejected) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  int port = (*server)->port();
  // A raw client announcing a 1 GiB key: the server answers an error and drops it.
  const int fd = ConnectRaw(port);
  ASSERT_GE(fd, 0) << "connect to the store on port " << port;
  const unsigned char request[] = {tcp_store::kSet, 0, 0, 0, 0x40};
  ASSERT_EQ(::send(fd, request, sizeof(request), 0), static_cast<ssize_t>(sizeof(request)));
  std::string reply;
  char buffer[512];
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ssize_t n;
  while ((n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0) reply.append(buffer, n);
  EXPECT_EQ(n, 0) << "the server should close the connection";
  ::close(fd);
  ASSERT_GT(reply.size(), 5u);
  EXPECT_EQ(static_cast<int>(reply[0]), static_cast<int>(Code::kInvalidArgument));
  EXPECT_NE(reply.find("exceeds the limit"), std::string::npos) << reply.substr(5);
  // The client refuses oversized keys before sending; the server keeps serving others.
  auto client = TcpStore::Connect("127.0.0.1", port, FastOptions());
  ASSERT_TRUE(client.ok());
  Status big = (*client)->Set(std::string(tcp_store::kMaxKeyBytes + 1, 'k'), "v");
  EXPECT_EQ(big.code(), Code::kInvalidArgument);
  EXPECT_NE(big.message().find("exceeds the limit"), std::string::npos) << big.message();
  EXPECT_TRUE((*client)->Set("ok", "v").ok());
  EXPECT_EQ(*(*client)->Get("ok", milliseconds(100)), "v");
}

// A stranger's SETs once grew the store by hundreds of MB: byte and key quotas hold, replacing
// a value counts only the difference, and connections past the cap are closed on accept while
// the clients already connected keep being served.
TEST(TcpStoreTest, QuotasAndTheConnectionCapHold) {
  TcpStoreLimits limits;
  limits.max_clients = 3;
  limits.max_bytes = 1 << 20;
  limits.max_keys = 8;
  auto server = TcpStoreServer::Start("127.0.0.1", 0, limits);
  ASSERT_TRUE(server.ok());
  const int port = (*server)->port();
  auto client = TcpStore::Connect("127.0.0.1", port, FastOptions());
  ASSERT_TRUE(client.ok());
  const std::string big(600 << 10, 'v');
  ASSERT_TRUE((*client)->Set("a", big).ok());
  Status over = (*client)->Set("b", big);
  EXPECT_EQ(over.code(), Code::kResourceExhausted) << over.ToString();
  EXPECT_NE(over.message().find("would exceed the store's quota of 1048576 bytes"),
            std::string::npos) << over.message();
  EXPECT_TRUE((*client)->Set("a", big + "w").ok()) << "a replacement counts the difference";
  EXPECT_EQ((*client)->Get("b", milliseconds(50)).status().code(), Code::kDeadlineExceeded);
  for (int k = 0; k < 7; ++k) EXPECT_TRUE((*client)->Set("k" + std::to_string(k), "x").ok());
  Status keys = (*client)->Set("one_too_many", "x");
  EXPECT_EQ(keys.code(), Code::kResourceExhausted) << keys.ToString();
  EXPECT_EQ((*client)->Add("counter", 1).status().code(), Code::kResourceExhausted);

  // Ten raw connections: the server keeps at most max_clients, closing the rest at once.
  std::vector<int> fds;
  int closed = 0;
  for (int i = 0; i < 10; ++i) {
    const int fd = ConnectRaw(port);
    ASSERT_GE(fd, 0) << "connect to the store on port " << port;
    fds.push_back(fd);
  }
  for (int fd : fds) {
    timeval tv{0, 300000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char byte;
    if (::recv(fd, &byte, 1, 0) == 0) ++closed;
  }
  for (int fd : fds) ::close(fd);
  EXPECT_GE(closed, 10 - static_cast<int>(limits.max_clients));
  // The client that was connected before still gets answers.
  EXPECT_EQ(*(*client)->Get("a", milliseconds(100)), big + "w");
}

// With a job secret a connection must answer the server's challenge before anything else: a
// rank with the secret works; no secret, a wrong one, or a stranger's raw SET are refused (and
// change nothing); a rank with a secret meeting a server without one is told so.
TEST(TcpStoreTest, TheJobSecretKeepsStrangersOut) {
  auto secret = NewJobSecret();
  ASSERT_TRUE(secret.ok());
  EXPECT_EQ(secret->size(), 64u);
  auto server = TcpStoreServer::Start("127.0.0.1", 0, {}, *secret);
  ASSERT_TRUE(server.ok());
  const int port = (*server)->port();
  TcpStoreOptions with = FastOptions();
  with.secret = *secret;
  auto rank = TcpStore::Connect("127.0.0.1", port, with);
  ASSERT_TRUE(rank.ok()) << rank.status().ToString();
  ASSERT_TRUE((*rank)->Set("k", "v").ok());
  EXPECT_EQ(*(*rank)->Get("k", milliseconds(100)), "v");

  auto none = TcpStore::Connect("127.0.0.1", port, FastOptions());
  ASSERT_TRUE(none.ok());  // connecting is not yet talking
  Status refused = (*none)->Set("k", "stranger");
  EXPECT_EQ(refused.code(), Code::kUnauthenticated) << refused.ToString();
  EXPECT_NE(refused.message().find("requires the job secret, and the connection has not"),
            std::string::npos) << refused.message();

  TcpStoreOptions wrong = FastOptions();
  wrong.secret = *secret + "x";
  auto bad = TcpStore::Connect("127.0.0.1", port, wrong);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kUnauthenticated) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("wrong job secret"), std::string::npos);

  // A raw SET straight away: answered UNAUTHENTICATED and closed.
  const int fd = ConnectRaw(port);
  ASSERT_GE(fd, 0) << "connect to the store on port " << port;
  std::string set = {static_cast<char>(tcp_store::kSet), 1, 0, 0, 0, 'k', 1, 0, 0, 0, 0, 0, 0,
                     0, 'X'};
  ASSERT_EQ(::send(fd, set.data(), set.size(), 0), static_cast<ssize_t>(set.size()));
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string reply;
  char buffer[512];
  ssize_t n;
  while ((n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0) reply.append(buffer, n);
  ::close(fd);
  ASSERT_GT(reply.size(), 1u);
  EXPECT_EQ(static_cast<int>(reply[0]), static_cast<int>(Code::kUnauthenticated));
  EXPECT_EQ(*(*rank)->Get("k", milliseconds(100)), "v") << "nothing the strangers sent landed";

  auto open_server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(open_server.ok());
  auto mismatch = TcpStore::Connect("127.0.0.1", (*open_server)->port(), with);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("runs without a job secret"), std::string::npos)
      << mismatch.status().message();
}

}  // namespace
}  // namespace fleet

namespace fleet {
namespace {

TEST(AbortableStoreTest, ForwardsAndTimesOutNamingTheWholeWait) {
  MemoryStore base;
  AbortableStore store(&base);
  ASSERT_TRUE(store.Set("a", "1").ok());
  auto got = store.Get("a", std::chrono::milliseconds(1000));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "1");
  const auto start = std::chrono::steady_clock::now();
  Status s = store.Wait({"a", "b"}, std::chrono::milliseconds(300));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded);
  EXPECT_NE(s.message().find("timed out after 300 ms waiting for 'b'"), std::string::npos)
      << s.ToString();
  EXPECT_EQ(s.message().find("'a'"), std::string::npos) << s.ToString();
  EXPECT_GE(took, 0.29);
  EXPECT_LT(took, 2.0);
}

TEST(AbortableStoreTest, AbortReleasesAWaitAtOnce) {
  MemoryStore base;
  AbortableStore store(&base);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    store.Abort();
  });
  const auto start = std::chrono::steady_clock::now();
  auto got = store.Get("never", std::chrono::milliseconds(20000));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  aborter.join();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kAborted);
  EXPECT_NE(got.status().message().find("'never'"), std::string::npos) << got.status().ToString();
  EXPECT_LT(took, 2.0);
  // Writes still go through: a peer's heartbeat or failure record is not a wait.
  EXPECT_TRUE(store.Set("x", "y").ok());
}

}  // namespace
}  // namespace fleet
