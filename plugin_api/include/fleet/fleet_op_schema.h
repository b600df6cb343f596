/*
 * fleet_op_schema.h — op schemas a plugin brings for its own custom ops (the built-in Paddle ops
 * are described by the host). Registered with kind FLEET_COMPONENT_OP_SCHEMA; the component's
 * name is the op type.
 *
 * A schema gives the op's slots and attributes, a shape function, and the name of its gradient
 * op. The gradient op follows Paddle's default grad maker: its inputs are the forward inputs, the
 * forward outputs and "<Out>@GRAD" for each output slot; its outputs are "<In>@GRAD" for each
 * differentiable input slot. The gradient op needs a schema and kernels of its own.
 */
#ifndef FLEET_OP_SCHEMA_H_
#define FLEET_OP_SCHEMA_H_

#include "fleet/fleet_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FLEET_SLOT_OPTIONAL       (1u << 0)  /* may be absent */
#define FLEET_SLOT_DUPLICABLE     (1u << 1)  /* may hold several variables */
#define FLEET_SLOT_NO_GRAD        (1u << 2)  /* input never gets a gradient (labels, indices) */

typedef struct FleetSlotSpec {
  size_t struct_size;
  const char* name;
  uint32_t flags;          /* FLEET_SLOT_* */
  uint32_t reserved;
} FleetSlotSpec;

/* Shapes and dtypes of one slot, for the shape function. -1 marks an unknown dimension. */
typedef struct FleetShapeSlot {
  size_t struct_size;
  const char* name;
  size_t count;
  int32_t* dtypes;         /* count entries; outputs: written by the shape function */
  int32_t* ndims;          /* count entries; outputs: written */
  int64_t* const* dims;    /* count arrays of FLEET_SHAPE_MAX_DIMS; outputs: written */
} FleetShapeSlot;

#define FLEET_SHAPE_MAX_DIMS 8

typedef struct FleetShapeContext {
  size_t struct_size;
  size_t num_inputs;
  const FleetShapeSlot* const* inputs;
  size_t num_outputs;
  const FleetShapeSlot* const* outputs;
  size_t num_attrs;
  const FleetAttr* const* attrs;   /* defaults filled in */
} FleetShapeContext;

typedef struct FleetOpSchemaVTable {
  size_t struct_size;
  size_t num_inputs;
  const FleetSlotSpec* const* inputs;
  size_t num_outputs;
  const FleetSlotSpec* const* outputs;
  size_t num_attrs;
  const FleetAttr* const* attrs;   /* name, type and default value of every attribute */
  /* Sets every output's dtype and dims from the inputs; INVALID_ARGUMENT names the slot and
   * the dimensions that disagree. */
  FleetStatus* (*infer_shape)(void* ctx, const FleetShapeContext* shape_context);
  /* Type of the gradient op, or NULL when the op is not differentiable. */
  const char* grad_op_type;
} FleetOpSchemaVTable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLEET_OP_SCHEMA_H_ */
