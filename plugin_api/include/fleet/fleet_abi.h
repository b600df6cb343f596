/*
 * fleet_abi.h — the vocabulary shared by every part of the Fleet plugin ABI.
 *
 * This header is plain C (C99 and later) and C++. It declares:
 *   - the ABI version and the struct-size rules that let minors evolve;
 *   - status objects and their canonical codes;
 *   - data types, the tensor descriptor and typed attributes (named values).
 *
 * Versioning rules (they apply to every struct and function table in the ABI):
 *   1. Every struct and table that crosses the boundary begins with `size_t struct_size`, set by
 *      whoever fills the struct, to FLEET_STRUCT_SIZE(Type, last_member_it_knows_of).
 *   2. A minor version only appends members. Nothing is reordered, resized or removed.
 *   3. A reader uses a member only when it lies inside the writer's struct_size
 *      (FLEET_HAS_FIELD). An optional function slot is called only when it also is non-NULL
 *      (FLEET_CAN_CALL). A reader never rejects a struct for being larger than it knows.
 *   4. Anything else (a removed member, a changed meaning) is a new major, with a new entry
 *      symbol (fleet_plugin_entry_v2, ...). The layout of every released minor is frozen by
 *      static_asserts in the host's tests.
 *
 * Fields never have enum type: enumerated values travel as int32_t so that their size does not
 * depend on the compiler. Enum values are frozen once released; an unknown value received from
 * the other side is answered with FLEET_CODE_UNIMPLEMENTED (or ignored, for flag bits).
 */
#ifndef FLEET_ABI_H_
#define FLEET_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version --------------------------------------------------------------------------- */

#define FLEET_ABI_MAJOR 1
#define FLEET_ABI_MINOR 7

/* Size of struct T counted through member M. Used instead of sizeof so that trailing padding
 * does not change when a later minor appends a member. */
#define FLEET_STRUCT_SIZE(T, M) (offsetof(T, M) + sizeof(((T*)0)->M))

/* Whether the struct at P (of type T, with a struct_size member) contains member M. */
#define FLEET_HAS_FIELD(P, T, M) ((P) != NULL && (P)->struct_size >= FLEET_STRUCT_SIZE(T, M))

/* Whether the optional function slot M of table P may be called. */
#define FLEET_CAN_CALL(P, T, M) (FLEET_HAS_FIELD(P, T, M) && (P)->M != NULL)

/* Marks the one symbol a plugin exports. Everything else in a plugin should be hidden
 * (-fvisibility=hidden); the CMake helper `fleet_add_plugin` sets that up. */
#if defined(_WIN32)
#define FLEET_EXPORT __declspec(dllexport)
#else
#define FLEET_EXPORT __attribute__((visibility("default")))
#endif

/* ---- status ---------------------------------------------------------------------------- */

/* An error crossing the boundary. NULL means success.
 *
 * Ownership: status objects are created and freed only by the host (FleetHostApi.status_new /
 * status_free), so no object ever crosses allocators. Whoever receives a non-NULL status owns
 * it and must free it or pass it on (returning it passes it on). The host never aborts on a
 * plugin's status. */
typedef struct FleetStatus FleetStatus;

/* Canonical codes (the Abseil/gRPC set, values frozen). What each means for plugin authors:
 *   INVALID_ARGUMENT     the caller passed something wrong (bad shape, unknown attribute)
 *   DEADLINE_EXCEEDED    a wait ran past its deadline (rendezvous, collective, RPC)
 *   NOT_FOUND            a named thing does not exist (variable, key, device ordinal)
 *   ALREADY_EXISTS       a name is taken (component name, program name)
 *   PERMISSION_DENIED    authentication worked but the peer may not do this (bad token)
 *   RESOURCE_EXHAUSTED   out of memory, message over the size cap
 *   FAILED_PRECONDITION  the system is not in a state to do this (not initialised, ABI too old)
 *   ABORTED              the operation was stopped by abort() or by a peer's failure
 *   OUT_OF_RANGE         an index or value past the valid range
 *   UNIMPLEMENTED        not supported by this component or this version
 *   INTERNAL             a bug or broken invariant inside the component
 *   UNAVAILABLE          a peer or service cannot be reached now; retrying may help
 *   DATA_LOSS            unrecoverable corruption (bad checksum)
 *   UNAUTHENTICATED      missing or invalid credentials (TLS, token) */
enum {
  FLEET_CODE_OK = 0,
  FLEET_CODE_CANCELLED = 1,
  FLEET_CODE_UNKNOWN = 2,
  FLEET_CODE_INVALID_ARGUMENT = 3,
  FLEET_CODE_DEADLINE_EXCEEDED = 4,
  FLEET_CODE_NOT_FOUND = 5,
  FLEET_CODE_ALREADY_EXISTS = 6,
  FLEET_CODE_PERMISSION_DENIED = 7,
  FLEET_CODE_RESOURCE_EXHAUSTED = 8,
  FLEET_CODE_FAILED_PRECONDITION = 9,
  FLEET_CODE_ABORTED = 10,
  FLEET_CODE_OUT_OF_RANGE = 11,
  FLEET_CODE_UNIMPLEMENTED = 12,
  FLEET_CODE_INTERNAL = 13,
  FLEET_CODE_UNAVAILABLE = 14,
  FLEET_CODE_DATA_LOSS = 15,
  FLEET_CODE_UNAUTHENTICATED = 16
};

/* ---- data types ------------------------------------------------------------------------ */

enum {
  FLEET_DTYPE_INVALID = 0,
  FLEET_DTYPE_BOOL = 1,
  FLEET_DTYPE_INT8 = 2,
  FLEET_DTYPE_UINT8 = 3,
  FLEET_DTYPE_INT16 = 4,
  FLEET_DTYPE_INT32 = 5,
  FLEET_DTYPE_INT64 = 6,
  FLEET_DTYPE_FLOAT16 = 7,
  FLEET_DTYPE_BFLOAT16 = 8,
  FLEET_DTYPE_FLOAT32 = 9,
  FLEET_DTYPE_FLOAT64 = 10
};

/* Device type 0 is plain host memory owned by no device component. Other device types are
 * ids the host assigns, per process, to registered device components; a plugin looks one up
 * with FleetHostApi.device_type_id. */
#define FLEET_DEVICE_TYPE_HOST 0

/* ---- tensor descriptor ----------------------------------------------------------------- */

/* Describes memory; never owns it.
 *
 * Lifetime: every pointer in the descriptor (and the descriptor itself) is valid for the
 * duration of the call it is passed to. For work enqueued on a stream, `data` stays valid until
 * that work completes; the host's allocator guarantees it. A callee that needs the shape later
 * copies it. */
typedef struct FleetTensor {
  size_t struct_size;
  void* data;               /* first element; may be NULL when numel is 0 */
  int32_t dtype;            /* FLEET_DTYPE_* */
  int32_t ndim;             /* 0 for a scalar */
  const int64_t* dims;      /* ndim entries, each >= 0 */
  const int64_t* strides;   /* in elements; NULL means dense row-major */
  int32_t device_type;      /* FLEET_DEVICE_TYPE_HOST or a host-assigned device id */
  int32_t device_ordinal;   /* logical device index within that type; 0 for host memory */
  /* 1.5: sequence offsets (Paddle's LoD level 1), or NULL with lod_count 0 for a dense tensor.
   * lod_count (the number of sequences + 1) offsets, in the same memory as `data` (device
   * memory for a device tensor): lod[0] is 0, offsets never decrease, and sequence i is rows
   * [lod[i], lod[i+1]) of dims[0]. dims[0] is a capacity fixed at prepare, so that the rows of
   * a batch may vary without a new prepare: rows from lod[lod_count - 1] to dims[0] are
   * padding, zero in every input, and the host zeroes them in every sequence output after the
   * launch, so a kernel never has to write them. Only a kernel that declares
   * FLEET_KERNEL_FLAG_SEQUENCES (fleet_kernels.h) is handed offsets; every other kernel sees
   * lod == NULL, lod_count == 0 and a dense tensor of dims[0] rows, which is right for ops that
   * treat rows alone (the host allows sequences only into ops whose schema says so). The
   * offsets of an output are the host's too: a kernel reads them and never writes them (for an
   * op whose output has sequences of its own, such as sequence_concat, the host makes them
   * before the launch). Read only when FLEET_HAS_FIELD(t, FleetTensor, lod_count). */
  const int64_t* lod;
  int64_t lod_count;
  /* 1.6: a SelectedRows tensor (Paddle's sparse rows) has height >= 0; any other tensor has
   * height -1 and rows == NULL. It stands for a dense tensor [height, dims[1], ...] that is
   * zero except in the rows it lists: entry i (i < dims[0]) adds slice i of `data` to row
   * rows[i]. rows holds dims[0] row indices, in the same memory as `data`; each lies in
   * [0, height) or is -1, an empty entry whose slice is zero and adds nothing. Like `data`,
   * rows is NULL in supports and prepare. A row may be listed more than once (its entries add
   * up), and rows need not be sorted. dims[0] is a capacity fixed at prepare (the ids of a
   * batch, say), so the number of rows a batch touches may vary without a new prepare. A
   * kernel that writes a SelectedRows output writes all dims[0] rows and slices. Only a
   * kernel that declares FLEET_KERNEL_FLAG_SELECTED_ROWS (fleet_kernels.h) is ever handed
   * one, and such a kernel tells the two kinds apart by height. Read only when
   * FLEET_HAS_FIELD(t, FleetTensor, height). */
  int64_t* rows;
  int64_t height;
} FleetTensor;

/* ---- typed attributes / named values --------------------------------------------------- */

/* Used for op attributes, pass options, communicator options and each plugin's config table.
 * One struct for every type keeps the ABI small; only the members named for `type` are read. */
enum {
  FLEET_ATTR_INVALID = 0,
  FLEET_ATTR_INT = 1,      /* i (fits int32) */
  FLEET_ATTR_INT64 = 2,    /* i */
  FLEET_ATTR_FLOAT = 3,    /* f (fits float) */
  FLEET_ATTR_DOUBLE = 4,   /* f */
  FLEET_ATTR_BOOL = 5,     /* i: 0 or 1 */
  FLEET_ATTR_STRING = 6,   /* s, s_len (s is also NUL-terminated) */
  FLEET_ATTR_INTS = 7,     /* ints[count] */
  FLEET_ATTR_INT64S = 8,   /* ints[count] */
  FLEET_ATTR_FLOATS = 9,   /* floats[count] */
  FLEET_ATTR_DOUBLES = 10, /* floats[count] */
  FLEET_ATTR_BOOLS = 11,   /* ints[count], each 0 or 1 */
  FLEET_ATTR_STRINGS = 12, /* strings[count], each NUL-terminated */
  FLEET_ATTR_BLOCK = 13    /* i: index of a block in the same program */
};

/* Lifetime: as FleetTensor — valid for the call; the receiver copies what it keeps. */
typedef struct FleetAttr {
  size_t struct_size;
  const char* name;
  int32_t type;                /* FLEET_ATTR_* */
  int32_t reserved;            /* zero */
  int64_t i;
  double f;
  const char* s;
  size_t s_len;
  size_t count;
  const int64_t* ints;
  const double* floats;
  const char* const* strings;
} FleetAttr;

/* Declared here because both the host services and the pass component refer to it; defined in
 * fleet_pass.h. */
typedef struct FleetProgramApi FleetProgramApi;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLEET_ABI_H_ */
