#!/usr/bin/env python3
"""The conformance kit against two fixture plugins an outside author could have written.

  crashing: the same device, whose scale kernel dies of SIGSEGV. Expect: that test failed as
      "crashed: SIGSEGV", the suite restarted, the tests after it still run, exit 1.
  hanging: the same device, whose scale kernel never returns for bias_after_scale = false.
      Expect, with --test-timeout 2: the scale row failed as "timed out", the suite restarted,
      the tests after the hung one still run, exit 1, all in well under a minute; and a kit
      killed while the suite hangs leaves no suite process behind.
  partial_device: three float32 kernels (scale, uniform_random, gaussian_random) and its own
      random stream. Expect: those pass, the random ones at the statistical level with the
      stream-exact test skipped as "not bit-identical"; everything else the suite tries is
      "not provided"; exit 0, and exit 1 with --require-all. No crash on the partial plugin.
  solo_comm: a communicator for one rank (supports_world_size). Expect: world 1 passes, every
      larger world is skipped with the reason; exit 0.

Usage: kit_test.py FLEET_CONFORMANCE FIXTURE_DIR
"""
import json
import os
import signal
import subprocess
import sys
import time


def run(kit, *args, timeout=540):
    try:
        p = subprocess.run([kit, *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        check(False, "%s %s finished within %d s" % (kit, " ".join(args), timeout),
              (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes)
              else (e.stdout or ""))
    return p.returncode, p.stdout, p.stderr


def check(cond, what, detail=""):
    if not cond:
        print("FAILED:", what)
        if detail:
            print(detail[-4000:])
        sys.exit(1)


def children_of(pid):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(pid):
    """Running, not a zombie waiting to be reaped by its new parent."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def rows_of(doc, suite):
    for s in doc["suites"]:
        if s["suite"] == suite:
            check("rows" in s, "suite %s ran" % suite, json.dumps(s)[:2000])
            return {(r["subject"], r["variant"]): r for r in s["rows"]}, s
    check(False, "no %s suite in the report" % suite, json.dumps(doc)[:2000])


def main():
    kit, fixtures = sys.argv[1], sys.argv[2]
    device = fixtures + "/libfleet_partial.so"

    # ---- a partial device ---------------------------------------------------------------------
    rc, out, err = run(kit, device, "--suite", "device", "--json")
    check(rc == 0, "partial device: exit 0 (not provided is not a failure), got %d" % rc,
          out + err)
    doc = json.loads(out)
    check(doc["schema_version"] == 1, "schema_version 1")
    rows, suite = rows_of(doc, "device")
    check(suite["restarts"] == 0, "the suite never crashed on a partial plugin", json.dumps(suite)[:3000])
    for op in ("scale", "uniform_random", "gaussian_random"):
        r = rows.get((op, "float32"))
        check(r is not None and r["result"] == "passed", "%s float32 passed" % op, str(r))
    for key in (("scale", "float64"), ("uniform_random", "float64"), ("elementwise_add", "float64")):
        r = rows.get(key)
        check(r is not None and r["result"] == "not provided", "%s %s not provided" % key, str(r))
        check("no kernel" in r["reason"], "the not-provided reason says why", str(r))
    stream = rows.get(("TensorConformance.RandomStreamsMatchTheCpuPlugin", ""))
    check(stream is not None and stream["result"] == "skipped"
          and "FLEET_DEVICE_CAP_CPU_RANDOM_STREAMS" in stream["reason"],
          "the stream-exact level is skipped for a device that does not declare it", str(stream))
    check("not bit-identical" in suite["note"], "the note says the stream is not bit-identical",
          suite["note"])
    failed = [r for r in rows.values() if r["result"] == "failed"]
    check(not failed, "nothing provided failed", json.dumps(failed[:5], indent=1))
    not_provided = sum(1 for r in rows.values() if r["result"] == "not provided")
    check(not_provided >= 100, "the suite tried many more ops (%d not provided)" % not_provided)

    # The same through the table, and --require-all turns "not provided" into exit 1.
    rc, out, err = run(kit, device, "--suite", "device", "--require-all",
                       "--filter", "MathConformance.Scale*:MathConformance.Matmul*")
    check(rc == 1, "--require-all: exit 1, got %d" % rc, out + err)
    check("not provided" in out and "DOES NOT CONFORM" in out, "the table says why", out)
    rc, out, err = run(kit, device, "--suite", "device",
                       "--filter", "MathConformance.Scale*:MathConformance.Matmul*")
    check(rc == 0 and "CONFORMS" in out, "without --require-all: exit 0", out + err)

    # ---- a kernel that crashes --------------------------------------------------------------
    # The suite process dies inside ScaleMatchesNumpy; the kit records that test's call as
    # crashed, starts the suite again and still runs the tests after it.
    rc, out, err = run(kit, fixtures + "/libfleet_crashing.so", "--suite", "device", "--json",
                       "--filter", "MathConformance.Scale*:MathConformance.Matmul*")
    check(rc == 1, "a crashing kernel: exit 1, got %d" % rc, out + err)
    rows, suite = rows_of(json.loads(out), "device")
    check(suite["restarts"] >= 1, "the suite was restarted after the crash", json.dumps(suite)[:3000])
    # The process died inside the kernel, before the call was reported: the test carries it.
    crashed = rows.get(("MathConformance.ScaleMatchesNumpy", ""))
    check(crashed is not None and crashed["result"] == "failed"
          and "crashed: SIGSEGV" in crashed["reason"],
          "the crashed test is failed with the signal", str(crashed))
    check(any(k[0].startswith("matmul") for k in rows),
          "the tests after the crash still ran", json.dumps(list(rows.keys())))

    # ---- a kernel that hangs ---------------------------------------------------------------
    # ScaleMatchesNumpy's second call never returns: no progress for 2 s, so the kit kills the
    # suite, fails the kernel's row as timed out and runs ScaleGradient, the test after it, in a
    # fresh suite process.
    start = time.monotonic()
    rc, out, err = run(kit, fixtures + "/libfleet_hanging.so", "--suite", "device", "--json",
                       "--test-timeout", "2",
                       "--filter", "MathConformance.Scale*:MathConformance.Matmul*", timeout=120)
    took = time.monotonic() - start
    check(rc == 1, "a hanging kernel: exit 1, got %d" % rc, out + err)
    check(took < 45, "the hang cost about the timeout, not more (%.1f s)" % took, out + err)
    rows, suite = rows_of(json.loads(out), "device")
    check(suite["restarts"] >= 1, "the suite was restarted after the hang", json.dumps(suite)[:3000])
    hung = rows.get(("scale", "float32"))
    check(hung is not None and hung["result"] == "failed"
          and hung["reason"].startswith("timed out") and "2 s" in hung["reason"],
          "the hung kernel's row is failed as timed out", str(hung))
    check(any("MathConformance.ScaleGradient" in r["tests"] for r in rows.values()),
          "the test after the hung one still ran", json.dumps(list(rows.values()))[:3000])
    check(any(k[0].startswith("matmul") for k in rows),
          "the other tests still ran", json.dumps(list(rows.keys())))
    rc, out, err = run(kit, fixtures + "/libfleet_hanging.so", "--suite", "device",
                       "--test-timeout", "2", "--filter", "MathConformance.Scale*", timeout=120)
    check(rc == 1 and "timed out" in out, "the table says timed out", out + err)

    # A kit stopped while its suite hangs takes the suite with it (the suite has a process group
    # of its own, so nothing else would stop it).
    kit_proc = subprocess.Popen([kit, fixtures + "/libfleet_hanging.so", "--suite", "device",
                                 "--filter", "MathConformance.ScaleMatchesNumpy"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    suites = []
    deadline = time.monotonic() + 60
    while not suites and time.monotonic() < deadline:
        suites = [pid for pid in children_of(kit_proc.pid)
                  if "--gtest_filter=" in cmdline(pid) and "--gtest_list_tests" not in cmdline(pid)]
        time.sleep(0.1)
    time.sleep(1)  # into the hung kernel
    kit_proc.kill()
    kit_proc.wait()
    check(suites, "the kit started a suite")
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in suites) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [pid for pid in suites if alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    check(not left, "no suite outlives a killed kit", str(left))

    # ---- a communicator for one rank ----------------------------------------------------------
    rc, out, err = run(kit, fixtures + "/libfleet_solo_comm.so", "--json")
    check(rc == 0, "solo communicator: exit 0, got %d" % rc, out + err)
    rows, _ = rows_of(json.loads(out), "comm")
    check(rows.get(("all_reduce", "world 1"), {}).get("result") == "passed", "world 1 passes",
          json.dumps(list(rows.values())[:10]))
    check(not any(k[1] in ("world 2", "world 3", "world 4") for k in rows),
          "no call was made in a world the communicator refuses")
    skipped = [r for r in rows.values()
               if r["result"] == "skipped" and "does not support a world of 2" in r["reason"]]
    check(len(skipped) >= 5, "larger worlds are skipped naming the reason",
          json.dumps(list(rows.values()), indent=1)[:4000])
    check(rows.get(("CommFaults.HostProvidedOptionsAreAccepted", ""), {}).get("result") == "passed",
          "the host-provided options are accepted")

    # ---- usage errors -------------------------------------------------------------------------
    rc, out, err = run(kit, "/nonexistent/libfleet_nothing.so")
    check(rc == 2 and "not" in err.lower(), "a missing plugin: exit 2 with a message", out + err)
    print("kit: all checks passed")


if __name__ == "__main__":
    main()
