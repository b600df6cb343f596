/*
 * fleet_kernels.h — the kernels component: implementations of ops for one device.
 * Registered with kind FLEET_COMPONENT_KERNELS; one component may carry any number of kernels.
 *
 * Division of labour: the host owns op schemas, shape inference and memory. By the time a kernel
 * runs, every output tensor has its final shape and memory from the host's allocator for the
 * kernel's device, and scratch memory of the size the kernel asked for at prepare.
 *
 * Life of a kernel instance (one op in one prepared program):
 *   prepare(ctx, kc, &state, &scratch_bytes)   once per program and feed shapes; data pointers
 *                                             in kc are NULL. Heavy set-up (oneDNN primitives,
 *                                             cuDNN descriptors) belongs here.
 *   launch(ctx, kc, state)                     every step, with data pointers set.
 *   release(ctx, state)                        when the prepared program is dropped.
 * Threading: distinct kernel instances may run concurrently on distinct streams; one instance
 * is never launched concurrently with itself.
 *
 * Random kernels (ops whose schema has a "seed" attribute). What every device must meet, and what
 * the conformance kit checks on every device:
 *   - the values follow the op's distribution: bounds (uniform [min, max), truncated normal within
 *     2 std of the mean), mean and standard deviation within sampling error;
 *   - determinism: the same seed attribute (or, when it is 0, the same FleetKernelContext.seed),
 *     launch_index and shape give the same bits on every launch and every run;
 *   - independence: different seeds, different launch_index values and different elements of one
 *     tensor are uncorrelated (the kit measures correlations on 10^5 samples).
 * Bit-equality with the CPU plugin's streams is not required; a device that offers it declares
 * FLEET_DEVICE_CAP_CPU_RANDOM_STREAMS (fleet_device.h), and only then does the kit compare bits.
 */
#ifndef FLEET_KERNELS_H_
#define FLEET_KERNELS_H_

#include "fleet/fleet_abi.h"
#include "fleet/fleet_device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One named input or output slot of an op (Paddle's "X", "Y", "Out", ...), with its tensors. */
typedef struct FleetTensorSlot {
  size_t struct_size;
  const char* name;
  size_t count;                         /* tensors in the slot (duplicable slots have many) */
  const FleetTensor* const* tensors;    /* count pointers; an entry may be NULL for an absent
                                           optional input */
} FleetTensorSlot;

/* Everything a kernel sees of its op. Valid for the duration of the call. Output tensors are
 * allocated; their data is writable. Input data must not be written. */
typedef struct FleetKernelContext {
  size_t struct_size;
  const char* op_type;
  size_t num_inputs;
  const FleetTensorSlot* const* inputs;
  size_t num_outputs;
  const FleetTensorSlot* const* outputs;
  size_t num_attrs;
  const FleetAttr* const* attrs;        /* every attribute of the schema, defaults filled in */
  int32_t device_ordinal;
  int32_t num_threads;                  /* CPU threads the kernel may use; 0 = its choice */
  FleetStream* stream;                  /* where to enqueue work; NULL = run synchronously */
  void* scratch;                        /* launch only: scratch_bytes from prepare, or NULL */
  uint64_t seed;                        /* per-op seed for random ops, stable across runs */
  /* 1.1: which run of the prepared program this launch belongs to: 0 on the first, then one
   * more each run; 0 in supports and prepare. A resumed job
   * continues the count of the job it resumes, so a kernel that draws new random numbers on
   * every launch (dropout) derives them from seed and launch_index, not from a count of its
   * own, and a resumed job draws what the uninterrupted one would have. Read it only when
   * FLEET_HAS_FIELD(kc, FleetKernelContext, launch_index). */
  uint64_t launch_index;
} FleetKernelContext;

typedef struct FleetKernelDef {
  size_t struct_size;
  const char* op_type;      /* Paddle op name, e.g. "matmul_v2", "relu_grad" */
  const char* device;       /* device component name, e.g. "cpu" */
  int32_t dtype;            /* FLEET_DTYPE_* of the op's main input; the host matches on it */
  int32_t priority;         /* the highest priority wins when several plugins offer a kernel */

  /* (optional) Whether this kernel handles these shapes and attributes; UNIMPLEMENTED with a
   * reason lets the host try the next candidate. Data pointers are NULL. */
  FleetStatus* (*supports)(void* ctx, const FleetKernelContext* kc);
  /* (optional) See the header comment. *state may be left NULL; *scratch_bytes defaults to 0. */
  FleetStatus* (*prepare)(void* ctx, const FleetKernelContext* kc, void** state,
                          size_t* scratch_bytes);
  /* Required. */
  FleetStatus* (*launch)(void* ctx, const FleetKernelContext* kc, void* state);
  /* (optional) Frees what prepare made. */
  void (*release)(void* ctx, void* state);
  /* 1.5: FLEET_KERNEL_FLAG_* bits; unknown bits are ignored. */
  uint32_t flags;
} FleetKernelDef;

/* 1.5: the kernel reads sequence offsets (FleetTensor.lod). The host chooses only kernels with
 * this flag for sequence ops (sequence_pool, ...), and hands offsets only to them. */
#define FLEET_KERNEL_FLAG_SEQUENCES 0x1u
/* 1.6: the kernel takes or produces SelectedRows tensors (FleetTensor.rows). The host chooses
 * only kernels with this flag for an op with a SelectedRows input or output, and every other
 * kernel sees rows == NULL and height -1. A flagged kernel may also be offered the op with dense
 * tensors alone; its `supports` may refuse that, leaving the call to another kernel. */
#define FLEET_KERNEL_FLAG_SELECTED_ROWS 0x2u

/* 1.7: which of `shards` shards holds row `id` of a growable table (a table whose rows are keyed
 * by any id in [0, 2^63 - 1) and live on the parameter servers): the SplitMix64 finaliser of
 * the id, modulo `shards`. Stable across processes, builds and machines, so that every trainer
 * routes an id's lookups and gradients to the server that holds it; a kernel that splits such a
 * table's gradient (split_selected_rows with by_hash) must use this function. Under nvcc it is
 * also a device function, so a CUDA kernel routes ids with the same code. */
#if defined(__CUDACC__)
#define FLEET_ROW_SHARD_QUALIFIERS static inline __host__ __device__
#else
#define FLEET_ROW_SHARD_QUALIFIERS static inline
#endif
FLEET_ROW_SHARD_QUALIFIERS int32_t fleet_row_shard(int64_t id, int32_t shards) {
  uint64_t z = (uint64_t)id + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return shards <= 1 ? 0 : (int32_t)(z % (uint64_t)shards);
}

typedef struct FleetKernelsVTable {
  size_t struct_size;
  size_t count;
  const FleetKernelDef* const* kernels;   /* count pointers, static storage */
} FleetKernelsVTable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLEET_KERNELS_H_ */
