// Layers: each expands into the ops, parameters and initializers paddle.static.nn (Paddle 2.x,
// fluid.layers) produces, with the same names. See docs/program.md for every layer.
#include <array>
#include <algorithm>
#include <cctype>
#include <cmath>

#include "frontend/builtins.h"
#include "support/text.h"

namespace fleet::frontend {

Value VarValue(std::string name, Pos pos) {
  Value v;
  v.kind = Value::Kind::kVar;
  v.text = std::move(name);
  v.pos = pos;
  return v;
}

namespace {

using ir::MakeOp;

constexpr std::array<std::string_view, 22> kActivations{
    "relu",  "relu6",      "tanh",     "sigmoid",      "softmax",  "log_softmax",
    "gelu",  "leaky_relu", "elu",      "swish",        "silu",     "mish",
    "hard_swish", "hard_sigmoid", "softplus", "softsign", "exp", "log",
    "sqrt",  "abs",        "square",   "tanh_shrink"};

std::string ShapeText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// The layer's name: `name=` when given (Paddle uses it verbatim), else "<type>_<n>".
StatusOr<std::string> LayerName(State& s, const Args& a, std::string_view type) {
  FLEET_ASSIGN_OR_RETURN(std::string name, a.String("name", ""));
  return name.empty() ? s.builder.NewLayerName(type) : name;
}

StatusOr<const ir::Var*> VarOf(State& s, const Args& a, std::string_view arg,
                               const std::string& name) {
  const ir::Var* v = s.builder.FindVar(name);
  if (v == nullptr) return a.ErrorAt(arg, "variable '" + name + "' is not declared");
  return v;
}

bool HasOutputSlot(const State& s, std::string_view op, std::string_view slot) {
  const ops::OpSchema* schema = s.builder.Schema(op);
  return schema != nullptr && schema->FindOutput(slot) != nullptr;
}

// Appends the `act` activation (if any) after `x`; returns the var the layer returns.
StatusOr<std::string> ApplyAct(State& s, const Args& a, const std::string& layer,
                               const std::string& x) {
  FLEET_ASSIGN_OR_RETURN(std::string act, a.String("act", ""));
  if (act.empty()) return x;
  bool known = false;
  for (auto k : kActivations) known = known || k == act;
  const ops::OpSchema* schema = s.builder.Schema(act);
  if (!known || schema == nullptr || !schema->FindInput("X") || !schema->FindOutput("Out")) {
    std::vector<std::string> names(kActivations.begin(), kActivations.end());
    std::string guess = ClosestMatch(act, names);
    return a.ErrorAt("act", "unknown activation '" + act + "'" +
                                (guess.empty() ? "" : " (did you mean '" + guess + "'?)"));
  }
  std::string out = s.builder.NewTmp(layer);
  FLEET_RETURN_IF_ERROR(a.AtCall(s.builder.AppendOp(MakeOp(act, {{"X", {x}}}, {{"Out", {out}}}))));
  return out;
}

// Appends a bias parameter of `shape` added to `x` along `axis`, unless bias_attr=False.
StatusOr<std::string> ApplyBias(State& s, const Args& a, const std::string& layer,
                                const std::string& x, std::vector<int64_t> shape, int64_t axis,
                                ir::DataType dtype) {
  FLEET_ASSIGN_OR_RETURN(ParamAttrSpec battr, ParamAttrArg(a, "bias_attr"));
  if (battr.disabled) return x;
  FLEET_ASSIGN_OR_RETURN(std::string b, a.AtCall(s.builder.CreateParameter(
                                            layer, true, shape, dtype, battr, InitSpec{})));
  std::string out = s.builder.NewTmp(layer);
  FLEET_RETURN_IF_ERROR(a.AtCall(s.builder.AppendOp(
      MakeOp("elementwise_add", {{"X", {x}}, {"Y", {b}}}, {{"Out", {out}}},
             {{"axis", static_cast<int32_t>(axis)}}))));
  return out;
}

InitSpec Xavier() {
  InitSpec i;
  i.kind = "xavier";
  return i;
}

InitSpec ConstantInit(double value) {
  InitSpec i;
  i.kind = "constant";
  i.value = value;
  return i;
}

StatusOr<Value> Data(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string name, a.String("name"));
  FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> shape, a.Shape("shape"));
  FLEET_ASSIGN_OR_RETURN(std::string dtype_name, a.String("dtype", "float32"));
  FLEET_ASSIGN_OR_RETURN(int64_t lod_level, a.Int("lod_level", 0));
  // fluid.layers.data prepends the batch dim itself.
  FLEET_ASSIGN_OR_RETURN(bool append_batch_size, a.Bool("append_batch_size", false));
  if (append_batch_size) shape.insert(shape.begin(), -1);
  if (name.empty()) return a.ErrorAt("name", "the name must not be empty");
  for (int64_t d : shape) {
    if (d < -1 || d == 0) {
      return a.ErrorAt("shape", "dims must be positive or -1 (unknown), got " + ShapeText(shape));
    }
  }
  ir::DataType dtype = ir::ParseDataType(dtype_name);
  if (dtype == ir::DataType::kInvalid) {
    std::vector<std::string> names = {"bool",  "int8",    "uint8",    "int16",   "int32",
                                      "int64", "float16", "bfloat16", "float32", "float64"};
    std::string guess = ClosestMatch(dtype_name, names);
    std::string hint = guess.empty() ? "; expected one of " + JoinWords(names, " or ")
                                     : " (did you mean '" + guess + "'?)";
    return a.ErrorAt("dtype", "unknown dtype '" + dtype_name + "'" + hint);
  }
  if (lod_level < 0 || lod_level > 1) {
    return a.ErrorAt("lod_level", "lod_level " + std::to_string(lod_level) +
                                      ": only 0 (dense) and 1 (sequences) are supported");
  }
  // A sequence tensor's first dim counts the rows of every sequence of the batch together.
  if (lod_level == 1 && (shape.empty() || shape[0] != -1)) {
    return a.ErrorAt("shape", "a data var with lod_level=1 has -1 as its first dim (the rows "
                              "of all its sequences), got " + ShapeText(shape));
  }
  FLEET_RETURN_IF_ERROR(
      a.AtCall(s.builder.AddData(name, shape, dtype, static_cast<int32_t>(lod_level))));
  s.feeds.push_back(name);
  return VarValue(name, a.call_pos());
}

StatusOr<Value> Fc(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::vector<std::string> inputs, a.Vars("input"));
  FLEET_ASSIGN_OR_RETURN(int64_t size, a.Int("size"));
  FLEET_ASSIGN_OR_RETURN(int64_t nfd, a.Int("num_flatten_dims", 1));
  FLEET_ASSIGN_OR_RETURN(ParamAttrSpec wattr, ParamAttrArg(a, "param_attr"));
  if (size <= 0) return a.ErrorAt("size", "size must be positive, got " + std::to_string(size));
  if (wattr.disabled) return a.ErrorAt("param_attr", "the weight cannot be disabled");
  FLEET_ASSIGN_OR_RETURN(std::string layer, LayerName(s, a, "fc"));
  ir::DataType dtype = ir::DataType::kFloat32;
  std::vector<std::string> products;
  for (const std::string& in : inputs) {
    FLEET_ASSIGN_OR_RETURN(const ir::Var* v, VarOf(s, a, "input", in));
    dtype = v->dtype;
    if (nfd < 1 || nfd >= static_cast<int64_t>(v->shape.size())) {
      return a.ErrorAt("num_flatten_dims",
                       "num_flatten_dims must be in [1, rank of input) but is " +
                           std::to_string(nfd) + " for input '" + in + "' of shape " +
                           ShapeText(v->shape));
    }
    int64_t k = 1;
    for (size_t i = static_cast<size_t>(nfd); i < v->shape.size(); ++i) {
      if (v->shape[i] < 0) {
        return a.ErrorAt("input", "input '" + in + "' of shape " + ShapeText(v->shape) +
                                      " needs known dims after num_flatten_dims=" +
                                      std::to_string(nfd));
      }
      k *= v->shape[i];
    }
    FLEET_ASSIGN_OR_RETURN(std::string w, a.AtCall(s.builder.CreateParameter(
                                              layer, false, {k, size}, dtype, wattr, Xavier())));
    std::string out = s.builder.NewTmp(layer);
    FLEET_RETURN_IF_ERROR(a.AtCall(s.builder.AppendOp(
        MakeOp("mul", {{"X", {in}}, {"Y", {w}}}, {{"Out", {out}}},
               {{"x_num_col_dims", static_cast<int32_t>(nfd)}, {"y_num_col_dims", 1}}))));
    products.push_back(out);
  }
  std::string pre_bias = products[0];
  if (products.size() > 1) {
    pre_bias = s.builder.NewTmp(layer);
    FLEET_RETURN_IF_ERROR(
        a.AtCall(s.builder.AppendOp(MakeOp("sum", {{"X", products}}, {{"Out", {pre_bias}}}))));
  }
  FLEET_ASSIGN_OR_RETURN(std::string pre_act,
                         ApplyBias(s, a, layer, pre_bias, {size}, nfd, dtype));
  FLEET_ASSIGN_OR_RETURN(std::string out, ApplyAct(s, a, layer, pre_act));
  return VarValue(out, a.call_pos());
}

// Paddle's conv padding: an int, [ph, pw], [top, bottom, left, right] (symmetric pairs fold to
// two values), or "SAME" / "VALID" as the padding algorithm.
Status ConvPadding(const Args& a, std::vector<int64_t>* paddings, std::string* algorithm) {
  *algorithm = "EXPLICIT";
  const Arg* arg = a.Get("padding");
  if (arg != nullptr && arg->value.kind == Value::Kind::kString) {
    std::string p = arg->value.text;
    for (char& c : p) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (p != "SAME" && p != "VALID") {
      return a.ErrorAt("padding", "padding must be an int, a list, 'SAME' or 'VALID', got '" +
                                      arg->value.text + "'");
    }
    *algorithm = p;
    *paddings = {0, 0};
    return OkStatus();
  }
  FLEET_ASSIGN_OR_RETURN(*paddings, a.Ints("padding", {0, 0}, 2));
  if (paddings->size() == 4 && (*paddings)[0] == (*paddings)[1] &&
      (*paddings)[2] == (*paddings)[3]) {
    *paddings = {(*paddings)[0], (*paddings)[2]};
  }
  if (paddings->size() != 2 && paddings->size() != 4) {
    return a.ErrorAt("padding", "padding must have 2 or 4 values, got " + ShapeText(*paddings));
  }
  for (int64_t p : *paddings) {
    if (p < 0) return a.ErrorAt("padding", "padding must not be negative");
  }
  return OkStatus();
}

StatusOr<std::vector<int64_t>> Pair(const Args& a, std::string_view name, int64_t def,
                                    int64_t min) {
  FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> v, a.Ints(name, {def, def}, 2));
  if (v.size() != 2) {
    return a.ErrorAt(name, "'" + std::string(name) + "' must be an int or 2 ints, got " +
                               ShapeText(v));
  }
  for (int64_t x : v) {
    if (x < min) {
      return a.ErrorAt(name, "'" + std::string(name) + "' must be at least " +
                                 std::to_string(min) + ", got " + ShapeText(v));
    }
  }
  return v;
}

StatusOr<std::string> DataFormat(const Args& a, std::string_view name) {
  FLEET_ASSIGN_OR_RETURN(std::string f, a.String(name, "NCHW"));
  if (f != "NCHW" && f != "NHWC") {
    return a.ErrorAt(name, "'" + std::string(name) + "' must be 'NCHW' or 'NHWC', got '" + f +
                               "'");
  }
  return f;
}

StatusOr<Value> Conv2d(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string input, a.Var("input"));
  FLEET_ASSIGN_OR_RETURN(int64_t num_filters, a.Int("num_filters"));
  FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> filter, Pair(a, "filter_size", 0, 1));
  FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> stride, Pair(a, "stride", 1, 1));
  FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> dilation, Pair(a, "dilation", 1, 1));
  FLEET_ASSIGN_OR_RETURN(int64_t groups, a.Int("groups", 1));
  FLEET_ASSIGN_OR_RETURN(std::string format, DataFormat(a, "data_format"));
  FLEET_ASSIGN_OR_RETURN(bool use_cudnn, a.Bool("use_cudnn", true));
  FLEET_ASSIGN_OR_RETURN(ParamAttrSpec wattr, ParamAttrArg(a, "param_attr"));
  std::vector<int64_t> paddings;
  std::string algorithm;
  FLEET_RETURN_IF_ERROR(ConvPadding(a, &paddings, &algorithm));
  if (wattr.disabled) return a.ErrorAt("param_attr", "the filter cannot be disabled");
  FLEET_ASSIGN_OR_RETURN(const ir::Var* in, VarOf(s, a, "input", input));
  if (in->shape.size() != 4) {
    return a.ErrorAt("input", "input must be 4-D (" + format + "), got shape " +
                                  ShapeText(in->shape));
  }
  int64_t channels = format == "NCHW" ? in->shape[1] : in->shape[3];
  if (channels <= 0) {
    return a.ErrorAt("input", "the channel dim of input " + ShapeText(in->shape) +
                                  " must be known");
  }
  if (num_filters <= 0) return a.ErrorAt("num_filters", "num_filters must be positive");
  if (groups <= 0 || channels % groups != 0 || num_filters % groups != 0) {
    return a.ErrorAt("groups", "groups (" + std::to_string(groups) +
                                   ") must divide the input channels (" +
                                   std::to_string(channels) + ") and num_filters (" +
                                   std::to_string(num_filters) + ")");
  }
  ir::DataType dtype = in->dtype;
  FLEET_ASSIGN_OR_RETURN(std::string layer, LayerName(s, a, "conv2d"));
  // Paddle's default: Normal(0, sqrt(2 / (filter_h * filter_w * input_channels))).
  InitSpec init;
  init.kind = "normal";
  init.mean = 0.0;
  // In doubles: the sizes are not checked yet (CreateParameter does that), and their int64
  // product can overflow.
  init.std = std::sqrt(2.0 / (static_cast<double>(filter[0]) * static_cast<double>(filter[1]) *
                              static_cast<double>(channels)));
  std::vector<int64_t> filter_shape = {num_filters, channels / groups, filter[0], filter[1]};
  FLEET_ASSIGN_OR_RETURN(std::string w, a.AtCall(s.builder.CreateParameter(
                                            layer, false, filter_shape, dtype, wattr, init)));
  std::string out = s.builder.NewTmp(layer);
  FLEET_RETURN_IF_ERROR(a.AtCall(s.builder.AppendOp(MakeOp(
      "conv2d", {{"Input", {input}}, {"Filter", {w}}}, {{"Output", {out}}},
      {{"strides", stride},
       {"paddings", paddings},
       {"dilations", dilation},
       {"groups", static_cast<int32_t>(groups)},
       {"padding_algorithm", algorithm},
       {"data_format", format},
       {"use_cudnn", use_cudnn}}))));
  FLEET_ASSIGN_OR_RETURN(std::string pre_act, ApplyBias(s, a, layer, out, {num_filters},
                                                        format == "NCHW" ? 1 : 3, dtype));
  FLEET_ASSIGN_OR_RETURN(std::string result, ApplyAct(s, a, layer, pre_act));
  return VarValue(result, a.call_pos());
}

StatusOr<Value> Pool2d(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string input, a.Var("input"));
  FLEET_ASSIGN_OR_RETURN(std::string type, a.String("pool_type", "max"));
  FLEET_ASSIGN_OR_RETURN(bool global, a.Bool("global_pooling", false));
  FLEET_ASSIGN_OR_RETURN(bool ceil_mode, a.Bool("ceil_mode", false));
  FLEET_ASSIGN_OR_RETURN(bool exclusive, a.Bool("exclusive", true));
  FLEET_ASSIGN_OR_RETURN(bool use_cudnn, a.Bool("use_cudnn", true));
  FLEET_ASSIGN_OR_RETURN(std::string format, DataFormat(a, "data_format"));
  FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> ksize, a.Ints("pool_size", {-1, -1}, 2));
  FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> stride, Pair(a, "pool_stride", 1, 1));
  FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> paddings, a.Ints("pool_padding", {0, 0}, 2));
  if (type != "max" && type != "avg") {
    return a.ErrorAt("pool_type", "pool_type must be 'max' or 'avg', got '" + type + "'");
  }
  if (ksize.size() != 2) return a.ErrorAt("pool_size", "pool_size must be an int or 2 ints");
  if (paddings.size() != 2 && paddings.size() != 4) {
    return a.ErrorAt("pool_padding", "pool_padding must have 2 or 4 values");
  }
  FLEET_ASSIGN_OR_RETURN(const ir::Var* in, VarOf(s, a, "input", input));
  if (in->shape.size() != 4) {
    return a.ErrorAt("input", "input must be 4-D (" + format + "), got shape " +
                                  ShapeText(in->shape));
  }
  if (ksize[0] == -1 && ksize[1] == -1) global = true;
  if (global) {
    // The whole spatial extent; Paddle's shape function does the same for global pooling.
    size_t h = format == "NCHW" ? 2 : 1;
    ksize = {std::max<int64_t>(in->shape[h], 1), std::max<int64_t>(in->shape[h + 1], 1)};
    paddings = {0, 0};
  } else if (ksize[0] <= 0 || ksize[1] <= 0) {
    return a.ErrorAt("pool_size", "pool_size must be positive (or -1 for global pooling), "
                                  "got " + ShapeText(ksize));
  }
  FLEET_ASSIGN_OR_RETURN(std::string layer, LayerName(s, a, "pool2d"));
  std::string out = s.builder.NewTmp(layer);
  FLEET_RETURN_IF_ERROR(a.AtCall(s.builder.AppendOp(MakeOp(
      "pool2d", {{"X", {input}}}, {{"Out", {out}}},
      {{"pooling_type", type},
       {"ksize", ksize},
       {"global_pooling", global},
       {"strides", stride},
       {"paddings", paddings},
       {"padding_algorithm", std::string("EXPLICIT")},
       {"ceil_mode", ceil_mode},
       {"exclusive", exclusive},
       {"adaptive", false},
       {"data_format", format},
       {"use_cudnn", use_cudnn}}))));
  return VarValue(out, a.call_pos());
}

StatusOr<Value> BatchNorm(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string input, a.Var("input"));
  FLEET_ASSIGN_OR_RETURN(bool is_test, a.Bool("is_test", false));
  FLEET_ASSIGN_OR_RETURN(double momentum, a.Float("momentum", 0.9));
  FLEET_ASSIGN_OR_RETURN(double epsilon, a.Float("epsilon", 1e-5));
  FLEET_ASSIGN_OR_RETURN(std::string layout, DataFormat(a, "data_layout"));
  FLEET_ASSIGN_OR_RETURN(std::string mean_name, a.String("moving_mean_name", ""));
  FLEET_ASSIGN_OR_RETURN(std::string var_name, a.String("moving_variance_name", ""));
  FLEET_ASSIGN_OR_RETURN(bool global_stats, a.Bool("use_global_stats", false));
  FLEET_ASSIGN_OR_RETURN(ParamAttrSpec wattr, ParamAttrArg(a, "param_attr"));
  FLEET_ASSIGN_OR_RETURN(ParamAttrSpec battr, ParamAttrArg(a, "bias_attr"));
  if (wattr.disabled) return a.ErrorAt("param_attr", "the scale cannot be disabled");
  if (battr.disabled) return a.ErrorAt("bias_attr", "the bias cannot be disabled");
  FLEET_ASSIGN_OR_RETURN(const ir::Var* in, VarOf(s, a, "input", input));
  if (in->shape.size() < 2) {
    return a.ErrorAt("input", "input must have at least 2 dims, got " + ShapeText(in->shape));
  }
  int64_t c = layout == "NCHW" ? in->shape[1] : in->shape.back();
  if (c <= 0) {
    return a.ErrorAt("input", "the channel dim of input " + ShapeText(in->shape) +
                                  " must be known");
  }
  ir::DataType dtype = in->dtype;
  FLEET_ASSIGN_OR_RETURN(std::string layer, LayerName(s, a, "batch_norm"));
  auto param = [&](bool is_bias, const ParamAttrSpec& attr, double init) {
    return a.AtCall(
        s.builder.CreateParameter(layer, is_bias, {c}, dtype, attr, ConstantInit(init)));
  };
  FLEET_ASSIGN_OR_RETURN(std::string scale, param(false, wattr, 1.0));
  FLEET_ASSIGN_OR_RETURN(std::string bias, param(true, battr, 0.0));
  ParamAttrSpec stat;
  stat.trainable = false;
  stat.name = mean_name;
  FLEET_ASSIGN_OR_RETURN(std::string mean, param(false, stat, 0.0));
  stat.name = var_name;
  FLEET_ASSIGN_OR_RETURN(std::string variance, param(false, stat, 1.0));
  std::string saved_mean = s.builder.NewTmp(layer);
  std::string saved_var = s.builder.NewTmp(layer);
  ir::SlotMap outputs = {{"MeanOut", {mean}},
                         {"VarianceOut", {variance}},
                         {"SavedMean", {saved_mean}},
                         {"SavedVariance", {saved_var}}};
  std::vector<std::string> no_grad = {saved_mean, saved_var};
  if (!is_test && HasOutputSlot(s, "batch_norm", "ReserveSpace")) {
    std::string reserve = s.builder.NewTmp(layer);
    outputs["ReserveSpace"] = {reserve};
    no_grad.push_back(reserve);
  }
  std::string y = s.builder.NewTmp(layer);
  outputs["Y"] = {y};
  FLEET_RETURN_IF_ERROR(a.AtCall(s.builder.AppendOp(MakeOp(
      "batch_norm",
      {{"X", {input}}, {"Scale", {scale}}, {"Bias", {bias}}, {"Mean", {mean}},
       {"Variance", {variance}}},
      outputs,
      {{"momentum", static_cast<float>(momentum)},
       {"epsilon", static_cast<float>(epsilon)},
       {"is_test", is_test},
       {"data_layout", layout},
       {"use_global_stats", global_stats},
       {"trainable_statistics", false}}))));
  s.builder.SetStopGradient(no_grad);
  FLEET_ASSIGN_OR_RETURN(std::string out, ApplyAct(s, a, layer, y));
  return VarValue(out, a.call_pos());
}

StatusOr<Value> LayerNorm(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string input, a.Var("input"));
  FLEET_ASSIGN_OR_RETURN(bool scale, a.Bool("scale", true));
  FLEET_ASSIGN_OR_RETURN(bool shift, a.Bool("shift", true));
  FLEET_ASSIGN_OR_RETURN(int64_t axis, a.Int("begin_norm_axis", 1));
  FLEET_ASSIGN_OR_RETURN(double epsilon, a.Float("epsilon", 1e-5));
  FLEET_ASSIGN_OR_RETURN(ParamAttrSpec wattr, ParamAttrArg(a, "param_attr"));
  FLEET_ASSIGN_OR_RETURN(ParamAttrSpec battr, ParamAttrArg(a, "bias_attr"));
  FLEET_ASSIGN_OR_RETURN(const ir::Var* in, VarOf(s, a, "input", input));
  int64_t rank = static_cast<int64_t>(in->shape.size());
  if (axis < 1 || axis >= rank) {
    return a.ErrorAt("begin_norm_axis", "begin_norm_axis must be in [1, " +
                                            std::to_string(rank) + ") for input of shape " +
                                            ShapeText(in->shape));
  }
  int64_t n = 1;
  for (int64_t i = axis; i < rank; ++i) {
    if (in->shape[static_cast<size_t>(i)] < 0) {
      return a.ErrorAt("input", "dims of input " + ShapeText(in->shape) +
                                    " from begin_norm_axis on must be known");
    }
    n *= in->shape[static_cast<size_t>(i)];
  }
  ir::DataType dtype = in->dtype;
  FLEET_ASSIGN_OR_RETURN(std::string layer, LayerName(s, a, "layer_norm"));
  ir::SlotMap inputs = {{"X", {input}}};
  if (scale && !wattr.disabled) {
    FLEET_ASSIGN_OR_RETURN(std::string w, a.AtCall(s.builder.CreateParameter(
                                              layer, false, {n}, dtype, wattr, ConstantInit(1))));
    inputs["Scale"] = {w};
  }
  if (shift && !battr.disabled) {
    FLEET_ASSIGN_OR_RETURN(std::string b, a.AtCall(s.builder.CreateParameter(
                                              layer, true, {n}, dtype, battr, ConstantInit(0))));
    inputs["Bias"] = {b};
  }
  std::string mean = s.builder.NewTmp(layer);
  std::string variance = s.builder.NewTmp(layer);
  std::string y = s.builder.NewTmp(layer);
  FLEET_RETURN_IF_ERROR(a.AtCall(s.builder.AppendOp(
      MakeOp("layer_norm", inputs, {{"Y", {y}}, {"Mean", {mean}}, {"Variance", {variance}}},
             {{"epsilon", static_cast<float>(epsilon)},
              {"begin_norm_axis", static_cast<int32_t>(axis)}}))));
  s.builder.SetStopGradient({mean, variance});
  FLEET_ASSIGN_OR_RETURN(std::string out, ApplyAct(s, a, layer, y));
  return VarValue(out, a.call_pos());
}

StatusOr<Value> Embedding(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string input, a.Var("input"));
  FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> size, a.Ints("size"));
  FLEET_ASSIGN_OR_RETURN(bool is_sparse, a.Bool("is_sparse", false));
  FLEET_ASSIGN_OR_RETURN(bool is_distributed, a.Bool("is_distributed", false));
  FLEET_ASSIGN_OR_RETURN(std::optional<int64_t> padding_idx, a.OptInt("padding_idx"));
  FLEET_ASSIGN_OR_RETURN(std::string dtype_name, a.String("dtype", "float32"));
  FLEET_ASSIGN_OR_RETURN(ParamAttrSpec wattr, ParamAttrArg(a, "param_attr"));
  // size [-1, dim]: a growable table, keyed by any id in [0, 2^63 - 1), whose rows the
  // parameter servers create as ids arrive. Its parameter is the one-row prototype [1, dim]
  // that the declared initializer fills, and from which each new row is drawn.
  const bool growable = size.size() == 2 && size[0] == -1;
  if (size.size() != 2 || (size[0] <= 0 && !growable) || size[1] <= 0) {
    return a.ErrorAt("size", "size must be [vocabulary, dim] with positive values, or [-1, dim] "
                             "for a growable table, got " + ShapeText(size));
  }
  if (growable && !is_distributed) {
    return a.ErrorAt("size", "a growable table (size [-1, dim]) lives on the parameter servers "
                             "only: declare it is_distributed=True");
  }
  if (growable) size[0] = 1;
  ir::DataType dtype = ir::ParseDataType(dtype_name);
  if (dtype != ir::DataType::kFloat32 && dtype != ir::DataType::kFloat64) {
    return a.ErrorAt("dtype", "dtype must be 'float32' or 'float64', got '" + dtype_name + "'");
  }
  if (wattr.disabled) return a.ErrorAt("param_attr", "the table cannot be disabled");
  int64_t pad = -1;
  if (padding_idx) {
    pad = *padding_idx < 0 && !growable ? size[0] + *padding_idx : *padding_idx;
    if (growable && pad < 0) {
      return a.ErrorAt("padding_idx", "padding_idx of a growable table must be an id (>= 0)");
    }
    if (!growable && (pad < 0 || pad >= size[0])) {
      return a.ErrorAt("padding_idx", "padding_idx must be in [-" + std::to_string(size[0]) +
                                          ", " + std::to_string(size[0]) + ")");
    }
  }
  // Ids of a sequence tensor [N, 1] give one row per id, [N, D], as fluid.layers.embedding's
  // lookup_table does (what sequence_pool takes); so do any ids [..., 1] with
  // lookup_table_v1=True (how fluid.layers.embedding is spelled); otherwise Paddle 2's
  // lookup_table_v2 appends D.
  FLEET_ASSIGN_OR_RETURN(const ir::Var* ids, VarOf(s, a, "input", input));
  FLEET_ASSIGN_OR_RETURN(bool v1, a.Bool("lookup_table_v1", false));
  const bool last_is_one = !ids->shape.empty() && ids->shape.back() == 1;
  if (v1 && !last_is_one) {
    return a.ErrorAt("input", "fluid.layers.embedding takes ids of shape [..., 1], got " +
                                  ShapeText(ids->shape));
  }
  const bool per_id = last_is_one && (v1 || ids->lod_level == 1);
  FLEET_ASSIGN_OR_RETURN(std::string layer, LayerName(s, a, "embedding"));
  FLEET_ASSIGN_OR_RETURN(std::string w, a.AtCall(s.builder.CreateParameter(
                                            layer, false, size, dtype, wattr, Xavier())));
  std::string out = s.builder.NewTmp(layer);
  FLEET_RETURN_IF_ERROR(a.AtCall(s.builder.AppendOp(
      MakeOp(per_id ? "lookup_table" : "lookup_table_v2", {{"Ids", {input}}, {"W", {w}}},
             {{"Out", {out}}},
             // A table kept on the servers (is_distributed) is only ever updated by rows.
             {{"is_sparse", is_sparse || is_distributed},
              {"is_distributed", is_distributed},
              {"remote_prefetch", false},
              {"growable", growable},
              {"padding_idx", pad}}))));
  return VarValue(out, a.call_pos());
}

// sequence_pool(input, pool_type, is_test=False, pad_value=0.0): one row per sequence.
StatusOr<Value> SequencePool(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string input, a.Var("input"));
  FLEET_ASSIGN_OR_RETURN(std::string pool_type, a.String("pool_type"));
  FLEET_ASSIGN_OR_RETURN(bool is_test, a.Bool("is_test", false));
  FLEET_ASSIGN_OR_RETURN(double pad_value, a.Float("pad_value", 0.0));
  std::string type;
  for (char c : pool_type) type += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::vector<std::string> types = {"AVERAGE", "SUM", "SQRT", "MAX", "LAST", "FIRST"};
  if (std::find(types.begin(), types.end(), type) == types.end()) {
    return a.ErrorAt("pool_type", "pool_type must be one of " + JoinWords(types, " or ") +
                                      " (any case), got " + QuoteForMessage(pool_type));
  }
  FLEET_ASSIGN_OR_RETURN(const ir::Var* x, VarOf(s, a, "input", input));
  if (x->lod_level != 1) {
    return a.ErrorAt("input", "sequence_pool pools sequences, but '" + input +
                                  "' is dense (declare the data with lod_level=1)");
  }
  FLEET_ASSIGN_OR_RETURN(std::string layer, LayerName(s, a, "sequence_pool"));
  std::string out = s.builder.NewTmp(layer);
  std::string index = s.builder.NewTmp(layer);
  FLEET_RETURN_IF_ERROR(a.AtCall(s.builder.AppendOp(
      MakeOp("sequence_pool", {{"X", {input}}}, {{"Out", {out}}, {"MaxIndex", {index}}},
             {{"pooltype", type},
              {"is_test", is_test},
              {"pad_value", static_cast<float>(pad_value)}}))));
  s.builder.SetStopGradient({index});
  return VarValue(out, a.call_pos());
}

StatusOr<Value> Dropout(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string x, a.Var("x"));
  FLEET_ASSIGN_OR_RETURN(double prob, a.Float("dropout_prob"));
  FLEET_ASSIGN_OR_RETURN(bool is_test, a.Bool("is_test", false));
  FLEET_ASSIGN_OR_RETURN(std::optional<int64_t> seed, a.OptInt("seed"));
  FLEET_ASSIGN_OR_RETURN(std::string impl,
                         a.String("dropout_implementation", "downgrade_in_infer"));
  if (prob < 0 || prob > 1) return a.ErrorAt("dropout_prob", "dropout_prob must be in [0, 1]");
  if (impl != "downgrade_in_infer" && impl != "upscale_in_train") {
    return a.ErrorAt("dropout_implementation",
                     "dropout_implementation must be 'downgrade_in_infer' or 'upscale_in_train'");
  }
  FLEET_ASSIGN_OR_RETURN(std::string layer, LayerName(s, a, "dropout"));
  std::string out = s.builder.NewTmp(layer);
  ir::SlotMap outputs = {{"Out", {out}}};
  std::string mask;
  if (HasOutputSlot(s, "dropout", "Mask")) {
    mask = s.builder.NewTmp(layer);
    outputs["Mask"] = {mask};
  }
  FLEET_RETURN_IF_ERROR(a.AtCall(s.builder.AppendOp(
      MakeOp("dropout", {{"X", {x}}}, outputs,
             {{"dropout_prob", static_cast<float>(prob)},
              {"is_test", is_test},
              {"fix_seed", seed.has_value()},
              {"seed", static_cast<int32_t>(seed.value_or(0))},
              {"dropout_implementation", impl}}))));
  if (!mask.empty()) s.builder.SetStopGradient({mask});
  return VarValue(out, a.call_pos());
}

StatusOr<Value> CrossEntropy(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string input, a.Var("input"));
  FLEET_ASSIGN_OR_RETURN(std::string label, a.Var("label"));
  FLEET_ASSIGN_OR_RETURN(bool soft, a.Bool("soft_label", false));
  FLEET_ASSIGN_OR_RETURN(int64_t ignore, a.Int("ignore_index", -100));
  // Paddle's fluid.layers.cross_entropy uses cross_entropy2 for hard labels.
  bool v2 = !soft && s.builder.Schema("cross_entropy2") != nullptr;
  std::string type = v2 ? "cross_entropy2" : "cross_entropy";
  FLEET_ASSIGN_OR_RETURN(std::string layer, LayerName(s, a, type));
  std::string out = s.builder.NewTmp(layer);
  ir::SlotMap outputs = {{"Y", {out}}};
  ir::AttrMap attrs = {{"ignore_index", ignore}};
  std::vector<std::string> no_grad;
  if (v2) {
    for (const char* slot : {"XShape", "MatchX"}) {
      if (HasOutputSlot(s, type, slot)) {
        outputs[slot] = {s.builder.NewTmp(layer)};
        no_grad.push_back(outputs[slot][0]);
      }
    }
  } else {
    attrs["soft_label"] = soft;
  }
  FLEET_RETURN_IF_ERROR(a.AtCall(s.builder.AppendOp(
      MakeOp(type, {{"X", {input}}, {"Label", {label}}}, outputs, attrs))));
  s.builder.SetStopGradient(no_grad);
  return VarValue(out, a.call_pos());
}

StatusOr<Value> SoftmaxWithCrossEntropy(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string logits, a.Var("logits"));
  FLEET_ASSIGN_OR_RETURN(std::string label, a.Var("label"));
  FLEET_ASSIGN_OR_RETURN(bool soft, a.Bool("soft_label", false));
  FLEET_ASSIGN_OR_RETURN(int64_t ignore, a.Int("ignore_index", -100));
  FLEET_ASSIGN_OR_RETURN(bool stable, a.Bool("numeric_stable_mode", true));
  FLEET_ASSIGN_OR_RETURN(int64_t axis, a.Int("axis", -1));
  FLEET_ASSIGN_OR_RETURN(std::string layer, LayerName(s, a, "softmax_with_cross_entropy"));
  std::string softmax = s.builder.NewTmp(layer);
  std::string loss = s.builder.NewTmp(layer);
  FLEET_RETURN_IF_ERROR(a.AtCall(s.builder.AppendOp(
      MakeOp("softmax_with_cross_entropy", {{"Logits", {logits}}, {"Label", {label}}},
             {{"Softmax", {softmax}}, {"Loss", {loss}}},
             {{"soft_label", soft},
              {"ignore_index", ignore},
              {"numeric_stable_mode", stable},
              {"axis", static_cast<int32_t>(axis)}}))));
  return VarValue(loss, a.call_pos());
}

StatusOr<Value> SquareErrorCost(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string input, a.Var("input"));
  FLEET_ASSIGN_OR_RETURN(std::string label, a.Var("label"));
  FLEET_ASSIGN_OR_RETURN(std::string layer, LayerName(s, a, "square_error_cost"));
  std::string minus = s.builder.NewTmp(layer);
  FLEET_RETURN_IF_ERROR(a.AtCall(s.builder.AppendOp(MakeOp(
      "elementwise_sub", {{"X", {input}}, {"Y", {label}}}, {{"Out", {minus}}}, {{"axis", -1}}))));
  std::string square = s.builder.NewTmp(layer);
  FLEET_RETURN_IF_ERROR(a.AtCall(
      s.builder.AppendOp(MakeOp("square", {{"X", {minus}}}, {{"Out", {square}}}))));
  return VarValue(square, a.call_pos());
}

StatusOr<Value> Accuracy(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string input, a.Var("input"));
  FLEET_ASSIGN_OR_RETURN(std::string label, a.Var("label"));
  FLEET_ASSIGN_OR_RETURN(int64_t k, a.Int("k", 1));
  if (k < 1) return a.ErrorAt("k", "k must be at least 1");
  FLEET_ASSIGN_OR_RETURN(std::string layer, LayerName(s, a, "accuracy"));
  std::string topk = s.builder.NewTmp(layer);
  std::string indices = s.builder.NewTmp(layer);
  FLEET_RETURN_IF_ERROR(a.AtCall(s.builder.AppendOp(
      MakeOp("top_k_v2", {{"X", {input}}}, {{"Out", {topk}}, {"Indices", {indices}}},
             {{"k", static_cast<int32_t>(k)}}))));
  std::string acc = s.builder.NewTmp(layer);
  std::string correct = s.builder.NewTmp(layer);
  std::string total = s.builder.NewTmp(layer);
  FLEET_RETURN_IF_ERROR(a.AtCall(s.builder.AppendOp(MakeOp(
      "accuracy", {{"Out", {topk}}, {"Indices", {indices}}, {"Label", {label}}},
      {{"Accuracy", {acc}}, {"Correct", {correct}}, {"Total", {total}}}))));
  s.builder.SetStopGradient({topk, indices, acc, correct, total});
  return VarValue(acc, a.call_pos());
}

// Paddle's fluid.layers.auc: a batch auc op over a window of slide_steps batches and a global
// one over every batch, each with its own persistable statistics (zeroed by startup, never
// trained). A call binds one value, so the layer returns the global AUC (Paddle's first result);
// the batch AUC is the var <layer>.tmp_1, which a fetch list can name.
StatusOr<Value> Auc(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string input, a.Var("input"));
  FLEET_ASSIGN_OR_RETURN(std::string label, a.Var("label"));
  FLEET_ASSIGN_OR_RETURN(std::string curve, a.String("curve", "ROC"));
  FLEET_ASSIGN_OR_RETURN(int64_t thresholds, a.Int("num_thresholds", 4095));
  FLEET_ASSIGN_OR_RETURN(int64_t topk, a.Int("topk", 1));
  FLEET_ASSIGN_OR_RETURN(int64_t steps, a.Int("slide_steps", 1));
  if (curve != "ROC") {
    return a.ErrorAt("curve", "curve must be 'ROC' (the only curve the auc op computes), got " +
                                  QuoteForMessage(curve));
  }
  constexpr int64_t kMax = 2147483646;
  if (thresholds < 1 || thresholds > kMax) {
    return a.ErrorAt("num_thresholds", "num_thresholds must be in [1, " + std::to_string(kMax) +
                                           "], got " + std::to_string(thresholds));
  }
  if (steps < 0 || steps > kMax) {
    return a.ErrorAt("slide_steps", "slide_steps must be in [0, " + std::to_string(kMax) +
                                        "], got " + std::to_string(steps));
  }
  // Paddle takes topk and does nothing with it.
  if (topk < 1) return a.ErrorAt("topk", "topk must be at least 1");
  FLEET_ASSIGN_OR_RETURN(std::string layer, LayerName(s, a, "auc"));
  const std::string global_auc = s.builder.NewTmp(layer);
  const std::string batch_auc = s.builder.NewTmp(layer);
  const int64_t buckets = thresholds + 1;
  struct Stats {
    std::string pos, neg;
  };
  auto stats = [&](int64_t n) -> StatusOr<Stats> {
    Stats st{s.builder.NewTmp(layer), s.builder.NewTmp(layer)};
    for (const std::string* v : {&st.pos, &st.neg}) {
      FLEET_RETURN_IF_ERROR(a.AtCall(
          s.builder.CreatePersistable(*v, {n}, ir::DataType::kInt64, ConstantInit(0.0))));
    }
    return st;
  };
  FLEET_ASSIGN_OR_RETURN(Stats batch, stats(steps > 0 ? (steps + 1) * buckets : buckets));
  FLEET_ASSIGN_OR_RETURN(Stats global, stats(buckets));
  auto append = [&](const Stats& st, const std::string& out, int64_t slide) {
    return a.AtCall(s.builder.AppendOp(MakeOp(
        "auc",
        {{"Predict", {input}}, {"Label", {label}}, {"StatPos", {st.pos}}, {"StatNeg", {st.neg}}},
        {{"AUC", {out}}, {"StatPosOut", {st.pos}}, {"StatNegOut", {st.neg}}},
        {{"curve", curve},
         {"num_thresholds", static_cast<int32_t>(thresholds)},
         {"slide_steps", static_cast<int32_t>(slide)}})));
  };
  FLEET_RETURN_IF_ERROR(append(batch, batch_auc, steps));
  FLEET_RETURN_IF_ERROR(append(global, global_auc, 0));
  s.builder.SetStopGradient({global_auc, batch_auc});
  return VarValue(global_auc, a.call_pos());
}

Builtin Reduce(std::string type) {
  Builtin b;
  b.params = {{"input", true}, {"dim"}, {"keep_dim"}, {"name"}};
  b.fn = [type](State& s, const Args& a) -> StatusOr<Value> {
    FLEET_ASSIGN_OR_RETURN(std::string input, a.Var("input"));
    FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> dim, a.Ints("dim", {}, 1));
    FLEET_ASSIGN_OR_RETURN(bool keep_dim, a.Bool("keep_dim", false));
    FLEET_ASSIGN_OR_RETURN(const ir::Var* in, VarOf(s, a, "input", input));
    int64_t rank = static_cast<int64_t>(in->shape.size());
    for (int64_t d : dim) {
      if (d < -rank || d >= std::max<int64_t>(rank, 1)) {
        return a.ErrorAt("dim", "dim " + std::to_string(d) + " is out of range for input of "
                                "shape " + ShapeText(in->shape));
      }
    }
    bool reduce_all = dim.empty() || static_cast<int64_t>(dim.size()) == rank;
    if (dim.empty()) dim = {0};
    FLEET_ASSIGN_OR_RETURN(std::string layer, LayerName(s, a, type));
    std::string out = s.builder.NewTmp(layer);
    FLEET_RETURN_IF_ERROR(a.AtCall(s.builder.AppendOp(
        MakeOp(type, {{"X", {input}}}, {{"Out", {out}}},
               {{"dim", dim}, {"keep_dim", keep_dim}, {"reduce_all", reduce_all}}))));
    return VarValue(out, a.call_pos());
  };
  return b;
}

StatusOr<Value> Matmul(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string x, a.Var("x"));
  FLEET_ASSIGN_OR_RETURN(std::string y, a.Var("y"));
  FLEET_ASSIGN_OR_RETURN(bool tx, a.Bool("transpose_x", false));
  FLEET_ASSIGN_OR_RETURN(bool ty, a.Bool("transpose_y", false));
  FLEET_ASSIGN_OR_RETURN(std::string layer, LayerName(s, a, "matmul_v2"));
  std::string out = s.builder.NewTmp(layer);
  FLEET_RETURN_IF_ERROR(a.AtCall(s.builder.AppendOp(MakeOp(
      "matmul_v2", {{"X", {x}}, {"Y", {y}}}, {{"Out", {out}}},
      {{"trans_x", tx}, {"trans_y", ty}}))));
  return VarValue(out, a.call_pos());
}

// reshape2 / transpose2 / flatten_contiguous_range: Out plus, when the schema has it, XShape.
StatusOr<Value> ShapeOp(State& s, const Args& a, const std::string& helper, const std::string& type,
                        ir::AttrMap attrs) {
  FLEET_ASSIGN_OR_RETURN(std::string x, a.Var("x"));
  FLEET_ASSIGN_OR_RETURN(std::string layer, LayerName(s, a, helper));
  std::string out = s.builder.NewTmp(layer);
  ir::SlotMap outputs = {{"Out", {out}}};
  if (HasOutputSlot(s, type, "XShape")) outputs["XShape"] = {s.builder.NewTmp(layer)};
  FLEET_RETURN_IF_ERROR(
      a.AtCall(s.builder.AppendOp(MakeOp(type, {{"X", {x}}}, outputs, std::move(attrs)))));
  if (outputs.count("XShape")) s.builder.SetStopGradient(outputs["XShape"]);
  return VarValue(out, a.call_pos());
}

StatusOr<Value> Reshape(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> shape, a.Ints("shape"));
  std::vector<int32_t> shape32(shape.begin(), shape.end());
  return ShapeOp(s, a, "reshape2", "reshape2", {{"shape", shape32}});
}

StatusOr<Value> Transpose(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> perm, a.Ints("perm"));
  std::vector<int32_t> perm32(perm.begin(), perm.end());
  return ShapeOp(s, a, "transpose", "transpose2", {{"axis", perm32}});
}

StatusOr<Value> Flatten(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(int64_t start, a.Int("start_axis", 0));
  FLEET_ASSIGN_OR_RETURN(int64_t stop, a.Int("stop_axis", -1));
  return ShapeOp(s, a, "flatten", "flatten_contiguous_range",
                 {{"start_axis", static_cast<int32_t>(start)},
                  {"stop_axis", static_cast<int32_t>(stop)}});
}

StatusOr<Value> Concat(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::vector<std::string> inputs, a.Vars("input"));
  FLEET_ASSIGN_OR_RETURN(int64_t axis, a.Int("axis", 0));
  FLEET_ASSIGN_OR_RETURN(std::string layer, LayerName(s, a, "concat"));
  std::string out = s.builder.NewTmp(layer);
  FLEET_RETURN_IF_ERROR(a.AtCall(s.builder.AppendOp(
      MakeOp("concat", {{"X", inputs}}, {{"Out", {out}}},
             {{"axis", static_cast<int32_t>(axis)}}))));
  return VarValue(out, a.call_pos());
}

void Add(BuiltinTable& t, const std::string& name, std::vector<Param> params, BuiltinFn fn) {
  t[name] = Builtin{std::move(params), std::move(fn)};
}

}  // namespace

void AddLayerBuiltins(BuiltinTable& t) {
  Add(t, "data", {{"name", true}, {"shape", true}, {"dtype"}, {"lod_level"}, {"append_batch_size"}},
      Data);
  Add(t, "fc",
      {{"input", true}, {"size", true}, {"num_flatten_dims"}, {"param_attr"}, {"bias_attr"},
       {"act"}, {"name"}},
      Fc);
  Add(t, "conv2d",
      {{"input", true}, {"num_filters", true}, {"filter_size", true}, {"stride"}, {"padding"},
       {"dilation"}, {"groups"}, {"param_attr"}, {"bias_attr"}, {"use_cudnn"}, {"act"},
       {"name"}, {"data_format"}},
      Conv2d);
  Add(t, "pool2d",
      {{"input", true}, {"pool_size"}, {"pool_type"}, {"pool_stride"}, {"pool_padding"},
       {"global_pooling"}, {"use_cudnn"}, {"ceil_mode"}, {"name"}, {"exclusive"},
       {"data_format"}},
      Pool2d);
  Add(t, "batch_norm",
      {{"input", true}, {"act"}, {"is_test"}, {"momentum"}, {"epsilon"}, {"param_attr"},
       {"bias_attr"}, {"data_layout"}, {"name"}, {"moving_mean_name"},
       {"moving_variance_name"}, {"use_global_stats"}},
      BatchNorm);
  Add(t, "layer_norm",
      {{"input", true}, {"scale"}, {"shift"}, {"begin_norm_axis"}, {"epsilon"}, {"param_attr"},
       {"bias_attr"}, {"act"}, {"name"}},
      LayerNorm);
  Add(t, "embedding",
      {{"input", true}, {"size", true}, {"is_sparse"}, {"is_distributed"}, {"padding_idx"},
       {"param_attr"}, {"dtype"}, {"name"}, {"lookup_table_v1"}},
      Embedding);
  Add(t, "sequence_pool", {{"input", true}, {"pool_type", true}, {"is_test"}, {"pad_value"}},
      SequencePool);
  AddSequenceLayerBuiltins(t);
  Add(t, "dropout",
      {{"x", true}, {"dropout_prob", true}, {"is_test"}, {"seed"}, {"name"},
       {"dropout_implementation"}},
      Dropout);
  Add(t, "cross_entropy", {{"input", true}, {"label", true}, {"soft_label"}, {"ignore_index"}},
      CrossEntropy);
  Add(t, "softmax_with_cross_entropy",
      {{"logits", true}, {"label", true}, {"soft_label"}, {"ignore_index"},
       {"numeric_stable_mode"}, {"axis"}},
      SoftmaxWithCrossEntropy);
  Add(t, "square_error_cost", {{"input", true}, {"label", true}}, SquareErrorCost);
  Add(t, "accuracy", {{"input", true}, {"label", true}, {"k"}}, Accuracy);
  Add(t, "auc",
      {{"input", true}, {"label", true}, {"curve"}, {"num_thresholds"}, {"topk"},
       {"slide_steps"}, {"name"}},
      Auc);
  for (const char* r : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"}) {
    t[r] = Reduce(r);
  }
  Add(t, "matmul", {{"x", true}, {"y", true}, {"transpose_x"}, {"transpose_y"}, {"name"}},
      Matmul);
  Add(t, "reshape", {{"x", true}, {"shape", true}, {"name"}}, Reshape);
  Add(t, "transpose", {{"x", true}, {"perm", true}, {"name"}}, Transpose);
  Add(t, "flatten", {{"x", true}, {"start_axis"}, {"stop_axis"}, {"name"}}, Flatten);
  Add(t, "concat", {{"input", true}, {"axis"}, {"name"}}, Concat);
}

}  // namespace fleet::frontend
