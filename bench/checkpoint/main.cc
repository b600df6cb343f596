// fleet_checkpoint_bench: how long a checkpoint takes to save against the bytes it writes, next
// to copying the same bytes with cp, in the same run.
//
//   fleet_checkpoint_bench [--dir DIR] [--reps 5] [--sizes-mb 16,64,256,1024] [--tensor-mb 4]
//
// For each size, a state of float32 tensors of --tensor-mb each (a model's parameters and
// optimizer moments look like this) is saved `reps` times with checkpoint::SaveCheckpoint: the
// safetensors file and manifest written with a running CRC-32, fsynced, renamed, the directory
// fsynced, `latest` replaced. In turn with each save, the committed file is copied twice by the
// system's cp: plain (`cp`, which leaves the bytes in the page cache) and durable (`cp` then
// `sync FILE`, which is what a save promises). Each line: medians in GB/s (1e9 bytes/s) and
// the ratio save/cp+sync. DIR (default: a new directory under /tmp) should be on the disk a job
// would checkpoint to.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"

namespace fleet::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Seconds(Clock::time_point a) {
  return std::chrono::duration<double>(Clock::now() - a).count();
}

std::vector<int64_t> ParseList(const std::string& text) {
  std::vector<int64_t> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = text.find(',', at);
    out.push_back(std::atoll(text.substr(at, comma - at).c_str()));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

// Runs a shell command, timed; exits the bench when it fails.
double Timed(const std::string& command) {
  const auto start = Clock::now();
  if (std::system(command.c_str()) != 0) {
    std::fprintf(stderr, "fleet_checkpoint_bench: '%s' failed\n", command.c_str());
    std::exit(1);
  }
  return Seconds(start);
}

int Main(int argc, char** argv) {
  fs::path dir;
  int reps = 5;
  std::vector<int64_t> sizes_mb = {16, 64, 256, 1024};
  int64_t tensor_mb = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--dir") {
      dir = value;
    } else if (flag == "--reps") {
      reps = std::max(1, std::atoi(value.c_str()));
    } else if (flag == "--sizes-mb") {
      sizes_mb = ParseList(value);
    } else if (flag == "--tensor-mb") {
      tensor_mb = std::max<int64_t>(1, std::atoll(value.c_str()));
    } else {
      std::fprintf(stderr, "usage: fleet_checkpoint_bench [--dir DIR] [--reps N] "
                           "[--sizes-mb 16,64,...] [--tensor-mb 4]\n");
      return 2;
    }
  }
  bool made = false;
  if (dir.empty()) {
    char tmpl[] = "/tmp/fleet_ckpt_bench_XXXXXX";
    dir = ::mkdtemp(tmpl);
    made = true;
  }
  std::printf("%8s %10s %10s %12s %10s %10s\n", "MB", "save GB/s", "cp GB/s", "cp+sync GB/s",
              "save/cp+sync", "save ms");
  for (int64_t mb : sizes_mb) {
    checkpoint::SafeTensors state;
    const int64_t elems = tensor_mb * (1 << 20) / 4;
    for (int64_t done = 0, k = 0; done < mb; done += tensor_mb, ++k) {
      exec::HostTensor t;
      t.Reshape(ir::DataType::kFloat32, {elems});
      float* p = t.data<float>();
      for (int64_t i = 0; i < elems; ++i) p[i] = static_cast<float>((i * 7 + k) % 1000) * 1e-3f;
      state.tensors.push_back({"param_" + std::to_string(k), std::move(t)});
    }
    const fs::path root = dir / ("size_" + std::to_string(mb));
    const std::string copy = (dir / "copy.bin").string();
    std::vector<double> save, cp, cp_sync;
    double bytes = 0;
    for (int r = 0; r <= reps; ++r) {  // rep 0 warms up
      checkpoint::CheckpointInfo info;
      info.step = r + 1;
      info.program_hash = "0000000000000000";
      const auto start = Clock::now();
      Status s = checkpoint::SaveCheckpoint(root, info, state, /*keep=*/1);
      const double t_save = Seconds(start);
      if (!s.ok()) {
        std::fprintf(stderr, "fleet_checkpoint_bench: %s\n", s.ToString().c_str());
        return 1;
      }
      const fs::path file = root / checkpoint::StepDirName(r + 1) / checkpoint::kStateFile;
      bytes = static_cast<double>(fs::file_size(file));
      const double t_cp = Timed("cp '" + file.string() + "' '" + copy + "'");
      fs::remove(copy);
      const double t_cp_sync =
          Timed("cp '" + file.string() + "' '" + copy + "' && sync '" + copy + "'");
      fs::remove(copy);
      if (r == 0) continue;
      save.push_back(t_save);
      cp.push_back(t_cp);
      cp_sync.push_back(t_cp_sync);
    }
    const double gb = bytes / 1e9;
    std::printf("%8lld %10.3f %10.3f %12.3f %10.2f %10.1f\n", static_cast<long long>(mb),
                gb / Median(save), gb / Median(cp), gb / Median(cp_sync),
                Median(cp_sync) / Median(save), Median(save) * 1e3);
    std::fflush(stdout);
    fs::remove_all(root);
  }
  if (made) fs::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace fleet::bench

int main(int argc, char** argv) { return fleet::bench::Main(argc, argv); }
