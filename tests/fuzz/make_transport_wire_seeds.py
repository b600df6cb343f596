#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_transport_wire (tests/fuzz/corpus/transport_wire).

Each seed is one Send call as the harness reads it (see fuzz_transport_wire.cc): records of
  u8 cut count | u16 LE cut positions | u32 LE message length | message
where a message is the transport's own framing (transport_rpc.proto):
  fixed32 LE header length | protobuf Header | payload.
The protobuf encoding is written out here so the script needs nothing beyond Python. Valid
calls give the fuzzer the paths that reach the end; the others each stop at one check.

Usage: tests/fuzz/make_transport_wire_seeds.py  (rewrites the directory's seeds)
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "transport_wire")

# FLEET_DTYPE_* (plugin_api/include/fleet/fleet_abi.h) and FLEET_BARRIER_BATCH.
UINT8, INT32, INT64, FLOAT32, FLOAT64 = 3, 5, 6, 9, 10
BARRIER_BATCH = 1


def varint(v):
    v &= (1 << 64) - 1  # negative numbers as protobuf writes int32/int64: two's complement
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def header(name=None, trainer=0, dtype=0, dims=(), total=0, barrier=0, tensor=False, offset=0,
           client_id=0, request_id=0, reason=None, selected_rows=False, height=0):
    h = bytearray()
    if name is not None:
        raw = name.encode()
        h += b"\x0a" + varint(len(raw)) + raw
    if trainer:
        h += b"\x10" + varint(trainer)
    if dtype:
        h += b"\x18" + varint(dtype)
    if dims:
        packed = b"".join(varint(d) for d in dims)
        h += b"\x22" + varint(len(packed)) + packed
    if total:
        h += b"\x28" + varint(total)
    if barrier:
        h += b"\x30" + varint(barrier)
    if tensor:
        h += b"\x38\x01"
    if offset:
        h += b"\x40" + varint(offset)
    if client_id:
        h += b"\x49" + struct.pack("<Q", client_id)
    if request_id:
        h += b"\x50" + varint(request_id)
    if reason is not None:
        raw = reason.encode()
        h += b"\x5a" + varint(len(raw)) + raw
    if selected_rows:
        h += b"\x60\x01"
    if height:
        h += b"\x68" + varint(height)
    return bytes(h)


def message(hdr, payload=b""):
    return struct.pack("<I", len(hdr)) + hdr + payload


def record(msg, cuts=()):
    return (bytes([len(cuts)]) + b"".join(struct.pack("<H", c) for c in cuts) +
            struct.pack("<I", len(msg)) + msg)


def tensor(name, dtype, dims, total, trainer=1, offset=0):
    return header(name=name, trainer=trainer, dtype=dtype, dims=dims, total=total, tensor=True,
                  offset=offset)


def chunks(name, dtype, dims, data, size, cuts=()):
    """A whole variable in chunks of `size` bytes: the shape on the first only."""
    out = b""
    for at in range(0, max(len(data), 1), size):
        hdr = (tensor(name, dtype, dims, len(data)) if at == 0 else header(offset=at))
        out += record(message(hdr, data[at:at + size]), cuts if at == 0 else ())
    return out


def pattern(n):
    return bytes((i * 7 + 3) & 0xFF for i in range(n))


def sparse(name, dtype, dims, values, rows, height, size=None, total=None):
    """A SelectedRows send (ABI 1.7): values, zeros to a multiple of 8, then the int64 rows;
    in chunks of `size` bytes when given. `total` overrides the announced size."""
    data = values + bytes(-len(values) % 8) + b"".join(struct.pack("<q", r) for r in rows)
    first = header(name=name, trainer=1, dtype=dtype, dims=dims,
                   total=len(data) if total is None else total, tensor=True,
                   selected_rows=True, height=height)
    size = size or max(len(data), 1)
    out = b""
    for at in range(0, max(len(data), 1), size):
        hdr = first if at == 0 else header(offset=at)
        out += record(message(hdr, data[at:at + size]))
    return out


SEEDS = {
    # Accepted calls.
    "send_one_message": chunks("w", FLOAT32, [2, 3], pattern(24), 24),
    "send_three_chunks_sliced": chunks("layer.0.weight", FLOAT32, [4, 4], pattern(64), 24,
                                       cuts=(1, 5, 9)),
    "send_scalar": chunks("step", FLOAT64, [], pattern(8), 8),
    "send_empty_tensor": record(message(tensor("empty", INT32, [0, 5], 0))),
    # Above the size from which EncodeMessage references the payload instead of copying it.
    "send_large_payload": chunks("embedding", UINT8, [33000], pattern(33000), 33000),
    "send_with_request_ids": record(message(
        header(name="w", trainer=2, dtype=FLOAT32, dims=[2], total=8, tensor=True,
               client_id=0x1234_5678_9ABC_DEF0, request_id=7), pattern(8))),
    "send_header_cut_in_slices": record(
        message(tensor("b", INT32, [3], 12), pattern(12)), cuts=(0, 2, 4, 4, 7, 30)),
    # SelectedRows sends (ABI 1.7): 60 value bytes, 4 of pad, 5 rows.
    "send_selected_rows": sparse("emb@GRAD", FLOAT32, [5, 3], pattern(60), [7, -1, 2, 7, 0], 9),
    "send_selected_rows_cut_in_pad": sparse("emb@GRAD", FLOAT32, [5, 3], pattern(60),
                                            [7, -1, 2, 7, 0], 9, size=62),
    "send_selected_rows_no_entries": sparse("emb@GRAD", FLOAT32, [0, 4], b"", [], 100),
    # A prefetch's ids arrive as a send of int64 [n].
    "prefetch_ids": record(message(tensor("emb", INT64, [3], 24),
                                   b"".join(struct.pack("<q", i) for i in (3, 0, 3)))),
    # Refused by the decoder.
    "short_framing": record(b"\x05\x00"),
    "header_over_limit": record(b"\xff\xff\xff\xff" + pattern(16)),
    "header_past_message": record(struct.pack("<I", 100) + header(name="w")),
    "unparsable_header": record(struct.pack("<I", 6) + b"\x0a\x7f\xff\xff\xff\xff"),
    # Refused by the send checks.
    "empty_name": record(message(tensor("", FLOAT32, [1], 4), pattern(4))),
    "abort_with_reason": record(message(header(trainer=3, reason="trainer 3: out of memory"))),
    "no_tensor": record(message(header(name="w", trainer=2, barrier=BARRIER_BATCH))),
    "total_mismatch": record(message(tensor("w", FLOAT32, [2, 2], 15), pattern(15))),
    "bad_dtype": record(message(tensor("w", 99, [2], 2), pattern(2))),
    "negative_dim": record(message(tensor("w", FLOAT32, [-1, 4], 0))),
    "overflowing_dims": record(message(tensor("w", FLOAT64, [1 << 40, 1 << 40], 0))),
    "offset_gap": (record(message(tensor("w", UINT8, [16], 16), pattern(8))) +
                   record(message(header(offset=12), pattern(8)))),
    "negative_offset": (record(message(tensor("w", UINT8, [16], 16), pattern(8))) +
                        record(message(header(offset=-8), pattern(8)))),
    "more_than_announced": (record(message(tensor("w", UINT8, [10], 10), pattern(8))) +
                            record(message(header(offset=8), pattern(8)))),
    "fewer_than_announced": record(message(tensor("w", UINT8, [10], 10), pattern(6))),
    "selected_rows_negative_height": sparse("g", FLOAT32, [1], pattern(4), [0], -1),
    "selected_rows_scalar": sparse("g", FLOAT32, [], pattern(4), [], 3),
    "selected_rows_total_without_pad": sparse("g", FLOAT32, [5, 3], pattern(60),
                                              [0, 1, 2, 3, 4], 9, total=100),
    # Empty values, but 2^61 rows of 8 bytes each: the size must not wrap to 0.
    "selected_rows_overflowing_rows": record(message(
        header(name="g", trainer=1, dtype=FLOAT32, dims=[1 << 61, 0], total=0, tensor=True,
               selected_rows=True, height=1))),
    # What the harness also hands the credentials parser (auth.h): a well-formed
    # "<client id>.<counter>.<hmac>" line, as a call carries it.
    "call_credentials": b"00ab00cd00ef0012.42." + b"e" * 64,
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name in os.listdir(OUT):
        os.remove(os.path.join(OUT, name))
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
