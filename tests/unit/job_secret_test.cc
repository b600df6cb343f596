// The job secret: where it comes from (the environment, a file, fleet.toml) in which order, a
// secret file read as hostile input, and the transport token derived from it.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <string>
#include <thread>

#include "config/config.h"
#include "config/job_secret.h"
#include "support/secret.h"
#include "temp_dir.h"

namespace fleet {
namespace {

namespace fs = std::filesystem;
using Env = std::map<std::string, std::string>;

const std::string kSecretA = "0123456789abcdef0123456789abcdef";
const std::string kSecretB = "fedcba9876543210fedcba9876543210";

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class JobSecretTest : public ::testing::Test {
 protected:
  // A file holding `text` with `mode` (set after writing, so the umask does not matter).
  fs::path SecretFile(const std::string& name, const std::string& text, mode_t mode = 0600) {
    const fs::path p = dir_.path() / name;
    std::ofstream(p, std::ios::binary) << text;
    EXPECT_EQ(::chmod(p.c_str(), mode), 0);
    return p;
  }

  test_util::TempDir dir_{"fleet_secret"};
};

TEST_F(JobSecretTest, APrivateFileIsReadWithoutItsTrailingNewline) {
  auto plain = ReadJobSecretFile(SecretFile("plain", kSecretA).string());
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(*plain, kSecretA);
  auto echoed = ReadJobSecretFile(SecretFile("echoed", kSecretA + "\n").string());
  ASSERT_TRUE(echoed.ok()) << echoed.status().ToString();
  EXPECT_EQ(*echoed, kSecretA);
  auto crlf = ReadJobSecretFile(SecretFile("crlf", kSecretA + "\r\n").string());
  ASSERT_TRUE(crlf.ok()) << crlf.status().ToString();
  EXPECT_EQ(*crlf, kSecretA);
  // Owner read-only is private too, and exactly the cap is allowed.
  auto readonly = ReadJobSecretFile(SecretFile("ro", kSecretA, 0400).string());
  EXPECT_TRUE(readonly.ok()) << readonly.status().ToString();
  const std::string full(kMaxJobSecretFileBytes, 's');
  auto at_cap = ReadJobSecretFile(SecretFile("full", full).string());
  ASSERT_TRUE(at_cap.ok()) << at_cap.status().ToString();
  EXPECT_EQ(at_cap->size(), kMaxJobSecretFileBytes);
}

TEST_F(JobSecretTest, AFileOthersMayReadOrWriteIsRefusedNamingPathAndMode) {
  for (mode_t mode : {0640, 0604, 0620, 0602, 0660, 0644, 0610}) {
    const fs::path p = SecretFile("shared", kSecretA, mode);
    auto read = ReadJobSecretFile(p.string());
    ASSERT_FALSE(read.ok()) << std::oct << mode;
    EXPECT_EQ(read.status().code(), Code::kPermissionDenied);
    const std::string m = read.status().message();
    EXPECT_TRUE(Contains(m, p.string())) << m;
    char octal[8];
    std::snprintf(octal, sizeof(octal), "%04o", static_cast<unsigned>(mode));
    EXPECT_TRUE(Contains(m, std::string("mode ") + octal)) << m;
    EXPECT_TRUE(Contains(m, "chmod 600")) << m;
  }
}

TEST_F(JobSecretTest, ASymlinkIsFollowedAndItsTargetMustBePrivate) {
  const fs::path target = SecretFile("target", kSecretA);
  const fs::path link = dir_.path() / "link";
  fs::create_symlink(target, link);
  auto ok = ReadJobSecretFile(link.string());
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, kSecretA);

  ASSERT_EQ(::chmod(target.c_str(), 0644), 0);
  auto shared = ReadJobSecretFile(link.string());
  ASSERT_FALSE(shared.ok());
  EXPECT_TRUE(Contains(shared.status().message(), "a link to")) << shared.status().ToString();
  EXPECT_TRUE(Contains(shared.status().message(), "mode 0644")) << shared.status().ToString();
}

TEST_F(JobSecretTest, ASymlinkToAnotherUsersFileIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make a file another user owns";
  const fs::path target = SecretFile("theirs", kSecretA);
  ASSERT_EQ(::chown(target.c_str(), 65534, 65534), 0);
  const fs::path link = dir_.path() / "mine";
  fs::create_symlink(target, link);
  auto read = ReadJobSecretFile(link.string());
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), Code::kPermissionDenied);
  const std::string m = read.status().message();
  EXPECT_TRUE(Contains(m, link.string())) << m;
  EXPECT_TRUE(Contains(m, "owned by uid 65534")) << m;
}

TEST_F(JobSecretTest, SizeLimitsAreEnforced) {
  auto oversized = ReadJobSecretFile(SecretFile("big", std::string(1 << 20, 'x')).string());
  ASSERT_FALSE(oversized.ok());
  EXPECT_TRUE(Contains(oversized.status().message(), "larger than 4096 bytes"))
      << oversized.status().ToString();
  EXPECT_TRUE(Contains(oversized.status().message(), "big")) << oversized.status().ToString();

  auto one_over =
      ReadJobSecretFile(SecretFile("over", std::string(kMaxJobSecretFileBytes + 1, 'x')).string());
  EXPECT_FALSE(one_over.ok());

  auto empty = ReadJobSecretFile(SecretFile("empty", "").string());
  ASSERT_FALSE(empty.ok());
  EXPECT_TRUE(Contains(empty.status().message(), "is empty")) << empty.status().ToString();
  auto newline_only = ReadJobSecretFile(SecretFile("newline", "\n").string());
  ASSERT_FALSE(newline_only.ok());
  EXPECT_TRUE(Contains(newline_only.status().message(), "is empty"));

  auto shorter = ReadJobSecretFile(SecretFile("short", "0123456789abcde\n").string());
  ASSERT_FALSE(shorter.ok());
  EXPECT_EQ(shorter.status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(
      Contains(shorter.status().message(), "holds 15 bytes; a job secret needs at least 16"))
      << shorter.status().ToString();
}

// Files that are not files: refused at once, never read (a device could be endless, a FIFO could
// block forever).
TEST_F(JobSecretTest, DevicesFifosAndDirectoriesAreRefusedWithoutHanging) {
  const fs::path fifo = dir_.path() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const fs::path sub = dir_.path() / "sub";
  fs::create_directory(sub);
  ::chmod(sub.c_str(), 0700);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/dev/zero", "a character device"},
      {fifo.string(), "a FIFO"},
      {sub.string(), "a directory"}};
  for (const auto& [path, what] : cases) {
    auto done = std::async(std::launch::async, [p = path] { return ReadJobSecretFile(p); });
    ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready) << path;
    auto read = done.get();
    ASSERT_FALSE(read.ok()) << path;
    EXPECT_EQ(read.status().code(), Code::kFailedPrecondition) << read.status().ToString();
    EXPECT_TRUE(Contains(read.status().message(), path)) << read.status().ToString();
    EXPECT_TRUE(Contains(read.status().message(), what)) << read.status().ToString();
  }
  auto missing = ReadJobSecretFile((dir_.path() / "missing").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_TRUE(Contains(missing.status().message(), "missing"));
}

TEST_F(JobSecretTest, TheEnvironmentsSecretComesBeforeItsFile) {
  const fs::path file = SecretFile("env", kSecretB);
  auto both = JobSecretFromEnvironment(
      Env{{"FLEET_JOB_SECRET", kSecretA}, {"FLEET_JOB_SECRET_FILE", file.string()}});
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  EXPECT_EQ(*both, kSecretA);
  // An empty variable counts as unset.
  auto file_only = JobSecretFromEnvironment(
      Env{{"FLEET_JOB_SECRET", ""}, {"FLEET_JOB_SECRET_FILE", file.string()}});
  ASSERT_TRUE(file_only.ok()) << file_only.status().ToString();
  EXPECT_EQ(*file_only, kSecretB);
  auto none = JobSecretFromEnvironment(Env{{"FLEET_JOB_SECRET_FILE", ""}});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, "");

  auto weak = JobSecretFromEnvironment(Env{{"FLEET_JOB_SECRET", "hunter2"}});
  ASSERT_FALSE(weak.ok());
  EXPECT_TRUE(Contains(weak.status().message(), "FLEET_JOB_SECRET holds 7 bytes"))
      << weak.status().ToString();
  auto bad_file = JobSecretFromEnvironment(
      Env{{"FLEET_JOB_SECRET_FILE", SecretFile("open", kSecretA, 0644).string()}});
  ASSERT_FALSE(bad_file.ok());
  EXPECT_TRUE(Contains(bad_file.status().message(), "FLEET_JOB_SECRET_FILE: job secret file"))
      << bad_file.status().ToString();
}

TEST_F(JobSecretTest, TheEnvironmentComesBeforeFleetToml) {
  const fs::path comm_file = SecretFile("comm", kSecretA);
  const fs::path env_file = SecretFile("env", kSecretB);
  Config config;
  config.comm_secret_file = comm_file;

  auto from_config = JobSecret(config, Env{});
  ASSERT_TRUE(from_config.ok()) << from_config.status().ToString();
  EXPECT_EQ(*from_config, kSecretA);
  auto from_env_file = JobSecret(config, Env{{"FLEET_JOB_SECRET_FILE", env_file.string()}});
  ASSERT_TRUE(from_env_file.ok()) << from_env_file.status().ToString();
  EXPECT_EQ(*from_env_file, kSecretB);
  const std::string launched(64, 'f');
  auto from_env = JobSecret(config, Env{{"FLEET_JOB_SECRET", launched},
                                        {"FLEET_JOB_SECRET_FILE", env_file.string()}});
  ASSERT_TRUE(from_env.ok()) << from_env.status().ToString();
  EXPECT_EQ(*from_env, launched);
  // The environment wins without the config's file being read at all.
  config.comm_secret_file = dir_.path() / "nonexistent";
  EXPECT_TRUE(JobSecret(config, Env{{"FLEET_JOB_SECRET", launched}}).ok());
  auto missing = JobSecret(config, Env{});
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(Contains(missing.status().message(), "comm.secret_file: job secret file"))
      << missing.status().ToString();

  Config none;
  auto nothing = JobSecret(none, Env{});
  ASSERT_TRUE(nothing.ok());
  EXPECT_EQ(*nothing, "");
}

TEST_F(JobSecretTest, CommAndTransportKeysMustAgree) {
  Config config;
  config.rpc.secret_file = SecretFile("transport", kSecretB);
  auto transport_only = JobSecret(config, Env{});
  ASSERT_TRUE(transport_only.ok()) << transport_only.status().ToString();
  EXPECT_EQ(*transport_only, kSecretB);

  config.comm_secret_file = SecretFile("copy", kSecretB + "\n");
  auto same = JobSecret(config, Env{});
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(*same, kSecretB);

  config.comm_secret_file = SecretFile("comm", kSecretA);
  auto differ = JobSecret(config, Env{});
  ASSERT_FALSE(differ.ok());
  EXPECT_EQ(differ.status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(Contains(differ.status().message(), "hold different secrets"))
      << differ.status().ToString();
  EXPECT_TRUE(Contains(differ.status().message(), "comm.secret_file"));
  EXPECT_TRUE(Contains(differ.status().message(), "transport.secret_file"));
}

TEST_F(JobSecretTest, FleetTomlKeysResolveLikeOtherPathsAndAreChecked) {
  auto config = ParseConfig("[comm]\nsecret_file = \"secret\"\n[transport]\nsecret_file = \"\"\n",
                            "fleet.toml", "/etc/fleet", {});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->comm_secret_file, fs::path("/etc/fleet/secret"));
  EXPECT_TRUE(config->rpc.secret_file.empty());

  auto overridden = ParseConfig("", "fleet.toml", "/etc/fleet",
                                {"transport.secret_file=/run/secrets/job"});
  ASSERT_TRUE(overridden.ok()) << overridden.status().ToString();
  EXPECT_EQ(overridden->rpc.secret_file, fs::path("/run/secrets/job"));

  auto wrong = ParseConfig("[comm]\nsecret_file = 3\n", "fleet.toml", "/etc/fleet", {});
  ASSERT_FALSE(wrong.ok());
  EXPECT_TRUE(Contains(wrong.status().message(), "fleet.toml:2:15: comm.secret_file"))
      << wrong.status().ToString();
}

TEST(TransportTokenTest, IsTheHmacOfTheSecretInHex) {
  // python3 -c "import hmac,hashlib; print(hmac.new(b'0123456789abcdef0123456789abcdef',
  //             b'fleet transport token v1', hashlib.sha256).hexdigest())"
  EXPECT_EQ(TransportTokenFromSecret(kSecretA),
            "2fe86c821ff1c7d6121f6aa3fa2d8617d24c7db96281023d5ad6bf93f747ea4c");
  EXPECT_EQ(TransportTokenFromSecret(kSecretA), TransportTokenFromSecret(kSecretA));
  EXPECT_NE(TransportTokenFromSecret(kSecretA), TransportTokenFromSecret(kSecretB));
  EXPECT_FALSE(Contains(TransportTokenFromSecret(kSecretA), kSecretA));
  EXPECT_EQ(TransportTokenFromSecret(""), "");
}

}  // namespace
}  // namespace fleet
