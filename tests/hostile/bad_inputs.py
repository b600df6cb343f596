#!/usr/bin/env python3
"""Bad inputs at every input boundary of fleet-host, and how each one ended.

Each boundary (program files, fleet.toml, data files, checkpoints and exports, command-line
flags) has a generator that writes dozens to a couple of hundred hostile variants of a good
input, deterministic from --seed, and says for each whether fleet-host must refuse it or may
legitimately accept it. Every variant runs against the real binary in its own process group
with a deadline, and ends as one of:

  clean error      exit 1 or 2, with a message naming the file (or key, or flag) that is wrong;
                   no "terminate called", no sanitizer report, no signal;
  legit accepted   exit 0 on an input the generator says may be accepted;
  wrongly accepted exit 0 on an input that must be refused (or a check of what the run left
                   behind failed, e.g. a file written outside the directory it belongs to);
  crash            killed by a signal, "terminate called" or a sanitizer report;
  hang             still running at the deadline (the whole process group is killed);
  other error      any other exit: a code other than 1 or 2 (70 is fleet-host's last-resort
                   "internal error" / "out of memory"), or a message that names nothing.

Independently of that, an output is flagged when it holds raw control characters or ESC (an
unescaped echo of hostile bytes) or is longer than 16 KB.

The exit status is non-zero when any crash, hang or unescaped echo was found; with --strict
also for wrongly accepted inputs, other errors and long outputs.

Standard library only. The processes run with a 4 GiB address-space limit (a runaway
allocation ends in bad_alloc instead of the machine's OOM killer), a 256 MiB file-size limit
and no core files.
"""

import argparse
import dataclasses
import json
import os
import random
import re
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLES = os.path.join(SOURCE_ROOT, "examples")
BASE_PROGRAM = os.path.join(EXAMPLES, "mlp", "mlp.fleet")
BASE_CONFIG = os.path.join(EXAMPLES, "mlp", "fleet.toml")

DEADLINE_S = 20.0
LONG_OUTPUT = 16 * 1024
KEEP_OUTPUT = 256 * 1024  # bytes of each output read back (the rest is only measured)

OUTCOMES = ("clean error", "legit accepted", "wrongly accepted", "crash", "hang", "other error")
FLAGS = ("unescaped echo", "long output")

# Variables that would make a process think it is one rank of a launched job.
ROLE_VARIABLES = re.compile(
    r"^(PADDLE_|TRAINING_ROLE$|POD_IP$|OMPI_|PMI_|SLURM_|RANK$|WORLD_SIZE$|LOCAL_RANK$|"
    r"LOCAL_WORLD_SIZE$|MASTER_ADDR$|MASTER_PORT$|FLEET_JOB_SECRET|FLEET_RESTART_COUNT$|"
    r"FLEET_COLLECTIVE_CHECK$)")


@dataclasses.dataclass
class Case:
    """One hostile input and the command that feeds it to fleet-host."""

    desc: str                       # what the input is, for the report
    args: List[str]                 # fleet-host's arguments
    must_refuse: Optional[bool]     # True: exit 0 is wrong; False: a valid input; None: either
    names: Sequence[str] = ()       # a clean error mentions one of these (file, key or flag)
    cwd: Optional[str] = None
    quick: bool = False             # part of --quick
    # A check of what an accepted (or refused) run left behind; returns a problem or None.
    post: Optional[Callable[["Result"], Optional[str]]] = None
    boundary: str = ""
    # The address-space limit of this case in MiB instead of --mem-mb; 0: none (for inputs that
    # reserve much address space but little memory, such as thousands of thread stacks).
    mem_mb: Optional[int] = None


@dataclasses.dataclass
class Result:
    case: Case
    rc: Optional[int]
    output: bytes
    output_size: int
    seconds: float
    outcome: str = ""
    flags: List[str] = dataclasses.field(default_factory=list)
    note: str = ""


# ---- running and classifying ---------------------------------------------------------------------

CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")
CRASH_MARKS = (b"terminate called", b"Sanitizer", b"runtime error:", b"core dumped")
# A C++ exception's what() passed on as the whole explanation: it names nothing the user wrote.
RAW_EXCEPTION = re.compile(rb"std::bad_alloc|std::bad_array_new_length|std::length_error|"
                           rb"vector::_M|basic_string::|_M_create|_M_default_append|\bstoi\b|"
                           rb"\bstoll?\b|\bstoull?\b|map::at|bad_optional_access|"
                           rb"bad_variant_access|std::out_of_range|std::invalid_argument")


def host_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not ROLE_VARIABLES.match(k)}
    env["LC_ALL"] = "C.UTF-8"
    env.pop("FLEET_JOB_SECRET", None)
    env.pop("FLEET_JOB_SECRET_FILE", None)
    return env


def run_case(host: str, case: Case, deadline: float, scratch: str, env: dict) -> Result:
    fd, out_path = tempfile.mkstemp(prefix="out.", dir=scratch)
    start = time.monotonic()
    timed_out = False
    try:
        with os.fdopen(fd, "wb") as out:
            argv = [host] + case.args
            if case.mem_mb is not None:
                limit = case.mem_mb << 20 if case.mem_mb else resource.RLIM_INFINITY
                argv = [sys.executable, "-c", "import os, resource, sys; "
                        "resource.setrlimit(resource.RLIMIT_AS, (%d, %d)); "
                        "os.execv(sys.argv[1], sys.argv[1:])"
                        % (limit, resource.getrlimit(resource.RLIMIT_AS)[1])] + argv
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                        stderr=subprocess.STDOUT, cwd=case.cwd or scratch,
                                        env=env, start_new_session=True)
            except OSError as e:
                raise SystemExit("bad_inputs.py: cannot start the case %r: %s"
                                 % (show(case.desc), e))
            try:
                proc.wait(timeout=deadline)
            except subprocess.TimeoutExpired:
                timed_out = True
            # Whatever is left of the group (a hung process, ranks a launcher started) goes.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
        seconds = time.monotonic() - start
        size = os.path.getsize(out_path)
        with open(out_path, "rb") as f:
            output = f.read(KEEP_OUTPUT)
    finally:
        os.unlink(out_path)
    result = Result(case, None if timed_out else proc.returncode, output, size, seconds)
    classify(result)
    return result


def error_text(output: bytes) -> bytes:
    """The lines of an output that report a problem (not the banner `check` prints first)."""
    marks = (b"fleet-host:", b"fleet-host launch:", b"fleet-host show:", b"fleet-host ops:",
             b"[error]", b"[warning]", b"error:", b"FAILED", b"Usage:")
    lines = [l for l in output.split(b"\n") if any(m in l for m in marks)]
    return b"\n".join(lines) if lines else output


def names_mentioned(case: Case, output: bytes) -> bool:
    if not case.names:
        return b"fleet-host" in output
    low = error_text(output).lower()
    for name in case.names:
        b = name.encode("utf-8", "surrogateescape") if isinstance(name, str) else name
        if b.lower() in low:
            return True
    return False


def classify(r: Result) -> None:
    case = r.case
    if r.rc is None:
        r.outcome = "hang"
    elif r.rc < 0 or any(mark in r.output for mark in CRASH_MARKS):
        r.outcome = "crash"
        if r.rc < 0:
            try:
                r.note = "killed by " + signal.Signals(-r.rc).name
            except ValueError:
                r.note = "killed by signal %d" % -r.rc
    elif r.rc == 0:
        r.outcome = "wrongly accepted" if case.must_refuse else "legit accepted"
    elif r.rc in (1, 2) and names_mentioned(case, r.output):
        r.outcome = "clean error"
        raw = RAW_EXCEPTION.search(r.output)
        if raw:
            r.outcome = "other error"
            r.note = "exit %d, but what is wrong is only a C++ exception: %s" % (
                r.rc, raw.group(0).decode())
    else:
        r.outcome = "other error"
        r.note = ("exit %d" % r.rc) if r.rc not in (1, 2) else \
            "exit %d, but the message names none of: %s" % (r.rc, ", ".join(map(show, case.names)))
    if case.must_refuse is False and r.rc not in (0, None) and r.outcome == "clean error":
        r.outcome = "other error"
        r.note = "a valid input was refused"
    if case.post is not None and r.outcome not in ("crash", "hang"):
        problem = case.post(r)
        if problem:
            r.note = problem if not r.note else r.note + "; " + problem
            r.outcome = "wrongly accepted" if r.rc == 0 else "other error"
    if CONTROL.search(r.output):
        r.flags.append("unescaped echo")
    if r.output_size > LONG_OUTPUT:
        r.flags.append("long output")


def show(text) -> str:
    """Text for the report, with control characters and invalid UTF-8 escaped."""
    if isinstance(text, str):
        text = text.encode("utf-8", "surrogateescape")
    out = []
    for ch in text.decode("utf-8", "backslashreplace"):
        if ch in "\t":
            out.append(ch)
        elif ord(ch) < 0x20 or 0x7f <= ord(ch) < 0xa0:
            out.append("\\x%02x" % ord(ch))
        else:
            out.append(ch)
    return "".join(out)


def first_lines(output: bytes, lines: int = 6, width: int = 240) -> List[str]:
    picked = []
    for line in output.split(b"\n"):
        if not line.strip():
            continue
        text = show(line)
        picked.append(text if len(text) <= width else text[:width] + "...(%d chars)" % len(text))
        if len(picked) == lines:
            break
    return picked


# ---- helpers for the generators ------------------------------------------------------------------


class Context:
    def __init__(self, host: str, work: str, seed: int, quick: bool):
        self.host = host
        self.work = work
        self.seed = seed
        self.quick = quick
        self.env = host_env()

    def rng(self, boundary: str) -> random.Random:
        return random.Random("%d:%s" % (self.seed, boundary))

    def dir(self, *parts: str) -> str:
        path = os.path.join(self.work, *parts)
        os.makedirs(path, exist_ok=True)
        return path

    def prepare(self, args: List[str], cwd: Optional[str] = None) -> subprocess.CompletedProcess:
        """Runs fleet-host to make a good input (a checkpoint, an export); it must succeed."""
        p = subprocess.run([self.host] + args, cwd=cwd or self.work, env=self.env,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
        if p.returncode != 0:
            raise SystemExit("bad_inputs.py: preparing with `fleet-host %s` failed (exit %d):\n%s"
                             % (" ".join(args), p.returncode,
                                (p.stdout + p.stderr).decode("utf-8", "replace")))
        return p


def write(path: str, data) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    with open(path, "wb") as f:
        f.write(data)
    return path


def fifo(path: str) -> str:
    if os.path.lexists(path):
        os.unlink(path)
    os.mkfifo(path)
    return path


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def flip_bytes(data: bytes, rng: random.Random, count: int) -> bytes:
    b = bytearray(data)
    for _ in range(count):
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    return bytes(b)


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parens_balanced(text: str) -> bool:
    depth = 0
    quote = None
    for ch in text:
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            break
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
    return depth == 0 and quote is None


# ---- boundary: program files ---------------------------------------------------------------------


def gen_program(ctx: Context) -> List[Case]:
    rng = ctx.rng("program")
    d = ctx.dir("program")
    base = read(BASE_PROGRAM).decode()
    lines = base.splitlines(keepends=True)
    cases: List[Case] = []
    n = [0]

    def add(desc, text, must_refuse=True, quick=False, name=None, post=None, extra=()):
        n[0] += 1
        path = os.path.join(d, name or "p%03d.fleet" % n[0])
        if text is not None:
            write(path, text)
        cases.append(Case(desc, ["check", path] + list(extra), must_refuse,
                          names=(os.path.basename(path),), cwd=d, quick=quick, post=post))
        return path

    head = "x = data(\"x\", shape=[-1, 32], dtype=\"float32\")\n" \
           "y = data(\"y\", shape=[-1, 1], dtype=\"int64\")\n"
    tail = "cost = cross_entropy(prediction, y)\navg_cost = mean(cost)\n" \
           "minimize(avg_cost, optimizer=sgd(learning_rate=0.01))\n"

    def net(*body: str) -> str:
        return head + "".join(b + "\n" for b in body) + tail

    add("the base program, unchanged", base, must_refuse=False, quick=True)

    # Deep nesting, of every construct that nests.
    for depth in (64, 1000, 100000):
        q = depth in (1000, 100000)
        add("list nested %d deep as fc's size" % depth,
            net("prediction = fc(x, size=" + "[" * depth + "2" + "]" * depth + ", act=\"softmax\")"),
            quick=q)
        add("parentheses nested %d deep around a number" % depth,
            net("prediction = fc(x, size=" + "(" * depth + "2" + ")" * depth + ", act=\"softmax\")"),
            must_refuse=None if depth <= 64 else None, quick=q)
        add("mean() nested %d deep" % depth,
            net("h = fc(x, size=2, act=\"softmax\")",
                "prediction = " + "mean(" * depth + "h" + ")" * depth),
            must_refuse=None, quick=q)
        add("unclosed '[' x %d" % depth, net("prediction = fc(x, size=" + "[" * depth), quick=q)
    add("2000 chained fc layers (a deep but legal network)",
        net(*["x = fc(x, size=2, act=\"tanh\")" for _ in range(2000)],
            "prediction = fc(x, size=2, act=\"softmax\")"), must_refuse=None)

    # Sizes: huge, overflowing, zero, negative, of the wrong type.
    for size, refuse, q in (("2**62", True, False), ("4611686018427387904", True, True),
                            ("9223372036854775807", True, True), ("9223372036854775808", True, True),
                            ("18446744073709551617", True, False), ("9" * 400, True, True),
                            ("0", True, True), ("-1", True, True), ("-9223372036854775808", True, False),
                            ("1e308", True, False), ("2.5", True, False), ("\"2\"", True, False),
                            ("True", True, False), ("None", True, False), ("[2, 2]", True, False),
                            ("x", True, False), ("1e-400", True, False), ("nan", True, False),
                            ("65536", None, False), ("2147483648", True, True),
                            ("3037000500", True, False)):
        add("fc(size=%s)" % size[:40], net("prediction = fc(x, size=%s, act=\"softmax\")" % size),
            must_refuse=refuse, quick=q)
    # (shape, in --quick, must refuse)
    for shape, q, refuse in (("[-1, 0]", True, True), ("[-1, -2]", True, True),
                             ("[0, 32]", False, True), ("[]", True, True),
                             ("[-1, -1]", False, True), ("[-1, 2**31]", False, True),
                             ("[-1, 2147483648, 2147483648, 2147483648]", True, True),
                             ("[-1, 65536, 65536, 65536, 65536]", False, True),
                             ("[-1, 4611686018427387904]", True, True),
                             ("[-1" + ", 1" * 2000 + "]", False, None),
                             ("[-1, 32.5]", False, True), ("[-1, \"32\"]", False, True),
                             ("-1", False, True), ("None", False, True),
                             ("[-1, 99999999999999999999999]", True, True)):
        add("data shape=%s" % (shape if len(shape) < 60 else shape[:40] + "... (%d dims)"
                               % (shape.count(",") + 1)),
            "x = data(\"x\", shape=%s, dtype=\"float32\")\n" % shape + base.split("\n", 2)[2],
            quick=q, must_refuse=refuse)
    for dtype in ("\"float128\"", "\"\"", "\"int64\"", "\"bfloat16\"", "7", "\"float32\\x00\""):
        add("data dtype=%s for x" % dtype,
            "x = data(\"x\", shape=[-1, 32], dtype=%s)\n" % dtype + base.split("\n", 2)[2],
            must_refuse=None if dtype in ("\"int64\"", "\"bfloat16\"") else True)
    for layer_args, q in (("conv2d(x, num_filters=2, filter_size=3)", False),
                          ("embedding(x, size=[2**62, 2])", True),
                          ("embedding(x, size=[-5, 2])", False),
                          ("pool2d(x, pool_size=0)", False),
                          ("dropout(x, dropout_prob=2.0)", True),
                          ("dropout(x, dropout_prob=-1)", False),
                          ("fc(x, size=2, num_flatten_dims=99)", True),
                          ("fc(x, size=2, num_flatten_dims=-99)", False),
                          ("fc(x, size=2, act=\"no_such_act\")", True),
                          ("layer_norm(x, begin_norm_axis=7)", False),
                          ("fc(x, 2, 1, None, None, None, None, None, None)", False),
                          ("fc(size=2)", False), ("fc(x, size=2, size=3)", True),
                          ("fc(x, size=2, bogus=1)", True)):
        add("bad layer call: %s" % layer_args,
            net("h = " + layer_args, "prediction = fc(x, size=2, act=\"softmax\")",
                "z = mean(h)"), quick=q)

    # Unknown layers, keywords, attribute access, and Python the language leaves out.
    for stmt, q in (("h = no_such_layer(x)", True), ("h = fluid.layers.no_such(x, size=2)", True),
                    ("import os", True), ("import sys as fluid", False),
                    ("h = __import__(\"os\")", True), ("h = x.__class__", False),
                    ("h = fc(x, size=2)(x)", False), ("h = x[:, 40]", False),
                    ("h = lambda: 1", False), ("h = undefined_name", True),
                    ("exec(\"print(1)\")", False), ("h = fc(x, size=2, act=fc)", False),
                    ("class A: pass", False), ("while True: pass", True),
                    ("if x: pass", False), ("h = open('/etc/passwd')", True),
                    ("h = paddle.static.nn.cond(x, 1, 2)", False),
                    ("strategy = fleet.DistributedStrategy(); strategy.amp = True", False)):
        add("statement %r" % stmt,
            head + stmt + "\n" + "prediction = fc(x, size=2, act=\"softmax\")\n" + tail, quick=q)
    # Statements of the Python subset: accepted.
    for stmt in ("h = fluid.layers.fc(x, size=2)", "def f(): pass", "h = x[0]",
                 "h = fc(x, size=2) + 1", "h = fc(x, size=2); z = 1"):
        add("statement %r" % stmt,
            head + stmt + "\n" + "prediction = fc(x, size=2, act=\"softmax\")\n" + tail,
            must_refuse=False)
    # Programs that would run forever, recurse without end or allocate what they ask for.
    for label, stmt, q in (
            ("unbounded recursion", "def f(n):\n    return f(n + 1)\nf(0)", True),
            ("mutual recursion", "def f(n):\n    return g(n)\ndef g(n):\n    return f(n)\nf(0)",
             False),
            ("a billion iterations", "for i in range(1000):\n    for j in range(1000):\n"
                                     "        for k in range(1000):\n            pass", True),
            ("a huge range", "r = list(range(10 ** 15))", True),
            ("a string of 10^12 bytes", "s = 'x' * 10 ** 12", True),
            ("doubling a list 64 times", "a = [1]\nfor i in range(64):\n    a = a + a", False),
            ("a list grown by concatenation 10^6 times",
             "a = []\nfor i in range(1000000):\n    a = a + [i]", False),
            ("a list nested 10^5 deep", "a = []\nfor i in range(100000):\n    a = [a]", True),
            ("a dict of 10^6 keys", "d = {}\nfor i in range(1000000):\n    d[str(i)] = i", False),
            ("a chain of 10^6 closures",
             "def wrap(g):\n    def h():\n        return g\n    return h\nf = None\n"
             "for i in range(1000000):\n    f = wrap(f)", True),
            ("a list nested through slices and concatenation",
             "x = []\nfor i in range(100000):\n    x = [[] + [x]][0:1]", False),
            ("a power tower", "n = 2 ** 2 ** 2 ** 2 ** 2 ** 2", False),
            ("a layer per iteration, 10^6 times",
             "h = x\nfor i in range(1000000):\n    h = relu(h)", False),
            ("an f-string nested in itself", "s = f'{f\"{f\\'{1}\\'}\"}'", False),
            ("deep unary minus", "n = " + "-" * 100000 + "1", False),
            ("deep power", "n = " + "2 ** " * 100000 + "1", False),
            ("deep blocks", "".join("    " * i + "if True:\n" for i in range(200)) + "    " * 200 +
             "pass", False)):
        add("program: %s" % label,
            head + stmt + "\n" + "prediction = fc(x, size=2, act=\"softmax\")\n" + tail, quick=q)

    # Invalid UTF-8, control characters and escapes in names and strings.
    for label, name, q in (("invalid UTF-8 byte 0xff", "x\udcff", True),
                           ("a lone continuation byte 0x80", "\udc80x", False),
                           ("an overlong '/' (0xc0 0xaf)", "x\udcc0\udcaf", False),
                           ("ESC [2J (clear screen)", "x\x1b[2J", True),
                           ("ESC ]0; (terminal title)", "x\x1b]0;owned\x07", False),
                           ("a NUL byte", "x\x00y", True), ("a carriage return", "x\rFAKE", True),
                           ("a backspace", "x\x08\x08\x08", False),
                           ("a C1 control (U+009B CSI)", "x\u009b31m", True),
                           ("right-to-left override U+202E", "x\u202etxt.exe", False),
                           ("a newline", "x\ny", False), ("the empty string", "", True),
                           ("a 100000-character name", "n" * 100000, False)):
        add("data var named with %s" % label,
            base.replace("data(\"x\"", "data(\"%s\"" % name, 1), must_refuse=None, quick=q)
        add("layer name= with %s" % label,
            net("prediction = fc(x, size=2, act=\"softmax\", name=\"%s\")" % name),
            must_refuse=None, quick=q)
    # Names the parser accepts are printed back by `show`: they must come out escaped.
    for label, name in (("a C1 control (U+009B CSI)", "x\u009b31m"),
                        ("right-to-left override U+202E", "x\u202etxt"),
                        ("a zero-width joiner U+200D", "x\u200dy")):
        n[0] += 1
        path = write(os.path.join(d, "p%03d.fleet" % n[0]),
                     base.replace("data(\"x\"", "data(\"%s\"" % name, 1))
        cases.append(Case("show --stage parsed of a data var named with %s" % label,
                          ["show", path, "--stage", "parsed"], None,
                          names=(os.path.basename(path),), cwd=d, quick=label.startswith("a C1")))
    for label, ident in (("an identifier with byte 0xff", "h\udcff"),
                         ("an identifier with ESC", "h\x1b[31m"),
                         ("an identifier with NUL", "h\x00"),
                         ("an identifier with U+00E9", "h\u00e9")):
        add(label, net(ident + " = fc(x, size=2, act=\"softmax\")", "prediction = " + ident),
            must_refuse=None, quick=True)
    for esc in ("\\x1b[31m", "\\u001b", "\\0", "\\", "\\q", "\\N{ESC}"):
        add("a string escape %r in a name" % esc,
            net("prediction = fc(x, size=2, act=\"softmax\", name=\"a%sb\")" % esc),
            must_refuse=None)

    # param_attr names that look like paths: accepted or not, nothing may be written outside
    # the directory given to save_params_dir.
    for label, pname, q in (("../ escaping the parameter directory", "../escaped_param", True),
                            ("deep ../../../", "../../../../../../tmp/escaped_param_abs", False),
                            ("an absolute path", os.path.join(d, "abs_escaped_param"), True),
                            ("a subdirectory", "sub/param", False), ("'.'", ".", False),
                            ("'..'", "..", True), ("the empty string", "", False),
                            ("a NUL byte", "w\x00x", False), ("a trailing slash", "w/", False)):
        out_dir = os.path.join(ctx.dir("program", "params_%03d" % (n[0] + 1)), "out")

        def escaped(r, out_dir=out_dir, pname=pname):
            parent = os.path.dirname(out_dir)
            stray = [os.path.join(dp, f) for dp, _, fs in os.walk(parent) for f in fs
                     if not os.path.join(dp, f).startswith(out_dir + os.sep)]
            target = os.path.normpath(os.path.join(out_dir, pname + ".npy")) if pname else ""
            if target and not target.startswith(out_dir + os.sep) and os.path.exists(target):
                stray.append(target)
            if stray:
                return "wrote outside save_params_dir: " + ", ".join(stray[:3])
            return None

        text = net("prediction = fc(x, size=2, act=\"softmax\", param_attr=\"%s\")" % pname)
        n[0] += 1
        path = write(os.path.join(d, "p%03d.fleet" % n[0]), text)
        cases.append(Case("param_attr name with %s, then run with save_params_dir" % label,
                          ["run", path, "--set", "train.steps=1",
                           "--set", "train.save_params_dir=" + out_dir],
                          None, names=(os.path.basename(path), "param"), cwd=d, quick=q,
                          post=escaped))
        add("ParamAttr(name=...) with %s" % label,
            net("prediction = fc(x, size=2, act=\"softmax\", param_attr=ParamAttr(name=\"%s\"))"
                % pname), must_refuse=None)

    # Truncations: before the end of the last statement the program must be refused.
    stripped = base.rstrip()
    points = sorted(set([0, 1, len(base) // 2, len(stripped) - 1, len(stripped), len(base) - 1] +
                        [rng.randrange(len(base)) for _ in range(30)]))
    for cut in points:
        text = base[:cut]
        complete = "minimize(" in text and parens_balanced(text.splitlines()[-1] if text else "")
        add("truncated after %d of %d bytes" % (cut, len(base)), text,
            must_refuse=None if complete else True, quick=cut in (0, len(base) // 2))

    # Long lines.
    mb = 1 << 20
    add("a 1 MB comment line", "#" + "c" * mb + "\n" + base, must_refuse=False)
    add("a 1 MB identifier", net("a" * mb + " = fc(x, size=2, act=\"softmax\")",
                                  "prediction = " + "a" * mb), must_refuse=False, quick=True)
    add("a 1 MB string literal as a layer name",
        net("prediction = fc(x, size=2, act=\"softmax\", name=\"%s\")" % ("s" * mb)),
        must_refuse=None)
    add("a 1 MB unterminated string", net("prediction = fc(x, size=2, name=\"" + "s" * mb),
        quick=True)
    add("a 1 MB number", net("prediction = fc(x, size=" + "7" * mb + ", act=\"softmax\")"))
    add("a 1 MB line of '+' before a number",
        net("prediction = fc(x, size=" + "+" * mb + "2, act=\"softmax\")"), must_refuse=None)
    add("a 1 MB line of '-' before a number",
        net("prediction = fc(x, size=" + "-" * mb + "2, act=\"softmax\")"), must_refuse=None)
    add("a 1 MB list as a shape (349525 dims of 1)",
        "x = data(\"x\", shape=[-1" + ", 1" * (mb // 3) + "])\n" + base.split("\n", 2)[2],
        must_refuse=None)
    add("200000 positional arguments", net("prediction = fc(x" + ", 2" * 200000 + ")"))
    add("200000 backslash continuations",
        net("prediction = fc(x, size=2, \\\n" + "\\\n" * 200000 + "act=\"softmax\")"),
        must_refuse=None)
    add("100000 lines rebinding the same name",
        net(*["h = x" for _ in range(100000)], "prediction = fc(h, size=2, act=\"softmax\")"),
        must_refuse=False)
    add("50000 distinct data vars",
        net(*["d%d = data(\"d%d\", shape=[-1, 1])" % (i, i) for i in range(50000)],
            "prediction = fc(x, size=2, act=\"softmax\")"), must_refuse=None)

    # Odd files.
    add("an empty file", "", quick=True)
    add("only whitespace and comments", "\n   \n# nothing\n\t\n")
    add("only NUL bytes", b"\x00" * 4096)
    add("a UTF-8 byte-order mark first", "\ufeff" + base, must_refuse=None)
    add("a UTF-16 encoded program", base.encode("utf-16"), quick=True)
    add("CRLF line endings", base.replace("\n", "\r\n"), must_refuse=None)
    add("CR-only line endings", base.replace("\n", "\r"), must_refuse=None)
    add("a NUL byte in the middle", base[:100] + "\x00" + base[100:])
    add("random binary (4 KiB)", bytes(rng.randrange(256) for _ in range(4096)))
    add("/dev/zero as the program", None, name="/dev/zero", quick=True)
    cases[-1].names = ("/dev/zero",)
    add("/dev/null as the program", None, name="/dev/null")
    cases[-1].names = ("/dev/null",)
    add("/dev/urandom as the program", None, name="/dev/urandom")
    cases[-1].names = ("/dev/urandom",)
    fifo_path = fifo(os.path.join(d, "fifo.fleet"))
    add("a FIFO nobody writes to as the program", None, name=fifo_path, quick=True)
    add("a directory as the program", None, name=d)
    cases[-1].names = ("program",)
    add("a program path that does not exist", None, name=os.path.join(d, "missing.fleet"))
    loop = os.path.join(d, "loop.fleet")
    if not os.path.lexists(loop):
        os.symlink(loop, loop)
    add("a symlink loop as the program", None, name=loop)
    add("a program path of 5000 characters", None, name="/".join(["a" * 250] * 20) + ".fleet")
    cases[-1].names = ("aaaa",)

    # Random damage to the base: bytes flipped, tokens deleted, duplicated or swapped. Whether
    # each may be accepted is unknown; only crashes, hangs and echoes count.
    tokens = re.findall(r"\w+|\S|\s+", base)
    for i in range(70):
        kind = i % 4
        if kind == 0:
            text = flip_bytes(base.encode(), rng, rng.randint(1, 4))
            what = "bytes flipped"
        else:
            t = list(tokens)
            j = rng.randrange(len(t))
            if kind == 1:
                del t[j]
                what = "token %r deleted" % tokens[j]
            elif kind == 2:
                t.insert(j, t[j] * rng.choice((2, 3, 50)))
                what = "token %r repeated" % tokens[j]
            else:
                k = rng.randrange(len(t))
                t[j], t[k] = t[k], t[j]
                what = "tokens %r and %r swapped" % (tokens[j], tokens[k])
            text = "".join(t)
        add("random damage #%d: %s" % (i, what), text, must_refuse=None, quick=i < 6)
    return cases


# ---- boundary: fleet.toml -----------------------------------------------------------------------

# Every key of fleet.toml with its kind (host/config/config_schema.cc, examples/fleet.toml).
CONFIG_KEYS = {
    "plugins": {"dirs": "strlist", "allow_insecure": "bool", "load": "strlist",
                "optional": "strlist"},
    "device": {"backend": "str", "plugin": "str"},
    "comm": {"backend": "str", "plugin": "str", "timeout_s": "float", "hostname": "str",
             "store": "str", "store_dir": "str", "staging": "bool", "check": "str",
             "secret_file": "str"},
    "transport": {"backend": "str", "plugin": "str", "timeout_s": "float", "retries": "int",
                  "max_message_mb": "float", "token": "str", "secret_file": "str", "tls": "bool",
                  "tls_cert": "str", "tls_key": "str", "tls_ca": "str", "tls_client_cert": "str",
                  "tls_client_key": "str"},
    "log": {"level": "str"},
    "strategy": {"mode": "str", "collective_mode": "str", "devices": "int", "nrings": "int",
                 "local_sgd_k_steps": "int", "fuse_grad_size_mb": "float", "passes": "strlist",
                 "sync_mode": "bool", "slice_var_up": "bool", "min_block_size": "int",
                 "split_method": "str", "pserver_init": "str", "a_sync": "bool",
                 "sync_batch_norm": "bool", "sparse_exchange": "str"},
    "strategy.a_sync_configs": {"k_steps": "int", "max_merge_var_num": "int",
                                "send_queue_size": "int", "independent_recv_thread": "bool",
                                "thread_pool_size": "int", "send_wait_times": "int",
                                "runtime_split_send_recv": "bool"},
    "strategy.growable_tables": {"admit_after": "int", "evict_after": "int"},
    "train": {"steps": "int", "batch_size": "int", "seed": "int", "threads": "int",
              "log_every": "int", "metrics_file": "str", "profile": "bool",
              "save_params_dir": "str", "init_from": "str", "check_replicas": "bool"},
    "checkpoint": {"dir": "str", "every_steps": "int", "keep": "int", "resume": "bool"},
    "eval": {"filelist": "strlist", "every_steps": "int", "batch_size": "int", "batches": "int"},
    "data": {"source": "str", "label": "str", "classes": "int", "filelist": "strlist",
             "slots": "strlist", "dataset": "str", "shuffle": "bool", "last_batch": "str",
             "bad_lines": "str", "queue_batches": "int", "shard": "str"},
    "role": {"role": "str", "rank": "int", "world_size": "int", "trainer_endpoints": "strlist",
             "current_endpoint": "str", "pserver_endpoints": "strlist", "master": "str",
             "local_rank": "int", "mpi_symmetric": "bool"},
}

WRONG_TYPES = {
    "int": ['"12"', "1.5", "true", "[1]", "{ v = 1 }", "1979-05-27T07:32:00Z"],
    "float": ['"1.0"', "true", "[1.0]", "{ v = 1.0 }", "07:32:00"],
    "bool": ['"true"', "1", "[true]", "{ v = true }", "1979-05-27"],
    "str": ["1", "true", '["a"]', "{ v = \"a\" }", "1.5"],
    "strlist": ['"a"', "[1, 2]", "[[\"a\"]]", "{ v = [\"a\"] }", '["a", 1]'],
}


def toml_with(base: str, section: str, line: str) -> str:
    """The base fleet.toml with `line` added to [section] (the table made if missing)."""
    header = "[%s]\n" % section
    if header in base:
        return base.replace(header, header + line + "\n", 1)
    return base + "\n" + header + line + "\n"


def gen_config(ctx: Context) -> List[Case]:
    rng = ctx.rng("config")
    d = ctx.dir("config")
    base = read(BASE_CONFIG).decode()
    cases: List[Case] = []
    n = [0]

    def add(desc, text, must_refuse=True, quick=False, names=(), program=False, run=False,
            name=None, extra=(), post=None, mem_mb=None):
        n[0] += 1
        path = os.path.join(d, name or "c%03d.toml" % n[0])
        if text is not None:
            write(path, text)
        if run:
            args = ["--config", path, "run", BASE_PROGRAM, "--set", "train.steps=2"] + list(extra)
        else:
            args = ["--config", path, "check"] + ([BASE_PROGRAM] if program else []) + list(extra)
        cases.append(Case(desc, args, must_refuse, names=(os.path.basename(path),) + tuple(names),
                          cwd=d, quick=quick, post=post, mem_mb=mem_mb))
        return path

    add("the base fleet.toml, unchanged", base, must_refuse=False, quick=True, program=True)
    add("examples/fleet.toml (every key at its default)", read(os.path.join(EXAMPLES, "fleet.toml")),
        must_refuse=False, program=True)

    # Malformed TOML.
    for desc, text, q in (
            ("an unclosed table header", "[train\nsteps = 1\n", True),
            ("an unterminated string", "[log]\nlevel = \"info\n", True),
            ("an unterminated multi-line string", "[log]\nlevel = \"\"\"info\n", False),
            ("a key without a value", "[train]\nsteps =\n", True),
            ("a value without a key", "[train]\n= 1\n", False),
            ("a key and value without '='", "[train]\nsteps 1\n", False),
            ("an unknown escape in a string", "[log]\nlevel = \"\\q\"\n", False),
            ("a surrogate \\uD800 escape", "[log]\nlevel = \"\\uD800\"\n", True),
            ("an escape past U+10FFFF", "[log]\nlevel = \"\\U7FFFFFFF\"\n", False),
            ("invalid UTF-8 in a comment", b"# \xff\xfe\n[train]\nsteps = 1\n", True),
            ("invalid UTF-8 in a string", b"[log]\nlevel = \"\xc0\xaf\"\n", True),
            ("a NUL byte", b"[train]\nsteps = 1\x00\n", True),
            ("a raw ESC in a comment", "# \x1b[2J\n[train]\nsteps = 1\n", False),
            ("a raw ESC in a string", "[log]\nlevel = \"\x1b[31m\"\n", True),
            ("a raw ESC in a bare key", "[train]\nst\x1beps = 1\n", True),
            ("a lone CR", "[train]\rsteps = 1\r", False),
            ("leading zeros", "[train]\nsteps = 0012\n", False),
            ("doubled underscores", "[train]\nsteps = 1__0\n", False),
            ("a hex integer past int64", "[train]\nsteps = 0xFFFFFFFFFFFFFFFFF\n", True),
            ("a decimal integer past int64", "[train]\nsteps = 9223372036854775808\n", True),
            ("an integer of 10000 digits", "[train]\nsteps = " + "9" * 10000 + "\n", False),
            ("a float of 10000 digits", "[comm]\ntimeout_s = 1." + "9" * 10000 + "e99999\n", False),
            ("an array with a missing comma", "[plugins]\ndirs = [\"a\" \"b\"]\n", False),
            ("an unclosed array", "[plugins]\ndirs = [\"a\",\n", True),
            ("an inline table across lines", "[plugins]\nconfig = {\ncpu = {}\n}\n", False),
            ("a table header and a key of the same name",
             "[train]\nsteps = 1\n[train.steps]\nx = 1\n", False),
            ("[[train]] (an array of tables)", "[[train]]\nsteps = 1\n", True),
            ("an empty table name", "[]\n", False),
            ("an empty quoted key", "[train]\n\"\" = 1\n", False),
            ("a quoted key with an ESC escape", "[train]\n\"a\\u001b[2Jb\" = 1\n", True),
            ("a quoted table name with an ESC escape", "[\"\\u001b]0;owned\\u0007\"]\nx = 1\n", True),
            ("a quoted key with a C1 control", "[train]\n\"a\\u009b31mb\" = 1\n", True),
            ("a quoted key with a NUL escape", "[train]\n\"a\\u0000b\" = 1\n", False),
            ("a quoted key with a newline escape", "[train]\n\"a\\nFAKE: fine\" = 1\n", True),
            ("an enum string with an ESC escape", "[log]\nlevel = \"\\u001b[31mred\"\n", True),
            ("an enum string with a CR escape", "[log]\nlevel = \"info\\rFAKE\"\n", True),
            ("an enum string with a NUL escape", "[log]\nlevel = \"info\\u0000\"\n", False),
            ("an enum string with invalid UTF-8", b"[log]\nlevel = \"\xff\"\n", False),
            ("a backend name with an ESC escape", "[device]\nbackend = \"\\u001b[2J\"\n", True),
            ("a plugin name with ../", "[device]\nplugin = \"../../tmp/evil\"\n", True),
            ("a plugin name with a NUL escape", "[device]\nplugin = \"cpu\\u0000x\"\n", False),
            ("a plugins.load entry with ../", "[plugins]\nload = [\"../evil\"]\n", False),
            ("a plugins.config table with an ESC", "[plugins.config.\"\\u001b[2J\"]\nx = 1\n", False),
            ("a pass name with an ESC", "[passes.\"\\u001b[2J\"]\nx = 1\n", False),
            ("an unknown pass", "[passes.no_such_pass]\nx = 1\n", True),
    ):
        add(desc, text, quick=q)
    add("strategy.passes naming an unknown pass (check PROGRAM; run refuses it)",
        "[strategy]\npasses = [\"no_such\"]\n", program=True, quick=True)
    add("strategy.passes naming an unknown pass (check, no program)",
        "[strategy]\npasses = [\"no_such\"]\n", names=("strategy.passes",))
    for value in ("\"sometimes\"", "\"1\"", "\"\""):
        add("comm.check = %s" % value, "[comm]\ncheck = %s\n" % value, names=("comm.check",))

    # Unknown keys and tables.
    for desc, text, q in (("an unknown table [trian]", base + "\n[trian]\nsteps = 1\n", True),
                          ("an unknown key train.stepz", toml_with(base, "train", "stepz = 1"), True),
                          ("a top-level key", "steps = 1\n" + base, False),
                          ("an unknown key under [device]", "[device]\nbackend = \"cpu\"\nx = 1\n", False),
                          ("an unknown key in [data.csv]", "[data.csv]\nnope = 1\n", False),
                          ("an unknown key in [checkpoint]", "[checkpoint]\ndri = \"x\"\n", False),
                          ("an unknown key in [eval]", "[eval]\nevery_step = 1\n", False),
                          ("an unknown key under [role]", "[role]\nranks = 1\n", False),
                          ("an unknown table under [plugins]", "[plugins.nope]\nx = 1\n", False),
                          ("a dotted key in a known table", "[train]\nsteps.x = 1\n", False)):
        add(desc, text, quick=q)
    add("an unknown key in [plugins.config.cpu]", "[plugins.config.cpu]\nbogus_key = 1\n",
        must_refuse=None)

    # Wrong types for every key.
    for section, keys in CONFIG_KEYS.items():
        for key, kind in keys.items():
            choices = WRONG_TYPES[kind]
            picked = [choices[0], rng.choice(choices[1:])]
            for value in picked:
                add("%s.%s = %s (wrong type)" % (section, key, value),
                    "[%s]\n%s = %s\n" % (section, key, value),
                    names=("%s.%s" % (section, key),),
                    quick=(section, key) in (("train", "batch_size"), ("data", "source")))

    add("strategy.a_sync = true against sync_mode = true",
        "[strategy]\nsync_mode = true\na_sync = true\n", names=("strategy.a_sync",))

    # Huge, negative, zero and non-finite values of the keys that size things.
    sized = {
        ("train", "batch_size"): ("0", "-1", "2147483648", "9223372036854775807", "-9223372036854775808"),
        ("train", "threads"): ("-1", "4097", "9223372036854775807"),
        ("train", "steps"): ("0", "-5"),
        ("train", "log_every"): ("0", "-9223372036854775808"),
        ("train", "seed"): ("-1",),
        ("data", "queue_batches"): ("-1", "65537", "9223372036854775807"),
        ("data", "classes"): ("-1", "2147483648"),
        ("strategy", "nrings"): ("0", "65", "9223372036854775807"),
        ("strategy", "devices"): ("0", "65", "9223372036854775807"),
        ("strategy", "local_sgd_k_steps"): ("0",),
        ("strategy", "min_block_size"): ("0", "-1"),
        ("strategy.a_sync_configs", "max_merge_var_num"): ("0", "1025", "9223372036854775807"),
        ("strategy.a_sync_configs", "send_queue_size"): ("0", "-1", "9223372036854775807"),
        ("strategy.a_sync_configs", "thread_pool_size"): ("0", "65"),
        ("strategy.a_sync_configs", "send_wait_times"): ("-1", "1001"),
        ("strategy.a_sync_configs", "k_steps"): ("-2", "1000001"),
        ("strategy.growable_tables", "admit_after"): ("0", "-1", "9223372036854775807"),
        ("strategy.growable_tables", "evict_after"): ("-1", "9223372036854775807"),
        ("strategy", "fuse_grad_size_mb"): ("-1.0", "nan", "-inf"),
        ("comm", "timeout_s"): ("0", "-1", "0.0001", "nan", "inf", "-inf", "-0.0"),
        ("transport", "timeout_s"): ("0", "nan", "inf"),
        ("transport", "retries"): ("-1", "101", "9223372036854775807"),
        ("transport", "max_message_mb"): ("0", "0.1", "2048", "nan", "inf", "1e308"),
        ("checkpoint", "every_steps"): ("0", "-1"),
        ("checkpoint", "keep"): ("-1",),
        ("role", "rank"): ("-2", "65536", "9223372036854775807"),
        ("role", "world_size"): ("-1", "65537", "9223372036854775807"),
        ("role", "local_rank"): ("-2", "65536"),
    }
    for (section, key), values in sized.items():
        for value in values:
            add("%s.%s = %s" % (section, key, value), "[%s]\n%s = %s\n" % (section, key, value),
                names=("%s.%s" % (section, key),),
                quick=value in ("2147483648", "nan", "9223372036854775807") and
                section in ("train", "comm"))

    # In range, but as large as allowed: may be accepted, must not crash or hang. A size that
    # cannot fit in memory is refused naming the key that asked for it.
    edge = (
        ("train.batch_size at its maximum (2^31 - 1), checked with the program",
         "[train]\nbatch_size = 2147483647\n",
         dict(program=True, quick=True, names=("train.batch_size",))),
        ("train.batch_size = 100000000, checked with the program",
         "[train]\nbatch_size = 100000000\n", dict(program=True, names=("train.batch_size",))),
        ("train.threads at its maximum (4096), run", "[train]\nthreads = 4096\n",
         dict(run=True, mem_mb=0)),
        ("train.threads at its maximum (4096), run under a 4 GiB address-space limit",
         "[train]\nthreads = 4096\n", dict(run=True, names=("train.threads",))),
        ("train.steps at int64's maximum, checked", "[train]\nsteps = 9223372036854775807\n",
         dict(program=True)),
        ("train.log_every at int64's maximum, run",
         "[train]\nlog_every = 9223372036854775807\n", dict(run=True)),
        ("train.seed at int64's maximum, run", "[train]\nseed = 9223372036854775807\n",
         dict(run=True)),
        ("comm.timeout_s = 1e308, run", "[comm]\ntimeout_s = 1e308\n", dict(run=True, quick=True)),
        ("comm.timeout_s = 1.7976931348623157e308, run",
         "[comm]\ntimeout_s = 1.7976931348623157e308\n", dict(run=True)),
        ("comm.timeout_s = 0.001, run", "[comm]\ntimeout_s = 0.001\n", dict(run=True)),
        ("transport.timeout_s = 1e300, run", "[transport]\ntimeout_s = 1e300\n", dict(run=True)),
        ("strategy.nrings = 64 with 1 trainer, checked",
         "[strategy]\nnrings = 64\n", dict(program=True)),
        ("strategy.devices at its maximum (64, single_process_multi_thread), run",
         "[strategy]\nmode = \"collective\"\ncollective_mode = \"single_process_multi_thread\"\n"
         "devices = 64\n[train]\nbatch_size = 1\n", dict(run=True, mem_mb=0)),
        ("strategy.devices = 64 (single_process_multi_thread), run under a 4 GiB "
         "address-space limit",
         "[strategy]\nmode = \"collective\"\ncollective_mode = \"single_process_multi_thread\"\n"
         "devices = 64\n[train]\nbatch_size = 64\n", dict(run=True)),
        ("strategy.local_sgd_k_steps at int64's maximum, checked",
         "[strategy]\ncollective_mode = \"local_sgd\"\nlocal_sgd_k_steps = 9223372036854775807\n",
         dict(program=True)),
        ("strategy.fuse_grad_size_mb = 1e308, checked",
         "[strategy]\nfuse_grad_size_mb = 1e308\n", dict(program=True)),
        ("checkpoint.every_steps and keep at int64's maximum, run",
         "[checkpoint]\ndir = \"ck_max\"\nevery_steps = 9223372036854775807\n"
         "keep = 9223372036854775807\n", dict(run=True)),
        ("role.world_size = 65536 and rank 65535, checked",
         "[role]\nworld_size = 65536\nrank = 65535\n", dict(program=True)),
        ("data.classes at its maximum, run",
         "[data]\nclasses = 2147483647\n", dict(run=True, names=("data.classes",))),
    )
    for desc, text, kw in edge:
        add(desc, text, must_refuse=None, **kw)
    # Past the cap of one process's devices (every two are connected: 1024 never connected
    # and hung): refused by the config check, before anything starts.
    for devices, batch in (("1024", "1024"), ("1024", "1"), ("65", "1")):
        add("strategy.devices = %s with batch_size %s (single_process_multi_thread), run"
            % (devices, batch),
            "[strategy]\nmode = \"collective\"\ncollective_mode = \"single_process_multi_thread\"\n"
            "devices = %s\n[train]\nbatch_size = %s\n" % (devices, batch),
            names=("strategy.devices",), run=True, mem_mb=0)

    # Paths that are not what they should be.
    two_ranks = "[role]\nworld_size = 2\nrank = 0\nmaster = \"127.0.0.1:%d\"\n[comm]\n" \
        "timeout_s = 2.0\n" % free_port()
    for desc, text, kw in (
            ("train.metrics_file = /dev/full (writes fail)",
             "[train]\nmetrics_file = \"/dev/full\"\n", dict(run=True, names=("/dev/full",))),
            ("train.metrics_file is a directory", "[train]\nmetrics_file = \"/\"\n",
             dict(run=True, names=("metrics",))),
            ("train.save_params_dir = /dev/null", "[train]\nsave_params_dir = \"/dev/null\"\n",
             dict(run=True, names=("/dev/null",))),
            ("train.save_params_dir under a regular file",
             "[train]\nsave_params_dir = \"c001.toml/sub\"\n", dict(run=True, names=("c001.toml",))),
            ("train.init_from that does not exist", "[train]\ninit_from = \"no/such/dir\"\n",
             dict(run=True, names=("no/such/dir",))),
            ("train.init_from = /dev/zero", "[train]\ninit_from = \"/dev/zero\"\n",
             dict(run=True, names=("/dev/zero",))),
            ("checkpoint.dir = /dev/null", "[checkpoint]\ndir = \"/dev/null\"\n",
             dict(run=True, names=("/dev/null",))),
            ("checkpoint.dir = /proc (not writable)", "[checkpoint]\ndir = \"/proc/fleet_ck\"\n",
             dict(run=True, names=("/proc",))),
            ("checkpoint.resume without a dir", "[checkpoint]\nresume = true\n",
             dict(names=("checkpoint",))),
            ("comm.secret_file = /dev/zero, rank 0 of 2 trainers",
             two_ranks + "secret_file = \"/dev/zero\"\n", dict(names=("/dev/zero",), run=True)),
            ("comm.secret_file is a FIFO, rank 0 of 2 trainers",
             two_ranks + "secret_file = \"fifo_secret\"\n",
             dict(names=("fifo_secret",), run=True)),
            ("transport.secret_file = /proc/self/environ, rank 0 of 2 trainers (a regular, "
             "private file: the job then waits 2 s for rank 1)",
             two_ranks + "[transport]\nsecret_file = \"/proc/self/environ\"\n",
             dict(names=("/proc/self/environ", "rendezvous"), run=True, must_refuse=None)),
            ("plugins.dirs = [/dev/zero]", "[plugins]\ndirs = [\"/dev/zero\"]\n",
             dict(must_refuse=None)),
            ("plugins.dirs = [a FIFO]", "[plugins]\ndirs = [\"fifo_secret\"]\n",
             dict(must_refuse=None)),
            ("data.filelist = [/dev/zero] (csv)",
             "[data]\nsource = \"csv\"\nfilelist = [\"/dev/zero\"]\n",
             dict(run=True, names=("/dev/zero",))),
    ):
        kw.setdefault("must_refuse", True)
        add(desc, text, **kw)
    fifo(os.path.join(d, "fifo_secret"))

    # Deep nesting, duplicates and sheer size.
    for depth in (20000, 200000):
        q = depth == 20000
        add("arrays nested %d deep" % depth,
            "[plugins]\ndirs = " + "[" * depth + "]" * depth + "\n", quick=q)
        add("inline tables nested %d deep" % depth,
            "[plugins.config.cpu]\nx = " + "{ a = " * depth + "1" + " }" * depth + "\n", quick=q)
        add("a dotted key %d parts long" % depth,
            "[plugins.config.cpu]\n" + ".".join(["k"] * depth) + " = 1\n", quick=True)
        add("a table header %d parts long" % depth,
            "[" + ".".join(["plugins", "config", "cpu"] + ["t"] * depth) + "]\nx = 1\n")
        add("an unknown dotted table %d parts long" % depth,
            "[" + ".".join(["t"] * depth) + "]\nx = 1\n", quick=q)
    add("a key given twice", "[train]\nsteps = 1\nsteps = 2\n", quick=True)
    add("a table given twice", "[train]\nsteps = 1\n[train]\nseed = 2\n")
    add("a table given as a dotted key and a header", "train.steps = 1\n[train]\nseed = 2\n",
        must_refuse=None)
    add("the same key quoted and bare", "[train]\nsteps = 1\n\"steps\" = 2\n")
    add("100000 keys under [plugins.config.cpu]",
        "[plugins.config.cpu]\n" + "".join("k%d = %d\n" % (i, i) for i in range(100000)),
        must_refuse=None)
    add("an array of 1000000 strings in plugins.dirs",
        "[plugins]\ndirs = [" + "\"d\"," * 1000000 + "]\n", must_refuse=None)
    add("a 10 MB string value", "[comm]\nhostname = \"" + "h" * (10 << 20) + "\"\n",
        must_refuse=None)
    add("a 10 MB comment", "#" + "c" * (10 << 20) + "\n" + base, must_refuse=False)
    add("a 1 MB key", "[train]\n" + "k" * (1 << 20) + " = 1\n")
    add("a 1 MB enum value", "[log]\nlevel = \"" + "x" * (1 << 20) + "\"\n")

    # Odd files.
    add("an empty file", "", must_refuse=False, quick=True)
    add("a UTF-8 byte-order mark first", "\ufeff" + base, must_refuse=None)
    add("a UTF-16 encoded file", base.encode("utf-16"), quick=True)
    add("CRLF line endings", base.replace("\n", "\r\n"), must_refuse=False)
    add("random binary (4 KiB)", bytes(rng.randrange(256) for _ in range(4096)))
    for dev in ("/dev/zero", "/dev/urandom", "/dev/null"):
        add("%s as the config" % dev, None, name=dev, names=(dev,),
            must_refuse=False if dev == "/dev/null" else True)
    add("a FIFO nobody writes to as the config", None, name=fifo(os.path.join(d, "fifo.toml")))
    add("a directory as the config", None, name=d, names=("config",))
    add("a config path that does not exist", None, name="missing.toml")
    add("a config path of 5000 characters", None, name="/".join(["a" * 250] * 20) + ".toml",
        names=("aaaa",))

    # Random damage to the base.
    for i in range(40):
        text = flip_bytes(base.encode(), rng, rng.randint(1, 4))
        add("random damage #%d: bytes flipped" % i, text, must_refuse=None, quick=i < 3,
            program=True)
    return cases


# ---- boundary: data files -----------------------------------------------------------------------


def npy_bytes(descr="<f4", fortran=False, shape=(4, 32), data=b"", version=(1, 0),
              magic=b"\x93NUMPY", header=None, header_len=None) -> bytes:
    """A .npy file: numpy's layout, every field of which may be made to lie."""
    if header is None:
        shape_text = "(" + "".join("%s, " % (d,) for d in shape) + ")" if len(shape) != 1 \
            else "(%s,)" % (shape[0],)
        if len(shape) > 1:
            shape_text = "(" + ", ".join(str(d) for d in shape) + ")"
        header = "{'descr': %s, 'fortran_order': %s, 'shape': %s, }" % (
            descr if descr.startswith(("[", "(")) else repr(descr), fortran, shape_text)
    if isinstance(header, str):
        header = header.encode("utf-8", "surrogateescape")
    size_bytes = 2 if version[0] == 1 else 4
    pad = (64 - (len(magic) + 2 + size_bytes + len(header) + 1) % 64) % 64
    header = header + b" " * pad + b"\n"
    n = len(header) if header_len is None else header_len
    packed = struct.pack("<H", n & 0xFFFF) if size_bytes == 2 else struct.pack("<I", n & 0xFFFFFFFF)
    return magic + bytes(version) + packed + header + data


def f32(values) -> bytes:
    return struct.pack("<%df" % len(values), *values)


def i64(values) -> bytes:
    return struct.pack("<%dq" % len(values), *values)


def gen_data(ctx: Context) -> List[Case]:
    rng = ctx.rng("data")
    top = ctx.dir("data")
    rows = 64
    xs = [rng.uniform(-1, 1) for _ in range(rows * 32)]
    ys = [rng.randrange(2) for _ in range(rows)]
    good_x = npy_bytes("<f4", False, (rows, 32), f32(xs))
    good_y = npy_bytes("<i8", False, (rows, 1), i64(ys))
    train = "[train]\nbatch_size = 16\n"
    cases: List[Case] = []
    n = [0]

    def case_dir() -> str:
        n[0] += 1
        return ctx.dir("data", "d%03d" % n[0])

    def add(desc, d, toml, must_refuse=True, quick=False, names=(), check=False, steps=2,
            extra=()):
        cfg = write(os.path.join(d, "fleet.toml"), train + toml)
        if check:
            args = ["--config", cfg, "check", BASE_PROGRAM]
        else:
            args = ["--config", cfg, "run", BASE_PROGRAM, "--set", "train.steps=%d" % steps]
        cases.append(Case(desc, args + list(extra), must_refuse, names=tuple(names), cwd=d,
                          quick=quick))

    # -- .npy
    def npy(desc, x=None, y=None, must_refuse=True, quick=False, check=False, names=None,
            x_path=None):
        d = case_dir()
        xp = x_path or write(os.path.join(d, "x.npy"), good_x if x is None else x)
        write(os.path.join(d, "y.npy"), good_y if y is None else y)
        toml = "[data]\nsource = \"npy\"\n[data.files]\nx = \"%s\"\ny = \"y.npy\"\n" % xp
        bad = "y.npy" if y is not None else os.path.basename(xp)
        add(".npy: " + desc, d, toml, must_refuse, quick, names or (bad,), check)

    npy("good files", must_refuse=False, quick=True)
    npy("good files, checked", must_refuse=False, check=True)
    data = f32(xs)
    for desc, blob, q in (
            ("a wrong magic", npy_bytes(data=data, shape=(rows, 32), magic=b"\x93NUMPZ"), False),
            ("version 0.0", npy_bytes(data=data, shape=(rows, 32), version=(0, 0)), False),
            ("version 255.255", npy_bytes(data=data, shape=(rows, 32), version=(255, 255)), True),
            ("header length 0xFFFF (past the end)",
             npy_bytes(data=data, shape=(rows, 32), header_len=0xFFFF), True),
            ("header length 0", npy_bytes(data=data, shape=(rows, 32), header_len=0), False),
            ("header length 10 (cuts the dict)",
             npy_bytes(data=data, shape=(rows, 32), header_len=10), False),
            ("version 2 with header length 0xFFFFFFFF",
             npy_bytes(data=data, shape=(rows, 32), version=(2, 0), header_len=0xFFFFFFFF), True),
            ("version 3 with header length 0x7FFFFFFF",
             npy_bytes(data=data, shape=(rows, 32), version=(3, 0), header_len=0x7FFFFFFF), False),
            ("a header that is a list", npy_bytes(data=data, header="[1, 2, 3]"), False),
            ("an empty header", npy_bytes(data=data, header=""), True),
            ("an unterminated header", npy_bytes(data=data, header="{'descr': '<f4"), False),
            ("a header nested 10000 deep",
             npy_bytes(data=data, header="{'a': " * 10000 + "1" + "}" * 10000), False),
            ("an ESC sequence in descr",
             npy_bytes(data=data, descr="\x1b[2J\x1b]0;owned\x07", shape=(rows, 32)), True),
            ("a C1 control in descr", npy_bytes(data=data, descr="<f\u009b4", shape=(rows, 32)),
             False),
            ("invalid UTF-8 in descr", npy_bytes(data=data, descr="<f\udcff", shape=(rows, 32)),
             False),
            ("a NUL in the header",
             npy_bytes(data=data, header="{'descr': '<f4\x00', 'fortran_order': False, "
                                         "'shape': (%d, 32), }" % rows), False),
            ("descr <f8 for a float32 var", npy_bytes("<f8", False, (rows, 32), data + data), True),
            ("descr >f4 (big-endian)", npy_bytes(">f4", False, (rows, 32), data), False),
            ("descr |O (pickled objects)", npy_bytes("|O", False, (rows, 32), data), True),
            ("descr <U8", npy_bytes("<U8", False, (rows, 4), data), False),
            ("descr <c8", npy_bytes("<c8", False, (rows, 16), data), False),
            ("descr V4", npy_bytes("V4", False, (rows, 32), data), False),
            ("a structured descr", npy_bytes("[('a', '<f4')]", False, (rows, 32), data), False),
            ("an empty descr", npy_bytes("", False, (rows, 32), data), False),
            ("a 100 KB descr", npy_bytes("<f4" * 33000, False, (rows, 32), data), False),
            ("fortran_order 'yes'",
             npy_bytes(data=data, header="{'descr': '<f4', 'fortran_order': 'yes', "
                                         "'shape': (%d, 32), }" % rows), False),
            ("no shape key", npy_bytes(data=data, header="{'descr': '<f4', "
                                                         "'fortran_order': False, }"), True),
            ("shape (1000, 32) over 64 rows of data", npy_bytes("<f4", False, (1000, 32), data),
             True),
            ("shape (64, 31)", npy_bytes("<f4", False, (rows, 31), data), False),
            ("shape (0, 32)", npy_bytes("<f4", False, (0, 32), b""), True),
            ("shape (-1, 32)", npy_bytes("<f4", False, (-1, 32), data), True),
            ("shape (2**62, 32)", npy_bytes("<f4", False, (2 ** 62, 32), data), True),
            ("shape (2**31, 2**31, 2**31) (the product overflows)",
             npy_bytes("<f4", False, (2 ** 31, 2 ** 31, 2 ** 31), data), True),
            ("shape (2**64 + 64, 32)", npy_bytes("<f4", False, (2 ** 64 + rows, 32), data), True),
            ("shape (4294967296 + 64, 32) (wraps at 32 bits)",
             npy_bytes("<f4", False, (2 ** 32 + rows, 32), data), False),
            ("shape () (a scalar)", npy_bytes("<f4", False, (), data[:4]), False),
            ("shape (64, 32, 1)", npy_bytes("<f4", False, (rows, 32, 1), data), None),
            ("shape (64, 1000 dims of 1)", npy_bytes("<f4", False, (rows,) + (1,) * 1000, data),
             None),
            ("shape (64.5, 32)", npy_bytes(data=data, header="{'descr': '<f4', "
                                           "'fortran_order': False, 'shape': (64.5, 32), }"),
             False),
            ("shape ('a', 32)", npy_bytes(data=data, header="{'descr': '<f4', "
                                          "'fortran_order': False, 'shape': ('a', 32), }"), False),
            ("shape with 100000 digits",
             npy_bytes(data=data, header="{'descr': '<f4', 'fortran_order': False, "
                                         "'shape': (" + "9" * 100000 + ", 32), }"), False),
            ("two descr keys, the second a lie",
             npy_bytes(data=data, header="{'descr': '<f4', 'descr': '<f8', "
                                         "'fortran_order': False, 'shape': (64, 32), }"), True),
            ("'descr' hidden in another key's value",
             npy_bytes(data=data, header="{'note': \"'descr': '<f4'\", 'descr': '<i8', "
                                         "'fortran_order': False, 'shape': (64, 32), }"), False),
            ("64 rows in the shape, 65 in the data",
             npy_bytes("<f4", False, (rows, 32), data + f32(xs[:32])), None),
    ):
        # q: True (refused; in --quick), False (refused), None (may be accepted)
        npy(desc, x=blob, quick=q is True, must_refuse=None if q is None else True)
    npy("fortran_order True", x=npy_bytes("<f4", True, (rows, 32), data), must_refuse=None,
        quick=True)
    full = good_x
    for cut in sorted(set([0, 3, 8, 9, 10, 40, len(full) - len(data), len(full) - len(data) + 3,
                           len(full) - 4, len(full) - 1] +
                          [rng.randrange(len(full)) for _ in range(6)])):
        npy("x truncated after %d of %d bytes" % (cut, len(full)), x=full[:cut],
            quick=cut == len(full) - 1)
    for desc, ys_bad, refuse, q in (
            ("labels 2 and 3 (2 classes)", [2, 3] * (rows // 2), True, True),
            ("a label of -1", [-1] + ys[1:], True, True),
            ("a label of 2**62", [2 ** 62] + ys[1:], True, False),
            ("a label of -2**63", [-2 ** 63] + ys[1:], True, False),
            ("a label of 1000000", [1000000] * rows, True, False)):
        npy("y with " + desc, y=npy_bytes("<i8", False, (rows, 1), i64(ys_bad)),
            must_refuse=refuse, quick=q)
    npy("y float64 for an int64 var", y=npy_bytes("<f8", False, (rows, 1), i64(ys)))
    npy("y int32 for an int64 var", y=npy_bytes("<i4", False, (rows, 1),
                                               struct.pack("<%di" % rows, *ys)))
    npy("y with 10 rows and x with 64", y=npy_bytes("<i8", False, (10, 1), i64(ys[:10])),
        quick=True)
    npy("x with NaN and infinities",
        x=npy_bytes("<f4", False, (rows, 32),
                    f32([float("nan"), float("inf"), float("-inf")] + xs[3:])), must_refuse=None)
    npy("an empty x file", x=b"", quick=True)
    d0 = ctx.dir("data", "devices")
    npy("/dev/zero as x", x_path="/dev/zero", names=("/dev/zero",), quick=True)
    npy("/dev/urandom as x", x_path="/dev/urandom", names=("/dev/urandom",))
    npy("a FIFO as x", x_path=fifo(os.path.join(d0, "x_fifo.npy")), quick=True)
    npy("a directory as x", x_path=d0, names=("devices",))
    link = os.path.join(d0, "zero_link.npy")
    if not os.path.lexists(link):
        os.symlink("/dev/zero", link)
    npy("a symlink to /dev/zero as x", x_path=link, names=("zero_link.npy", "/dev/zero"))
    npy("x that does not exist", x_path=os.path.join(d0, "missing.npy"))
    for desc, toml in (
            ("a [data.files] entry for a var the program lacks",
             "[data]\nsource = \"npy\"\n[data.files]\nx = \"x.npy\"\ny = \"y.npy\"\nz = \"x.npy\"\n"),
            ("no file for y", "[data]\nsource = \"npy\"\n[data.files]\nx = \"x.npy\"\n"),
            ("the same file for x and y",
             "[data]\nsource = \"npy\"\n[data.files]\nx = \"x.npy\"\ny = \"x.npy\"\n"),
            ("an empty path", "[data]\nsource = \"npy\"\n[data.files]\nx = \"\"\ny = \"y.npy\"\n"),
            ("a path of 5000 characters",
             "[data]\nsource = \"npy\"\n[data.files]\nx = \"%s\"\ny = \"y.npy\"\n"
             % "/".join(["a" * 250] * 20))):
        d = case_dir()
        write(os.path.join(d, "x.npy"), good_x)
        write(os.path.join(d, "y.npy"), good_y)
        add(".npy: " + desc, d, toml, names=("data",))

    # -- CSV: 32 feature columns and the label.
    def row(i, label=None):
        vals = ["%.4f" % v for v in xs[i * 32:(i + 1) * 32]]
        return ",".join(vals + [str(ys[i] if label is None else label)])

    good_rows = [row(i) for i in range(rows)]

    def csv(desc, lines=None, blob=None, must_refuse=True, quick=False, columns=None,
            extra_toml="", names=("d.csv",)):
        d = case_dir()
        if blob is None:
            blob = "".join(l + "\n" for l in lines)
        write(os.path.join(d, "d.csv"), blob)
        toml = ("[data]\nsource = \"csv\"\n%s[data.csv]\npath = \"d.csv\"\n[data.csv.columns]\n%s"
                % (extra_toml, columns if columns is not None else "x = \"0:32\"\ny = 32\n"))
        add("csv: " + desc, d, toml, must_refuse, quick, names)

    def with_row(k, text):
        return good_rows[:k] + [text] + good_rows[k + 1:]

    csv("a good file", good_rows, must_refuse=False, quick=True)
    base_row = good_rows[5]
    cells = base_row.split(",")
    for desc, line, refuse, q in (
            ("a row with 32 columns", ",".join(cells[:32]), True, True),
            ("a row with 34 columns", base_row + ",1", None, False),
            ("a row with 1000 columns", base_row + ",1" * 1000, None, False),
            ("a field 'abc'", ",".join(["abc"] + cells[1:]), True, True),
            ("an empty field", ",".join([""] + cells[1:]), True, False),
            ("a field '1e999' (overflows float)", ",".join(["1e999"] + cells[1:]), None, False),
            ("a field 'nan'", ",".join(["nan"] + cells[1:]), None, False),
            ("a field '0x1p3'", ",".join(["0x1p3"] + cells[1:]), None, False),
            ("a field '1_000'", ",".join(["1_000"] + cells[1:]), True, False),
            ("a field with an ESC sequence", ",".join(["1\x1b[2J"] + cells[1:]), True, True),
            ("a field with a C1 control", ",".join(["1\u009b2J"] + cells[1:]), True, False),
            ("a field with invalid UTF-8", ",".join(["1\udcff"] + cells[1:]), True, False),
            ("a NUL byte in a row", base_row[:10] + "\x00" + base_row[10:], True, False),
            ("a quoted field", ",".join(["\"1.5\""] + cells[1:]), None, False),
            ("a label '0.5'", ",".join(cells[:32] + ["0.5"]), True, True),
            ("a label '1e3'", ",".join(cells[:32] + ["1e3"]), True, False),
            ("a label '99999999999999999999'", ",".join(cells[:32] + ["9" * 20]), True, False),
            ("a label of -1", ",".join(cells[:32] + ["-1"]), True, True),
            ("a label of 2 (2 classes)", ",".join(cells[:32] + ["2"]), True, False),
            ("a label 'inf'", ",".join(cells[:32] + ["inf"]), True, False),
            ("a label with surrounding spaces", ",".join(cells[:32] + [" 1 "]), None, False),
            ("a 1 MB row", base_row + "," + "9" * (1 << 20), True, False),
            ("a 1 MB field of digits", ",".join(["1" * (1 << 20)] + cells[1:]), None, False),
            ("a row of only commas", "," * 32, True, False),
    ):
        csv(desc, with_row(5, line), must_refuse=refuse, quick=q)
    csv("CRLF line endings", blob="".join(r + "\r\n" for r in good_rows), must_refuse=None)
    csv("no newline at the end", blob="\n".join(good_rows), must_refuse=False)
    csv("blank lines between rows", [r + "\n" for r in good_rows], must_refuse=None)
    csv("an empty file", blob="", quick=True)
    csv("only a newline", blob="\n")
    csv("a header line without header = true", ["c%d" % i for i in range(33)] and
        [",".join("c%d" % i for i in range(33))] + good_rows)
    csv("header = true and only the header", [",".join("c%d" % i for i in range(33))],
        extra_toml="")
    for desc, columns, q in (
            ("columns x = \"0:4000000000\"", "x = \"0:4000000000\"\ny = 32\n", False),
            ("columns x = \"0:9223372036854775807\"", "x = \"0:9223372036854775807\"\ny = 32\n",
             False),
            ("columns x = \"5:3\"", "x = \"5:3\"\ny = 32\n", False),
            ("columns x = \"-1:31\"", "x = \"-1:31\"\ny = 32\n", False),
            ("columns y = 2**62", "x = \"0:32\"\ny = 4611686018427387904\n", True),
            ("columns y = 33 (past the last column)", "x = \"0:32\"\ny = 33\n", False),
            ("columns x of 31 for a 32-wide var", "x = \"0:31\"\ny = 32\n", False),
            ("columns x and y overlapping", "x = \"0:32\"\ny = 31\n", False),
            ("columns y = [] (an empty array)", "x = \"0:32\"\ny = []\n", False),
            ("columns y = [1.5]", "x = \"0:32\"\ny = [1.5]\n", False),
            ("columns for a var the program lacks", "x = \"0:32\"\ny = 32\nz = 0\n", False),
    ):
        csv(desc, good_rows, columns=columns, quick=q, names=("columns", "d.csv", "fleet.toml"))

    # Batches fleet.toml sizes past what memory holds: refused naming the key, before reading.
    csv_toml = ("[data]\nsource = \"csv\"\nqueue_batches = %d\n[data.csv]\npath = \"d.csv\"\n"
                "[data.csv.columns]\nx = \"0:32\"\ny = 32\n")
    for desc, batch, queue, key in (
            ("train.batch_size = 2^31 - 1", 2147483647, 4, "train.batch_size"),
            ("data.queue_batches = 65536 batches of 2^22 samples ahead", 1 << 22, 65536,
             "data.queue_batches")):
        d = case_dir()
        write(os.path.join(d, "d.csv"), "".join(r + "\n" for r in good_rows))
        add("csv: " + desc, d, csv_toml % queue, names=(key,),
            extra=("--set", "train.batch_size=%d" % batch))

    # -- MultiSlot: slot x (32 values) then slot y (1 value).
    def ms_line(i, label=None):
        return "32 " + " ".join("%.4f" % v for v in xs[i * 32:(i + 1) * 32]) + \
            " 1 %s" % (ys[i] if label is None else label)

    good_ms = [ms_line(i) for i in range(rows)]

    def ms(desc, lines=None, blob=None, must_refuse=True, quick=False, toml="", names=("m.txt",),
           filelist="[\"m.txt\"]", steps=2):
        d = case_dir()
        if blob is None:
            blob = "".join(l + "\n" for l in lines)
        write(os.path.join(d, "m.txt"), blob)
        cfg = ("[data]\nsource = \"multislot\"\nfilelist = %s\nslots = [\"x\", \"y\"]\n%s"
               % (filelist, toml))
        add("multislot: " + desc, d, cfg, must_refuse, quick, names, steps=steps)

    ms("a good file", good_ms, must_refuse=False, quick=True)
    vals = good_ms[7].split(" ")
    body = vals[1:33]
    for desc, line, refuse, q in (
            ("a count of 31", "31 " + " ".join(body[:31]) + " 1 0", True, True),
            ("a count of 33", "33 " + " ".join(body) + " 0.5 1 0", True, False),
            ("a count of 0", "0 1 0", True, False),
            ("a count of -1", "-1 " + " ".join(body) + " 1 0", True, True),
            ("a count of 2**62", "4611686018427387904 " + " ".join(body) + " 1 0", True, True),
            ("a count of 2**64 + 32", "18446744073709551648 " + " ".join(body) + " 1 0", True,
             False),
            ("a count of 4294967328 (32 + 2**32)", "4294967328 " + " ".join(body) + " 1 0", True,
             True),
            ("a count 'abc'", "abc " + " ".join(body) + " 1 0", True, False),
            ("a count '3.2e1'", "3.2e1 " + " ".join(body) + " 1 0", True, False),
            ("the label slot missing", "32 " + " ".join(body), True, True),
            ("trailing values", good_ms[7] + " 9 9 9", True, False),
            ("a value 'abc'", "32 abc " + " ".join(body[1:]) + " 1 0", True, False),
            ("a value with an ESC sequence", "32 1\x1b[2J " + " ".join(body[1:]) + " 1 0",
             True, True),
            ("a value with a C1 control", "32 1\u009b2J " + " ".join(body[1:]) + " 1 0",
             True, False),
            ("a NUL byte", "32 \x00 " + " ".join(body[1:]) + " 1 0", True, False),
            ("a label '0.5'", "32 " + " ".join(body) + " 1 0.5", True, True),
            ("a label of 5 (2 classes)", "32 " + " ".join(body) + " 1 5", True, True),
            ("a label of -1", "32 " + " ".join(body) + " 1 -1", True, False),
            ("a label of 2**63", "32 " + " ".join(body) + " 1 9223372036854775808", True, False),
            ("values 'nan' and 'inf'", "32 nan inf " + " ".join(body[2:]) + " 1 0", None, False),
            ("tabs between values", "32\t" + "\t".join(body) + "\t1\t0", None, False),
            ("a count '+32'", "+32 " + " ".join(body) + " 1 0", None, False),
            ("a 1 MB line", "32 " + " ".join(body) + " 1 0 " + "7 " * (1 << 19), True, False),
            ("a count of 1000000 with that many values",
             "1000000 " + "1 " * 1000000 + "1 0", True, False),
    ):
        ms(desc, good_ms[:7] + [line] + good_ms[8:], must_refuse=refuse, quick=q)
    ms("empty lines between lines", [l + "\n" for l in good_ms], must_refuse=None)
    ms("an empty file", blob="", quick=True)
    ms("every line bad, bad_lines = \"skip\"", ["32 abc"] * rows, toml="bad_lines = \"skip\"\n",
       quick=True)
    ms("every line bad, bad_lines = \"skip\", dataset = \"queue\"", ["32 abc"] * rows,
       toml="bad_lines = \"skip\"\ndataset = \"queue\"\n", quick=True)
    ms("an empty file, dataset = \"queue\"", blob="", toml="dataset = \"queue\"\n")
    ms("one line and queue_batches = 65536", good_ms[:1], toml="queue_batches = 65536\n",
       must_refuse=None)
    ms("every line bad but one, bad_lines = \"skip\", 1000 steps",
       ["32 abc"] * 5000 + good_ms[:1], toml="bad_lines = \"skip\"\n", must_refuse=None,
       steps=1000)
    ms("a filelist pattern that matches nothing", good_ms, filelist="[\"nomatch*.txt\"]",
       names=("nomatch",), quick=True)
    ms("a filelist pattern '['", good_ms, filelist="[\"[\"]", names=("filelist", "'['"))
    ms("a filelist of /dev/zero", good_ms, filelist="[\"/dev/zero\"]", names=("/dev/zero",))
    ms("a filelist of /dev/urandom", good_ms, filelist="[\"/dev/urandom\"]",
       names=("/dev/urandom",))
    d0 = ctx.dir("data", "ms_special")
    ms("a filelist naming a FIFO", good_ms,
       filelist="[\"%s\"]" % fifo(os.path.join(d0, "fifo.txt")), names=("fifo.txt",))
    ms("a filelist naming a directory", good_ms, filelist="[\"%s\"]" % d0,
       names=("ms_special",))
    ms("a filelist pattern over /proc/*/task/*/* (directories, special files)", good_ms,
       filelist="[\"/proc/*/task/*/*\"]", names=("/proc",))
    ms("a filelist of 20000 names (one file)", good_ms,
       filelist="[" + ", ".join(["\"m.txt\""] * 20000) + "]", must_refuse=None)
    ms("slots missing the label", good_ms, toml="", filelist="[\"m.txt\"]",
       names=("y", "slots"))
    cases[-1].args[1] = write(cases[-1].args[1], read(cases[-1].args[1]).decode().replace(
        "slots = [\"x\", \"y\"]", "slots = [\"x\"]"))
    return cases


# ---- boundary: checkpoints and exports ----------------------------------------------------------


def st_split(blob: bytes):
    """A safetensors file's header (parsed) and its data."""
    n = struct.unpack("<Q", blob[:8])[0]
    return json.loads(blob[8:8 + n]), blob[8 + n:]


def st_join(header, data: bytes, header_len: Optional[int] = None) -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    raw += b" " * ((8 - len(raw) % 8) % 8)
    n = len(raw) if header_len is None else header_len
    return struct.pack("<Q", n & 0xFFFFFFFFFFFFFFFF) + raw + data


def safetensors_variants(blob: bytes, rng: random.Random):
    """(description, bytes, must_refuse, quick) for hostile versions of a safetensors file."""
    header, data = st_split(blob)
    names = sorted(k for k in header if k != "__metadata__")
    first, big = names[0], max(names, key=lambda k: header[k]["data_offsets"][1] -
                               header[k]["data_offsets"][0])
    raw = json.dumps(header).encode()

    def edit(fn):
        h = json.loads(json.dumps(header))
        fn(h)
        return st_join(h, data)

    def setk(name, key, value):
        return edit(lambda h: h[name].__setitem__(key, value))

    out = [
        ("header length 2**64 - 1", st_join(raw, data, 0xFFFFFFFFFFFFFFFF), True, True),
        ("header length past the end of the file", st_join(raw, data, len(raw) + len(data) + 9),
         True, False),
        ("header length 2**31", st_join(raw, data, 1 << 31), True, False),
        ("header length 0", st_join(raw, data, 0), True, False),
        ("header length 7 (cuts the JSON)", st_join(raw, data, 7), True, False),
        ("a file of 5 bytes", blob[:5], True, False),
        ("the header '{'", st_join(b"{", data), True, False),
        ("the header '[]'", st_join(b"[]", data), True, False),
        ("the header 'null'", st_join(b"null", data), True, False),
        ("the header nested 100000 deep",
         st_join(b'{"a":' * 100000 + b"1" + b"}" * 100000, data), True, True),
        ("the header an array nested 100000 deep",
         st_join(b"[" * 100000 + b"]" * 100000, data), True, False),
        ("invalid UTF-8 in the header", st_join(raw.replace(b'"F32"', b'"F\xff2"', 1), data),
         True, False),
        ("dtype F64 for a float32 tensor", setk(big, "dtype", "F64"), True, True),
        ("dtype 'Q9'", setk(first, "dtype", "Q9"), True, False),
        ("dtype with an ESC sequence", setk(first, "dtype", "\x1b[2J"), True, True),
        ("dtype as a number", setk(first, "dtype", 7), True, False),
        ("shape [2**62, 2]", setk(big, "shape", [2 ** 62, 2]), True, True),
        ("shape [-1, 128]", setk(big, "shape", [-1, 128]), True, False),
        ("shape [2**32, 2**32, 2**32] (the product overflows)",
         setk(big, "shape", [2 ** 32, 2 ** 32, 2 ** 32]), True, True),
        ("shape [2**64]", setk(big, "shape", [2 ** 64]), True, False),
        ("shape of 1000 dims of 1", setk(first, "shape",
                                         header[first]["shape"] + [1] * 1000), None, False),
        ("shape as a string", setk(first, "shape", "[128]"), True, False),
        ("shape transposed", setk(big, "shape", list(reversed(header[big]["shape"]))),
         None, False),
        ("data_offsets [0, 2**63]", setk(big, "data_offsets", [0, 2 ** 63]), True, True),
        ("data_offsets [0, 2**64 + 4]", setk(big, "data_offsets", [0, 2 ** 64 + 4]), True, False),
        ("data_offsets reversed",
         setk(big, "data_offsets", list(reversed(header[big]["data_offsets"]))), True, True),
        ("data_offsets negative", setk(first, "data_offsets", [-8, -8 + (
            header[first]["data_offsets"][1] - header[first]["data_offsets"][0])]), True, False),
        ("data_offsets past the end",
         setk(first, "data_offsets", [len(data), len(data) + header[first]["data_offsets"][1] -
                                      header[first]["data_offsets"][0]]), True, True),
        ("data_offsets overlapping another tensor's",
         setk(first, "data_offsets", [header[big]["data_offsets"][0],
                                      header[big]["data_offsets"][0] +
                                      header[first]["data_offsets"][1] -
                                      header[first]["data_offsets"][0]]), None, False),
        ("data_offsets as strings", setk(first, "data_offsets", ["0", "512"]), True, False),
        ("data_offsets of three numbers", setk(first, "data_offsets", [0, 256, 512]), True, False),
        ("a tensor missing", edit(lambda h: h.pop(big)), None, False),
        ("an extra tensor 'ghost'", edit(lambda h: h.__setitem__("ghost", dict(header[first]))),
         None, False),
        ("a tensor named '../../escaped'",
         edit(lambda h: h.__setitem__("../../escaped", h.pop(first))), True, True),
        ("a tensor named '/tmp/escaped_abs'",
         edit(lambda h: h.__setitem__("/tmp/escaped_abs", h.pop(first))), True, False),
        ("a tensor named with an ESC sequence",
         edit(lambda h: h.__setitem__("w\x1b[2J\x1b]0;owned\x07", h.pop(first))), True, True),
        ("a tensor named with a NUL", edit(lambda h: h.__setitem__("w\x00x", h.pop(first))),
         True, False),
        ("a tensor with an empty name", edit(lambda h: h.__setitem__("", h.pop(first))), True,
         False),
        ("a tensor with a 1 MB name", edit(lambda h: h.__setitem__("n" * (1 << 20), h.pop(first))),
         True, False),
        ("the same tensor twice (duplicate JSON keys)",
         st_join(raw[:-1] + b',"' + first.encode() + b'":' +
                 json.dumps(header[big]).encode() + b"}", data), None, False),
        ("__metadata__ that is not a map of strings",
         edit(lambda h: h.__setitem__("__metadata__", {"a": [1, 2, {"b": None}]})), None, False),
        ("__metadata__ with a 1 MB value",
         edit(lambda h: h.__setitem__("__metadata__", {"a": "m" * (1 << 20)})), None, False),
        ("a tensor entry that is a string", edit(lambda h: h.__setitem__(first, "x")), True,
         False),
        ("a tensor entry without dtype", edit(lambda h: h[first].pop("dtype")), True, False),
        ("the data cut short by 4 bytes", blob[:-4], True, True),
        ("the data cut in half", blob[:len(blob) - len(data) // 2], True, False),
        ("4 bytes of garbage after the data", blob + b"\xde\xad\xbe\xef", None, False),
        ("NaN weights", st_join(raw, struct.pack("<f", float("nan")) * (len(data) // 4)), None,
         False),
    ]
    for i in range(6):
        pos = rng.randrange(8, 8 + len(raw))
        b = bytearray(blob)
        b[pos] ^= 1 << rng.randrange(8)
        out.append(("header byte %d flipped" % pos, bytes(b), None, False))
    return out


def gen_checkpoint(ctx: Context) -> List[Case]:
    rng = ctx.rng("checkpoint")
    d = ctx.dir("checkpoint")
    good_ck = os.path.join(d, "good_ck")
    good_model = os.path.join(d, "good_model")
    if not os.path.isdir(os.path.join(good_ck, "step_0000002")):
        ctx.prepare(["--config", BASE_CONFIG, "run", BASE_PROGRAM, "--set", "train.steps=2",
                     "--set", "checkpoint.dir=" + good_ck])
    if not os.path.isdir(good_model):
        ctx.prepare(["export", BASE_PROGRAM, "--feed", "x", "--fetch", "prediction", "--out",
                     good_model, "--checkpoint", good_ck])
    step = os.path.join(good_ck, "step_0000002")
    st_blob = read(os.path.join(step, "persistables.safetensors"))
    manifest = json.loads(read(os.path.join(step, "manifest.json")))
    x_in = write(os.path.join(d, "x.npy"), npy_bytes("<f4", False, (4, 32),
                                                      f32([0.5] * 128)))
    cases: List[Case] = []
    n = [0]

    def new_dir(prefix):
        n[0] += 1
        path = os.path.join(d, "%s%03d" % (prefix, n[0]))
        if os.path.exists(path):
            shutil.rmtree(path)
        return path

    # -- resuming from a damaged checkpoint. A damaged one must be skipped with a warning that
    # names it, or refused; resuming from it, or skipping it silently, is wrong.
    def resume(desc, mutate, must_refuse=True, quick=False):
        root = new_dir("ck")
        shutil.copytree(good_ck, root)
        mutate(root, os.path.join(root, "step_0000002"))

        def judged(r, must_refuse=must_refuse):
            if r.rc != 0 or must_refuse is None:
                return None
            if b"resumed from" in r.output:
                return "resumed from the damaged checkpoint"
            if b"step_0000002" not in r.output:
                return "the damaged checkpoint was skipped without a warning naming it"
            return None

        cases.append(Case("resume: " + desc,
                          ["--config", BASE_CONFIG, "run", BASE_PROGRAM, "--resume",
                           "--set", "checkpoint.dir=" + root, "--set", "train.steps=4"],
                          None, names=("step_0000002", "manifest", "checkpoint", "latest"),
                          cwd=d, quick=quick, post=judged))

    def fix_manifest(step_dir, fields=None):
        m = json.loads(read(os.path.join(step_dir, "manifest.json")))
        for f in m.get("files", []):
            path = os.path.join(step_dir, f["name"])
            if os.path.isfile(path):
                blob = read(path)
                f["bytes"] = len(blob)
                f["crc32"] = "%08x" % zlib.crc32(blob)
        if fields:
            m.update(fields)
        write(os.path.join(step_dir, "manifest.json"), json.dumps(m, indent=2))

    resume("an intact checkpoint", lambda root, sd: None, must_refuse=None, quick=True)
    for desc, blob, refuse, q in safetensors_variants(st_blob, rng):
        def damage(root, sd, blob=blob):
            write(os.path.join(sd, "persistables.safetensors"), blob)
        resume("persistables.safetensors with " + desc + " (manifest not updated)", damage,
               must_refuse=True, quick=q and desc.startswith("header length"))

        def consistent(root, sd, blob=blob):
            write(os.path.join(sd, "persistables.safetensors"), blob)
            fix_manifest(sd)
        resume("persistables.safetensors with " + desc + ", manifest sizes and CRCs updated",
               consistent, must_refuse=refuse, quick=q)

    mtext = read(os.path.join(step, "manifest.json")).decode()
    for desc, text, refuse, q in (
            ("manifest.json empty", "", True, True),
            ("manifest.json 'null'", "null", True, False),
            ("manifest.json '[]'", "[]", True, False),
            ("manifest.json cut in half", mtext[:len(mtext) // 2], True, True),
            ("manifest.json nested 100000 deep", "[" * 100000 + "]" * 100000, True, True),
            ("manifest.json an object nested 100000 deep",
             "{\"a\":" * 100000 + "1" + "}" * 100000, True, False),
            ("manifest.json with invalid UTF-8", mtext.replace("\"format\"", "\"form\udcff\""),
             True, False),
            ("manifest.json of 10 MB", mtext[:-2] + ", \"pad\": \"" + "p" * (10 << 20) + "\"}",
             None, False),
    ):
        resume(desc, lambda root, sd, text=text: write(os.path.join(sd, "manifest.json"), text),
               must_refuse=refuse, quick=q)
    files0 = manifest["files"][0]
    for desc, fields, refuse, q in (
            ("step as a string", {"step": "2"}, True, False),
            ("step -1", {"step": -1}, True, True),
            ("step 2**70", {"step": 2 ** 70}, True, False),
            ("step 9223372036854775807", {"step": 9223372036854775807}, True, True),
            ("step 3 in step_0000002", {"step": 3}, True, False),
            ("format 999", {"format": 999}, True, False),
            ("format as a string", {"format": "1"}, True, False),
            ("world_size 0", {"world_size": 0}, True, False),
            ("world_size 2**40", {"world_size": 2 ** 40}, True, False),
            ("another program's hash", {"program_hash": "0000000000000000"}, True, True),
            ("program_hash with an ESC sequence", {"program_hash": "\x1b[2J"}, True, False),
            ("data.batches 2**62", {"data": {"batch_size": 128, "batches": 2 ** 62}}, True, True),
            ("data.batches -5", {"data": {"batch_size": 128, "batches": -5}}, True, False),
            ("data.batch_size 0", {"data": {"batch_size": 0, "batches": 2}}, True, False),
            ("data as a string", {"data": "all"}, True, False),
            ("files empty", {"files": []}, True, True),
            ("files as an object", {"files": {"name": "x"}}, True, False),
            ("a file named '../../../escaped'",
             {"files": [dict(files0, name="../../../escaped")]}, True, True),
            ("a file named '/etc/passwd'", {"files": [dict(files0, name="/etc/passwd")]}, True,
             False),
            ("a file named '/dev/zero'", {"files": [dict(files0, name="/dev/zero")]}, True, True),
            ("a file named with an ESC sequence",
             {"files": [dict(files0, name="p\x1b[2J.safetensors")]}, True, True),
            ("the file listed twice", {"files": [files0, files0]}, None, False),
            ("bytes -1", {"files": [dict(files0, bytes=-1)]}, True, False),
            ("bytes 2**64", {"files": [dict(files0, bytes=2 ** 64)]}, True, False),
            ("crc32 'zz'", {"files": [dict(files0, crc32="zz")]}, True, False),
            ("crc32 as a number", {"files": [dict(files0, crc32=12345)]}, True, False),
            ("config as a list", {"config": [1, 2]}, None, False),
            ("an extra file that is a FIFO", {"files": [files0, dict(files0, name="fifo")]},
             True, False),
    ):
        def edit(root, sd, fields=fields):
            m = dict(manifest)
            m.update(fields)
            write(os.path.join(sd, "manifest.json"), json.dumps(m, indent=2))
            if any(f.get("name") == "fifo" for f in m.get("files", []) if isinstance(f, dict)):
                fifo(os.path.join(sd, "fifo"))
        resume("manifest.json with " + desc, edit, must_refuse=refuse, quick=q)

    for desc, fn, refuse, q in (
            ("latest naming a step that does not exist",
             lambda root, sd: write(os.path.join(root, "latest"), "step_0000099\n"), None, False),
            ("latest naming '../../..'",
             lambda root, sd: write(os.path.join(root, "latest"), "../../..\n"), None, True),
            ("latest with an ESC sequence",
             lambda root, sd: write(os.path.join(root, "latest"), "\x1b[2J\n"), None, True),
            ("latest of 1 MB", lambda root, sd: write(os.path.join(root, "latest"), "s" * (1 << 20)),
             None, False),
            ("latest is a FIFO", lambda root, sd: (os.unlink(os.path.join(root, "latest")),
                                                   fifo(os.path.join(root, "latest"))), None, True),
            ("latest is a symlink to /dev/zero",
             lambda root, sd: (os.unlink(os.path.join(root, "latest")),
                               os.symlink("/dev/zero", os.path.join(root, "latest"))), None, False),
            ("latest is a directory",
             lambda root, sd: (os.unlink(os.path.join(root, "latest")),
                               os.mkdir(os.path.join(root, "latest"))), None, False),
            ("a step_9999999999 directory that is empty",
             lambda root, sd: os.mkdir(os.path.join(root, "step_9999999999")), None, False),
            ("a step_0000003 that is a FIFO",
             lambda root, sd: fifo(os.path.join(root, "step_0000003")), None, True),
            ("a step_0000003 whose manifest is a FIFO",
             lambda root, sd: (os.mkdir(os.path.join(root, "step_0000003")),
                               fifo(os.path.join(root, "step_0000003", "manifest.json"))),
             None, False),
            ("a step_0000003 whose safetensors is /dev/zero",
             lambda root, sd: (shutil.copytree(sd, os.path.join(root, "step_0000003")),
                               os.unlink(os.path.join(root, "step_0000003",
                                                      "persistables.safetensors")),
                               os.symlink("/dev/zero", os.path.join(root, "step_0000003",
                                                                    "persistables.safetensors"))),
             None, True),
            ("persistables.safetensors missing",
             lambda root, sd: os.unlink(os.path.join(sd, "persistables.safetensors")), True,
             False),
            ("persistables.safetensors replaced by a directory",
             lambda root, sd: (os.unlink(os.path.join(sd, "persistables.safetensors")),
                               os.mkdir(os.path.join(sd, "persistables.safetensors"))), True,
             False),
            ("the checkpoint dir is a regular file",
             lambda root, sd: (shutil.rmtree(root), write(root, "not a directory")), None, False),
    ):
        resume(desc, fn, must_refuse=refuse, quick=q)

    # -- convert: the safetensors parser with no checksum in front of it. Nothing may be written
    # outside the output directory.
    def convert(desc, blob, must_refuse, quick):
        root = new_dir("cv")
        os.makedirs(root)
        src = write(os.path.join(root, "in.safetensors"), blob)
        dst = os.path.join(root, "out")

        def contained(r, root=root, dst=dst):
            stray = [os.path.join(dp, f) for dp, _, fs in os.walk(os.path.dirname(root))
                     for f in fs if "escaped" in f]
            stray += [p for p in ("/tmp/escaped_abs.npy",) if os.path.exists(p)]
            return "wrote outside --out: " + ", ".join(stray[:3]) if stray else None

        cases.append(Case("convert: safetensors with " + desc, ["convert", src, "--out", dst],
                          must_refuse, names=("in.safetensors", "convert: var"), cwd=root,
                          quick=quick, post=contained))

    convert("no damage", st_blob, False, True)
    for desc, blob, refuse, q in safetensors_variants(st_blob, rng):
        # A file name may hold control characters; only '/', '.', '..' and NUL cannot be one.
        convert(desc, blob, None if "ESC" in desc else refuse, q)

    # -- init_from: weights made elsewhere.
    def init_from(desc, files, must_refuse=True, quick=False, names=()):
        root = new_dir("if")
        os.makedirs(root)
        for name, blob in files.items():
            write(os.path.join(root, name), blob)
        cases.append(Case("init_from: " + desc,
                          ["--config", BASE_CONFIG, "run", BASE_PROGRAM, "--set", "train.steps=1",
                           "--set", "train.init_from=" + root],
                          must_refuse, names=tuple(names) or tuple(files) or (root,), cwd=root,
                          quick=quick))

    init_from("the checkpoint's safetensors", {"w.safetensors": st_blob}, False, True)
    for desc, blob, refuse, q in safetensors_variants(st_blob, rng)[:24]:
        init_from("a safetensors file with " + desc, {"w.safetensors": blob}, refuse, q)
    w = npy_bytes("<f4", False, (32, 128), f32([0.01] * 4096))
    init_from("fc_0.w_0.npy of the right shape", {"fc_0.w_0.npy": w}, False)
    init_from("fc_0.w_0.npy transposed", {"fc_0.w_0.npy": npy_bytes("<f4", False, (128, 32),
                                                                     f32([0.01] * 4096))},
              quick=True)
    init_from("fc_0.w_0.npy as float64", {"fc_0.w_0.npy": npy_bytes("<f8", False, (32, 128),
                                                                     f32([0.01] * 8192))})
    init_from("ghost.npy (no such var)", {"ghost.npy": w})
    init_from("fc_0.w_0.npy and the same var in a safetensors file",
              {"fc_0.w_0.npy": w, "w.safetensors": st_blob})
    init_from("a .npy named with an ESC sequence", {"\x1b[2J.npy": w}, names=("init_from",))
    init_from("a .npy named '..npy'", {"..npy": w})
    init_from("x.npy (a data var, not persistable)", {"x.npy": w})
    init_from("an empty directory", {}, must_refuse=None, names=("init_from",))
    cases[-1].names = ("init_from",)

    # -- infer on a damaged export.
    def outside(root, out):
        """A check that nothing named *escaped* was written outside `out` (under the work dir)."""
        def check(r):
            stray = [os.path.join(dp, f) for dp, _, fs in os.walk(ctx.work) for f in fs
                     if "escaped" in f and not os.path.join(dp, f).startswith(out + os.sep)]
            return "wrote outside --out: " + ", ".join(stray[:3]) if stray else None
        return check

    def infer(desc, mutate, must_refuse=True, quick=False, extra=None, names=()):
        root = new_dir("ex")
        shutil.copytree(good_model, root)
        mutate(root)
        args = ["infer", root] + (extra if extra is not None else ["--input", "x=" + x_in])
        post = None
        if "--out" in args:
            out = os.path.join(root, args[args.index("--out") + 1])
            args[args.index("--out") + 1] = out
            post = outside(root, out)
        cases.append(Case("infer: " + desc, args, must_refuse,
                          names=tuple(names) + ("model.json", "model.ir", "params.safetensors",
                                                os.path.basename(root)),
                          cwd=root, quick=quick, post=post))

    def fix_model(root):
        mj = json.loads(read(os.path.join(root, "model.json")))
        for name in list(mj.get("crc32", {})):
            path = os.path.join(root, name)
            if os.path.isfile(path):
                mj["crc32"][name] = "%08x" % zlib.crc32(read(path))
        write(os.path.join(root, "model.json"), json.dumps(mj, indent=2))

    infer("an intact export", lambda root: None, must_refuse=False, quick=True)
    model_json = json.loads(read(os.path.join(good_model, "model.json")))
    for desc, blob, refuse, q in safetensors_variants(read(os.path.join(good_model,
                                                                        "params.safetensors")),
                                                      rng):
        def damage(root, blob=blob):
            write(os.path.join(root, "params.safetensors"), blob)
            fix_model(root)
        infer("params.safetensors with " + desc + ", CRC updated", damage, refuse, q)
    infer("params.safetensors with a byte flipped, CRC not updated",
          lambda root: write(os.path.join(root, "params.safetensors"),
                             flip_bytes(read(os.path.join(root, "params.safetensors")), rng, 1)),
          quick=True)
    ir = read(os.path.join(good_model, "model.ir")).decode()
    ir_variants = [
        ("model.ir empty", "", True, True),
        ("model.ir cut in half", ir[:len(ir) // 2], True, False),
        ("model.ir with an unknown op", ir.replace("op tanh", "op no_such_op", 1), True, True),
        ("model.ir with a var of shape [2**62, 2**62]",
         ir.replace("float32[32, 128]", "float32[4611686018427387904, 4611686018427387904]", 1),
         True, True),
        ("model.ir with a var of shape [-5, 128]", ir.replace("float32[32, 128]",
                                                             "float32[-5, 128]", 1), True, False),
        ("model.ir with a weight of another shape", ir.replace("float32[32, 128]",
                                                              "float32[32, 64]", 1), True, False),
        ("model.ir with braces nested 100000 deep",
         ir.replace("block 0 {", "block 0 {" + "{" * 100000, 1), True, True),
        ("model.ir with an op reading an undeclared var", ir.replace("X=[x]", "X=[ghost]", 1),
         True, False),
        ("model.ir with an attribute of 1 MB",
         ir.replace("{axis=1}", "{axis=" + "1" * (1 << 20) + "}", 1), True, False),
        ("model.ir with an ESC sequence in a var name", ir.replace("fc_0.tmp_0",
                                                                  "fc_0\x1b[2J.tmp_0"), True,
         True),
        ("model.ir with x_num_col_dims=99", ir.replace("x_num_col_dims=1", "x_num_col_dims=99",
                                                       1), True, False),
        ("model.ir with axis=-99", ir.replace("{axis=1}", "{axis=-99}", 1), True, False),
        ("model.ir with a second block", ir.replace("  }\n}", "  }\n  block 1 {\n  }\n}"),
         None, False),
    ]
    for i in range(10):
        b = flip_bytes(ir.encode(), rng, rng.randint(1, 3))
        ir_variants.append(("model.ir with random bytes flipped (#%d)" % i, b, None, False))
    for desc, text, refuse, q in ir_variants:
        def damage(root, text=text):
            write(os.path.join(root, "model.ir"), text)
            fix_model(root)
        infer(desc + ", CRC updated", damage, refuse, q)

    feeds0 = model_json["feeds"][0]
    for desc, fields, refuse, q in (
            ("an empty model.json", None, True, True),
            ("model.json nested 100000 deep", "[" * 100000 + "]" * 100000, True, True),
            ("program '../../../../etc/passwd'", {"program": "../../../../etc/passwd"}, True,
             True),
            ("program '/dev/zero'", {"program": "/dev/zero"}, True, True),
            ("program a FIFO", {"program": "fifo"}, True, False),
            ("params '/etc/passwd'", {"params": "/etc/passwd"}, True, False),
            ("params '/dev/urandom'", {"params": "/dev/urandom"}, True, False),
            ("no crc32", {"crc32": None}, True, False),
            ("crc32 as a list", {"crc32": [1]}, True, False),
            ("format 2", {"format": 2}, True, False),
            ("a feed of dtype 'complex128'", {"feeds": [dict(feeds0, dtype="complex128")]}, True,
             False),
            ("a feed of shape [-1, 2**62]", {"feeds": [dict(feeds0, shape=[-1, 2 ** 62])]}, True,
             True),
            ("a feed of shape [-1, 33]", {"feeds": [dict(feeds0, shape=[-1, 33])]}, True, False),
            ("a feed of shape []", {"feeds": [dict(feeds0, shape=[])]}, True, False),
            ("a feed named 'ghost'", {"feeds": [dict(feeds0, name="ghost")]}, True, False),
            ("a feed named with an ESC sequence", {"feeds": [dict(feeds0, name="x\x1b[2J")]},
             True, True),
            ("no feeds", {"feeds": []}, True, False),
            ("feeds as a string", {"feeds": "x"}, True, False),
            ("a fetch of var 'ghost'", {"fetches": [{"name": "p", "var": "ghost"}]}, True, False),
            ("a fetch named with an ESC sequence",
             {"fetches": [{"name": "p\x1b[2J", "var": "fc_2.tmp_2"}]}, True, True),
            ("a fetch named '../../escaped'",
             {"fetches": [{"name": "../../escaped", "var": "fc_2.tmp_2"}]}, True, True),
            ("10000 fetches of the same var",
             {"fetches": [{"name": "p%d" % i, "var": "fc_2.tmp_2"} for i in range(10000)]},
             None, False),
    ):
        def edit(root, fields=fields):
            if fields is None:
                write(os.path.join(root, "model.json"), "")
                return
            if isinstance(fields, str):
                write(os.path.join(root, "model.json"), fields)
                return
            mj = json.loads(json.dumps(model_json))
            for k, v in fields.items():
                if v is None:
                    mj.pop(k, None)
                else:
                    mj[k] = v
            write(os.path.join(root, "model.json"), json.dumps(mj, indent=1))
            if fields.get("program") == "fifo":
                fifo(os.path.join(root, "fifo"))
        extra = None
        if "escaped" in desc:
            extra = ["--input", "x=" + x_in, "--out", "OUT"]
        infer("model.json with " + desc, edit, refuse, q, extra=extra,
              names=("feed",) if desc == "no feeds" else ())

    # Inputs of infer.
    for desc, blob, refuse, q in (
            ("x.npy float64", npy_bytes("<f8", False, (4, 32), f32([0.5] * 256)), True, True),
            ("x.npy of shape (4, 31)", npy_bytes("<f4", False, (4, 31), f32([0.5] * 124)), True,
             False),
            ("x.npy of shape (0, 32)", npy_bytes("<f4", False, (0, 32), b""), None, True),
            ("x.npy of shape (2**40, 32) over 4 rows of data",
             npy_bytes("<f4", False, (2 ** 40, 32), f32([0.5] * 128)), True, True),
            ("x.npy of shape (1000000, 32) (a real 128 MB batch)",
             npy_bytes("<f4", False, (1000000, 32), bytes(128000000)), None, False),
            ("x.npy of shape (4, 32, 1)", npy_bytes("<f4", False, (4, 32, 1), f32([0.5] * 128)),
             True, False),
            ("x.npy with NaN", npy_bytes("<f4", False, (4, 32), f32([float("nan")] * 128)), None,
             False),
    ):
        root = new_dir("in")
        os.makedirs(root)
        path = write(os.path.join(root, "in.npy"), blob)
        cases.append(Case("infer input: " + desc, ["infer", good_model, "--input", "x=" + path],
                          refuse, names=("in.npy",), cwd=root, quick=q))
    root = new_dir("in")
    os.makedirs(root)
    fifo_in = fifo(os.path.join(root, "fifo.npy"))
    other_in = write(os.path.join(root, "other.npy"), npy_bytes("<f4", False, (4, 32),
                                                                 f32([0.25] * 128)))
    for desc, extra, refuse, q, names in (
            ("--input naming an unknown feed", ["--input", "ghost=" + x_in], True, True,
             ("ghost", "--input")),
            ("--input '=x.npy'", ["--input", "=" + x_in], None, False, ("--input",)),
            ("--input 'x='", ["--input", "x="], True, False, ("--input",)),
            ("--input x given twice, two different files",
             ["--input", "x=" + x_in, "--input", "x=" + other_in], True, False, ("x",)),
            ("--input /dev/zero", ["--input", "x=/dev/zero"], True, True, ("/dev/zero",)),
            ("--input a FIFO", ["--input", "x=" + fifo_in], True, True, ("fifo.npy",)),
            ("--input a directory", ["--input", "x=" + root], True, False, (root,)),
            ("--input with an ESC sequence in the feed name", ["--input", "x\x1b[2J=" + x_in],
             True, True, ("--input", "feed")),
            ("no --input", [], True, False, ("--input", "x")),
            ("--out /dev/null", ["--input", "x=" + x_in, "--out", "/dev/null"], True, False,
             ("/dev/null",)),
            ("--out under a regular file", ["--input", "x=" + x_in, "--out", x_in + "/sub"],
             True, False, ("x.npy",)),
            ("--out ''", ["--input", "x=" + x_in, "--out", ""], True, False, ("--out",)),
            ("--out given twice", ["--input", "x=" + x_in, "--out", root + "/o1", "--out",
                                   root + "/o2"], True, False, ("--out",)),
    ):
        cases.append(Case("infer flags: " + desc, ["infer", good_model] + extra, refuse,
                          names=names, cwd=root, quick=q))
    for desc, model_dir, names in (("infer on a directory that is no export", d, ("model.json",)),
                                   ("infer on /dev/zero", "/dev/zero", ("/dev/zero",)),
                                   ("infer on a checkpoint step", step, ("model.json",))):
        cases.append(Case(desc, ["infer", model_dir, "--input", "x=" + x_in], True, names=names,
                          cwd=d))

    # export with damaged weights and odd destinations.
    for desc, extra, refuse, q, names in (
            ("--params a directory with a damaged safetensors", None, True, True,
             ("w.safetensors",)),
            ("--out /dev/null", ["--out", "/dev/null"], True, True, ("/dev/null",)),
            ("--out an existing regular file", ["--out", x_in], True, False, ("x.npy",)),
            ("--out under a regular file", ["--out", x_in + "/model"], True, False, ("x.npy",)),
            ("--out /", ["--out", "/", "--force"], True, False, ("--out", "'/'")),
            ("--fetch a var that does not exist", ["--fetch", "ghost"], True, True, ("ghost",)),
            ("--fetch with an ESC sequence", ["--fetch", "p\x1b[2J"], True, True, ("fetch",)),
            ("--feed a parameter", ["--feed", "fc_0.w_0"], True, False, ("fc_0.w_0",)),
            ("--checkpoint /dev/zero", ["--checkpoint", "/dev/zero"], True, False,
             ("/dev/zero",)),
    ):
        root = new_dir("xp")
        os.makedirs(root)
        args = ["export", BASE_PROGRAM, "--feed", "x", "--fetch", "prediction",
                "--out", os.path.join(root, "model")]
        if extra is None:
            bad = safetensors_variants(st_blob, rng)[0][1]
            write(os.path.join(root, "w.safetensors"), bad)
            args += ["--params", root]
        else:
            for i in range(0, len(extra), 2):
                if extra[i] in args and extra[i] != "--feed":
                    j = args.index(extra[i])
                    args[j + 1] = extra[i + 1]
                else:
                    args += extra[i:i + 2]
            args += extra[len(extra) - len(extra) % 2:]
        cases.append(Case("export: " + desc, args, refuse, names=names, cwd=root, quick=q))
    return cases


# ---- boundary: command-line flags and --set values ----------------------------------------------


# The longest single argument Linux passes to a program (MAX_ARG_STRLEN is 128 KiB).
ARG_MAX_ONE = 120000


def gen_cli(ctx: Context) -> List[Case]:
    rng = ctx.rng("cli")
    d = ctx.dir("cli")
    prog = BASE_PROGRAM
    cases: List[Case] = []

    def add(desc, args, must_refuse=True, names=(), quick=False, post=None, cwd=None):
        cases.append(Case(desc, list(args), must_refuse, names=tuple(names), cwd=cwd or d,
                          quick=quick, post=post))

    add("--help", ["--help"], must_refuse=False)
    add("version", ["version"], must_refuse=False, quick=True)
    # Commands and global options.
    for desc, args, names, q in (
            ("no arguments at all", [], ("command", "usage"), False),
            ("an unknown command", ["frobnicate"], ("frobnicate",), True),
            ("an empty command", [""], ("command",), False),
            ("a command with an ESC sequence", ["\x1b[2J\x1b]0;owned\x07"], ("command",), True),
            ("a command with a C1 control", ["run\u009b31m"], ("command",), False),
            ("a command of invalid UTF-8", ["\udcff\udcfe"], ("command",), False),
            ("a command of 120 KB", ["c" * ARG_MAX_ONE], ("command",), False),
            ("an unknown option", ["--bogus", "check"], ("--bogus",), True),
            ("an unknown option with an ESC sequence", ["--\x1b[2J", "check"], ("option",), True),
            ("a single dash", ["-", "check"], ("'-'",), False),
            ("--config without a value", ["--config"], ("--config",), True),
            ("--config ''", ["--config", "", "check"], ("--config", "config"), False),
            ("--config=FILE (with '=')", ["--config=" + BASE_CONFIG, "check"], ("--config",),
             False),

            ("--log-level bogus", ["--log-level", "bogus", "check"], ("--log-level", "bogus"),
             True),
            ("--log-level ''", ["--log-level", "", "check"], ("--log-level",), False),
            ("--log-level with an ESC sequence", ["--log-level", "\x1b[31m", "check"],
             ("--log-level",), True),
            ("--log-level without a value", ["--log-level"], ("--log-level",), False),
            ("check with two programs", ["check", prog, prog], ("argument",), False),
            ("check with an unknown flag", ["check", prog, "--bogus"], ("--bogus",), False),
            ("run without a program", ["run"], ("program", "run"), True),
            ("run with two programs", ["run", prog, prog], ("argument", "unexpected"), False),
            ("run --resume without checkpoint.dir", ["run", prog, "--resume"],
             ("checkpoint.dir", "--resume"), True),
            ("run --set without a value", ["run", prog, "--set"], ("--set",), False),
            ("run with '--' and more", ["run", prog, "--", "x"], ("--", "argument"), False),
    ):
        add(desc, args, names=names, quick=q)
    add("--log-level off", ["--log-level", "off", "check"], must_refuse=False)
    add("--config given twice", ["--config", BASE_CONFIG, "--config", "/dev/null", "check"],
        names=("--config",))
    add("--config before and after the command", ["--config", BASE_CONFIG, "run", prog,
                                                  "--config", "/dev/null"], names=("--config",))
    add("--log-level given twice", ["--log-level", "info", "--log-level", "off", "check"],
        names=("--log-level",))
    add("--log-level TRACE (upper case)", ["--log-level", "TRACE", "check"], must_refuse=None,
        names=("--log-level",))

    # --set: keys and values of every shape.
    sets = [
        ("no '='", "train.steps", True, True),
        ("an empty key", "=5", True, True),
        ("only '='", "=", True, False),
        ("an empty string", "", True, True),
        ("an empty value for an integer key", "train.steps=", True, True),
        ("an empty value for a string key", "log.level=", True, False),
        ("a value of spaces", "train.steps=   ", True, False),
        ("a value '1e999'", "train.steps=1e999", True, False),
        ("a value past int64", "train.steps=99999999999999999999", True, True),
        ("a value 2**63", "train.steps=9223372036854775808", True, False),
        ("a value -1", "train.steps=-1", True, False),
        ("a value 'nan'", "train.steps=nan", True, False),
        ("a value 'inf'", "comm.timeout_s=inf", True, True),
        ("a value '-0.0'", "comm.timeout_s=-0.0", True, False),
        ("a value '1_000' (TOML digits)", "train.steps=1_000", None, False),
        ("a value '0x10' (TOML hex)", "train.steps=0x10", None, False),
        ("a value '0b11' (TOML binary)", "train.steps=0b11", None, False),
        ("a value of 10000 digits", "train.steps=" + "9" * 10000, True, False),
        ("a float of 10000 digits", "comm.timeout_s=1." + "1" * 10000, None, False),
        ("a quoted number for an integer", "train.steps=\"5\"", True, False),
        ("an unterminated quote", "log.level=\"info", True, True),
        ("a table for a scalar", "train.steps={a=1}", True, False),
        ("an array nested 20000 deep", "plugins.dirs=" + "[" * 20000 + "]" * 20000, True, True),
        ("an inline table nested 20000 deep (not TOML, so a bare string)",
         "plugins.config.cpu.x=" + "{a=" * 20000 + "1" + "}" * 20000, None, False),
        ("a scalar over a table", "train=1", True, True),
        ("a key below a scalar", "train.steps.x=1", True, False),
        ("a key of 20000 parts", ".".join(["plugins", "config", "cpu"] + ["k"] * 20000) + "=1",
         None, True),
        ("a key of 60000 parts", ".".join(["plugins", "config", "cpu"] + ["k"] * 60000) + "=1",
         None, True),
        ("a key '.'", ".=1", True, False),
        ("a key 'a..b'", "train..steps=1", True, False),
        ("a key with spaces", "train. steps =1", None, False),
        ("a key with an ESC sequence", "train.\x1b[2J=1", True, True),
        ("a key with a C1 control", "train.a\u009b31m=1", True, False),
        ("a key of invalid UTF-8", "train.\udcff=1", True, False),
        ("a key of 120 KB", "train." + "k" * ARG_MAX_ONE + "=1", True, False),
        ("a bare value with an ESC sequence", "log.level=\x1b[31mred", True, True),
        ("a bare value with a CR", "log.level=info\rFAKE", True, False),
        ("a bare value of invalid UTF-8", "log.level=\udcff", True, False),
        ("a bare value of 120 KB", "log.level=" + "x" * ARG_MAX_ONE, True, False),
        ("a path value of 120 KB", "checkpoint.dir=" + "d" * ARG_MAX_ONE, None, False),
        ("an unknown key", "train.stepz=1", True, True),
        ("an unknown table", "trian.steps=1", True, False),
        ("a TOML date for an integer", "train.steps=1979-05-27", True, False),
        ("an array of 30000 strings", "plugins.dirs=[" + "\"d\"," * 30000 + "]", None,
         False),
        ("a value with a NUL escape", "log.level=\"info\\u0000\"", True, False),
        ("a value with a surrogate escape", "log.level=\"\\uD800\"", True, False),
        ("a filelist of /dev/zero",
         "data.filelist=[\"/dev/zero\"]", None, False),
    ]
    for desc, value, refuse, q in sets:
        key = value.split("=", 1)[0] if "=" in value else value
        add("--set with %s" % desc, ["--set", value, "check"], must_refuse=refuse,
            names=("--set",) + ((key,) if key else ()), quick=q)
    add("--set the same key twice", ["--set", "train.steps=1", "--set", "train.steps=2", "check"],
        must_refuse=None, names=("--set",))
    add("10000 --set flags", sum((["--set", "plugins.config.cpu.k%d=%d" % (i, i)]
                                  for i in range(10000)), []) + ["check"],
        must_refuse=None, names=("--set",))
    add("--set train.batch_size=2147483647 and check the program",
        ["--set", "train.batch_size=2147483647", "check", prog], must_refuse=None,
        names=("batch",))

    # show.
    for desc, extra, refuse, names, q in (
            ("--stage bogus", ["--stage", "bogus"], True, ("--stage", "bogus"), True),
            ("--stage with an ESC sequence", ["--stage", "\x1b[2J"], True, ("--stage",), True),
            ("--stage without a value", ["--stage"], True, ("--stage",), False),
            ("--stage given twice", ["--stage", "parsed", "--stage", "backward"], True,
             ("--stage",), False),
            ("--program nope", ["--program", "nope"], True, ("--program", "nope"), False),
            ("--rank -1 --world-size 2", ["--stage", "transpiled", "--rank", "-1",
                                          "--world-size", "2"], True, ("--rank",), True),
            ("--rank 5 --world-size 2", ["--stage", "transpiled", "--rank", "5",
                                         "--world-size", "2"], True, ("--rank", "rank 5"), False),
            ("--world-size 0", ["--stage", "transpiled", "--world-size", "0"], True,
             ("--world-size",), False),
            ("--world-size 2**31", ["--stage", "transpiled", "--world-size", "2147483648"], True,
             ("--world-size",), True),
            ("--world-size 2**63", ["--stage", "transpiled", "--world-size",
                                    "9223372036854775808"], True, ("--world-size",), False),
            ("--world-size abc", ["--stage", "transpiled", "--world-size", "abc"], True,
             ("--world-size",), False),
            ("--world-size 65536", ["--stage", "transpiled", "--world-size", "65536",
                                    "--rank", "65535"], None, ("--world-size",), False),
            ("--world-size 65537", ["--stage", "transpiled", "--world-size", "65537"], True,
             ("--world-size",), False),
            ("--role bogus", ["--stage", "transpiled", "--role", "bogus"], True, ("--role",),
             False),
            ("--role pserver without --pservers", ["--stage", "transpiled", "--role", "pserver",
                                                   "--index", "0"], True,
             ("--pservers", "pserver"), False),
            ("--index -1", ["--stage", "transpiled", "--role", "pserver", "--index", "-1",
                            "--pservers", "127.0.0.1:6170"], True, ("--index",), False),
            ("--index 5 of 1 server", ["--stage", "transpiled", "--role", "pserver", "--index",
                                       "5", "--pservers", "127.0.0.1:6170"], True,
             ("--index", "index 5"), False),
            ("--pservers ''", ["--stage", "transpiled", "--pservers", ""], True, ("--pservers",),
             False),
            ("--pservers 'a'", ["--stage", "transpiled", "--pservers", "a"], True,
             ("--pservers", "'a'"), False),
            ("--pservers with port 99999", ["--stage", "transpiled", "--pservers",
                                            "127.0.0.1:99999"], True, ("99999",), True),
            ("--pservers with an ESC sequence", ["--stage", "transpiled", "--pservers",
                                                 "h\x1b[2J:1"], True, ("--pservers",), True),
            ("--pservers of 7000 endpoints", ["--stage", "transpiled", "--pservers",
                                               ",".join("127.0.0.1:%d" % (10000 + i)
                                                        for i in range(7000))], None,
             ("--pservers",), False),
            ("--pservers with one endpoint twice", ["--stage", "transpiled", "--pservers",
                                                    "127.0.0.1:1,127.0.0.1:1"], True,
             ("127.0.0.1:1",), False),
    ):
        add("show " + desc, ["show", prog] + extra, must_refuse=refuse, names=names, quick=q)
    # A table that must stay on the servers but has a dense gradient (a second, dense lookup).
    dist = write(os.path.join(d, "distributed.fleet"),
                 "ids = data(\"ids\", shape=[-1, 4], dtype=\"int64\")\n"
                 "y = data(\"y\", shape=[-1, 1], dtype=\"int64\")\n"
                 "e = embedding(ids, size=[1000, 8], is_distributed=True, param_attr=\"t\")\n"
                 "f = embedding(ids, size=[1000, 8], param_attr=\"t\")\n"
                 "prediction = fc(e + f, size=2, act=\"softmax\")\n"
                 "avg_cost = mean(cross_entropy(prediction, y))\n"
                 "minimize(avg_cost, optimizer=sgd(learning_rate=0.01))\n")
    add("show an is_distributed table whose gradient is dense, on parameter servers",
        ["show", dist, "--stage", "transpiled", "--pservers", "127.0.0.1:6170"],
        names=("'t'", "is_distributed", "dense"), quick=True)
    # Growable tables (size [-1, dim]): only distributed, only on parameter servers, not GEO.
    def growable(name, table, lookups=1):
        return write(os.path.join(d, name + ".fleet"),
                     "ids = data(\"ids\", shape=[-1, 4], dtype=\"int64\")\n"
                     "y = data(\"y\", shape=[-1, 1], dtype=\"int64\")\n"
                     "e = embedding(ids, " + table + ", param_attr=\"g\")\n"
                     "prediction = fc(e, size=2, act=\"softmax\")\n"
                     "avg_cost = mean(cross_entropy(prediction, y))\n"
                     "minimize(avg_cost, optimizer=sgd(learning_rate=0.01))\n")
    ok_growable = growable("growable", "size=[-1, 8], is_distributed=True")
    for desc, prog, extra, names in (
            ("a growable table that is not is_distributed",
             growable("growable_local", "size=[-1, 8], is_sparse=True"), [],
             ("size", "is_distributed")),
            ("a growable table with a negative padding_idx",
             growable("growable_pad", "size=[-1, 8], is_distributed=True, padding_idx=-1"), [],
             ("padding_idx",)),
            ("a growable table in a collective job", ok_growable,
             ["--world-size", "2"], ("'g'", "growable", "pserver")),
            ("a growable table with GEO-SGD", ok_growable,
             ["--pservers", "127.0.0.1:6170", "--set", "strategy.a_sync=true", "--set",
              "strategy.a_sync_configs.k_steps=5"], ("growable", "GEO")),
    ):
        add("show " + desc, ["show", prog, "--stage", "transpiled"] + extra, names=names,
            quick=True)

    # ops, plugins, devices, env.
    for desc, args, refuse, names, q in (
            ("ops with an unknown op", ["ops", "no_such_op"], True, ("no_such_op",), False),
            ("ops with an ESC sequence", ["ops", "mul\x1b[2J"], True, ("op",), True),
            ("ops with a C1 control", ["ops", "mul\u009b2J"], True, ("op",), False),
            ("ops with 120 KB", ["ops", "o" * ARG_MAX_ONE], True, ("op",), False),
            ("ops with two names", ["ops", "mul", "sum"], True, ("sum", "one op"), False),
            ("ops --json --bogus", ["ops", "--json", "--bogus"], True, ("--bogus",), False),
            ("plugins with an unknown name", ["plugins", "nope"], True, ("nope",), False),
            ("plugins with an ESC sequence", ["plugins", "x\x1b[2J"], True, ("plugin",), True),
            ("plugins /dev/zero", ["plugins", "/dev/zero"], True, ("/dev/zero",), True),
            ("plugins /etc/passwd", ["plugins", "/etc/passwd"], True, ("/etc/passwd",), False),
            ("plugins ../../../etc/passwd", ["plugins", "../../../etc/passwd"], True,
             ("passwd",), False),
            ("devices --bogus", ["devices", "--bogus"], True, ("--bogus",), False),
            ("env with an argument", ["env", "x"], True, ("'x'", "argument"), False),
            ("version --bogus", ["version", "--bogus"], True, ("--bogus",), False),
    ):
        add(desc, args, must_refuse=refuse, names=names, quick=q)

    # Files that claim to be plugins: given by path and found in a plugins dir.
    pdir = ctx.dir("cli", "plugins")
    real = os.path.join(os.path.dirname(os.path.dirname(ctx.host)), "lib", "fleet", "plugins",
                        "libfleet_cpu.so")
    fakes = {"libfleet_text.so": b"this is not an ELF file\n",
             "libfleet_empty.so": b"",
             "libfleet_elfhead.so": b"\x7fELF\x02\x01\x01" + b"\x00" * 57}
    if os.path.exists(real):
        blob = read(real)
        fakes["libfleet_half.so"] = blob[:len(blob) // 2]
        fakes["libfleet_head.so"] = blob[:4096]
        fakes["libfleet_flipped.so"] = flip_bytes(blob[:4096], rng, 8) + blob[4096:]
        fakes["libfleet_renamed.so"] = blob
    for libm in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6",
                 "/lib64/libm.so.6"):
        if os.path.exists(libm):
            fakes["libfleet_libm.so"] = read(libm)
            break
    for name, blob in sorted(fakes.items()):
        path = write(os.path.join(pdir, name), blob)
        os.chmod(path, 0o755)
        stem = name[len("libfleet_"):-3]
        refuse = None if name == "libfleet_renamed.so" else True
        add("plugins PATH: %s" % name, ["plugins", path], must_refuse=refuse,
            names=(name, stem), quick=name in ("libfleet_half.so", "libfleet_text.so"))
        add("device.backend from a plugins dir: %s" % name,
            ["--set", "plugins.dirs=[\"%s\"]" % pdir, "--set", "device.backend=" + stem,
             "check"], must_refuse=refuse, names=(name, stem), quick=name == "libfleet_head.so")
    special = ctx.dir("cli", "special")
    link = os.path.join(special, "libfleet_zero.so")
    if not os.path.lexists(link):
        os.symlink("/dev/zero", link)
    fifo(os.path.join(special, "libfleet_fifo.so"))
    for name in ("libfleet_zero.so", "libfleet_fifo.so"):
        add("plugins PATH: %s" % name, ["plugins", os.path.join(special, name)],
            names=(name, name[9:-3]), quick=name == "libfleet_fifo.so")
    add("plugins --json with a plugins dir of special files",
        ["--set", "plugins.dirs=[\"%s\"]" % special, "plugins", "--json"], must_refuse=None,
        names=("libfleet_",))
    add("FLEET_PLUGIN_PATH-style dir of broken plugins, plugins --rejected",
        ["--set", "plugins.dirs=[\"%s\"]" % pdir, "plugins", "--rejected"], must_refuse=None)

    # launch (each job only prints the version).
    ver = ["--", "version"]
    for desc, extra, refuse, names, q in (
            ("--nproc 0", ["--nproc", "0"] + ver, True, ("--nproc",), True),
            ("--nproc -1", ["--nproc", "-1"] + ver, True, ("--nproc",), False),
            ("--nproc abc", ["--nproc", "abc"] + ver, True, ("--nproc",), False),
            ("--nproc ''", ["--nproc", ""] + ver, True, ("--nproc",), False),
            ("--nproc 2**31", ["--nproc", "2147483648"] + ver, True, ("--nproc",), True),
            ("--nproc 2**64 + 1", ["--nproc", "18446744073709551617"] + ver, True, ("--nproc",),
             False),
            ("--nproc without a value", ["--nproc"], True, ("--nproc",), False),
            ("--nproc 1 and no command", ["--nproc", "1"], True, ("command", "--"), False),
            ("--nproc 1 and an empty command", ["--nproc", "1", "--", ""], True, ("command",),
             False),
            ("--nproc 1 -- version", ["--nproc", "1"] + ver, False, (), True),
            ("--job-id '../escaped'", ["--nproc", "1", "--job-id", "../escaped"] + ver, True,
             ("--job-id",), True),
            ("--job-id with an ESC sequence", ["--nproc", "1", "--job-id", "j\x1b[2J"] + ver,
             True, ("--job-id",), True),
            ("--job-id '..'", ["--nproc", "1", "--job-id", ".."] + ver, True, ("--job-id",),
             False),
            ("--job-id ''", ["--nproc", "1", "--job-id", ""] + ver, True, ("--job-id",), False),
            ("--job-id of 120 KB", ["--nproc", "1", "--job-id", "j" * ARG_MAX_ONE] + ver, True,
             ("job",), False),
            ("--nproc twice", ["--nproc", "1", "--nproc", "2"] + ver, True, ("--nproc",), False),
            ("--nproc and --nproc_per_node", ["--nproc", "1", "--nproc_per_node", "2"] + ver,
             True, ("--nproc",), False),
            ("--log-dir /dev/null", ["--nproc", "1", "--log-dir", "/dev/null"] + ver, True,
             ("/dev/null",), False),
            ("--log-dir ''", ["--nproc", "1", "--log-dir", ""] + ver, True, ("--log-dir",),
             False),
            ("--log-dir under a regular file", ["--nproc", "1", "--log-dir",
                                                BASE_PROGRAM + "/logs"] + ver, True,
             ("mlp.fleet",), False),
            ("--grace-s -1", ["--nproc", "1", "--grace-s", "-1"] + ver, True, ("--grace-s",),
             False),
            ("--grace-s nan", ["--nproc", "1", "--grace-s", "nan"] + ver, True, ("--grace-s",),
             True),
            ("--grace-s 1e308", ["--nproc", "1", "--grace-s", "1e308"] + ver, None,
             ("--grace-s",), False),
            ("--max-restarts -1", ["--nproc", "1", "--max-restarts", "-1"] + ver, True,
             ("--max-restarts",), False),
            ("--nnodes 0", ["--nproc", "1", "--nnodes", "0"] + ver, True, ("--nnodes",), False),
            ("--nnodes 2 without --master", ["--nproc", "1", "--nnodes", "2"] + ver, True,
             ("--master",), False),
            ("--master with port 0", ["--nproc", "1", "--master", "127.0.0.1:0"] + ver, True,
             ("--master",), False),
            ("--master 'nohost'", ["--nproc", "1", "--master", "nohost"] + ver, True,
             ("--master",), False),
            ("--master with an ESC sequence", ["--nproc", "1", "--master",
                                               "h\x1b[2J:5000"] + ver, True, ("--master",), True),
            ("--servers 0 --workers 1", ["--servers", "0", "--workers", "1"] + ver, True,
             ("--servers",), False),
            ("--servers 1 --workers 0", ["--servers", "1", "--workers", "0"] + ver, True,
             ("--workers",), False),
            ("--servers with a bad endpoint", ["--servers", "127.0.0.1:70000", "--workers",
                                               "1"] + ver, True, ("70000", "--servers"), False),
            ("--server-exit-s inf", ["--servers", "1", "--workers", "1", "--server-exit-s",
                                     "inf"] + ver, True, ("--server-exit-s",), False),
            ("--nproc and --servers together", ["--nproc", "1", "--servers", "1", "--workers",
                                                "1"] + ver, True, ("--nproc",), False),
            ("an unknown launch option", ["--nproc", "1", "--bogus"] + ver, True, ("--bogus",),
             False),
    ):
        jobs = ctx.dir("cli", "launch_logs")

        def escaped_job(r, jobs=jobs):
            bad = os.path.join(os.path.dirname(jobs), "escaped")
            return "a job directory outside --log-dir: " + bad if os.path.exists(bad) else None

        has_log_dir = "--log-dir" in extra
        args = ["launch"] + ([] if has_log_dir else ["--log-dir", jobs]) + extra
        add("launch " + desc, args, must_refuse=refuse, names=names, quick=q,
            post=escaped_job if "escaped" in desc else None)

    # export, convert, infer: missing and odd flags.
    out = os.path.join(d, "export_out")
    for desc, args, refuse, names, q in (
            ("export without --fetch", ["export", prog, "--out", out], True, ("--fetch",), True),
            ("export without --out", ["export", prog, "--fetch", "prediction"], True, ("--out",),
             False),
            ("export with --params and --checkpoint", ["export", prog, "--fetch", "prediction",
                                                       "--out", out, "--params", d,
                                                       "--checkpoint", d], True,
             ("--params", "--checkpoint"), False),
            ("export with --feed ''", ["export", prog, "--fetch", "prediction", "--feed", "",
                                       "--out", out], True, ("--feed", "feed"), False),
            ("export with 10000 --feed flags", ["export", prog, "--fetch", "prediction",
                                                "--out", out] + ["--feed", "x"] * 10000, None,
             ("--feed", "feed"), False),
            ("convert without --out", ["convert", d], True, ("--out",), False),
            ("convert of a path that does not exist", ["convert", os.path.join(d, "nope"),
                                                       "--out", out], True, ("nope",), True),
            ("convert of /dev/zero", ["convert", "/dev/zero", "--out", out], True,
             ("/dev/zero",), True),
            ("convert of a directory of no .npy", ["convert", ctx.dir("cli", "empty"), "--out",
                                                   out + ".safetensors"], True,
             ("empty", ".npy"), False),
            ("convert to /dev/null", ["convert", ctx.dir("cli", "empty"), "--out", "/dev/null"],
             True, ("/dev/null", "empty"), False),
            ("infer without a directory", ["infer"], True, ("infer", "DIR"), False),
            ("infer --input without a value", ["infer", d, "--input"], True, ("--input",), False),
    ):
        add(desc, args, must_refuse=refuse, names=names, quick=q)
    # A table of 1.5 TiB: an export would hold it whole, so it is refused before anything is
    # allocated, saying how large it is.
    huge = write(os.path.join(d, "huge_table.fleet"),
                 "ids = data(\"ids\", shape=[-1, 4], dtype=\"int64\")\n"
                 "y = data(\"y\", shape=[-1, 1], dtype=\"int64\")\n"
                 "e = embedding(ids, size=[50000000000, 8], is_sparse=True)\n"
                 "prediction = fc(e, size=2, act=\"softmax\")\n"
                 "avg_cost = mean(cross_entropy(prediction, y))\n"
                 "minimize(avg_cost, optimizer=sgd(learning_rate=0.01))\n")
    add("export of a model whose table exceeds memory",
        ["export", huge, "--fetch", "prediction", "--out", os.path.join(d, "huge_out")],
        names=("embedding_0.w_0", "TiB"), quick=True)
    return cases


# ---- the driver ----------------------------------------------------------------------------------

BOUNDARIES = {
    "program": gen_program,
    "config": gen_config,
    "data": gen_data,
    "checkpoint": gen_checkpoint,
    "cli": gen_cli,
}


def default_host() -> str:
    built = os.path.join(SOURCE_ROOT, "build", "bin", "fleet-host")
    if os.path.exists(built):
        return built
    return shutil.which("fleet-host") or built


def limit_resources(mem_mb: int) -> None:
    """Limits inherited by every fleet-host this script starts."""
    for which, value in ((resource.RLIMIT_CORE, 0),
                         (resource.RLIMIT_FSIZE, 256 << 20),
                         (resource.RLIMIT_AS, mem_mb << 20)):
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY and value > hard:
            value = hard
        resource.setrlimit(which, (value, hard))


def report(results: List[Result], boundaries: List[str], out) -> None:
    cols = ("tried",) + OUTCOMES + FLAGS
    header = ["boundary"] + list(cols)
    rows = []
    totals = {c: 0 for c in cols}
    for b in boundaries:
        rs = [r for r in results if r.case.boundary == b]
        counts = {c: 0 for c in cols}
        counts["tried"] = len(rs)
        for r in rs:
            counts[r.outcome] += 1
            for f in r.flags:
                counts[f] += 1
        for c in cols:
            totals[c] += counts[c]
        rows.append([b] + [str(counts[c]) for c in cols])
    rows.append(["total"] + [str(totals[c]) for c in cols])
    widths = [max(len(header[i]), *(len(row[i]) for row in rows)) for i in range(len(header))]

    def line(cells):
        return "| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths))) + " |"

    print(line(header), file=out)
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|", file=out)
    for row in rows:
        print(line(row), file=out)

    bad = [r for r in results if r.outcome not in ("clean error", "legit accepted") or r.flags]
    if bad:
        print("\nNot clean:", file=out)
    for r in bad:
        what = r.outcome
        if r.flags:
            what += " + " + " + ".join(r.flags)
        print("\n[%s] %s: %s%s" % (r.case.boundary, what, show(r.case.desc),
                                   " (%s)" % show(r.note) if r.note else ""), file=out)
        print("  $ fleet-host " + command_line(r.case.args), file=out)
        status = "deadline (%.0f s)" % r.seconds if r.rc is None else "exit %d" % r.rc
        print("  %s, %.2f s, %d bytes of output" % (status, r.seconds, r.output_size), file=out)
        for text in first_lines(r.output):
            print("  > " + text, file=out)


def command_line(args: List[str], width: int = 600) -> str:
    words = []
    for i, a in enumerate(args):
        words.append(shell_word(a))
        if sum(len(w) + 1 for w in words) > width and i + 1 < len(args):
            words.append("... (%d more arguments)" % (len(args) - i - 1))
            break
    return " ".join(words)


def shell_word(arg: str) -> str:
    text = show(arg)
    if len(text) > 160:
        text = text[:160] + "...(%d chars)" % len(text)
    if re.fullmatch(r"[\w@%+=:,./-]+", text):
        return text
    return "'" + text.replace("'", "'\\''") + "'"


def to_json(r: Result) -> dict:
    return {"boundary": r.case.boundary, "input": show(r.case.desc),
            "args": [show(a)[:400] for a in r.case.args], "must_refuse": r.case.must_refuse,
            "outcome": r.outcome, "flags": r.flags, "note": show(r.note), "exit": r.rc,
            "seconds": round(r.seconds, 3), "output_bytes": r.output_size,
            "output_head": first_lines(r.output, 12)}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default=default_host(), help="the fleet-host binary")
    ap.add_argument("--quick", action="store_true", help="a subset (well under 90 s)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the random variants")
    ap.add_argument("--only", action="append", choices=sorted(BOUNDARIES),
                    help="run this boundary only (repeatable)")
    ap.add_argument("--json", metavar="FILE", help="write every case and its outcome here")
    ap.add_argument("--strict", action="store_true",
                    help="also fail on wrongly accepted inputs, other errors and long outputs")
    ap.add_argument("--jobs", type=int, default=max(1, min(4, os.cpu_count() or 1)),
                    help="cases run at once")
    ap.add_argument("--deadline", type=float, default=DEADLINE_S, help="seconds per case")
    ap.add_argument("--mem-mb", type=int, default=4096, help="address-space limit per process")
    ap.add_argument("--keep", metavar="DIR", help="generate the inputs into DIR and keep them")
    args = ap.parse_args(argv)

    host = os.path.abspath(args.host)
    if not os.access(host, os.X_OK):
        print("bad_inputs.py: no fleet-host at %s (use --host)" % host, file=sys.stderr)
        return 2
    boundaries = args.only or list(BOUNDARIES)
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        work = os.path.abspath(args.keep)
    else:
        work = tempfile.mkdtemp(prefix="fleet-bad-inputs.")
    started = time.monotonic()
    try:
        limit_resources(args.mem_mb)
        ctx = Context(host, work, args.seed, args.quick)
        cases: List[Case] = []
        for b in boundaries:
            made = BOUNDARIES[b](ctx)
            for c in made:
                c.boundary = b
            cases += [c for c in made if c.quick or not args.quick]
        scratch = ctx.dir("scratch")
        done = [0]
        lock = threading.Lock()

        def one(case: Case) -> Result:
            r = run_case(host, case, args.deadline, scratch, ctx.env)
            with lock:
                done[0] += 1
                if r.outcome not in ("clean error", "legit accepted") or r.flags:
                    print("  [%d/%d] %s: %s: %s" % (done[0], len(cases), case.boundary,
                                                    r.outcome + "".join(" + " + f for f in r.flags),
                                                    show(case.desc)[:120]),
                          file=sys.stderr, flush=True)
            return r

        print("bad_inputs.py: %d inputs over %s, seed %d, deadline %.0f s, %d at once"
              % (len(cases), ", ".join(boundaries), args.seed, args.deadline, args.jobs),
              file=sys.stderr, flush=True)
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(one, cases))
        elapsed = time.monotonic() - started
        report(results, boundaries, sys.stdout)
        print("\n%d inputs in %.1f s (seed %d%s)" % (len(results), elapsed, args.seed,
                                                      ", quick" if args.quick else ""))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"seed": args.seed, "quick": args.quick, "seconds": round(elapsed, 1),
                           "host": host, "results": [to_json(r) for r in results]}, f, indent=1)
        failing = {"crash", "hang"}
        if args.strict:
            failing |= {"wrongly accepted", "other error"}
        fail = any(r.outcome in failing or "unescaped echo" in r.flags or
                   (args.strict and r.flags) for r in results)
        return 1 if fail else 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
