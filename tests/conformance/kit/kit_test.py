#!/usr/bin/env python3
"""The conformance kit against two fixture plugins an outside author could have written.

  crashing: the same device, whose scale kernel dies of SIGSEGV. Expect: that test failed as
      "crashed: SIGSEGV", the suite restarted, the tests after it still run, exit 1.
  partial_device: three float32 kernels (scale, uniform_random, gaussian_random) and its own
      random stream. Expect: those pass, the random ones at the statistical level with the
      stream-exact test skipped as "not bit-identical"; everything else the suite tries is
      "not provided"; exit 0, and exit 1 with --require-all. No crash on the partial plugin.
  solo_comm: a communicator for one rank (supports_world_size). Expect: world 1 passes, every
      larger world is skipped with the reason; exit 0.

Usage: kit_test.py FLEET_CONFORMANCE FIXTURE_DIR
"""
import json
import subprocess
import sys


def run(kit, *args):
    p = subprocess.run([kit, *args], capture_output=True, text=True, timeout=540)
    return p.returncode, p.stdout, p.stderr


def check(cond, what, detail=""):
    if not cond:
        print("FAILED:", what)
        if detail:
            print(detail[-4000:])
        sys.exit(1)


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
