// The verifier against test-only schemas (so the tests do not depend on which built-in ops
// exist yet) and against the built-in `scale`.
#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include "ir/text.h"
#include "ops/verifier.h"

namespace fleet::ir {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// t_mul: Out[M, N] = X[M, K] * Y[K, N]; t_relu: Out = X; t_sum: Out = X[0] (duplicable X,
// optional Bias); t_loop: a block attribute.
const ops::OpRegistry& TestOps() {
  static const ops::OpRegistry* registry = [] {
    auto* r = new ops::OpRegistry();
    ops::OpSchema mul;
    mul.type = "t_mul";
    mul.inputs = {{"X"}, {"Y"}};
    mul.outputs = {{"Out"}};
    mul.attrs = {{"x_num_col_dims", int32_t{1}}, {"alpha", 1.0f}, {"tag", std::string()},
                 {"dims", std::vector<int32_t>{}}, {"scales", std::vector<float>{}},
                 {"flag", false}};
    mul.infer_shape = [](ops::ShapeContext& c) {
      const auto& x = c.Input("X");
      const auto& y = c.Input("Y");
      if (x.dims.size() != 2 || y.dims.size() != 2) return c.Error("X and Y must be 2-D");
      if (x.dims[1] >= 0 && y.dims[0] >= 0 && x.dims[1] != y.dims[0]) {
        return c.Error("X has " + std::to_string(x.dims[1]) + " columns but Y has " +
                       std::to_string(y.dims[0]) + " rows");
      }
      c.Output("Out") = {x.dtype, {x.dims[0], y.dims[1]}};
      return OkStatus();
    };
    EXPECT_TRUE(r->Register(mul).ok());
    ops::OpSchema relu;
    relu.type = "t_relu";
    relu.inputs = {{"X"}};
    relu.outputs = {{"Out"}};
    relu.infer_shape = [](ops::ShapeContext& c) {
      c.Output("Out") = c.Input("X");
      return OkStatus();
    };
    EXPECT_TRUE(r->Register(relu).ok());
    ops::OpSchema sum;
    sum.type = "t_sum";
    sum.inputs = {{"X", false, true}, {"Bias", true}};
    sum.outputs = {{"Out"}};
    sum.infer_shape = [](ops::ShapeContext& c) {
      c.Output("Out") = c.Input("X", 0);
      return OkStatus();
    };
    EXPECT_TRUE(r->Register(sum).ok());
    ops::OpSchema loop;
    loop.type = "t_loop";
    loop.attrs = {{"sub_block", BlockRef{0}}};
    loop.infer_shape = [](ops::ShapeContext&) { return OkStatus(); };
    EXPECT_TRUE(r->Register(loop).ok());
    return r;
  }();
  return *registry;
}

Program Parse(std::string_view text) {
  auto p = ParseProgram(text, "v.ir");
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : Program();
}

std::vector<std::string> Errors(std::string_view text) {
  return VerifyProgramErrors(Parse(text), TestOps());
}

constexpr std::string_view kHeader = R"(
    var x : float32[-1, 4] stop_gradient
    param w : float32[4, 8] {lr=1.0}
    var h : float32[-1, 8]
    var r : float32[-1, 8]
)";

std::string Block0(std::string_view ops) {
  return "program {\n  block 0 {" + std::string(kHeader) + std::string(ops) + "\n  }\n}\n";
}

TEST(IrVerifier, AcceptsAWellFormedProgram) {
  EXPECT_THAT(Errors(Block0("op t_mul(X=[x], Y=[w]) -> (Out=[h]) {x_num_col_dims=1}\n"
                            "op t_relu(X=[h]) -> (Out=[r])\n"
                            "op t_sum(X=[r, h]) -> (Out=[h])")),
              ElementsAre());
  EXPECT_TRUE(VerifyProgram(Parse(Block0("op t_relu(X=[h]) -> (Out=[r])")), TestOps()).ok());
}

TEST(IrVerifier, UndeclaredVar) {
  EXPECT_THAT(Errors(Block0("op t_mul(X=[q], Y=[w]) -> (Out=[h])")),
              ElementsAre("block 0, op 0 (t_mul): input X reads 'q', which is not declared"));
  EXPECT_THAT(Errors(Block0("op t_relu(X=[x]) -> (Out=[nowhere])")),
              ElementsAre("block 0, op 0 (t_relu): output Out writes 'nowhere', which is not "
                          "declared"));
}

TEST(IrVerifier, UseBeforeDefinition) {
  EXPECT_THAT(Errors(Block0("op t_relu(X=[h]) -> (Out=[r])\n"
                            "op t_mul(X=[x], Y=[w]) -> (Out=[h])")),
              ElementsAre("block 0, op 0 (t_relu): input X reads 'h' before it is written "
                          "(first by op 1 (t_mul))"));
  // Reading its own output before anyone wrote it is the same mistake...
  EXPECT_THAT(Errors(Block0("op t_relu(X=[r]) -> (Out=[r])")),
              ElementsAre("block 0, op 0 (t_relu): input X reads 'r' before it is written "
                          "(first by op 0 (t_relu))"));
  // ...but not for a persistable var (an in-place parameter update).
  EXPECT_THAT(Errors(Block0("op t_relu(X=[w]) -> (Out=[w])")), ElementsAre());
}

TEST(IrVerifier, UnknownOpType) {
  EXPECT_THAT(Errors(Block0("op t_mull(X=[x], Y=[w]) -> (Out=[h])")),
              ElementsAre("block 0, op 0 (t_mull): unknown op type 't_mull' (did you mean "
                          "'t_mul'?)"));
}

TEST(IrVerifier, SlotRules) {
  EXPECT_THAT(Errors(Block0("op t_mul(X=[x]) -> (Out=[h])")),
              ElementsAre("block 0, op 0 (t_mul): required input slot Y is missing"));
  EXPECT_THAT(Errors(Block0("op t_mul(X=[x], Y=[]) -> (Out=[h])")),
              ElementsAre("block 0, op 0 (t_mul): required input slot Y is missing"));
  EXPECT_THAT(Errors(Block0("op t_relu(X=[x]) -> ()")),
              ElementsAre("block 0, op 0 (t_relu): required output slot Out is missing"));
  EXPECT_THAT(Errors(Block0("op t_relu(X=[x], Z=[x]) -> (Out=[h])")),
              ElementsAre("block 0, op 0 (t_relu): unknown input slot 'Z' (did you mean 'X'?)"));
  EXPECT_THAT(Errors(Block0("op t_relu(X=[x, x]) -> (Out=[h])")),
              ElementsAre("block 0, op 0 (t_relu): input slot X holds 2 vars but takes one"));
  // Optional and duplicable slots.
  EXPECT_THAT(Errors(Block0("op t_sum(X=[h, h, h], Bias=[]) -> (Out=[r])")), ElementsAre());
}

TEST(IrVerifier, AttributeKindsAreStrictAndWidthsLenient) {
  auto with = [](std::string_view attrs) {
    return Errors(Block0("op t_mul(X=[x], Y=[w]) -> (Out=[h]) {" + std::string(attrs) + "}"));
  };
  EXPECT_THAT(with("x_num_col_dims=1L, alpha=2, tag=\"t\", dims=int64s[1, 2], scales=[1, 2], "
                   "flag=true"),
              ElementsAre());
  EXPECT_THAT(with("alpha=0.5, scales=doubles[0.5], dims=floats[]"), ElementsAre());
  EXPECT_THAT(with("x_num_col_dims=\"1\""),
              ElementsAre("block 0, op 0 (t_mul): attribute x_num_col_dims: expected int, got "
                          "string \"1\""));
  EXPECT_THAT(with("x_num_col_dims=1.0f"),
              ElementsAre("block 0, op 0 (t_mul): attribute x_num_col_dims: expected int, got "
                          "float 1.0f"));
  EXPECT_THAT(with("x_num_col_dims=4294967296L"),
              ElementsAre("block 0, op 0 (t_mul): attribute x_num_col_dims: expected int, got "
                          "int64 4294967296L (does not fit an int32)"));
  EXPECT_THAT(with("flag=1"),
              ElementsAre("block 0, op 0 (t_mul): attribute flag: expected bool, got int 1"));
  EXPECT_THAT(with("dims=[0.5f]"),
              ElementsAre("block 0, op 0 (t_mul): attribute dims: expected ints, got floats "
                          "[0.5f]"));
  EXPECT_THAT(with("alpha=[1.0f]"),
              ElementsAre("block 0, op 0 (t_mul): attribute alpha: expected float, got floats "
                          "[1.0f]"));
  EXPECT_THAT(with("alpa=1.0f"),
              ElementsAre("block 0, op 0 (t_mul): unknown attribute 'alpa' (did you mean "
                          "'alpha'?)"));
}

TEST(IrVerifier, OutputShapesMustMatchInference) {
  std::string bad = "program {\n  block 0 {" + std::string(kHeader) +
                    "    var o : float32[-1, 5]\n"
                    "    var o64 : float64[-1, 8]\n"
                    "    var o3 : float32[2, 2, 8]\n"
                    "    var ok : float32[16, -1]\n"
                    "op t_mul(X=[x], Y=[w]) -> (Out=[o])\n"
                    "op t_mul(X=[x], Y=[w]) -> (Out=[o64])\n"
                    "op t_mul(X=[x], Y=[w]) -> (Out=[o3])\n"
                    "op t_mul(X=[x], Y=[w]) -> (Out=[ok])\n"
                    "  }\n}\n";
  EXPECT_THAT(Errors(bad),
              ElementsAre("block 0, op 0 (t_mul): output Out 'o' is declared float32[-1, 5] but "
                          "the op produces float32[-1, 8]",
                          "block 0, op 1 (t_mul): output Out 'o64' is declared float64[-1, 8] "
                          "but the op produces float32[-1, 8]",
                          "block 0, op 2 (t_mul): output Out 'o3' is declared float32[2, 2, 8] "
                          "but the op produces float32[-1, 8]"));
  EXPECT_THAT(Errors(Block0("op t_mul(X=[w], Y=[w]) -> (Out=[h])")),
              ElementsAre("block 0, op 0 (t_mul): shape inference failed: t_mul: X has 8 "
                          "columns but Y has 4 rows"));
}

TEST(IrVerifier, BlocksAndBlockAttributes) {
  Program p = Parse(R"(program {
  block 0 {
    var x : float32[3]
    var y : float32[3]
    op t_loop() -> () {sub_block=block(1)}
    op t_loop() -> () {sub_block=block(5)}
  }
  block 1 parent 0 {
    var z : float32[3]
    op t_relu(X=[x]) -> (Out=[z])
    op t_relu(X=[z]) -> (Out=[y])
  }
})");
  EXPECT_THAT(VerifyProgramErrors(p, TestOps()),
              ElementsAre("block 0, op 1 (t_loop): attribute sub_block refers to block 5, but "
                          "the program has 2"));
  p.block(1).parent = 1;
  p.global().vars["x"].param = ParamInfo{};
  EXPECT_THAT(VerifyProgramErrors(p, TestOps()),
              ElementsAre("block 0: param 'x' is not persistable",
                          "block 1: parent 1 is not an earlier block"));
}

TEST(IrVerifier, StatusListsEveryError) {
  Status s = VerifyProgram(Parse(Block0("op t_relu(X=[q]) -> (Out=[h])\n"
                                        "op nope() -> ()")),
                           TestOps());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "2 errors in the program:\n"
            "  block 0, op 0 (t_relu): input X reads 'q', which is not declared\n"
            "  block 0, op 1 (nope): unknown op type 'nope'");
}

TEST(IrVerifier, BuiltinScale) {
  Program p = Parse(R"(program {
  block 0 {
    var x : float32[-1, 3] stop_gradient
    var y : float32[-1, 3]
    op scale(X=[x]) -> (Out=[y]) {bias=0.5f, scale=2.0f}
  }
})");
  EXPECT_TRUE(VerifyProgram(p).ok()) << VerifyProgram(p).ToString();
  p.global().ops[0].attrs["scale"] = std::string("two");
  EXPECT_THAT(VerifyProgram(p).message(), HasSubstr("attribute scale: expected float"));
}

// Autodiff's placeholder for an output entry that is not computed (concat over a data var): it
// stands in an output slot undeclared, never in an input slot, and is never declared itself.
constexpr std::string_view kConcatGrad = R"(program {
  block 0 {
    var c@GRAD : float32[-1, 5]
    var h : float32[-1, 3]
    var h@GRAD : float32[-1, 3]
    var x : float32[-1, 2] stop_gradient
    op concat_grad(Out@GRAD=[c@GRAD], X=[x, h]) -> (X@GRAD=[@EMPTY@, h@GRAD]) {axis=1}
  }
}
)";

TEST(IrVerifier, EmptyPlaceholderStandsInOutputSlots) {
  Program p = Parse(kConcatGrad);
  EXPECT_EQ(PrintProgram(p), kConcatGrad);
  EXPECT_THAT(VerifyProgramErrors(p), ElementsAre());
  const Op& op = p.global().ops[0];
  EXPECT_EQ(op.Output("X@GRAD"), (std::vector<std::string>{"@EMPTY@", "h@GRAD"}));
  EXPECT_EQ(op.OutputVars(), (std::vector<std::string>{"h@GRAD"}));
  // Written again by another op: each placeholder is its op's own, not a var written twice.
  p.global().ops.push_back(op);
  EXPECT_THAT(VerifyProgramErrors(p), ElementsAre());
}

TEST(IrVerifier, EmptyPlaceholderIsNeverReadNorDeclared) {
  Program p = Parse(kConcatGrad);
  Op relu;
  relu.type = "relu";
  relu.inputs["X"] = {"@EMPTY@"};
  relu.outputs["Out"] = {"r"};
  Var r;
  r.name = "r";
  r.shape = {-1, 2};
  (void)p.global().AddVar(r);
  p.global().ops.push_back(relu);
  EXPECT_THAT(VerifyProgramErrors(p),
              ElementsAre("block 0, op 1 (relu): input X reads '@EMPTY@', the placeholder of "
                          "an output entry that is not computed"));
  EXPECT_TRUE(p.global().ops[1].InputVars().empty());

  Program declared;
  Var v;
  v.name = "@EMPTY@";
  EXPECT_THAT(declared.global().AddVar(v).status().message(), HasSubstr("is reserved"));
  declared.global().vars.emplace(v.name, v);  // around AddVar, as a careless pass might
  EXPECT_THAT(VerifyProgramErrors(declared),
              ElementsAre("block 0: declares '@EMPTY@', a reserved name: it marks an output "
                          "entry that is not computed"));
  auto parsed = ParseProgram("program {\n  block 0 {\n    var @EMPTY@ : float32[1]\n  }\n}\n",
                             "e.ir");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("e.ir:3:9: var name '@EMPTY@' is reserved"));
}

}  // namespace
}  // namespace fleet::ir
