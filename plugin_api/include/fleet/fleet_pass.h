/*
 * fleet_pass.h — transpile passes and the program-editing API they use.
 *
 * A pass rewrites a set of named programs ("main", "startup", and any it adds such as
 * "pserver.0") through handles. It never sees the host's C++ IR: it reads and edits programs
 * only through FleetProgramApi (FleetHostApi.program), so the IR can change without breaking
 * passes. Registered with kind FLEET_COMPONENT_PASS.
 *
 * Handles (FleetProgramSet*, FleetProgram*) are borrowed from the host for the duration of
 * FleetPassVTable.run and must not be kept. Ops are addressed by (block index, op index); an
 * insert or remove shifts the indices after it. Every string and array the API returns lives
 * until the next editing call on the same program.
 *
 * Passes are deterministic: the same programs and options give the same output. The host runs
 * passes one at a time, on one thread, and verifies the programs after each.
 */
#ifndef FLEET_PASS_H_
#define FLEET_PASS_H_

#include "fleet/fleet_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct FleetProgramSet FleetProgramSet;  /* opaque, host-owned */
typedef struct FleetProgram FleetProgram;        /* opaque, host-owned */

/* A slot of an op: a name and the variable names it holds. */
typedef struct FleetSlot {
  size_t struct_size;
  const char* name;
  size_t count;
  const char* const* vars;
} FleetSlot;

/* An op as read (op_get: host-owned, valid until the next edit) or as written (op_insert:
 * caller-owned, copied by the host). */
typedef struct FleetOpDesc {
  size_t struct_size;
  const char* type;
  size_t num_inputs;
  const FleetSlot* const* inputs;
  size_t num_outputs;
  const FleetSlot* const* outputs;
  size_t num_attrs;
  const FleetAttr* const* attrs;
} FleetOpDesc;

/* A variable. dims uses -1 for an unknown (batch) dimension. */
typedef struct FleetVarDesc {
  size_t struct_size;
  const char* name;
  int32_t dtype;          /* FLEET_DTYPE_* */
  int32_t ndim;
  const int64_t* dims;
  int32_t persistable;    /* 0 or 1 */
  int32_t stop_gradient;  /* 0 or 1 */
} FleetVarDesc;

struct FleetProgramApi {
  size_t struct_size;

  /* Programs of the set, by name. program_get: NOT_FOUND if absent. program_add: a new empty
   * program with one block; ALREADY_EXISTS if the name is taken. */
  size_t (*program_count)(FleetProgramSet* set);
  const char* (*program_name)(FleetProgramSet* set, size_t index);
  FleetStatus* (*program_get)(FleetProgramSet* set, const char* name, FleetProgram** out);
  FleetStatus* (*program_add)(FleetProgramSet* set, const char* name, FleetProgram** out);

  /* Blocks. block_add appends a block whose parent is `parent`; *out gets its index. */
  int32_t (*block_count)(FleetProgram* program);
  FleetStatus* (*block_add)(FleetProgram* program, int32_t parent, int32_t* out);

  /* Ops of a block. */
  int64_t (*op_count)(FleetProgram* program, int32_t block);
  FleetStatus* (*op_get)(FleetProgram* program, int32_t block, int64_t index, FleetOpDesc* out);
  /* Inserts before `index` (index == op_count appends). */
  FleetStatus* (*op_insert)(FleetProgram* program, int32_t block, int64_t index,
                            const FleetOpDesc* op);
  FleetStatus* (*op_remove)(FleetProgram* program, int32_t block, int64_t index);
  /* Adds or replaces one attribute of an op. */
  FleetStatus* (*op_set_attr)(FleetProgram* program, int32_t block, int64_t index,
                              const FleetAttr* attr);
  /* Replaces the variables of one input (is_output = 0) or output (1) slot, adding the slot
   * if the op lacks it. */
  FleetStatus* (*op_set_slot)(FleetProgram* program, int32_t block, int64_t index,
                              int32_t is_output, const FleetSlot* slot);

  /* Variables of a block. var_get: NOT_FOUND if absent from the block. var_add: ALREADY_EXISTS
   * if present. var_remove: FAILED_PRECONDITION while an op still uses it. */
  size_t (*var_count)(FleetProgram* program, int32_t block);
  FleetStatus* (*var_at)(FleetProgram* program, int32_t block, size_t index, FleetVarDesc* out);
  FleetStatus* (*var_get)(FleetProgram* program, int32_t block, const char* name,
                          FleetVarDesc* out);
  FleetStatus* (*var_add)(FleetProgram* program, int32_t block, const FleetVarDesc* var);
  FleetStatus* (*var_remove)(FleetProgram* program, int32_t block, const char* name);
};

/* What a pass knows of the job it transpiles for. */
typedef struct FleetPassContext {
  size_t struct_size;
  int32_t rank;            /* this trainer's rank, or the pserver index for a pserver */
  int32_t world_size;      /* number of trainers */
  const char* role;        /* "trainer" or "pserver" */
  size_t num_pservers;
  const char* const* pserver_endpoints;
} FleetPassContext;

typedef struct FleetPassVTable {
  size_t struct_size;
  /* Options the pass accepts, with their defaults; fleet.toml values are checked against
   * these names and types before run is called. */
  size_t num_options;
  const FleetAttr* const* options;
  /* Rewrites the programs. options holds every option (defaults filled in). On error the host
   * discards the partly edited programs. */
  FleetStatus* (*run)(void* ctx, const FleetProgramApi* api, FleetProgramSet* programs,
                      const FleetPassContext* pass_context, size_t num_options,
                      const FleetAttr* const* options);
} FleetPassVTable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLEET_PASS_H_ */
