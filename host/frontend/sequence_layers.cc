// The sequence layers besides sequence_pool (layers.cc): sequence_softmax, sequence_reverse,
// sequence_pad, sequence_mask, sequence_expand_as, sequence_expand, sequence_concat,
// sequence_slice and sequence_unpad, each one op as fluid.layers writes it.
// See docs/program.md.
#include <optional>

#include "frontend/builtins.h"
#include "support/text.h"

namespace fleet::frontend {
namespace {

using ir::MakeOp;

// `arg` must name a sequence var (what a sequence layer takes).
StatusOr<const ir::Var*> SequenceVar(State& s, const Args& a, std::string_view arg,
                                     const std::string& name) {
  const ir::Var* v = s.builder.FindVar(name);
  if (v == nullptr) return a.ErrorAt(arg, "variable '" + name + "' is not declared");
  if (v->lod_level != 1) {
    return a.ErrorAt(arg, a.fn() + " takes sequences, but '" + name +
                              "' is dense (declare the data with lod_level=1)");
  }
  return v;
}

// A layer of one op with input slots `ins` and one output var per slot of `outs`, named
// "<layer>.tmp_<k>"; returns the first output.
StatusOr<Value> OneOpLayer(State& s, const Args& a, std::string_view type,
                           const ir::SlotMap& ins, const std::vector<std::string>& outs,
                           std::map<std::string, ir::Attribute> attrs = {}) {
  FLEET_ASSIGN_OR_RETURN(std::string name, a.String("name", ""));
  const std::string layer = name.empty() ? s.builder.NewLayerName(type) : name;
  ir::SlotMap out_slots;
  std::string first;
  for (const std::string& slot : outs) {
    out_slots[slot] = {s.builder.NewTmp(layer)};
    if (first.empty()) first = out_slots[slot][0];
  }
  ir::Op op = MakeOp(std::string(type), ins, out_slots);
  for (auto& [name, value] : attrs) op.attrs[name] = std::move(value);
  FLEET_RETURN_IF_ERROR(a.AtCall(s.builder.AppendOp(std::move(op))));
  return VarValue(first, a.call_pos());
}

// sequence_softmax(input, use_cudnn=False, name=None): softmax within each sequence.
StatusOr<Value> SequenceSoftmax(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string input, a.Var("input"));
  FLEET_ASSIGN_OR_RETURN(bool use_cudnn, a.Bool("use_cudnn", false));
  FLEET_RETURN_IF_ERROR(SequenceVar(s, a, "input", input).status());
  return OneOpLayer(s, a, "sequence_softmax", {{"X", {input}}}, {"Out"},
                    {{"use_cudnn", use_cudnn}});
}

// sequence_reverse(x, name=None): the rows of each sequence reversed.
StatusOr<Value> SequenceReverse(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string x, a.Var("x"));
  FLEET_RETURN_IF_ERROR(SequenceVar(s, a, "x", x).status());
  return OneOpLayer(s, a, "sequence_reverse", {{"X", {x}}}, {"Y"});
}

// sequence_pad(x, pad_value, maxlen, name=None): Out [sequences, maxlen, ...]; Length is the
// layer's tmp_1 (one value per call here, fetched by name). pad_value is a var, or a number that
// becomes a fill_constant of x's dtype.
StatusOr<Value> SequencePad(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string x, a.Var("x"));
  FLEET_ASSIGN_OR_RETURN(std::optional<int64_t> maxlen, a.OptInt("maxlen"));
  FLEET_ASSIGN_OR_RETURN(const ir::Var* xv, SequenceVar(s, a, "x", x));
  if (!maxlen || *maxlen <= 0) {
    return a.ErrorAt("maxlen", "maxlen must be given and > 0 (padding to the longest sequence "
                               "of each batch would give Out a shape that changes with the "
                               "batch, and shapes are fixed when the program is prepared)");
  }
  const ir::DataType dtype = xv->dtype;
  const Arg* pad = a.Get("pad_value");
  std::string pad_var;
  if (pad != nullptr && pad->value.kind == Value::Kind::kVar) {
    pad_var = pad->value.text;
  } else {
    FLEET_ASSIGN_OR_RETURN(double value, a.Float("pad_value"));
    pad_var = s.builder.NewTmp(s.builder.NewLayerName("fill_constant"));
    FLEET_RETURN_IF_ERROR(a.AtCall(s.builder.AppendOp(MakeOp(
        "fill_constant", {}, {{"Out", {pad_var}}},
        {{"shape", std::vector<int64_t>{1}},
         {"value", static_cast<float>(value)},
         {"dtype", static_cast<int32_t>(dtype)}}))));
  }
  return OneOpLayer(s, a, "sequence_pad", {{"X", {x}}, {"PadValue", {pad_var}}},
                    {"Out", "Length"}, {{"padded_length", static_cast<int32_t>(*maxlen)}});
}

// sequence_mask(x, maxlen, dtype="int64", name=None): Y[..., j] = j < x[...].
StatusOr<Value> SequenceMask(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string x, a.Var("x"));
  FLEET_ASSIGN_OR_RETURN(std::optional<int64_t> maxlen, a.OptInt("maxlen"));
  FLEET_ASSIGN_OR_RETURN(std::string dtype_name, a.String("dtype", "int64"));
  if (!maxlen || *maxlen <= 0) {
    return a.ErrorAt("maxlen", "maxlen must be given and > 0 (the largest length of each batch "
                               "would give the mask a shape that changes with the batch, and "
                               "shapes are fixed when the program is prepared)");
  }
  const ir::DataType dtype = ir::ParseDataType(dtype_name);
  if (dtype == ir::DataType::kInvalid) {
    return a.ErrorAt("dtype", "unknown dtype " + QuoteForMessage(dtype_name));
  }
  return OneOpLayer(s, a, "sequence_mask", {{"X", {x}}}, {"Y"},
                    {{"maxlen", static_cast<int32_t>(*maxlen)},
                     {"out_dtype", static_cast<int32_t>(dtype)}});
}

// sequence_expand_as(x, y, name=None): row s of x repeated over the rows of y's sequence s.
StatusOr<Value> SequenceExpandAs(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string x, a.Var("x"));
  FLEET_ASSIGN_OR_RETURN(std::string y, a.Var("y"));
  FLEET_RETURN_IF_ERROR(SequenceVar(s, a, "y", y).status());
  return OneOpLayer(s, a, "sequence_expand_as", {{"X", {x}}, {"Y", {y}}}, {"Out"});
}

// sequence_expand(x, y, ref_level=-1, name=None): row s of a dense x repeated over y's
// sequence s (an x of sequences is refused by the op, saying why).
StatusOr<Value> SequenceExpand(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string x, a.Var("x"));
  FLEET_ASSIGN_OR_RETURN(std::string y, a.Var("y"));
  FLEET_ASSIGN_OR_RETURN(int64_t ref_level, a.Int("ref_level", -1));
  FLEET_RETURN_IF_ERROR(SequenceVar(s, a, "y", y).status());
  return OneOpLayer(s, a, "sequence_expand", {{"X", {x}}, {"Y", {y}}}, {"Out"},
                    {{"ref_level", static_cast<int32_t>(ref_level)}});
}

// sequence_concat(input, name=None): sequence i of the result joins sequence i of each input.
StatusOr<Value> SequenceConcat(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::vector<std::string> input, a.Vars("input"));
  for (const std::string& v : input) FLEET_RETURN_IF_ERROR(SequenceVar(s, a, "input", v).status());
  return OneOpLayer(s, a, "sequence_concat", {{"X", input}}, {"Out"});
}

// sequence_slice(input, offset, length, name=None): rows [offset[i], offset[i] + length[i]) of
// sequence i; offset and length are int64 vars of one value per sequence.
StatusOr<Value> SequenceSlice(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string input, a.Var("input"));
  FLEET_ASSIGN_OR_RETURN(std::string offset, a.Var("offset"));
  FLEET_ASSIGN_OR_RETURN(std::string length, a.Var("length"));
  FLEET_RETURN_IF_ERROR(SequenceVar(s, a, "input", input).status());
  return OneOpLayer(s, a, "sequence_slice",
                    {{"X", {input}}, {"Offset", {offset}}, {"Length", {length}}}, {"Out"});
}

// sequence_unpad(x, length, name=None): sequences from a padded [S, L, ...] x, sequence i being
// x[i, :length[i]].
StatusOr<Value> SequenceUnpad(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string x, a.Var("x"));
  FLEET_ASSIGN_OR_RETURN(std::string length, a.Var("length"));
  return OneOpLayer(s, a, "sequence_unpad", {{"X", {x}}, {"Length", {length}}}, {"Out"});
}

}  // namespace

void AddSequenceLayerBuiltins(BuiltinTable& t) {
  const auto add = [&t](const std::string& name, std::vector<Param> params, BuiltinFn fn) {
    t[name] = Builtin{std::move(params), std::move(fn)};
  };
  add("sequence_softmax", {{"input", true}, {"use_cudnn"}, {"name"}}, SequenceSoftmax);
  add("sequence_reverse", {{"x", true}, {"name"}}, SequenceReverse);
  add("sequence_pad", {{"x", true}, {"pad_value", true}, {"maxlen"}, {"name"}}, SequencePad);
  add("sequence_mask", {{"x", true}, {"maxlen"}, {"dtype"}, {"name"}}, SequenceMask);
  add("sequence_expand_as", {{"x", true}, {"y", true}, {"name"}}, SequenceExpandAs);
  add("sequence_expand", {{"x", true}, {"y", true}, {"ref_level"}, {"name"}}, SequenceExpand);
  add("sequence_concat", {{"input", true}, {"name"}}, SequenceConcat);
  add("sequence_slice", {{"input", true}, {"offset", true}, {"length", true}, {"name"}},
      SequenceSlice);
  add("sequence_unpad", {{"x", true}, {"length", true}, {"name"}}, SequenceUnpad);
}

}  // namespace fleet::frontend
