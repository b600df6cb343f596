// The synthetic source: inputs from a seeded normal generator, labels from a fixed random
// teacher of the same input width, so a model trained on it has something real to learn and
// its loss falls.
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>

#include "data/source.h"
#include "support/host_memory.h"

namespace fleet::data {
namespace {

constexpr int64_t kTeacherHidden = 16;

class SyntheticSource : public DataSource {
 public:
  SyntheticSource(std::vector<FeedSpec> feeds, int label, int64_t classes, double noise,
                  uint64_t seed)
      : feeds_(std::move(feeds)), label_(label), classes_(classes), noise_(noise), rng_(seed) {
    origin_.SetPlaces(std::make_shared<const std::vector<std::string>>(
                          std::vector<std::string>{"synthetic data (seed " +
                                                   std::to_string(seed) + ")"}),
                      OriginUnit::kSample);
    for (size_t i = 0; i < feeds_.size(); ++i) {
      if (static_cast<int>(i) != label_) in_width_ += SampleNumel(feeds_[i]);
      std::vector<int64_t> dims = SampleDims(feeds_[i]);
      dims.insert(dims.begin(), 0);
      batch_dims_.push_back(std::move(dims));
    }
    // The teacher is drawn from its own generator, so it depends on the seed only.
    std::mt19937_64 teacher_rng(seed ^ 0x7EAC4E5ull);
    std::normal_distribution<double> normal(0.0, 1.0);
    const double in_scale = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(in_width_, 1)));
    if (label_ >= 0) {
      out_width_ = classes_ > 0 ? classes_ : SampleNumel(feeds_[static_cast<size_t>(label_)]);
      const int64_t first = classes_ > 0 ? kTeacherHidden : out_width_;
      w1_.resize(static_cast<size_t>(in_width_ * first));
      for (double& w : w1_) w = normal(teacher_rng) * in_scale * (classes_ > 0 ? 2.0 : 1.0);
      b1_.resize(static_cast<size_t>(first));
      for (double& b : b1_) b = 0.1 * normal(teacher_rng);
      if (classes_ > 0) {
        const double h_scale = 1.0 / std::sqrt(static_cast<double>(kTeacherHidden));
        w2_.resize(static_cast<size_t>(kTeacherHidden * classes_));
        for (double& w : w2_) w = normal(teacher_rng) * h_scale * 2.0;
        b2_.assign(static_cast<size_t>(classes_), 0.0);
        hidden_.resize(static_cast<size_t>(kTeacherHidden));
      }
      logits_.resize(static_cast<size_t>(out_width_));
      sample_.resize(static_cast<size_t>(in_width_));
    }
  }

  Status Next(int64_t batch_size, exec::FeedMap& feeds) override {
    if (batch_size <= 0) return InvalidArgument("batch size must be > 0");
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<exec::HostTensor*>& tensors = tensors_;
    tensors.resize(feeds_.size());
    for (size_t i = 0; i < feeds_.size(); ++i) {
      batch_dims_[i][0] = batch_size;
      tensors[i] = &feeds[feeds_[i].name];
      tensors[i]->Reshape(feeds_[i].dtype, batch_dims_[i]);
    }
    for (int64_t r = 0; r < batch_size; ++r) {
      int64_t at = 0;
      for (size_t i = 0; i < feeds_.size(); ++i) {
        if (static_cast<int>(i) == label_) continue;
        const int64_t n = SampleNumel(feeds_[i]);
        for (int64_t k = 0; k < n; ++k) {
          double v = normal(rng_);
          if (!sample_.empty()) sample_[static_cast<size_t>(at + k)] = v;
          Store(*tensors[i], feeds_[i].dtype, r * n + k, v);
        }
        at += n;
      }
      if (label_ >= 0) Label(*tensors[static_cast<size_t>(label_)], r, normal);
    }
    origin_.Begin();
    origin_.Add(0, drawn_, batch_size);
    drawn_ += batch_size;
    return OkStatus();
  }

  int64_t num_samples() const override { return 0; }

 private:
  static void Store(exec::HostTensor& t, ir::DataType dtype, int64_t i, double v) {
    if (dtype == ir::DataType::kFloat64) {
      t.data<double>()[i] = v;
    } else {
      t.data<float>()[i] = static_cast<float>(v);
    }
  }

  void Label(exec::HostTensor& t, int64_t row, std::normal_distribution<double>& normal) {
    const int64_t first = static_cast<int64_t>(b1_.size());
    // First layer: x W1 + b1 (the hidden layer of a classifier, the output of a regressor).
    std::vector<double>& first_out = classes_ > 0 ? hidden_ : logits_;
    for (int64_t j = 0; j < first; ++j) {
      double s = b1_[static_cast<size_t>(j)];
      for (int64_t k = 0; k < in_width_; ++k) {
        s += sample_[static_cast<size_t>(k)] * w1_[static_cast<size_t>(k * first + j)];
      }
      first_out[static_cast<size_t>(j)] = classes_ > 0 ? std::tanh(s) : s;
    }
    if (classes_ == 0) {
      for (int64_t j = 0; j < out_width_; ++j) {
        Store(t, feeds_[static_cast<size_t>(label_)].dtype, row * out_width_ + j,
              logits_[static_cast<size_t>(j)] + noise_ * normal(rng_));
      }
      return;
    }
    int64_t best = 0;
    for (int64_t c = 0; c < classes_; ++c) {
      double s = b2_[static_cast<size_t>(c)];
      for (int64_t j = 0; j < kTeacherHidden; ++j) {
        s += hidden_[static_cast<size_t>(j)] * w2_[static_cast<size_t>(j * classes_ + c)];
      }
      logits_[static_cast<size_t>(c)] = s;
      if (s > logits_[static_cast<size_t>(best)]) best = c;
    }
    t.data<int64_t>()[row] = best;
  }

  std::vector<FeedSpec> feeds_;
  int label_;
  int64_t classes_;
  double noise_;
  std::mt19937_64 rng_;
  int64_t drawn_ = 0;  // samples generated so far
  int64_t in_width_ = 0;
  int64_t out_width_ = 0;
  std::vector<std::vector<int64_t>> batch_dims_;
  std::vector<exec::HostTensor*> tensors_;
  std::vector<double> w1_, b1_, w2_, b2_, hidden_, logits_, sample_;
};

// The teacher's weights and scratch are sized by the program (the inputs' width, the label's)
// and by the classes, which come from data.classes or the width of the prediction the label is
// compared with: counted without overflow and refused before allocating when they cannot fit.
Status CheckTeacherSize(const std::vector<FeedSpec>& feeds, int label, int64_t classes) {
  if (label < 0) return OkStatus();
  uint64_t in_width = 0;
  bool overflows = false;
  for (size_t i = 0; i < feeds.size(); ++i) {
    if (static_cast<int>(i) == label) continue;
    const FeedSpec& f = feeds[i];
    FLEET_ASSIGN_OR_RETURN(const size_t bytes, ir::TensorBytes(f.dtype, SampleDims(f)));
    overflows = overflows ||
                __builtin_add_overflow(in_width, bytes / ir::DataTypeSize(f.dtype), &in_width);
  }
  const FeedSpec& l = feeds[static_cast<size_t>(label)];
  FLEET_ASSIGN_OR_RETURN(const size_t label_bytes, ir::TensorBytes(l.dtype, SampleDims(l)));
  const uint64_t out = classes > 0 ? static_cast<uint64_t>(classes)
                                   : label_bytes / ir::DataTypeSize(l.dtype);
  const uint64_t first = classes > 0 ? kTeacherHidden : out;
  // w1, b1, w2, b2, hidden, logits and one sample, as doubles (the constructor's vectors).
  const uint64_t hidden = classes > 0 ? kTeacherHidden : 0;
  uint64_t doubles = 0;
  auto add = [&](uint64_t a, uint64_t b) {  // doubles += a * b
    uint64_t n = 0;
    overflows = overflows || __builtin_mul_overflow(a, b, &n) ||
                __builtin_add_overflow(doubles, n, &doubles);
  };
  add(in_width, first);  // w1
  add(first, 1);         // b1
  add(hidden, out);      // w2
  add(hidden > 0 ? out : 0, 1);  // b2
  add(hidden, 1);        // hidden
  add(out, 1);           // logits
  add(in_width, 1);      // sample
  uint64_t bytes = 0;
  overflows = overflows || __builtin_mul_overflow(doubles, uint64_t{sizeof(double)}, &bytes);
  const uint64_t limit = HostMemoryBytes();
  if (!overflows && bytes <= limit) return OkStatus();
  const std::string what = classes > 0
      ? "the int64 label '" + l.name + "' with " + std::to_string(classes) +
            " classes (data.classes, or the width of the prediction it is compared with)"
      : "the label '" + l.name + "' of " + std::to_string(out) + " values from " +
            std::to_string(in_width) + " inputs";
  return ResourceExhausted("synthetic data: the teacher network for " + what + " needs " +
                           (overflows ? std::string("more than 2^64 bytes") : BytesText(bytes)) +
                           ", more than the " + BytesText(limit) +
                           " of memory this process can use");
}

}  // namespace

StatusOr<std::unique_ptr<DataSource>> MakeSyntheticSource(const std::vector<FeedSpec>& feeds,
                                                          const SyntheticOptions& options) {
  FLEET_RETURN_IF_ERROR(RefuseSequenceFeeds(feeds, "synthetic data"));
  int label = -1;
  if (!options.label.empty()) {
    for (size_t i = 0; i < feeds.size(); ++i) {
      if (feeds[i].name == options.label) label = static_cast<int>(i);
    }
    if (label < 0) {
      return InvalidArgument("synthetic data: the label '" + options.label +
                             "' is not a feed of the program");
    }
  } else if (feeds.size() >= 2) {
    label = static_cast<int>(feeds.size()) - 1;
  }
  int64_t classes = 0;
  for (size_t i = 0; i < feeds.size(); ++i) {
    const FeedSpec& f = feeds[i];
    const bool is_float = f.dtype == ir::DataType::kFloat32 || f.dtype == ir::DataType::kFloat64;
    if (static_cast<int>(i) != label) {
      if (!is_float) {
        return InvalidArgument("synthetic data: input '" + f.name + "' is " +
                               std::string(ir::DataTypeName(f.dtype)) +
                               "; only float inputs can be generated (use a csv or npy source)");
      }
      continue;
    }
    if (f.dtype == ir::DataType::kInt64) {
      if (SampleNumel(f) != 1) {
        return InvalidArgument("synthetic data: the int64 label '" + f.name + "' is declared " +
                               ir::ShapeText(f.dims) + "; a class label has shape [-1, 1]");
      }
      if (options.classes < 2) {
        return InvalidArgument("synthetic data: the int64 label '" + f.name +
                               "' needs the number of classes (at least 2; set data.classes)");
      }
      classes = options.classes;
    } else if (!is_float) {
      return InvalidArgument("synthetic data: the label '" + f.name + "' is " +
                             std::string(ir::DataTypeName(f.dtype)) +
                             "; a label is int64 (classes) or float (regression)");
    }
  }
  FLEET_RETURN_IF_ERROR(CheckTeacherSize(feeds, label, classes));
  return std::unique_ptr<DataSource>(
      new SyntheticSource(feeds, label, classes, options.noise, options.seed));
}

}  // namespace fleet::data
