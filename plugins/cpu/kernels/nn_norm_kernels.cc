// batch_norm and layer_norm kernels (+ grads), float32 and float64, as per-channel / per-row
// loops (parallel over channels or rows; each inner loop is contiguous and vectorises), and
// float32 layer_norm on oneDNN.
//
// batch_norm views X as [N, C, S] (S = product of the dims after C; 1 for 2-D input).
// Statistics accumulate in double so float32 results do not drift with large N*S.
#include <climits>
#include <cmath>
#include <memory>

#include "kernels/math_util.h"
#include "kernels/nn_kernels.h"

namespace fleet_cpu {
namespace {

struct NCS {
  int64_t n = 1, c = 1, s = 1;
};

FleetStatus* ViewNCS(const FleetKernelContext* kc, const FleetTensor* x, NCS* v) {
  if (FleetStatus* st = Require(kc, x, "X")) return st;
  if (x->ndim < 2) return InvalidArgument(OpName(kc) + ": X must be at least 2-D");
  v->n = x->dims[0];
  v->c = x->dims[1];
  v->s = 1;
  for (int32_t i = 2; i < x->ndim; ++i) v->s *= x->dims[i];
  return nullptr;
}

bool GlobalStats(const FleetKernelContext* kc) {
  return BoolAttr(kc, "is_test") || BoolAttr(kc, "use_global_stats");
}

template <typename T>
FleetStatus* BatchNorm(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    NCS v;
    const FleetTensor* xt = Input(kc, "X");
    if (FleetStatus* st = ViewNCS(kc, xt, &v)) return st;
    for (const char* slot : {"Scale", "Bias", "Mean", "Variance"}) {
      const FleetTensor* t = Input(kc, slot);
      if (FleetStatus* st = ExpectRank(kc, t, slot, 1)) return st;
      if (t->dims[0] != v.c) return InvalidArgument(OpName(kc) + ": " + slot + " size != C");
    }
    const T* x = Data<T>(xt);
    const T* scale = Data<T>(Input(kc, "Scale"));
    const T* bias = Data<T>(Input(kc, "Bias"));
    const T* mean_in = Data<T>(Input(kc, "Mean"));
    const T* var_in = Data<T>(Input(kc, "Variance"));
    T* y = Data<T>(Output(kc, "Y"));
    const FleetTensor* mean_out = Output(kc, "MeanOut");
    const FleetTensor* var_out = Output(kc, "VarianceOut");
    const FleetTensor* saved_mean = Output(kc, "SavedMean");
    const FleetTensor* saved_var = Output(kc, "SavedVariance");
    const double eps = FloatAttr(kc, "epsilon", 1e-5);
    const double momentum = FloatAttr(kc, "momentum", 0.9);
    const bool global = GlobalStats(kc);
    const double count = static_cast<double>(v.n * v.s);
    ParallelForEach(kc, v.c, v.n * v.s, [&](int64_t c) {
      double mean = mean_in[c], var = var_in[c];
      if (!global) {
        double sum = 0;
        for (int64_t n = 0; n < v.n; ++n) {
          const T* xs = x + (n * v.c + c) * v.s;
          for (int64_t k = 0; k < v.s; ++k) sum += xs[k];
        }
        mean = count > 0 ? sum / count : 0.0;
        double sq = 0;
        for (int64_t n = 0; n < v.n; ++n) {
          const T* xs = x + (n * v.c + c) * v.s;
          for (int64_t k = 0; k < v.s; ++k) sq += (xs[k] - mean) * (xs[k] - mean);
        }
        var = count > 0 ? sq / count : 0.0;
      }
      const double inv_std = 1.0 / std::sqrt(var + eps);
      const T a = static_cast<T>(scale[c] * inv_std);
      const T b = static_cast<T>(bias[c] - mean * scale[c] * inv_std);
      for (int64_t n = 0; n < v.n; ++n) {
        const T* xs = x + (n * v.c + c) * v.s;
        T* ys = y + (n * v.c + c) * v.s;
        for (int64_t k = 0; k < v.s; ++k) ys[k] = xs[k] * a + b;
      }
      // MeanOut/VarianceOut may be the very buffers of Mean/Variance: each is read above,
      // before its element is written here.
      const double old_mean = mean_in[c], old_var = var_in[c];
      if (mean_out != nullptr) {
        Data<T>(mean_out)[c] =
            static_cast<T>(global ? old_mean : old_mean * momentum + mean * (1 - momentum));
      }
      if (var_out != nullptr) {
        Data<T>(var_out)[c] =
            static_cast<T>(global ? old_var : old_var * momentum + var * (1 - momentum));
      }
      if (saved_mean != nullptr) Data<T>(saved_mean)[c] = static_cast<T>(mean);
      if (saved_var != nullptr) Data<T>(saved_var)[c] = static_cast<T>(inv_std);
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* BatchNormGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    NCS v;
    const FleetTensor* xt = Input(kc, "X");
    if (FleetStatus* st = ViewNCS(kc, xt, &v)) return st;
    const T* x = Data<T>(xt);
    const T* dy = Data<T>(Input(kc, "Y@GRAD"));
    const T* scale = Data<T>(Input(kc, "Scale"));
    const bool global = GlobalStats(kc);
    // With global statistics Y depends on X only through the running mean/variance.
    const FleetTensor* mean_t = Input(kc, "SavedMean");
    const FleetTensor* var_t = Input(kc, "SavedVariance");
    const bool from_running = global && Input(kc, "Mean") && Input(kc, "Variance");
    if (from_running) {
      mean_t = Input(kc, "Mean");
      var_t = Input(kc, "Variance");
    }
    if (FleetStatus* st = Require(kc, mean_t, "SavedMean")) return st;
    if (FleetStatus* st = Require(kc, var_t, "SavedVariance")) return st;
    const T* mean = Data<T>(mean_t);
    const T* var = Data<T>(var_t);
    const double eps = FloatAttr(kc, "epsilon", 1e-5);
    const FleetTensor* dxt = Output(kc, "X@GRAD");
    const FleetTensor* dscale_t = Output(kc, "Scale@GRAD");
    const FleetTensor* dbias_t = Output(kc, "Bias@GRAD");
    const double count = static_cast<double>(v.n * v.s);
    ParallelForEach(kc, v.c, v.n * v.s, [&](int64_t c) {
      const double m = mean[c];
      const double inv_std = from_running ? 1.0 / std::sqrt(var[c] + eps) : double(var[c]);
      double dbias = 0, dscale = 0;
      for (int64_t n = 0; n < v.n; ++n) {
        const T* xs = x + (n * v.c + c) * v.s;
        const T* ds = dy + (n * v.c + c) * v.s;
        for (int64_t k = 0; k < v.s; ++k) {
          dbias += ds[k];
          dscale += ds[k] * (xs[k] - m) * inv_std;
        }
      }
      if (dscale_t != nullptr) Data<T>(dscale_t)[c] = static_cast<T>(dscale);
      if (dbias_t != nullptr) Data<T>(dbias_t)[c] = static_cast<T>(dbias);
      if (dxt == nullptr) return;
      T* dx = Data<T>(dxt);
      const double k0 = scale[c] * inv_std;
      for (int64_t n = 0; n < v.n; ++n) {
        const T* xs = x + (n * v.c + c) * v.s;
        const T* ds = dy + (n * v.c + c) * v.s;
        T* dxs = dx + (n * v.c + c) * v.s;
        for (int64_t k = 0; k < v.s; ++k) {
          if (global) {
            dxs[k] = static_cast<T>(k0 * ds[k]);
          } else {
            const double xhat = (xs[k] - m) * inv_std;
            dxs[k] = static_cast<T>(k0 * (ds[k] - dbias / count - xhat * dscale / count));
          }
        }
      }
    });
    return nullptr;
  });
}

struct Rows {
  int64_t left = 1, right = 1;
};

FleetStatus* ViewRows(const FleetKernelContext* kc, const FleetTensor* x, Rows* r) {
  if (FleetStatus* st = Require(kc, x, "X")) return st;
  const int64_t axis = IntAttr(kc, "begin_norm_axis", 1);
  if (axis < 1 || axis >= x->ndim) {
    return InvalidArgument(OpName(kc) + ": begin_norm_axis out of range");
  }
  for (int64_t i = 0; i < x->ndim; ++i) (i < axis ? r->left : r->right) *= x->dims[i];
  return nullptr;
}

// ---- layer_norm on oneDNN (float32) ----------------------------------------------------------

// float32 layer_norm runs on oneDNN's layer_normalization primitives (vectorised for the CPU
// they run on), made at prepare; float64, and shapes oneDNN's int sizes cannot take, run the
// loops below. Outputs the op does not ask for (Mean / Variance in the forward pass, X@GRAD,
// Scale@GRAD, Bias@GRAD in the backward) go to scratch, since the primitive writes them all.
struct LayerNormState {
  math::DnnlCall call;
  Rows rows;
  bool scale = false, shift = false;  // Scale / Bias inputs present
  bool weights_grad = false;          // backward: the pass computes Scale / Bias gradients
};

void ReleaseLayerNorm(void*, void* state) { delete static_cast<LayerNormState*>(state); }

bool DnnlSized(const Rows& r) {
  return r.left > 0 && r.right > 0 && r.left <= INT32_MAX && r.right <= INT32_MAX &&
         r.left * r.right <= INT32_MAX;
}

template <bool kGrad>
FleetStatus* LayerNormPrepare(void*, const FleetKernelContext* kc, void** state,
                              size_t* scratch_bytes) {
  UseThreads(kc);  // oneDNN sizes a primitive's thread team when it is created
  return Guard(kc, [&]() -> FleetStatus* {
    using dnnl::memory;
    using dnnl::normalization_flags;
    auto st = std::make_unique<LayerNormState>();
    if (FleetStatus* e = ViewRows(kc, Input(kc, "X"), &st->rows)) return e;
    if (!DnnlSized(st->rows)) {
      *state = nullptr;  // the loops
      return nullptr;
    }
    const Rows& r = st->rows;
    st->scale = Input(kc, "Scale") != nullptr;
    st->shift = Input(kc, "Bias") != nullptr;
    auto flags = normalization_flags::none;
    if (st->scale) flags |= normalization_flags::use_scale;
    if (st->shift) flags |= normalization_flags::use_shift;
    const float eps = static_cast<float>(FloatAttr(kc, "epsilon", 1e-5));
    const memory::desc data({r.left, r.right}, memory::data_type::f32, memory::format_tag::ab);
    const memory::desc stat({r.left}, memory::data_type::f32, memory::format_tag::a);
    const memory::desc chan({r.right}, memory::data_type::f32, memory::format_tag::a);
    const dnnl::layer_normalization_forward::primitive_desc fwd(
        {dnnl::prop_kind::forward_training, data, stat, eps, flags}, DnnlEngine());
    size_t scratch = 0;
    if (!kGrad) {
      st->call.prim = dnnl::layer_normalization_forward(fwd);
      st->call.Bind(DNNL_ARG_SRC, data);
      st->call.Bind(DNNL_ARG_DST, data);
      st->call.Bind(DNNL_ARG_MEAN, stat);
      st->call.Bind(DNNL_ARG_VARIANCE, stat);
      if (Output(kc, "Mean") == nullptr) scratch += r.left;
      if (Output(kc, "Variance") == nullptr) scratch += r.left;
    } else {
      // oneDNN computes the data gradient alone only without scale and shift; with either, the
      // full backward pass runs and an unrequested Scale@GRAD / Bias@GRAD goes to scratch.
      st->weights_grad = st->scale || st->shift;
      const auto prop =
          st->weights_grad ? dnnl::prop_kind::backward : dnnl::prop_kind::backward_data;
      const dnnl::layer_normalization_backward::primitive_desc bwd(
          {prop, data, data, stat, eps, flags}, DnnlEngine(), fwd);
      st->call.prim = dnnl::layer_normalization_backward(bwd);
      st->call.Bind(DNNL_ARG_SRC, data);
      st->call.Bind(DNNL_ARG_MEAN, stat);
      st->call.Bind(DNNL_ARG_VARIANCE, stat);
      st->call.Bind(DNNL_ARG_DIFF_DST, data);
      st->call.Bind(DNNL_ARG_DIFF_SRC, data);
      if (Output(kc, "X@GRAD") == nullptr) scratch += r.left * r.right;
      if (st->weights_grad) {
        if (st->scale) st->call.Bind(DNNL_ARG_DIFF_SCALE, chan);
        if (st->shift) st->call.Bind(DNNL_ARG_DIFF_SHIFT, chan);
        scratch += 2 * r.right;
      }
    }
    // The backward primitive takes the shift too, though the gradient does not depend on it.
    if (st->scale) st->call.Bind(DNNL_ARG_SCALE, chan);
    if (st->shift) st->call.Bind(DNNL_ARG_SHIFT, chan);
    *scratch_bytes = static_cast<size_t>(scratch) * sizeof(float);
    *state = st.release();
    return nullptr;
  });
}

// Where an output goes: its tensor, or the next `n` floats of scratch.
float* OrScratch(const FleetTensor* t, float*& scratch, int64_t n) {
  if (t != nullptr) return Data<float>(t);
  float* p = scratch;
  scratch += n;
  return p;
}

FleetStatus* LayerNormDnnl(const FleetKernelContext* kc, LayerNormState& st) {
  float* scratch = static_cast<float*>(kc->scratch);
  const Rows& r = st.rows;
  st.call.Set(DNNL_ARG_SRC, Input(kc, "X")->data);
  st.call.Set(DNNL_ARG_DST, Output(kc, "Y")->data);
  st.call.Set(DNNL_ARG_MEAN, OrScratch(Output(kc, "Mean"), scratch, r.left));
  st.call.Set(DNNL_ARG_VARIANCE, OrScratch(Output(kc, "Variance"), scratch, r.left));
  if (st.scale) st.call.Set(DNNL_ARG_SCALE, Input(kc, "Scale")->data);
  if (st.shift) st.call.Set(DNNL_ARG_SHIFT, Input(kc, "Bias")->data);
  st.call.Run();
  return nullptr;
}

FleetStatus* LayerNormGradDnnl(const FleetKernelContext* kc, LayerNormState& st) {
  const FleetTensor* dx = Output(kc, "X@GRAD");
  if (dx == nullptr && Output(kc, "Scale@GRAD") == nullptr && Output(kc, "Bias@GRAD") == nullptr) {
    return nullptr;
  }
  if (FleetStatus* e = Require(kc, Input(kc, "Mean"), "Mean")) return e;
  if (FleetStatus* e = Require(kc, Input(kc, "Variance"), "Variance")) return e;
  if (FleetStatus* e = Require(kc, Input(kc, "Y@GRAD"), "Y@GRAD")) return e;
  float* scratch = static_cast<float*>(kc->scratch);
  const Rows& r = st.rows;
  st.call.Set(DNNL_ARG_SRC, Input(kc, "X")->data);
  st.call.Set(DNNL_ARG_MEAN, Input(kc, "Mean")->data);
  st.call.Set(DNNL_ARG_VARIANCE, Input(kc, "Variance")->data);
  st.call.Set(DNNL_ARG_DIFF_DST, Input(kc, "Y@GRAD")->data);
  st.call.Set(DNNL_ARG_DIFF_SRC, OrScratch(dx, scratch, r.left * r.right));
  if (st.scale) st.call.Set(DNNL_ARG_SCALE, Input(kc, "Scale")->data);
  if (st.shift) st.call.Set(DNNL_ARG_SHIFT, Input(kc, "Bias")->data);
  if (st.weights_grad) {
    if (st.scale) {
      st.call.Set(DNNL_ARG_DIFF_SCALE, OrScratch(Output(kc, "Scale@GRAD"), scratch, r.right));
    }
    if (st.shift) {
      st.call.Set(DNNL_ARG_DIFF_SHIFT, OrScratch(Output(kc, "Bias@GRAD"), scratch, r.right));
    }
  }
  st.call.Run();
  return nullptr;
}

// ---- layer_norm loops (float64, and float32 shapes oneDNN does not take) ----------------------

template <typename T>
FleetStatus* LayerNorm(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (state != nullptr) return LayerNormDnnl(kc, *static_cast<LayerNormState*>(state));
    Rows r;
    const FleetTensor* xt = Input(kc, "X");
    if (FleetStatus* st = ViewRows(kc, xt, &r)) return st;
    const T* x = Data<T>(xt);
    const T* scale = Input(kc, "Scale") ? Data<T>(Input(kc, "Scale")) : nullptr;
    const T* bias = Input(kc, "Bias") ? Data<T>(Input(kc, "Bias")) : nullptr;
    T* y = Data<T>(Output(kc, "Y"));
    T* mean_out = Output(kc, "Mean") ? Data<T>(Output(kc, "Mean")) : nullptr;
    T* var_out = Output(kc, "Variance") ? Data<T>(Output(kc, "Variance")) : nullptr;
    const double eps = FloatAttr(kc, "epsilon", 1e-5);
    ParallelForEach(kc, r.left, r.right, [&](int64_t i) {
      const T* xs = x + i * r.right;
      T* ys = y + i * r.right;
      double sum = 0;
      for (int64_t j = 0; j < r.right; ++j) sum += xs[j];
      const double mean = sum / static_cast<double>(r.right);
      double sq = 0;
      for (int64_t j = 0; j < r.right; ++j) sq += (xs[j] - mean) * (xs[j] - mean);
      const double var = sq / static_cast<double>(r.right);
      const double inv_std = 1.0 / std::sqrt(var + eps);
      for (int64_t j = 0; j < r.right; ++j) {
        double v = (xs[j] - mean) * inv_std;
        if (scale != nullptr) v *= scale[j];
        if (bias != nullptr) v += bias[j];
        ys[j] = static_cast<T>(v);
      }
      if (mean_out != nullptr) mean_out[i] = static_cast<T>(mean);
      if (var_out != nullptr) var_out[i] = static_cast<T>(var);
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* LayerNormGrad(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (state != nullptr) return LayerNormGradDnnl(kc, *static_cast<LayerNormState*>(state));
    Rows r;
    const FleetTensor* xt = Input(kc, "X");
    if (FleetStatus* st = ViewRows(kc, xt, &r)) return st;
    if (FleetStatus* st = Require(kc, Input(kc, "Mean"), "Mean")) return st;
    if (FleetStatus* st = Require(kc, Input(kc, "Variance"), "Variance")) return st;
    const T* x = Data<T>(xt);
    const T* dy = Data<T>(Input(kc, "Y@GRAD"));
    const T* scale = Input(kc, "Scale") ? Data<T>(Input(kc, "Scale")) : nullptr;
    const T* mean = Data<T>(Input(kc, "Mean"));
    const T* var = Data<T>(Input(kc, "Variance"));
    const double eps = FloatAttr(kc, "epsilon", 1e-5);
    const FleetTensor* dxt = Output(kc, "X@GRAD");
    const FleetTensor* dscale_t = Output(kc, "Scale@GRAD");
    const FleetTensor* dbias_t = Output(kc, "Bias@GRAD");
    const double width = static_cast<double>(r.right);
    if (dxt != nullptr) {
      T* dx = Data<T>(dxt);
      ParallelForEach(kc, r.left, r.right, [&](int64_t i) {
        const T* xs = x + i * r.right;
        const T* ds = dy + i * r.right;
        const double inv_std = 1.0 / std::sqrt(var[i] + eps);
        // g = dY * scale; dX = inv_std * (g - mean(g) - xhat * mean(g * xhat)).
        double sum_g = 0, sum_gx = 0;
        for (int64_t j = 0; j < r.right; ++j) {
          const double g = scale != nullptr ? ds[j] * scale[j] : ds[j];
          sum_g += g;
          sum_gx += g * (xs[j] - mean[i]) * inv_std;
        }
        for (int64_t j = 0; j < r.right; ++j) {
          const double g = scale != nullptr ? ds[j] * scale[j] : ds[j];
          const double xhat = (xs[j] - mean[i]) * inv_std;
          dx[i * r.right + j] =
              static_cast<T>(inv_std * (g - sum_g / width - xhat * sum_gx / width));
        }
      });
    }
    if (dscale_t != nullptr || dbias_t != nullptr) {
      T* dscale = dscale_t ? Data<T>(dscale_t) : nullptr;
      T* dbias = dbias_t ? Data<T>(dbias_t) : nullptr;
      ParallelForEach(kc, r.right, r.left, [&](int64_t j) {
        double ds_acc = 0, db_acc = 0;
        for (int64_t i = 0; i < r.left; ++i) {
          const double d = dy[i * r.right + j];
          db_acc += d;
          ds_acc += d * (x[i * r.right + j] - mean[i]) / std::sqrt(var[i] + eps);
        }
        if (dscale != nullptr) dscale[j] = static_cast<T>(ds_acc);
        if (dbias != nullptr) dbias[j] = static_cast<T>(db_acc);
      });
    }
    return nullptr;
  });
}

}  // namespace

void AddNnNormKernels(KernelList& list) {
  Add(list, "batch_norm", FLEET_DTYPE_FLOAT32, BatchNorm<float>);
  Add(list, "batch_norm", FLEET_DTYPE_FLOAT64, BatchNorm<double>);
  Add(list, "batch_norm_grad", FLEET_DTYPE_FLOAT32, BatchNormGrad<float>);
  Add(list, "batch_norm_grad", FLEET_DTYPE_FLOAT64, BatchNormGrad<double>);
  Add(list, "layer_norm", FLEET_DTYPE_FLOAT32, LayerNorm<float>, LayerNormPrepare<false>,
      ReleaseLayerNorm);
  Add(list, "layer_norm", FLEET_DTYPE_FLOAT64, LayerNorm<double>);
  Add(list, "layer_norm_grad", FLEET_DTYPE_FLOAT32, LayerNormGrad<float>,
      LayerNormPrepare<true>, ReleaseLayerNorm);
  Add(list, "layer_norm_grad", FLEET_DTYPE_FLOAT64, LayerNormGrad<double>);
}

}  // namespace fleet_cpu
