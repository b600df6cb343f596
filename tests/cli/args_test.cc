// The rules every command's flags follow (host/cli/args.h), through the real binary: a flag that
// takes one value is given once, a value is never empty, numbers are parsed whole within their
// range, and lists of endpoints are checked as fleet.toml's are. Each error names the flag and
// exits 2 (a usage error).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace {

namespace fs = std::filesystem;

const fs::path kExamples = FLEET_EXAMPLES_DIR;

struct Result {
  int exit_code = -1;
  std::string out, err;
};

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class ArgsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fleet_args_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs fleet-host with `args` (bash words; $'...' allowed) in the test's directory.
  Result Run(const std::string& args) const {
    std::ofstream(dir_ / "cmd.sh") << "cd '" << dir_.string()
                                   << "' && env -u FLEET_PLUGIN_PATH timeout 60 "
                                   << FLEET_HOST_EXE << " " << args << " >out.txt 2>err.txt\n";
    const int status = std::system(("bash '" + (dir_ / "cmd.sh").string() + "'").c_str());
    Result r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = Slurp(dir_ / "out.txt");
    r.err = Slurp(dir_ / "err.txt");
    return r;
  }

  // Expects a usage error (exit 2) whose message holds `what`.
  void ExpectUsageError(const std::string& args, const std::string& what) const {
    SCOPED_TRACE(args);
    Result r = Run(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }

  fs::path dir_;
  const std::string mlp_ = (kExamples / "mlp/mlp.fleet").string();
  const std::string config_ = (kExamples / "mlp/fleet.toml").string();
};

// A second value of a single-valued flag silently replaced the first; now it is an error that
// quotes both, before the command or after it, for the global options and a command's own.
TEST_F(ArgsTest, ASingleValuedFlagGivenTwiceIsRefused) {
  ExpectUsageError("--config " + config_ + " --config /dev/null check",
                   "--config is given twice ('" + config_ + "' and '/dev/null')");
  ExpectUsageError("--config " + config_ + " run " + mlp_ + " --config /dev/null",
                   "--config is given twice");
  ExpectUsageError("--log-level info --log-level debug check", "--log-level is given twice");
  ExpectUsageError("show " + mlp_ + " --stage parsed --stage backward",
                   "fleet-host show: --stage is given twice ('parsed' and 'backward')");
  ExpectUsageError("show " + mlp_ + " --stage transpiled --world-size 2 --world-size 4",
                   "--world-size is given twice");
  ExpectUsageError("convert a.safetensors --out x --out y", "--out is given twice");
  ExpectUsageError("infer model --input x=a.npy --out o1 --out o2", "--out is given twice");
  ExpectUsageError("export " + mlp_ + " --fetch prediction --out a --out b",
                   "--out is given twice");
  // Flags documented as repeatable stay so.
  Result sets = Run("--set train.steps=2 --set train.seed=3 check");
  EXPECT_EQ(sets.exit_code, 0) << sets.err;
}

// infer's --input is repeatable for a model's several feeds, not to give one feed two files.
TEST_F(ArgsTest, InferRefusesOneFeedGivenTwice) {
  const std::string ckpt = (dir_ / "ckpt").string(), model = (dir_ / "model").string();
  Result run = Run("--config " + config_ + " run " + mlp_ + " --set train.steps=2 " +
                   "--set checkpoint.dir=" + ckpt);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  Result ex = Run("--config " + config_ + " export " + mlp_ + " --feed x --fetch prediction " +
                  "--out " + model + " --checkpoint " + ckpt);
  ASSERT_EQ(ex.exit_code, 0) << ex.err;
  const std::string script = "import numpy; numpy.save('a.npy', numpy.zeros((4, 32), "
                             "dtype=numpy.float32)); numpy.save('b.npy', numpy.ones((4, 32), "
                             "dtype=numpy.float32))";
  ASSERT_EQ(std::system(("cd '" + dir_.string() + "' && /usr/bin/python3 -c \"" + script +
                         "\"").c_str()),
            0);
  Result once = Run("infer " + model + " --input x=a.npy");
  ASSERT_EQ(once.exit_code, 0) << once.err;
  for (const std::string& inputs : {std::string("--input x=a.npy --input x=b.npy"),
                                    std::string("--input a.npy --input x=b.npy")}) {
    SCOPED_TRACE(inputs);
    Result twice = Run("infer " + model + " " + inputs);
    EXPECT_EQ(twice.exit_code, 1) << twice.err;
    EXPECT_EQ(twice.out, "");
    EXPECT_NE(twice.err.find("--input"), std::string::npos) << twice.err;
  }
  Result both = Run("infer " + model + " --input x=a.npy --input x=b.npy");
  EXPECT_NE(both.err.find("--input gives feed 'x' twice ('a.npy' and 'b.npy')"),
            std::string::npos)
      << both.err;
}

// No flag means anything by an empty value: `--config ''` read as "no config given" (the
// defaults, or ./fleet.toml), `--out ''` as "no output".
TEST_F(ArgsTest, AnEmptyValueIsRefusedNamingTheFlag) {
  // A fleet.toml here that `--config ''` would have fallen back to.
  std::ofstream(dir_ / "fleet.toml") << "[train]\nsteps = 1\n";
  ExpectUsageError("--config '' check", "fleet-host: --config: expected a value, got ''");
  ExpectUsageError("run " + mlp_ + " --config ''", "--config: expected a value, got ''");
  ExpectUsageError("--log-level '' check", "--log-level: expected a value, got ''");
  ExpectUsageError("infer model --input x=a.npy --out ''", "--out: expected a value, got ''");
  ExpectUsageError("show " + mlp_ + " --stage ''", "--stage: expected a value, got ''");
  ExpectUsageError("show " + mlp_ + " --pservers ''", "--pservers: expected a value, got ''");
  ExpectUsageError("infer model --input x=", "--input 'x=': no file after '='");
}

// Commands without arguments take none: `version --bogus` printed the version.
TEST_F(ArgsTest, VersionAndHelpRefuseArguments) {
  ExpectUsageError("version --bogus", "fleet-host version: unexpected argument '--bogus'");
  ExpectUsageError("help run", "fleet-host help: unexpected argument 'run'");
  Result v = Run("version");
  EXPECT_EQ(v.exit_code, 0) << v.err;
}

// Numbers are parsed whole and within what they can mean: 2^31 wrapped to a negative world
// size on its way to the passes, 2^63 to anything.
TEST_F(ArgsTest, NumericFlagsAreCheckedAgainstTheirRange) {
  const std::string show = "show " + mlp_ + " --stage transpiled ";
  ExpectUsageError(show + "--world-size 2147483648",
                   "--world-size: expected an integer from 1 to 65536, got '2147483648'");
  ExpectUsageError(show + "--world-size 9223372036854775808",
                   "--world-size: expected an integer from 1 to 65536");
  ExpectUsageError(show + "--world-size 0", "--world-size: expected an integer from 1 to 65536");
  ExpectUsageError(show + "--world-size 2x", "--world-size: expected an integer");
  ExpectUsageError(show + "--world-size ' 2'", "--world-size: expected an integer");
  ExpectUsageError(show + "--world-size 2 --rank -1",
                   "--rank: expected an integer from 0 to 65535, got '-1'");
  ExpectUsageError(show + "--world-size 2 --rank 65536", "--rank: expected an integer");
  // The largest world is accepted, its last rank too.
  Result big = Run(show + "--world-size 65536 --rank 65535 --program main");
  EXPECT_EQ(big.exit_code, 0) << big.err;
}

// --pservers is checked as [role] pserver_endpoints and PADDLE_PSERVERS_IP_PORT_LIST are (one
// code path): every endpoint host:port, none twice, at every stage.
TEST_F(ArgsTest, PserversAreCheckedAsTheConfigsEndpointLists) {
  const std::string show = "show " + mlp_ + " --pservers ";
  ExpectUsageError(show + "127.0.0.1:1,127.0.0.1:1",
                   "--pservers: the endpoint '127.0.0.1:1' appears more than once");
  ExpectUsageError(show + "'127.0.0.1:1, 127.0.0.1:1'", "appears more than once");
  ExpectUsageError(show + "127.0.0.1:1,,127.0.0.1:2", "--pservers: '' is not host:port");
  ExpectUsageError(show + "127.0.0.1:99999", "--pservers: '127.0.0.1:99999': the port '99999'");
  ExpectUsageError(show + "$'h\\x1b[2J:1'", "--pservers: 'h\\x1b[2J:1'");
  Result ok = Run(show + "'127.0.0.1:6170, 127.0.0.1:6171' --stage transpiled --world-size 2 "
                         "--program pserver.1");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("127.0.0.1:6171"), std::string::npos) << ok.out;
}

}  // namespace
