// The program language as Python: each construct text-in, programs-out (compared with the
// straight-line program it stands for, or op by op), and each refusal with its exact position.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "frontend/frontend.h"
#include "frontend/paddle_api.h"
#include "ir/text.h"

namespace fleet::frontend {
namespace {

ParsedProgram Parse(std::string_view text) {
  StatusOr<ParsedProgram> r = ParseProgramText(text, "t.fleet");
  EXPECT_TRUE(r.ok()) << r.status().message() << "\nfor:\n" << text;
  return r.ok() ? std::move(*r) : ParsedProgram{};
}

std::string ErrorOf(std::string_view text) {
  StatusOr<ParsedProgram> r = ParseProgramText(text, "t.fleet");
  EXPECT_FALSE(r.ok()) << "expected an error for:\n" << text;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().message();
  return r.status().message();
}

// Both programs as text, for comparing two files that must build the same thing.
std::string Programs(const ParsedProgram& p) {
  return "startup:\n" + ir::PrintProgram(p.startup) + "main:\n" + ir::PrintProgram(p.main) +
         "loss: " + p.loss + "\n";
}

std::vector<std::string> OpTypes(const ParsedProgram& p) {
  std::vector<std::string> out;
  for (const auto& op : p.main.global().ops) out.push_back(op.type);
  return out;
}

const ir::Op& OpAt(const ParsedProgram& p, size_t i) {
  static const ir::Op none;
  EXPECT_LT(i, p.main.global().ops.size());
  return i < p.main.global().ops.size() ? p.main.global().ops[i] : none;
}

std::vector<int64_t> Shape(const ParsedProgram& p, const std::string& var) {
  const ir::Var* v = p.main.global().FindVar(var);
  EXPECT_NE(v, nullptr) << var;
  return v ? v->shape : std::vector<int64_t>{-999};
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string kX = "x = data('x', shape=[-1, 8])\n";

TEST(LanguageTest, FunctionsLoopsAndConditionsBuildTheStraightLineProgram) {
  const ParsedProgram with_code = Parse(
      "def block(h, size, act='relu', name=None):\n"
      "    \"\"\"A docstring is a statement like any other.\"\"\"\n"
      "    h = fc(h, size=size, act=act, name=name)\n"
      "    return h, size * 2\n"
      "\n"
      "x = data('x', shape=[-1, 8])\n"
      "h = x\n"
      "sizes = [16, 32]\n"
      "for i, s in enumerate(sizes):\n"
      "    if i == 0:\n"
      "        h, doubled = block(h, s, name=f'enc_{i}')\n"
      "    elif i > 5:\n"
      "        pass\n"
      "    else:\n"
      "        h, doubled = block(h, size=s, act='tanh')\n"
      "assert doubled == 64, 'the loop ran twice'\n"
      "out = fc(h, size=len(sizes) + 0)\n"
      "minimize(mean(out), optimizer=sgd(learning_rate=0.1))\n");
  const ParsedProgram straight = Parse(
      "x = data('x', shape=[-1, 8])\n"
      "h = fc(x, size=16, act='relu', name='enc_0')\n"
      "h = fc(h, size=32, act='tanh')\n"
      "out = fc(h, size=2)\n"
      "minimize(mean(out), optimizer=sgd(learning_rate=0.1))\n");
  EXPECT_EQ(Programs(with_code), Programs(straight));
  EXPECT_EQ(with_code.names.count("doubled"), 0u);  // build-time values are not program vars
}

TEST(LanguageTest, ListComprehensionsClosuresAndListMethods) {
  const ParsedProgram p = Parse(
      kX +
      "def make(scale):\n"
      "    def apply(v):\n"
      "        return v * scale\n"
      "    return apply\n"
      "double = make(2.0)\n"
      "outs = [double(x) for _ in range(3) if _ != 1]\n"
      "more = []\n"
      "for o in outs:\n"
      "    more.append(o)\n"
      "more.extend(outs)\n"
      "cfg = {'k': 1}\n"
      "cfg['k'] += 2\n"
      "total = sum([cfg['k'], len(more)], 10)\n"
      "y = fc(concat(more, axis=1), size=total)\n");
  EXPECT_EQ(OpTypes(p), (std::vector<std::string>{"scale", "scale", "concat", "mul",
                                                  "elementwise_add"}));
  EXPECT_FLOAT_EQ(std::get<float>(OpAt(p, 0).attrs.at("scale")), 2.0f);
  EXPECT_EQ(Shape(p, p.names.at("y")), (std::vector<int64_t>{-1, 17}));  // 10 + 3 + 4
}

TEST(LanguageTest, OperatorsOnVariablesAreThePaddleOps) {
  const ParsedProgram p = Parse(
      "x = data('x', shape=[-1, 4])\n"
      "y = data('y', shape=[-1, 4])\n"
      "w = data('w', shape=[4, 3])\n"
      "a = x * 0.5\n"      // scale(scale=0.5)
      "b = 1.0 - x\n"      // scale(scale=-1, bias=1)
      "c = x + y\n"        // elementwise_add
      "d = x @ w\n"        // matmul_v2
      "e = x ** 2\n"       // pow(factor=2)
      "f = -x\n"           // scale(-1)
      "g = 2.0 / x\n"      // fill_constant + elementwise_div
      "h = x < 0.5\n"      // fill_constant + less_than
      "i = x // y\n"
      "j = x % y\n"
      "k = x / 4\n");      // scale(0.25)
  EXPECT_EQ(OpTypes(p),
            (std::vector<std::string>{"scale", "scale", "elementwise_add", "matmul_v2", "pow",
                                      "scale", "fill_constant", "elementwise_div",
                                      "fill_constant", "less_than", "elementwise_floordiv",
                                      "elementwise_mod", "scale"}));
  EXPECT_FLOAT_EQ(std::get<float>(OpAt(p, 1).attrs.at("scale")), -1.0f);
  EXPECT_FLOAT_EQ(std::get<float>(OpAt(p, 1).attrs.at("bias")), 1.0f);
  EXPECT_FLOAT_EQ(std::get<float>(OpAt(p, 4).attrs.at("factor")), 2.0f);
  EXPECT_FLOAT_EQ(std::get<float>(OpAt(p, 12).attrs.at("scale")), 0.25f);
  EXPECT_EQ(OpAt(p, 7).inputs.at("X"), OpAt(p, 6).outputs.at("Out"));  // 2.0 on the left
  EXPECT_EQ(Shape(p, p.names.at("d")), (std::vector<int64_t>{-1, 3}));
  EXPECT_EQ(p.main.global().FindVar(p.names.at("h"))->dtype, ir::DataType::kBool);
}

TEST(LanguageTest, IndexingIsSliceStridedSliceAndUnsqueeze) {
  const ParsedProgram p = Parse(
      "x = data('x', shape=[-1, 6, 5])\n"
      "a = x[:, 0]\n"
      "b = x[..., 1:3]\n"
      "c = x[:, None]\n"
      "d = x[:, ::2]\n"
      "e = x[:, -1, :]\n");
  EXPECT_EQ(OpTypes(p), (std::vector<std::string>{"slice", "slice", "unsqueeze2",
                                                  "strided_slice", "slice"}));
  EXPECT_EQ(Shape(p, p.names.at("a")), (std::vector<int64_t>{-1, 5}));
  EXPECT_EQ(Shape(p, p.names.at("b")), (std::vector<int64_t>{-1, 6, 2}));
  EXPECT_EQ(Shape(p, p.names.at("c")), (std::vector<int64_t>{-1, 1, 6, 5}));
  EXPECT_EQ(Shape(p, p.names.at("d")), (std::vector<int64_t>{-1, 3, 5}));
  EXPECT_EQ(Shape(p, p.names.at("e")), (std::vector<int64_t>{-1, 5}));
  EXPECT_EQ(OpAt(p, 0).attrs.at("axes"), ir::Attribute(std::vector<int32_t>{1}));
  EXPECT_EQ(OpAt(p, 0).attrs.at("decrease_axis"), ir::Attribute(std::vector<int32_t>{1}));
  EXPECT_EQ(OpAt(p, 1).attrs.at("axes"), ir::Attribute(std::vector<int32_t>{2}));
  EXPECT_EQ(OpAt(p, 3).attrs.at("strides"), ir::Attribute(std::vector<int32_t>{2}));
  EXPECT_EQ(ErrorOf("x = data('x', shape=[-1, 6])\ny = x[:, 6]\n"),
            "t.fleet:2:10: index 6 is out of range for dim 1 of size 6");
  EXPECT_EQ(ErrorOf("x = data('x', shape=[-1, 6])\ny = x[:, :, 0]\n"),
            "t.fleet:2:6: too many indices for 'x' of rank 2");
}

TEST(LanguageTest, SeveralResultsUnpack) {
  const ParsedProgram p = Parse(
      "x = data('x', shape=[-1, 12])\n"
      "q, k, v = paddle.split(x, 3, axis=-1)\n"
      "out, idx = paddle.topk(x, k=5)\n"
      "parts = fluid.layers.split(x, [4, -1])\n");
  EXPECT_EQ(Shape(p, p.names.at("q")), (std::vector<int64_t>{-1, 4}));
  EXPECT_EQ(Shape(p, p.names.at("v")), (std::vector<int64_t>{-1, 4}));
  EXPECT_EQ(Shape(p, p.names.at("out")), (std::vector<int64_t>{-1, 5}));
  EXPECT_EQ(p.main.global().FindVar(p.names.at("idx"))->dtype, ir::DataType::kInt64);
  EXPECT_EQ(OpAt(p, 0).outputs.at("Out").size(), 3u);
  EXPECT_EQ(OpAt(p, 2).attrs.at("axis"), ir::Attribute(int32_t{-1}));  // fluid's dim=-1
  EXPECT_EQ(ErrorOf("x = data('x', shape=[-1, 12])\na, b = paddle.split(x, 3, axis=1)\n"),
            "t.fleet:2:1: cannot unpack 3 values into 2 names");
}

// An op called directly gets as many vars in a duplicable output as in the input it carries on
// from: rnn's LSTM State holds h and c, as PreState does.
TEST(LanguageTest, DuplicableOutputsFollowTheirPreviousInput) {
  const ParsedProgram p = Parse(
      "x = data('x', shape=[8, -1, 4])\n"
      "h0 = data('h0', shape=[1, -1, 6])\n"
      "c0 = data('c0', shape=[1, -1, 6])\n"
      "w = [create_parameter([24, 4]), create_parameter([24, 6]),\n"
      "     create_parameter([24], is_bias=True), create_parameter([24], is_bias=True)]\n"
      "out = rnn(x, [h0, c0], w, mode='LSTM', input_size=4, hidden_size=6)\n");
  ASSERT_EQ(OpTypes(p), std::vector<std::string>{"rnn"});
  EXPECT_EQ(OpAt(p, 0).outputs.at("State").size(), 2u);
  EXPECT_EQ(Shape(p, p.names.at("out")), (std::vector<int64_t>{8, -1, 6}));
}

TEST(LanguageTest, PaddleNamesTakeTheirOwnKeywords) {
  const ParsedProgram paddle = Parse(
      "import paddle\n"
      "import paddle.fluid as fluid\n"
      "import numpy as np\n"
      "from paddle.distributed import fleet\n"
      "paddle.enable_static()\n"
      "x = paddle.static.data(name='x', shape=[None, 8], dtype='float32')\n"
      "h = paddle.static.nn.fc(x, size=4, weight_attr=paddle.ParamAttr(name='w'),\n"
      "                        activation='relu')\n"
      "h = fluid.layers.fc(input=h, size=4, act='tanh')\n"
      "h = paddle.nn.functional.gelu(h)\n"
      "h = paddle.matmul(h, h, transpose_y=True)\n"
      "h = fluid.layers.elementwise_add(h, h, act='relu')\n"
      "h = h.reshape([-1, 2, 2])\n"
      "h = h.astype('float64')\n");
  const ParsedProgram fleet = Parse(
      "x = data('x', shape=[-1, 8])\n"
      "h = fc(x, size=4, param_attr=ParamAttr(name='w'), act='relu')\n"
      "h = fc(h, size=4, act='tanh')\n"
      "h = gelu(h)\n"
      "h = matmul(h, h, transpose_y=True)\n"
      "h = elementwise_add(h, h, act='relu')\n"
      "h = reshape(h, [-1, 2, 2])\n"
      "h = cast(h, in_dtype='float32', out_dtype='float64')\n");
  EXPECT_EQ(Programs(paddle), Programs(fleet));
  EXPECT_EQ(ErrorOf("h = paddle.static.nn.fcc(1)\n"),
            "t.fleet:1:22: paddle.static.nn.fcc is not known to Fleet (closest: "
            "'paddle.static.nn.fc', 'paddle.static.auc' or 'paddle.static.data'); "
            "docs/program.md lists the Paddle names Fleet maps");
  EXPECT_EQ(ErrorOf(kX + "h = paddle.static.nn.fc(x, size=3, actvation='relu')\n"),
            "t.fleet:2:36: paddle.static.nn.fc: unknown keyword 'actvation' (did you mean "
            "'activation'?)");
  EXPECT_EQ(ErrorOf("import os\n"),
            "t.fleet:1:1: import of 'os': a program file may import only paddle (and its "
            "submodules) and numpy");
  EXPECT_EQ(ErrorOf(kX + "y = paddle.static.nn.cond(x, 1, 2)\n"),
            "t.fleet:2:22: paddle.static.nn.cond: graph control flow is out of scope; loops "
            "and conditions run at build time (for, if)");
}

TEST(LanguageTest, OptimizerObjectsAndParameters) {
  const ParsedProgram p = Parse(
      "ids = data('ids', shape=[-1, 4], dtype='int64')\n"
      "emb = embedding(ids, size=[50, 8], param_attr=ParamAttr(name='word_emb'))\n"
      "h = reduce_mean(emb, dim=1)\n"
      "logits = paddle.matmul(h, param('word_emb'), transpose_y=True)\n"
      "bias = create_parameter([50], 'float32', is_bias=True)\n"
      "logits = logits + bias\n"
      "loss = mean(logits)\n"
      "opt = paddle.optimizer.Adam(learning_rate=0.001, grad_clip=paddle.nn.ClipGradByGlobalNorm(1.0))\n"
      "opt.minimize(loss)\n");
  ASSERT_TRUE(p.optimizer.has_value());
  EXPECT_EQ(p.optimizer->type, "adam");
  EXPECT_DOUBLE_EQ(p.optimizer->clip_global_norm, 1.0);
  EXPECT_EQ(p.loss, p.names.at("loss"));
  const ir::Op& matmul = OpAt(p, 2);
  EXPECT_EQ(matmul.type, "matmul_v2");
  EXPECT_EQ(matmul.inputs.at("Y"), std::vector<std::string>{"word_emb"});  // tied weights
  EXPECT_EQ(Shape(p, "create_parameter_0.b_0"), std::vector<int64_t>{50});
  EXPECT_EQ(ErrorOf("p = param('word_emb')\n"), "t.fleet:1:11: param: no parameter named "
                                                 "'word_emb'");
}

// Lists and dicts are values here: a function's parameter holds a copy of the caller's list, so
// changing it in place, which Python would show the caller, is refused rather than dropped. A
// copy made in the function, a list of its own, or one reached through a closure (the very
// list, as in Python) may change.
TEST(LanguageTest, ChangingAParameterListInPlaceIsRefused) {
  EXPECT_EQ(ErrorOf("def add(layers, x):\n    layers.append(x)\n    return layers\n"
                    "outs = add([], 1)\n"),
            "t.fleet:2:5: cannot append to 'layers': it is a parameter, and a list passed to a "
            "function is a copy here, so the caller's would not change as it does in Python; "
            "return it instead (layers = f(layers, ...)) or make a copy first (layers = "
            "list(layers))");
  EXPECT_EQ(ErrorOf("def put(d):\n    d['k'] = 1\nput({})\n"),
            "t.fleet:2:5: cannot assign an item of 'd': it is a parameter, and a dict passed to "
            "a function is a copy here, so the caller's would not change as it does in Python; "
            "return it instead (d = f(d, ...))");
  EXPECT_NE(ErrorOf("def grow(xs=[]):\n    xs.extend([1])\ngrow()\n").find("cannot extend 'xs'"),
            std::string::npos);
  const ParsedProgram p = Parse(
      kX +
      "def widths(base, n):\n"
      "    base = list(base)\n"
      "    seen = []\n"
      "    def note(v):\n"
      "        seen.append(v)\n"
      "    for i in range(n):\n"
      "        base.append(base[-1] * 2)\n"
      "        note(i)\n"
      "    return base + seen\n"
      "w = widths([4], 2)\n"
      "y = fc(x, size=sum(w))\n");  // 4 + 8 + 16 + 0 + 1
  EXPECT_EQ(Shape(p, p.names.at("y")), (std::vector<int64_t>{-1, 29}));
}

TEST(LanguageTest, BuildTimeValuesFollowPython) {
  const ParsedProgram p = Parse(
      "n = 7 // 2 + 7 % -3 + int(2 ** 3 / 4)\n"   // 3 + -2 + 2 = 3
      "s = f'{n:03d}-{0.1 + 0.2:.2f}-{[1, \"a\"]}-{n!r}' + '{}'.format(n) + ','.join(['a', 'b'])\n"
      "ok = (1 < n <= 3) and not (n in [1, 2]) and 'a' in 'cat' and None is None\n"
      "t = (1,)\n"
      "last = [1, 2, 3][-1] + [0, 1, 2, 3][1:3][0]\n"
      "x = data(s if ok else 'bad', shape=[-1, last + len(t)])\n");
  EXPECT_NE(p.main.global().FindVar("003-0.30-[1, 'a']-33a,b"), nullptr) << Programs(p);
  EXPECT_EQ(Shape(p, "003-0.30-[1, 'a']-33a,b"), (std::vector<int64_t>{-1, 5}));
}

TEST(LanguageTest, RefusalsNameTheirPlace) {
  EXPECT_EQ(ErrorOf("while True:\n    pass\n"),
            "t.fleet:1:1: 'while' loops are not supported: loop a known number of times with "
            "'for i in range(n)' (graph loops such as while_loop are out of scope)");
  EXPECT_EQ(ErrorOf("class Net:\n    pass\n"),
            "t.fleet:1:1: 'class' is not supported: write the model as functions (def) that "
            "build layers");
  EXPECT_EQ(ErrorOf("f = lambda v: v\n"), "t.fleet:1:5: 'lambda' is not supported: use a def");
  EXPECT_EQ(ErrorOf(kX + "if x:\n    pass\n"),
            "t.fleet:2:4: the truth of the variable 'x' is known only when the program runs: "
            "conditions must be build-time values (graph control flow such as cond and "
            "while_loop is out of scope)");
  EXPECT_EQ(ErrorOf("def f(n):\n    return f(n + 1)\nf(0)\n").substr(0, 33),
            "t.fleet:2:12: calls nest more tha");
  EXPECT_EQ(ErrorOf("for i in range(1000):\n    for j in range(1001):\n        pass\n"),
            "t.fleet:2:5: the program runs more than 1000000 loop iterations in all");
  EXPECT_EQ(ErrorOf("a = []\nfor i in range(1000):\n    a = [a]\n"),
            "t.fleet:3:9: lists and dicts nest more than 100 levels deep");
  EXPECT_EQ(ErrorOf("a = []\nfor i in range(1000000):\n    a = a + [i]\n"),
            "t.fleet:3:5: the program does more than 100000000 units of build-time work "
            "(values copied, scanned or formatted)");
  EXPECT_EQ(ErrorOf("x = []\nfor i in range(1000):\n    x = [[] + [x]][0:1]\n"),
            "t.fleet:3:9: lists and dicts nest more than 100 levels deep");
  EXPECT_EQ(ErrorOf("def wrap(g):\n    def h():\n        return g\n    return h\nf = None\n"
                    "for i in range(100000):\n    f = wrap(f)\n"),
            "t.fleet:2:5: the program runs more than 2000 def statements");
  EXPECT_EQ(ErrorOf("n = 2 ** 70\n"), "t.fleet:1:5: integer overflow in **");
  EXPECT_EQ(ErrorOf("n = 1 // 0\n"), "t.fleet:1:5: integer division or modulo by zero");
  EXPECT_EQ(ErrorOf("s = 'ab' * 10000000\n"),
            "t.fleet:1:5: the result would hold more than 1048576 items");
  EXPECT_EQ(ErrorOf("r = range(10000000000)\n"),
            "t.fleet:1:5: range: range of more than 1048576 items");
  EXPECT_EQ(ErrorOf("a = [1, 2][2]\n"), "t.fleet:1:12: index 2 is out of range for 2 items");
  EXPECT_EQ(ErrorOf("a, b = 1\n"), "t.fleet:1:1: cannot unpack an int (1) into 2 names");
  EXPECT_EQ(ErrorOf("def f(a, b=1):\n    return a\nf(b=2)\n"),
            "t.fleet:3:1: f() missing argument 'a'");
  EXPECT_EQ(ErrorOf("def f(a):\n    return a\nf(1, c=2)\n"),
            "t.fleet:3:6: f() has no parameter 'c' (did you mean 'a'?)");
  EXPECT_EQ(ErrorOf("def f():\n  return 1\n    x = 2\n"), "t.fleet:3:5: unexpected indent");
  EXPECT_EQ(ErrorOf("if 1:\n    a = 1\n  b = 2\n"),
            "t.fleet:3:1: this line's indentation matches no enclosing block (mixing tabs and "
            "spaces, or dedenting to a level never used)");
  EXPECT_EQ(ErrorOf("return 1\n"), "t.fleet:1:1: 'return' outside a function");
  EXPECT_EQ(ErrorOf("break\n"), "t.fleet:1:1: 'break' outside a loop");
  EXPECT_EQ(ErrorOf("assert 1 == 2, 'one is not two'\n"),
            "t.fleet:1:1: __assert_failed__: assertion failed: one is not two");
  EXPECT_EQ(ErrorOf("x = 1 | 2\n"),
            "t.fleet:1:7: operator '|' is not supported; call logical_and, logical_or or "
            "logical_xor on tensors");
  EXPECT_EQ(ErrorOf(kX + "for v in x:\n    pass\n"),
            "t.fleet:2:10: cannot loop over the variable 'x': its values exist only when the "
            "program runs (loop over range(n) or a list instead)");
}

// The quick start as Paddle's documentation writes it builds what examples/mlp/mlp.fleet does.
TEST(LanguageTest, PaddleSpelledQuickStartBuildsTheMlpExample) {
  const std::string model =
      "import paddle\n"
      "paddle.enable_static()\n"
      "\n"
      "def mlp(input_x, input_y, hid_dim=128, label_dim=2):\n"
      "    fc_1 = paddle.static.nn.fc(input=input_x, size=hid_dim, act='tanh')\n"
      "    fc_2 = paddle.static.nn.fc(input=fc_1, size=hid_dim, act='tanh')\n"
      "    prediction = paddle.static.nn.fc(input=[fc_2], size=label_dim, act='softmax')\n"
      "    cost = paddle.fluid.layers.cross_entropy(input=prediction, label=input_y)\n"
      "    avg_cost = paddle.fluid.layers.mean(x=cost)\n"
      "    return avg_cost\n"
      "\n"
      "input_x = paddle.static.data(name='x', shape=[None, 32], dtype='float32')\n"
      "input_y = paddle.static.data(name='y', shape=[None, 1], dtype='int64')\n"
      "cost = mlp(input_x, input_y)\n";
  const ParsedProgram example =
      Parse(ReadFile(std::filesystem::path(FLEET_TEST_DATA_DIR) / "../../../examples/mlp/mlp.fleet"));
  const ParsedProgram single = Parse(model +
                                     "optimizer = paddle.optimizer.SGD(learning_rate=0.01)\n"
                                     "optimizer.minimize(cost)\n");
  EXPECT_EQ(Programs(single), Programs(example));
  ASSERT_TRUE(single.optimizer.has_value());
  EXPECT_EQ(single.optimizer->type, "sgd");

  // Collective: the Fleet lines of a training script, with strategy keys Fleet maps.
  const ParsedProgram collective = Parse(
      "import paddle.distributed.fleet as fleet\n" + model +
      "fleet.init(is_collective=True)\n"
      "strategy = fleet.DistributedStrategy()\n"
      "strategy.nccl_comm_num = 2\n"
      "strategy.fuse_grad_size_in_MB = 16\n"
      "strategy.amp = False\n"
      "optimizer = paddle.optimizer.SGD(learning_rate=0.01)\n"
      "optimizer = fleet.distributed_optimizer(optimizer, strategy)\n"
      "optimizer.minimize(cost)\n");
  EXPECT_EQ(Programs(collective), Programs(example));
  ASSERT_TRUE(collective.fleet_init.has_value());
  EXPECT_EQ(collective.fleet_init->is_collective, true);
  ASSERT_EQ(collective.strategy.size(), 2u);
  EXPECT_EQ(collective.strategy[0].config_key, "fuse_grad_size_mb");
  EXPECT_EQ(std::get<double>(collective.strategy[0].value), 16.0);
  EXPECT_EQ(collective.strategy[1].config_key, "nrings");
  EXPECT_EQ(std::get<int64_t>(collective.strategy[1].value), 2);
  EXPECT_EQ(collective.strategy[1].where, "t.fleet:18:10");

  // Parameter server: a_sync (sync_mode's negation) and the communicator's configs.
  const ParsedProgram ps = Parse(
      "from paddle.distributed import fleet\n" + model +
      "role = fleet.PaddleCloudRoleMaker()\n"
      "fleet.init(role)\n"
      "strategy = fleet.DistributedStrategy()\n"
      "strategy.a_sync = False\n"
      "optimizer = fleet.distributed_optimizer(paddle.optimizer.SGD(learning_rate=0.01),\n"
      "                                        strategy=strategy)\n"
      "optimizer.minimize(cost)\n");
  EXPECT_EQ(Programs(ps), Programs(example));
  ASSERT_EQ(ps.strategy.size(), 1u);
  EXPECT_EQ(ps.strategy[0].config_key, "a_sync");
  EXPECT_EQ(std::get<bool>(ps.strategy[0].value), false);
  EXPECT_EQ(ps.fleet_init->is_collective, false);
  const ParsedProgram async = Parse(
      "strategy = fleet.DistributedStrategy()\nstrategy.a_sync = True\n"
      "strategy.a_sync_configs = {'k_steps': 0, 'max_merge_var_num': 4, "
      "'independent_recv_thread': True}\n"
      "opt = fleet.distributed_optimizer(paddle.optimizer.SGD(learning_rate=0.1), strategy)\n");
  ASSERT_EQ(async.strategy.size(), 4u);
  std::map<std::string, std::variant<bool, int64_t, double, std::string>> set;
  for (const auto& k : async.strategy) set[k.config_key] = k.value;
  EXPECT_EQ(std::get<bool>(set.at("a_sync")), true);
  EXPECT_EQ(std::get<int64_t>(set.at("a_sync_configs.k_steps")), 0);
  EXPECT_EQ(std::get<int64_t>(set.at("a_sync_configs.max_merge_var_num")), 4);
  EXPECT_EQ(std::get<bool>(set.at("a_sync_configs.independent_recv_thread")), true);
  EXPECT_EQ(ErrorOf("strategy = fleet.DistributedStrategy()\n"
                    "strategy.a_sync_configs = {'send_queue_size': 0}\n"),
            "t.fleet:2:10: strategy.a_sync_configs: 'send_queue_size' must be in [1, 1024], "
            "got 0");
  EXPECT_EQ(ErrorOf("strategy = fleet.DistributedStrategy()\n"
                    "strategy.a_sync_configs = {'use_ps_gpu': True}\n"),
            "t.fleet:2:10: strategy.a_sync_configs: 'use_ps_gpu' is not supported; Fleet reads "
            "k_steps, max_merge_var_num, send_queue_size, independent_recv_thread, "
            "thread_pool_size, send_wait_times and runtime_split_send_recv");

  const ParsedProgram sbn =
      Parse("strategy = fleet.DistributedStrategy()\nstrategy.sync_batch_norm = True\n"
            "opt = fleet.distributed_optimizer(paddle.optimizer.SGD(learning_rate=0.1), "
            "strategy)\n");
  ASSERT_EQ(sbn.strategy.size(), 1u);
  EXPECT_EQ(sbn.strategy[0].config_key, "sync_batch_norm");
  EXPECT_EQ(std::get<bool>(sbn.strategy[0].value), true);

  EXPECT_EQ(ErrorOf("strategy = fleet.DistributedStrategy()\nstrategy.amp = True\n"),
            "t.fleet:2:10: strategy.amp: Fleet does not support this feature (only = False is "
            "accepted); it supports a_sync, a_sync_configs, fuse_all_reduce_ops, "
            "fuse_grad_size_in_MB, localsgd, localsgd_configs, nccl_comm_num and sync_batch_norm");
  EXPECT_EQ(ErrorOf("strategy = fleet.DistributedStrategy()\nstrategy.a_snc = True\n"),
            "t.fleet:2:10: strategy.a_snc: DistributedStrategy has no such attribute (did you "
            "mean 'a_sync'?)");
  EXPECT_EQ(ErrorOf("strategy = fleet.DistributedStrategy()\n"
                    "strategy.a_sync_configs = {'k_steps': 1000001}\n"),
            "t.fleet:2:10: strategy.a_sync_configs: 'k_steps' must be in [-1, 1000000], got "
            "1000001");
}

// Every Paddle name maps onto a layer or op that takes the parameters the table names, and
// docs/program.md lists exactly the table.
TEST(LanguageTest, PaddleNameTableAgreesWithTheLayersAndTheDocs) {
  Status table = CheckPaddleApiTable();
  EXPECT_TRUE(table.ok()) << table.message();
  const std::string doc =
      ReadFile(std::filesystem::path(FLEET_TEST_DATA_DIR) / "../../../docs/program.md");
  const std::string begin = "<!-- paddle-names:begin -->\n", end = "<!-- paddle-names:end -->";
  const size_t b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos) << "docs/program.md lacks " << begin;
  ASSERT_NE(e, std::string::npos);
  const std::string listed = doc.substr(b + begin.size(), e - b - begin.size());
  const std::string want = PaddleApiMarkdown();
  if (listed != want) {
    const std::filesystem::path fresh = std::filesystem::temp_directory_path() / "paddle_names.md";
    std::ofstream(fresh) << want;
    ADD_FAILURE() << "docs/program.md's table of Paddle names is stale (the frontend's is in "
                  << fresh << "); scripts/update_paddle_names.sh rewrites it";
  }
}

}  // namespace
}  // namespace fleet::frontend
