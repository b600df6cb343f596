// Reader throughput of the text datasets: samples/s that MultiSlot and CSV reading delivers for
// the quick-start MLP's feeds (x: 32 floats, y: one int64), for each dataset kind.
//
//   fleet_reader_bench [--samples N] [--files F] [--batch B] [--reps R]
//   fleet_reader_bench --ctr DIR [--batch B] [--reps R]
//
// Writes its own files into a temporary directory, then for each case and repetition prints
// one JSON line {"case": ..., "samples_per_s": ...}. With --ctr it reads instead the files
// DIR/part-*.txt that examples/ctr_dnn/make_data.py wrote, as CTR-DNN's feeds: 13 dense floats,
// 26 variable-length id slots (sequence feeds) and the label; its cases are named "ctr ...".
// Cases:
//   FORMAT queue          Next(B) on a streaming dataset over the files: parse rate
//   FORMAT memory load    MakeDataset of a memory dataset: reading and parsing every line
//   FORMAT memory serve   Next(B) on the loaded memory dataset (shuffled): batch assembly only
//   FORMAT queue+prefetch the streaming dataset behind a 4-batch reader thread
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/prefetch.h"

namespace fs = std::filesystem;
using fleet::data::DatasetOptions;
using fleet::data::DataSource;
using Clock = std::chrono::steady_clock;

namespace {

const std::vector<fleet::data::FeedSpec> kFeeds = {
    {"x", fleet::ir::DataType::kFloat32, {-1, 32}}, {"y", fleet::ir::DataType::kInt64, {-1, 1}}};

// F files of N / F samples each, in both formats.
void WriteFiles(const fs::path& dir, int64_t samples, int64_t files) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t f = 0; f < files; ++f) {
    std::ofstream ms(dir / ("part-" + std::to_string(f) + ".txt"));
    std::ofstream csv(dir / ("part-" + std::to_string(f) + ".csv"));
    char buf[32];
    for (int64_t i = 0; i < samples / files; ++i) {
      std::string ms_line = "32", csv_line;
      float s = 0;
      for (int k = 0; k < 32; ++k) {
        const float v = u(rng);
        s += k < 2 ? v : 0;
        std::snprintf(buf, sizeof buf, "%.6f", v);
        ms_line += std::string(" ") + buf;
        csv_line += std::string(k ? "," : "") + buf;
      }
      const char* label = s > 0 ? "1" : "0";
      ms << ms_line << " 1 " << label << "\n";
      csv << csv_line << "," << label << "\n";
    }
  }
}

DatasetOptions Options(const fs::path& dir, const std::string& format, int64_t files,
                       bool in_memory) {
  DatasetOptions o;
  o.format = format;
  for (int64_t f = 0; f < files; ++f) {
    o.files.push_back(dir / ("part-" + std::to_string(f) + (format == "csv" ? ".csv" : ".txt")));
  }
  o.slots = {"x", "y"};
  o.in_memory = in_memory;
  o.shuffle = in_memory;
  return o;
}

// CTR-DNN's feeds and the files of `dir`, in examples/ctr_dnn/fleet.toml's slot order.
std::vector<fleet::data::FeedSpec> CtrFeeds() {
  std::vector<fleet::data::FeedSpec> feeds = {{"dense_input", fleet::ir::DataType::kFloat32,
                                               {-1, 13}}};
  for (int s = 1; s <= 26; ++s) {
    feeds.push_back({"C" + std::to_string(s), fleet::ir::DataType::kInt64, {-1, 1}, 1});
  }
  feeds.push_back({"label", fleet::ir::DataType::kInt64, {-1, 1}});
  return feeds;
}

DatasetOptions CtrOptions(const fs::path& dir, bool in_memory) {
  DatasetOptions o;
  o.format = "multislot";
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("part-") && name.ends_with(".txt")) o.files.push_back(e.path());
  }
  std::sort(o.files.begin(), o.files.end());
  for (const auto& f : CtrFeeds()) o.slots.push_back(f.name);
  o.in_memory = in_memory;
  o.shuffle = in_memory;
  return o;
}

int64_t CountLines(const std::vector<fs::path>& files) {
  int64_t n = 0;
  for (const fs::path& f : files) {
    std::ifstream in(f);
    std::string line;
    while (std::getline(in, line)) n += line.empty() ? 0 : 1;
  }
  return n;
}

double Secs(Clock::time_point a) {
  return std::chrono::duration<double>(Clock::now() - a).count();
}

// Samples/s of `samples` samples drawn in batches of `batch`.
double Drain(DataSource& s, int64_t samples, int64_t batch) {
  fleet::exec::FeedMap feeds;
  const auto t0 = Clock::now();
  for (int64_t n = 0; n < samples; n += batch) {
    fleet::Status st = s.Next(batch, feeds);
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      std::exit(1);
    }
  }
  return static_cast<double>(samples) / Secs(t0);
}

void Report(const std::string& name, double rate) {
  std::printf("{\"case\": \"%s\", \"samples_per_s\": %.1f}\n", name.c_str(), rate);
  std::fflush(stdout);
}

// The --ctr cases: each drains one epoch of the files (a whole number of batches).
int RunCtr(const fs::path& dir, int64_t batch, int64_t reps) {
  const std::vector<fleet::data::FeedSpec> feeds = CtrFeeds();
  const int64_t samples = CountLines(CtrOptions(dir, false).files) / batch * batch;
  if (samples == 0) {
    std::fprintf(stderr, "no batch of %lld lines in %s/part-*.txt\n",
                 static_cast<long long>(batch), dir.c_str());
    return 1;
  }
  for (int64_t r = 0; r < reps; ++r) {
    {
      auto q = fleet::data::MakeDataset(feeds, CtrOptions(dir, false));
      if (!q.ok()) {
        std::fprintf(stderr, "%s\n", q.status().ToString().c_str());
        return 1;
      }
      Report("ctr queue", Drain(**q, samples, batch));
    }
    {
      auto q = fleet::data::MakeDataset(feeds, CtrOptions(dir, false));
      auto p = fleet::data::MakePrefetchSource(std::move(*q), {4});
      Report("ctr queue+prefetch", Drain(*p, samples, batch));
    }
    const auto t0 = Clock::now();
    auto m = fleet::data::MakeDataset(feeds, CtrOptions(dir, true));
    if (!m.ok()) {
      std::fprintf(stderr, "%s\n", m.status().ToString().c_str());
      return 1;
    }
    Report("ctr memory load", static_cast<double>(samples) / Secs(t0));
    Report("ctr memory serve", Drain(**m, samples, batch));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t samples = 200000, files = 4, batch = 128, reps = 5;
  fs::path ctr;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int64_t v = std::atoll(argv[i + 1]);
    if (flag == "--ctr") ctr = argv[i + 1];
    else if (flag == "--samples") samples = v;
    else if (flag == "--files") files = v;
    else if (flag == "--batch") batch = v;
    else if (flag == "--reps") reps = v;
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (!ctr.empty()) return RunCtr(ctr, batch, reps);
  char tmpl[] = "/tmp/fleet_reader_bench_XXXXXX";
  const fs::path dir = ::mkdtemp(tmpl);
  WriteFiles(dir, samples, files);
  samples = samples / files * files;
  for (int64_t r = 0; r < reps; ++r) {
    for (const std::string format : {"multislot", "csv"}) {
      {
        auto q = fleet::data::MakeDataset(kFeeds, Options(dir, format, files, false));
        Report(format + " queue", Drain(**q, samples, batch));
      }
      {
        auto q = fleet::data::MakeDataset(kFeeds, Options(dir, format, files, false));
        auto p = fleet::data::MakePrefetchSource(std::move(*q), {4});
        Report(format + " queue+prefetch", Drain(*p, samples, batch));
      }
      const auto t0 = Clock::now();
      auto m = fleet::data::MakeDataset(kFeeds, Options(dir, format, files, true));
      if (!m.ok()) {
        std::fprintf(stderr, "%s\n", m.status().ToString().c_str());
        return 1;
      }
      Report(format + " memory load", static_cast<double>(samples) / Secs(t0));
      Report(format + " memory serve", Drain(**m, samples, batch));
    }
  }
  fs::remove_all(dir);
  return 0;
}
