// pserver: parameter-server training (Paddle's DistributeTranspiler in pserver mode).
//
// Options: sync (bool, true), slice_var_up (bool, true), min_block_size (int, 8192, >= 1),
// split_method ("round_robin" | "hash_name"), init ("full" | "shard"), geo_k_steps (int, 0;
// > 0 needs sync = false: GEO-SGD, see GeoTrainerMain and GeoServerMain in pserver_plan.h; a
// table whose gradient is sparse then exchanges changed rows only). Context: rank = the
// trainer id (0 in a pserver process), world_size = the number of trainers N, and the server
// endpoints (at least one). Needs "main" (after the optimizer) and "startup"; rewrites them into
// the trainer's programs and adds "pserver.<i>" and "pserver.<i>.startup" for every server i.
//
// Planning (pserver_plan.h). Learning-rate ops are those whose op_role has the LRSched bit
// (and the increment of @LR_DECAY_COUNTER@); optimize ops those with the Optimize bit. Every
// optimizer op (Param and LearningRate inputs) gives a (param, grad) pair; parameters are
// taken in name order (Paddle's params_grads order). Each parameter is cut by slice_variable
// (pserver_slicing.h) into row blocks, one per server at most, "<p>.block<i>" when there are
// several; the blocks of all parameters, flattened in that order, go to servers round robin
// (block k to server k mod S) or by FNV-1a 64 of the parameter block's name mod S. Gradient
// block i always goes where parameter block i goes. The other optimize ops (regularization,
// per-parameter learning-rate scales, clipping of one parameter) go with the parameter whose
// gradient, accumulators or temporaries they touch. Accumulators are cut with their parameter
// following Paddle's table (momentum: Velocity; adam, adamw: Moment1, Moment2; adagrad: Moment;
// rmsprop: Moment, MeanSquare, MeanGrad; adamax: Moment, InfNorm); the others
// (Beta1Pow, Beta2Pow) stay whole, one copy per block.
//
// Trainer "main": the learning-rate and optimize ops and the vars only they used are removed;
// after the last op writing each gradient: split_byref (when cut; split_selected_rows with
// height_sections for a sparse gradient, whose blocks are sparse) and send {epmap,
// op_role_var=[p, g]} with a control var "__control_var@<k>" as Out; then, in sync mode,
// send_barrier; one recv per parameter (X = the barrier's control var, or in async mode the
// parameter's send control var); in sync mode fetch_barrier (Out = every received var); one
// concat per cut parameter. In sync mode with N > 1 gradients carry ".trainer_<rank>": a whole
// gradient is renamed in place everywhere, blocks are "<g>.block<i>.trainer_<rank>".
// Tables the trainers never hold (Paddle's remote prefetch): a parameter whose gradient is
// sparse and which main reads only in lookup_table(_v2) ops and their gradients. Its lookups
// become distributed_lookup_table {table_names = its blocks, height_sections, endpoints,
// padding_idx, trainer_id, lookup_table_version, emb_dim, dtype}: the lookups of one table with
// the same padding_idx and version whose ids no op computes (feeds) share one op, where the
// first of them was; any other lookup gets an op of its own. Its gradient ops lose W and take
// table_height; it gets no recv and no concat, and leaves both trainer programs, initializer
// included. A lookup with is_distributed whose
// table cannot stay on the servers (a dense gradient, or another reader) is an error.
// A growable table (lookups with growable, from embedding size [-1, dim]) takes that path with
// one block per server, "<p>.block<k>" on server k (any number of servers, whatever
// slice_var_up says), each the one-row prototype: its lookup carries growable (ids go to the
// server fleet_row_shard names), its gradients stand for [kGrowableHeight, dim] on the trainer
// and are split with split_selected_rows {by_hash}, and each server's listen_and_serv lists it
// in growable_tables as "<block> <per-row accumulator blocks...>"; startup gives each block a
// copy of the prototype (assign) under init = "full". Refused with GEO-SGD.
// Trainer "startup": the initializers of the optimizer-only vars (learning rate, accumulators,
// step counter) are removed; recv(X=[]) per parameter, one fetch_barrier(X=[], Out=[]), a
// concat per cut parameter.
// "pserver.<i>": block 0 holds every var the server uses (all persistable) and one
// listen_and_serv {endpoint, pserver_id=i, Fanin=N, distributed_mode 0 sync / 1 async,
// optimize_blocks, grad_to_block_id "<merged grad>:<block>", lr_decay_block_id,
// sparse_grad_to_param=[]}; then the learning-rate block (parent 0) when there is a schedule,
// then one block per parameter block of the server (parent: the learning-rate block or 0):
// in sync mode with N > 1 sum of the per-trainer parts and scale by 1/N, then the parameter's
// optimize ops with the parameter, gradient and owned vars renamed to the block's. A server
// with no block gets one empty optimize block, as in Paddle. A sparse gradient's receive vars
// are persistable selected_rows vars, its merged gradient a selected_rows temporary (sum
// concatenates the trainers' entries, scale scales them), and "<merged grad>:<param block>" is
// listed in sparse_grad_to_param.
// "pserver.<i>.startup": init = "full" keeps the whole original startup (same ops, same order,
// so random initializers draw what a single process draws), with the vars that are not the
// server's made temporary, then split_byref of every cut parameter and cut accumulator with a
// block here, and an assign per block for a whole accumulator of a cut parameter. init =
// "shard" keeps only the initializers of the server's vars, renamed to the block and with their
// shape attribute set to the block's shape (Paddle's way).
//
// Deliberate differences from Paddle 1.8:
//   - Control var names are "__control_var@0", "@1", ... in creation order (Paddle: random).
//   - With one trainer there is no ".trainer_" suffix on either side and no sum/scale (Paddle's
//     trainer and server disagree there).
//   - slice_var_up = false does not shuffle the parameters with numpy's MT19937 seeded by
//     random_seed: whole parameters go round robin in name order.
//   - hash_name hashes with FNV-1a 64, stable across processes (Paddle's is unusable).
//   - Accumulators of a cut parameter get block names ("<acc>.block<i>"), also the whole ones,
//     so two blocks of one parameter on one server (possible with hash_name) do not share them.
//   - The trainer startup also loses the step counter's initializer (only the LR ops used it).
//   - The startup fetch_barrier has no Out; sends and recvs of one op's several gradients keep
//     parameter order; merge ops carry op_role Optimize.
//   - The pserver startup is built from the original startup (Paddle's depends on call order).
//   - An asynchronous job with a learning-rate schedule is refused (Paddle counts steps with
//     per-trainer counters sent to every server); clipping by global norm is refused (it
//     combines every gradient); only sgd, momentum, adam, adamw, adagrad, rmsprop and adamax are
//     supported (lamb's trust ratio needs the whole parameter).
//   - is_distributed tables take the remote-prefetch path above, as is_sparse ones do (Paddle
//     1.8 gives them split_ids/prefetch/merge_ids, one such table per job, SGD only); a table
//     another op reads is then refused rather than received. The table's distributed lookup
//     carries emb_dim and dtype, and has no W input: the trainer has no such var.
//   - No DC-ASGD, runtime split or half-async modes.
#pragma once

#include "passes/collective_util.h"

namespace fleet::passes {

Status RunPserver(ProgramSet& programs, const PassContextInfo& ctx, const ir::AttrMap& options);

}  // namespace fleet::passes
