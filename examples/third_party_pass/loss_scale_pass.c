/*
 * loss_scale_pass.c — a transpile pass in strict C99, written as a tutorial, with one option.
 *
 * The pass "loss_scale" multiplies the gradient the backward pass starts from: the
 * `fill_constant` op in program "main" that writes `<loss>@GRAD` (1.0 by default) gets
 * `value = factor`. Every gradient is then `factor` times larger, which is what static loss
 * scaling does (to be undone before the update, by another pass or a smaller learning rate).
 *
 * Enable it in fleet.toml:
 *
 *     [plugins]
 *     load = ["loss_scale"]
 *     [strategy]
 *     passes = ["loss_scale"]
 *     [passes.loss_scale]
 *     factor = 128.0
 *
 * and see what it did with `fleet-host show PROGRAM --stage transpiled`.
 *
 * What a pass must know (fleet_pass.h):
 *   - It edits programs only through the FleetProgramApi the host hands it; handles are
 *     borrowed for the call. Strings the API returns live until the next edit.
 *   - It declares its options with defaults. The host checks fleet.toml's [passes.NAME] values
 *     against them (unknown key, wrong type: an error with file:line:col) and calls run with
 *     every option, defaults filled in and converted to the declared type.
 *   - The host runs it on a copy and verifies the result; on an error the programs are left as
 *     they were. It must be deterministic.
 */
#include <stdio.h>
#include <string.h>

#include <fleet/fleet_plugin.h>

static const FleetHostApi* g_host;

/* ---- the one option ------------------------------------------------------------------------- */

/* "factor", a double, default 1.0 (a pass with its defaults should change nothing harmful). */
static const FleetAttr g_factor_default = {
    FLEET_STRUCT_SIZE(FleetAttr, strings), "factor", FLEET_ATTR_DOUBLE, 0, 0, 1.0,
    NULL, 0, 0, NULL, NULL, NULL};
static const FleetAttr* const g_options[] = {&g_factor_default};

static FleetStatus* fail(int32_t code, const char* msg) { return g_host->status_new(code, msg); }

/* Whether `name` ends with "@GRAD". */
static int is_grad_name(const char* name) {
  const size_t n = strlen(name), k = strlen("@GRAD");
  return n > k && strcmp(name + n - k, "@GRAD") == 0;
}

/* ---- run ------------------------------------------------------------------------------------ */

static FleetStatus* loss_scale_run(void* ctx, const FleetProgramApi* api,
                                   FleetProgramSet* programs, const FleetPassContext* pass_context,
                                   size_t num_options, const FleetAttr* const* options) {
  FleetProgram* main_program = NULL;
  FleetStatus* status;
  double factor = 1.0;
  int64_t i, count;
  size_t k;
  (void)ctx;
  (void)pass_context;

  /* The host passes every declared option, already of the declared type. */
  for (k = 0; k < num_options; ++k) {
    if (strcmp(options[k]->name, "factor") == 0) factor = options[k]->f;
  }
  if (!(factor > 0.0)) return fail(FLEET_CODE_INVALID_ARGUMENT, "loss_scale: factor must be > 0");

  status = api->program_get(programs, "main", &main_program);
  if (status != NULL) return status;

  /* The first fill_constant writing a gradient is the seed of the backward pass. */
  count = api->op_count(main_program, 0);
  for (i = 0; i < count; ++i) {
    FleetOpDesc op;
    memset(&op, 0, sizeof(op));
    op.struct_size = sizeof(op);
    status = api->op_get(main_program, 0, i, &op);
    if (status != NULL) return status;
    if (strcmp(op.type, "fill_constant") == 0) {
      for (k = 0; k < op.num_outputs; ++k) {
        const FleetSlot* slot = op.outputs[k];
        if (strcmp(slot->name, "Out") == 0 && slot->count == 1 && is_grad_name(slot->vars[0])) {
          FleetAttr value;
          memset(&value, 0, sizeof(value));
          value.struct_size = FLEET_STRUCT_SIZE(FleetAttr, strings);
          value.name = "value";
          value.type = FLEET_ATTR_FLOAT;
          value.f = factor;
          return api->op_set_attr(main_program, 0, i, &value);
        }
      }
    }
  }
  /* A program without backward (inference) has nothing to scale: not an error. */
  return NULL;
}

/* ---- registration --------------------------------------------------------------------------- */

static FleetPassVTable g_table;

FLEET_EXPORT FleetStatus* fleet_plugin_entry_v1(const FleetHostApi* host, FleetPluginInfo* info) {
  FleetComponent component;
  g_host = host;
  info->abi_major = FLEET_ABI_MAJOR;
  info->abi_minor = FLEET_ABI_MINOR;
  info->name = "loss_scale";
  info->version = "0.1.0";
  info->description = "example pass: scales the loss gradient by the option factor";

  memset(&g_table, 0, sizeof(g_table));
  g_table.struct_size = FLEET_STRUCT_SIZE(FleetPassVTable, run);
  g_table.num_options = 1;
  g_table.options = g_options;
  g_table.run = loss_scale_run;

  memset(&component, 0, sizeof(component));
  component.struct_size = FLEET_STRUCT_SIZE(FleetComponent, vtable);
  component.kind = FLEET_COMPONENT_PASS;
  component.name = "loss_scale";
  component.summary = "multiplies the backward seed (loss@GRAD) by factor";
  component.vtable = &g_table;
  return host->register_component(host->host_ctx, &component);
}
