#!/usr/bin/env python3
"""Reads back the TensorBoard event files of [train] tensorboard_dir with a reader written from
TensorBoard's record format alone, not from fleet-host's writer:

  record  = uint64 length | uint32 masked_crc32c(length bytes) | data | uint32 masked_crc32c(data)
  masked  = ((crc >> 15) | (crc << 17)) + 0xa282ead8 (mod 2^32), CRC-32C = Castagnoli
  data    = Event protobuf: wall_time 1 (double), step 2 (int64), file_version 3 (string),
            summary 5 (Summary: value 1 repeated (Value: tag 1 string, simple_value 2 float))

Trains the quick-start MLP with fetched vars, a metrics file and an event directory, and checks
that the event file holds the file-version record and then, for every metrics record, an Event
of its step whose scalars are that record's numbers as float32. Then checks that the reader
catches a changed byte in the length, in either CRC and in the data, and that a file cut in the
middle of a record still reads up to the last complete one.

Usage: tfevents_check.py --host PATH/fleet-host --examples DIR
"""
import argparse
import glob
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time


def crc32c(data):
    # Bit by bit, from the definition: reflected polynomial 0x82F63B78, init and xorout ~0.
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class Corrupt(Exception):
    pass


def read_records(blob):
    """(records, complete): the data of every whole record; complete is False when the blob
    ends inside a record (a writer killed mid-record). Raises Corrupt on a CRC mismatch."""
    records, at = [], 0
    while at < len(blob):
        if len(blob) - at < 12:
            return records, False
        header = blob[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", blob[at + 8:at + 12])
        if masked(crc32c(header)) != length_crc:
            raise Corrupt(f"length CRC mismatch at offset {at}")
        if len(blob) - at - 12 < length + 4:
            return records, False
        data = blob[at + 12:at + 12 + length]
        (data_crc,) = struct.unpack("<I", blob[at + 12 + length:at + 16 + length])
        if masked(crc32c(data)) != data_crc:
            raise Corrupt(f"data CRC mismatch at offset {at}")
        records.append(data)
        at += 16 + length
    return records, True


def varint(buf, at):
    value, shift = 0, 0
    while True:
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, at


def fields(buf):
    """[(field number, wire type, value)]: ints for varints, bytes for the rest."""
    out, at = [], 0
    while at < len(buf):
        key, at = varint(buf, at)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, at = varint(buf, at)
        elif wire == 1:
            value, at = buf[at:at + 8], at + 8
        elif wire == 2:
            n, at = varint(buf, at)
            value, at = buf[at:at + n], at + n
        elif wire == 5:
            value, at = buf[at:at + 4], at + 4
        else:
            raise ValueError(f"wire type {wire} of field {field}")
        out.append((field, wire, value))
    return out


def decode_event(data):
    event = {"scalars": {}}
    for field, wire, value in fields(data):
        if field == 1 and wire == 1:
            event["wall_time"] = struct.unpack("<d", value)[0]
        elif field == 2 and wire == 0:
            event["step"] = value
        elif field == 3 and wire == 2:
            event["file_version"] = value.decode()
        elif field == 5 and wire == 2:
            for f, w, v in fields(value):
                assert (f, w) == (1, 2), "Summary holds only values"
                tag, simple = None, None
                for vf, vw, vv in fields(v):
                    if (vf, vw) == (1, 2):
                        tag = vv.decode()
                    elif (vf, vw) == (2, 5):
                        simple = struct.unpack("<f", vv)[0]
                assert tag is not None and simple is not None, "a value has a tag and a float"
                event["scalars"][tag] = simple
        else:
            raise AssertionError(f"unexpected field {field} (wire type {wire}) in an Event")
    return event


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", required=True)
    ap.add_argument("--examples", required=True)
    args = ap.parse_args()

    # The reader's own CRC against the check value of the CRC-32C definition.
    check(crc32c(b"123456789") == 0xE3069283, "CRC-32C check value")
    work = tempfile.mkdtemp(prefix="fleet_tfevents_")
    try:
        program = os.path.join(work, "mlp.fleet")
        with open(os.path.join(args.examples, "mlp", "mlp.fleet")) as f:
            text = f.read()
        # One metric from the program, one var fetched by the config.
        text += '\nmetric("acc", accuracy(prediction, y))\n'
        with open(program, "w") as f:
            f.write(text)
        events_dir = os.path.join(work, "tb")
        metrics = os.path.join(work, "m.jsonl")
        started = time.time()
        subprocess.run([args.host, "run", program, "--set", "train.steps=12",
                        "--set", "train.log_every=3", "--set", "train.batch_size=32",
                        "--set", "train.threads=1",
                        "--set", 'train.fetch=["avg_cost"]',
                        "--set", "train.metrics_file=" + metrics,
                        "--set", "train.tensorboard_dir=" + events_dir],
                       check=True, stdout=subprocess.DEVNULL, timeout=120)
        files = glob.glob(os.path.join(events_dir, "events.out.tfevents.*"))
        check(len(files) == 1, f"one event file, got {files}")
        name = os.path.basename(files[0]).split(".")
        check(abs(int(name[3]) - started) < 600, f"the file name carries the start time: {name}")

        with open(files[0], "rb") as f:
            blob = f.read()
        records, complete = read_records(blob)
        check(complete, "the file ends at a record boundary")
        events = [decode_event(r) for r in records]
        check(events[0].get("file_version") == "brain.Event:2", f"first record: {events[0]}")
        with open(metrics) as f:
            recs = [json.loads(line) for line in f]
        check(len(events) == 1 + len(recs), f"{len(events)} events for {len(recs)} records")
        check([r["step"] for r in recs] == [3, 6, 9, 12], f"steps {[r['step'] for r in recs]}")
        for ev, rec in zip(events[1:], recs):
            check(ev["step"] == rec["step"], f"step {ev.get('step')} vs {rec['step']}")
            check(abs(ev["wall_time"] - time.time()) < 600, f"wall_time {ev['wall_time']}")
            want = {k: v for k, v in rec.items() if k not in ("step", "elapsed_s")}
            check(set(ev["scalars"]) == set(want), f"tags {sorted(ev['scalars'])} vs "
                                                   f"{sorted(want)}")
            for tag, value in want.items():
                got = ev["scalars"][tag]
                check(math.isnan(got) if value is None else got == f32(value),
                      f"step {rec['step']} {tag}: {got} vs {value}")
            # The fetched loss var is the loss.
            check(ev["scalars"]["avg_cost"] == ev["scalars"]["loss"], "avg_cost is the loss")
            check(0.0 <= ev["scalars"]["acc"] <= 1.0, f"accuracy {ev['scalars']['acc']}")
            check(ev["scalars"]["lr"] == f32(0.01), f"lr {ev['scalars']['lr']}")

        # A changed byte anywhere is caught: in the length, its CRC, the data, the data's CRC.
        second = 16 + struct.unpack("<Q", blob[:8])[0]  # offset of the second record
        (length,) = struct.unpack("<Q", blob[second:second + 8])
        for offset, where in ((second, "length"), (second + 9, "length CRC"),
                              (second + 12 + length // 2, "data"),
                              (second + 12 + length + 1, "data CRC")):
            bad = bytearray(blob)
            bad[offset] ^= 0x20
            try:
                read_records(bytes(bad))
            except Corrupt:
                continue
            raise AssertionError(f"a changed byte in the {where} went unnoticed")

        # A writer killed mid-record leaves a readable prefix.
        cut, complete = read_records(blob[:second + 12 + length // 2])
        check(not complete and len(cut) == 1, "a cut file reads up to its last whole record")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("event files read back: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
