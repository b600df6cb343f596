#include "frontend/paddle_api.h"

#include <algorithm>
#include <set>

#include "support/text.h"

namespace fleet::frontend {
namespace {

// Parameter lists shared by several spellings of one API.
constexpr std::string_view kFc =
    "input size num_flatten_dims param_attr bias_attr act name | x=input weight_attr=param_attr "
    "activation=act";
constexpr std::string_view kFc2 =
    "x=input size num_flatten_dims weight_attr=param_attr bias_attr activation=act name | "
    "input param_attr act";
constexpr std::string_view kConv2d =
    "input num_filters filter_size stride padding dilation groups param_attr bias_attr "
    "use_cudnn act name data_format";
constexpr std::string_view kPool2d =
    "input pool_size pool_type pool_stride pool_padding global_pooling use_cudnn ceil_mode name "
    "exclusive data_format";
constexpr std::string_view kBatchNorm =
    "input act is_test momentum epsilon param_attr bias_attr data_layout in_place=- name "
    "moving_mean_name moving_variance_name do_model_average_for_mean_and_var=- "
    "use_global_stats";
constexpr std::string_view kLayerNorm =
    "input scale shift begin_norm_axis epsilon param_attr bias_attr act name";
constexpr std::string_view kEmbedding =
    "input size is_sparse is_distributed padding_idx param_attr dtype name";
constexpr std::string_view kFluidReduce = "input dim keep_dim name";
constexpr std::string_view kPaddleReduce = "x=input axis=dim keepdim=keep_dim name";
constexpr std::string_view kFluidElementwise = "x y axis act=@act name=-";
constexpr std::string_view kBinary = "x y name=-";
constexpr std::string_view kUnary = "x name=-";
constexpr std::string_view kFluidUnary = "x name=-";
constexpr std::string_view kSequencePool = "input pool_type is_test pad_value";
constexpr std::string_view kParamAttr =
    "name initializer learning_rate regularizer trainable do_model_average=- need_clip=-";
constexpr std::string_view kSgd =
    "learning_rate parameters=- weight_decay=regularization grad_clip name=-";
constexpr std::string_view kFluidSgd =
    "learning_rate parameter_list=- regularization grad_clip name=-";
constexpr std::string_view kMomentum =
    "learning_rate momentum parameters=- use_nesterov weight_decay=regularization grad_clip "
    "name=-";
constexpr std::string_view kFluidMomentum =
    "learning_rate momentum parameter_list=- use_nesterov regularization grad_clip name=-";
constexpr std::string_view kAdam =
    "learning_rate beta1 beta2 epsilon parameters=- weight_decay=regularization grad_clip "
    "name=- lazy_mode";
constexpr std::string_view kFluidAdam =
    "learning_rate beta1 beta2 epsilon parameter_list=- regularization grad_clip name=- "
    "lazy_mode";
constexpr std::string_view kAdamW =
    "learning_rate beta1 beta2 epsilon parameters=- weight_decay apply_decay_param_fun=- "
    "grad_clip lazy_mode name=-";
constexpr std::string_view kAdagrad =
    "learning_rate epsilon parameters=- weight_decay=regularization grad_clip name=- "
    "initial_accumulator_value";
constexpr std::string_view kFluidAdagrad =
    "learning_rate epsilon parameter_list=- regularization grad_clip name=- "
    "initial_accumulator_value";
constexpr std::string_view kRmsProp =
    "learning_rate rho epsilon momentum centered parameters=- weight_decay=regularization "
    "grad_clip name=-";
constexpr std::string_view kFluidRmsProp =
    "learning_rate rho epsilon momentum centered parameter_list=- regularization grad_clip "
    "name=-";
constexpr std::string_view kAdamax =
    "learning_rate beta1 beta2 epsilon parameters=- weight_decay=regularization grad_clip "
    "name=-";
constexpr std::string_view kFluidAdamax =
    "learning_rate beta1 beta2 epsilon parameter_list=- regularization grad_clip name=-";
constexpr std::string_view kLamb =
    "learning_rate lamb_weight_decay beta1 beta2 epsilon parameters=- grad_clip "
    "exclude_from_weight_decay_fn=- name=-";

std::vector<PaddleApi> BuildTable() {
  std::vector<PaddleApi> t = {
      // Program structure: accepted so that a script's scaffolding runs unchanged.
      {"paddle.enable_static", "@none", ""},
      {"paddle.static.Program", "@program", ""},
      {"paddle.fluid.Program", "@program", ""},
      {"paddle.static.default_main_program", "@program", ""},
      {"paddle.static.default_startup_program", "@program", ""},
      {"paddle.fluid.default_main_program", "@program", ""},
      {"paddle.fluid.default_startup_program", "@program", ""},
      {"paddle.static.program_guard", "@guard", "main_program=- startup_program=-"},
      {"paddle.fluid.program_guard", "@guard", "main_program=- startup_program=-"},
      {"paddle.utils.unique_name.guard", "@guard", "new_generator=-"},
      {"paddle.fluid.unique_name.guard", "@guard", "new_generator=-"},
      {"paddle.static.name_scope", "@guard", "prefix=-"},
      {"paddle.fluid.name_scope", "@guard", "prefix=-"},

      // Data.
      {"paddle.static.data", "data", "name shape dtype lod_level"},
      {"paddle.fluid.data", "data", "name shape dtype lod_level"},
      {"paddle.fluid.layers.data", "data",
       "name shape append_batch_size dtype lod_level type=- stop_gradient=-",
       "append_batch_size=True"},

      // Layers with parameters.
      {"paddle.static.nn.fc", "fc", kFc2},
      {"paddle.fluid.layers.fc", "fc", kFc},
      {"paddle.static.nn.conv2d", "conv2d", kConv2d},
      {"paddle.fluid.layers.conv2d", "conv2d", kConv2d},
      {"paddle.fluid.layers.pool2d", "pool2d", kPool2d},
      {"paddle.static.nn.batch_norm", "batch_norm", kBatchNorm},
      {"paddle.fluid.layers.batch_norm", "batch_norm", kBatchNorm},
      {"paddle.static.nn.layer_norm", "layer_norm", kLayerNorm},
      {"paddle.fluid.layers.layer_norm", "layer_norm", kLayerNorm},
      {"paddle.static.nn.embedding", "embedding", kEmbedding},
      {"paddle.fluid.embedding", "embedding", kEmbedding},
      {"paddle.fluid.layers.embedding", "embedding", kEmbedding, "lookup_table_v1=True"},
      {"paddle.static.create_parameter", "create_parameter",
       "shape dtype name attr is_bias default_initializer"},
      {"paddle.fluid.layers.create_parameter", "create_parameter",
       "shape dtype name attr is_bias default_initializer"},

      // Sequences.
      {"paddle.static.nn.sequence_pool", "sequence_pool", kSequencePool},
      {"paddle.fluid.layers.sequence_pool", "sequence_pool", kSequencePool},

      // Losses and metrics.
      {"paddle.fluid.layers.cross_entropy", "cross_entropy", "input label soft_label ignore_index"},
      {"paddle.nn.functional.cross_entropy", "@f_cross_entropy",
       "input label weight=- ignore_index reduction soft_label axis use_softmax name=-"},
      {"paddle.fluid.layers.softmax_with_cross_entropy", "softmax_with_cross_entropy",
       "logits label soft_label ignore_index numeric_stable_mode return_softmax=- axis"},
      {"paddle.nn.functional.softmax_with_cross_entropy", "softmax_with_cross_entropy",
       "logits label soft_label ignore_index numeric_stable_mode return_softmax=- axis"},
      {"paddle.fluid.layers.square_error_cost", "square_error_cost", "input label"},
      {"paddle.nn.functional.square_error_cost", "square_error_cost", "input label"},
      {"paddle.nn.functional.mse_loss", "@f_mse_loss", "input label reduction name=-"},
      {"paddle.fluid.layers.log_loss", "log_loss", "input=predicted label=labels epsilon name=-"},
      {"paddle.nn.functional.log_loss", "log_loss", "input=predicted label=labels epsilon name=-"},
      {"paddle.nn.functional.binary_cross_entropy_with_logits", "@f_bce_with_logits",
       "logit label weight=- reduction pos_weight=- name=-"},
      {"paddle.fluid.layers.sigmoid_cross_entropy_with_logits",
       "sigmoid_cross_entropy_with_logits", "x label ignore_index name=- normalize"},
      {"paddle.fluid.layers.accuracy", "accuracy", "input label k correct=- total=-"},
      {"paddle.static.accuracy", "accuracy", "input label k correct=- total=- name=-"},
      {"paddle.metric.accuracy", "accuracy", "input label k correct=- total=- name=-"},
      {"paddle.fluid.layers.auc", "auc", "input label curve num_thresholds topk slide_steps"},
      {"paddle.static.auc", "auc", "input label curve num_thresholds topk slide_steps"},

      // Reductions.
      {"paddle.fluid.layers.mean", "mean", "x name=-"},
      {"paddle.mean", "reduce_mean", kPaddleReduce},
      {"paddle.sum", "reduce_sum", "x=input axis=dim dtype=- keepdim=keep_dim name"},
      {"paddle.max", "reduce_max", kPaddleReduce},
      {"paddle.min", "reduce_min", kPaddleReduce},
      {"paddle.prod", "reduce_prod", "x=input axis=dim keepdim=keep_dim dtype=- name"},
      {"paddle.fluid.layers.reduce_sum", "reduce_sum", kFluidReduce},
      {"paddle.fluid.layers.reduce_mean", "reduce_mean", kFluidReduce},
      {"paddle.fluid.layers.reduce_max", "reduce_max", kFluidReduce},
      {"paddle.fluid.layers.reduce_min", "reduce_min", kFluidReduce},
      {"paddle.fluid.layers.reduce_prod", "reduce_prod", kFluidReduce},

      // Shapes.
      {"paddle.matmul", "matmul", "x y transpose_x transpose_y name"},
      {"paddle.fluid.layers.matmul", "matmul", "x y transpose_x transpose_y alpha=@alpha name"},
      {"paddle.reshape", "reshape", "x shape name"},
      {"paddle.fluid.layers.reshape", "reshape", "x shape actual_shape=- act=@act inplace=- name"},
      {"paddle.transpose", "transpose", "x perm name"},
      {"paddle.fluid.layers.transpose", "transpose", "x perm name"},
      {"paddle.flatten", "flatten", "x start_axis stop_axis name"},
      {"paddle.fluid.layers.flatten", "flatten2", "x axis name=-"},
      {"paddle.concat", "concat", "x=input axis name"},
      {"paddle.fluid.layers.concat", "concat", "input axis name"},
      {"paddle.split", "@split", "x num_or_sections axis name=-"},
      {"paddle.fluid.layers.split", "@split", "input=x num_or_sections dim=axis name=-",
       "axis=-1"},
      {"paddle.unstack", "@unstack", "x axis num"},
      {"paddle.fluid.layers.unstack", "@unstack", "x axis num"},
      {"paddle.stack", "stack", "x axis name=-"},
      {"paddle.fluid.layers.stack", "stack", "x axis name=-"},
      {"paddle.unsqueeze", "unsqueeze2", "x axis=axes name=-"},
      {"paddle.fluid.layers.unsqueeze", "unsqueeze2", "input=x axes name=-"},
      {"paddle.squeeze", "squeeze2", "x axis=axes name=-"},
      {"paddle.fluid.layers.squeeze", "squeeze2", "input=x axes name=-"},
      {"paddle.expand", "expand_v2", "x shape name=-"},
      {"paddle.expand_as", "expand_as_v2", "x y name=-"},
      {"paddle.tile", "tile", "x repeat_times name=-"},
      {"paddle.slice", "slice", "input axes starts ends"},
      {"paddle.fluid.layers.slice", "slice", "input axes starts ends"},
      {"paddle.strided_slice", "strided_slice", "x=input axes starts ends strides name=-"},
      {"paddle.gather", "gather", "x index axis name=-"},
      {"paddle.fluid.layers.gather", "gather", "input=x index overwrite"},
      {"paddle.index_select", "index_select", "x index axis=dim name=-"},
      {"paddle.flip", "flip", "x axis name=-"},
      {"paddle.roll", "roll", "x shifts axis name=-"},
      {"paddle.cast", "@cast", "x dtype"},
      {"paddle.fluid.layers.cast", "@cast", "x dtype"},
      {"paddle.tril", "tril_triu", "x diagonal name=-", "lower=True"},
      {"paddle.triu", "tril_triu", "x diagonal name=-", "lower=False"},
      {"paddle.where", "where", "condition x y name=-"},
      {"paddle.fluid.layers.where", "where", "condition x y"},
      {"paddle.topk", "@topk", "x k axis largest sorted name=-"},
      {"paddle.fluid.layers.topk", "@topk", "input=x k name=-"},
      {"paddle.argmax", "arg_max", "x axis keepdim=keepdims dtype name=-"},
      {"paddle.argmin", "arg_min", "x axis keepdim=keepdims dtype name=-"},
      {"paddle.cumsum", "cumsum", "x axis dtype=- name=-"},
      {"paddle.nn.functional.one_hot", "one_hot_v2", "x num_classes=depth name=-"},
      {"paddle.fluid.one_hot", "one_hot_v2", "input=x depth allow_out_of_range"},
      {"paddle.fluid.layers.one_hot", "one_hot_v2", "input=x depth allow_out_of_range"},

      // Tensors made from nothing.
      {"paddle.full", "fill_constant", "shape fill_value=value dtype name=-", "dtype='float32'"},
      {"paddle.ones", "fill_constant", "shape dtype name=-", "value=1.0 dtype='float32'"},
      {"paddle.zeros", "fill_constant", "shape dtype name=-", "value=0.0 dtype='float32'"},
      {"paddle.fluid.layers.fill_constant", "fill_constant",
       "shape dtype value force_cpu=- out=- name=-"},
      {"paddle.fluid.layers.ones", "fill_constant", "shape dtype force_cpu=-", "value=1.0"},
      {"paddle.fluid.layers.zeros", "fill_constant", "shape dtype force_cpu=-", "value=0.0"},
      {"paddle.full_like", "fill_any_like", "x fill_value=value dtype name=-"},
      {"paddle.ones_like", "fill_any_like", "x dtype name=-", "value=1.0"},
      {"paddle.zeros_like", "fill_any_like", "x dtype name=-", "value=0.0"},
      {"paddle.arange", "@arange", "start end step dtype name=-"},

      // Element-wise arithmetic.
      {"paddle.add", "elementwise_add", kBinary},
      {"paddle.subtract", "elementwise_sub", kBinary},
      {"paddle.multiply", "elementwise_mul", kBinary},
      {"paddle.divide", "elementwise_div", kBinary},
      {"paddle.maximum", "elementwise_max", kBinary},
      {"paddle.minimum", "elementwise_min", kBinary},
      {"paddle.remainder", "elementwise_mod", kBinary},
      {"paddle.mod", "elementwise_mod", kBinary},
      {"paddle.floor_divide", "elementwise_floordiv", kBinary},
      {"paddle.pow", "@pow", kBinary},
      {"paddle.fluid.layers.elementwise_add", "elementwise_add", kFluidElementwise},
      {"paddle.fluid.layers.elementwise_sub", "elementwise_sub", kFluidElementwise},
      {"paddle.fluid.layers.elementwise_mul", "elementwise_mul", kFluidElementwise},
      {"paddle.fluid.layers.elementwise_div", "elementwise_div", kFluidElementwise},
      {"paddle.fluid.layers.elementwise_max", "elementwise_max", kFluidElementwise},
      {"paddle.fluid.layers.elementwise_min", "elementwise_min", kFluidElementwise},
      {"paddle.fluid.layers.elementwise_pow", "elementwise_pow", kFluidElementwise},
      {"paddle.fluid.layers.elementwise_mod", "elementwise_mod", kFluidElementwise},
      {"paddle.fluid.layers.elementwise_floordiv", "elementwise_floordiv", kFluidElementwise},
      {"paddle.fluid.layers.pow", "pow", "x factor name=-"},
      {"paddle.scale", "scale", "x scale bias bias_after_scale act=@act name=-"},
      {"paddle.fluid.layers.scale", "scale", "x scale bias bias_after_scale act=@act name=-"},
      {"paddle.clip", "clip", "x min max name=-"},
      {"paddle.fluid.layers.clip", "clip", "x min max name=-"},
      {"paddle.equal", "equal", kBinary},
      {"paddle.not_equal", "not_equal", kBinary},
      {"paddle.less_than", "less_than", kBinary},
      {"paddle.less_equal", "less_equal", kBinary},
      {"paddle.greater_than", "greater_than", kBinary},
      {"paddle.greater_equal", "greater_equal", kBinary},
      {"paddle.logical_and", "logical_and", kBinary},
      {"paddle.logical_or", "logical_or", kBinary},
      {"paddle.logical_xor", "logical_xor", kBinary},
      {"paddle.logical_not", "logical_not", kUnary},

      // Activations and unary math.
      {"paddle.nn.functional.relu", "relu", kUnary},
      {"paddle.nn.functional.relu6", "relu6", kUnary},
      {"paddle.nn.functional.sigmoid", "sigmoid", kUnary},
      {"paddle.nn.functional.tanh", "tanh", kUnary},
      {"paddle.nn.functional.gelu", "gelu", "x approximate name=-"},
      {"paddle.nn.functional.silu", "silu", kUnary},
      {"paddle.nn.functional.swish", "swish", kUnary},
      {"paddle.nn.functional.mish", "mish", kUnary},
      {"paddle.nn.functional.selu", "selu", kUnary},
      {"paddle.nn.functional.softplus", "softplus", kUnary},
      {"paddle.nn.functional.softsign", "softsign", kUnary},
      {"paddle.nn.functional.hardswish", "hard_swish", kUnary},
      {"paddle.nn.functional.hardsigmoid", "hard_sigmoid", kUnary},
      {"paddle.nn.functional.log_sigmoid", "logsigmoid", kUnary},
      {"paddle.nn.functional.leaky_relu", "leaky_relu", "x negative_slope=alpha name=-",
       "alpha=0.01"},
      {"paddle.nn.functional.elu", "elu", "x alpha name=-"},
      {"paddle.nn.functional.softmax", "softmax", "x axis dtype=- name=-"},
      {"paddle.nn.functional.log_softmax", "log_softmax", "x axis dtype=- name=-"},
      {"paddle.nn.functional.dropout", "dropout",
       "x p=dropout_prob axis=- training=@training mode=dropout_implementation name",
       "dropout_prob=0.5 dropout_implementation='upscale_in_train'"},
      {"paddle.fluid.layers.dropout", "dropout",
       "x dropout_prob is_test seed name dropout_implementation"},
      {"paddle.fluid.layers.relu", "relu", kFluidUnary},
      {"paddle.fluid.layers.relu6", "relu6", "x threshold=- name=-"},
      {"paddle.fluid.layers.sigmoid", "sigmoid", kFluidUnary},
      {"paddle.fluid.layers.tanh", "tanh", kFluidUnary},
      {"paddle.fluid.layers.gelu", "gelu", "x approximate"},
      {"paddle.fluid.layers.softmax", "softmax", "input=x use_cudnn=- name=- axis"},
      {"paddle.fluid.layers.leaky_relu", "leaky_relu", "x alpha name=-"},
      {"paddle.fluid.layers.elu", "elu", "x alpha name=-"},
      {"paddle.fluid.layers.swish", "swish", "x beta=- name=-"},
      {"paddle.fluid.layers.softplus", "softplus", kFluidUnary},
      {"paddle.fluid.layers.softsign", "softsign", kFluidUnary},
      {"paddle.fluid.layers.hard_sigmoid", "hard_sigmoid", "x slope=- offset=- name=-"},
      {"paddle.fluid.layers.exp", "exp", kFluidUnary},
      {"paddle.fluid.layers.log", "log", kFluidUnary},
      {"paddle.fluid.layers.sqrt", "sqrt", kFluidUnary},
      {"paddle.fluid.layers.rsqrt", "rsqrt", kFluidUnary},
      {"paddle.fluid.layers.abs", "abs", kFluidUnary},
      {"paddle.fluid.layers.square", "square", kFluidUnary},
      {"paddle.tanh", "tanh", kUnary},
      {"paddle.exp", "exp", kUnary},
      {"paddle.log", "log", kUnary},
      {"paddle.log1p", "log1p", kUnary},
      {"paddle.sqrt", "sqrt", kUnary},
      {"paddle.rsqrt", "rsqrt", kUnary},
      {"paddle.abs", "abs", kUnary},
      {"paddle.square", "square", kUnary},
      {"paddle.sin", "sin", kUnary},
      {"paddle.cos", "cos", kUnary},
      {"paddle.floor", "floor", kUnary},
      {"paddle.ceil", "ceil", kUnary},
      {"paddle.round", "round", kUnary},
      {"paddle.reciprocal", "reciprocal", kUnary},
      {"paddle.erf", "erf", kUnary},
      {"paddle.sign", "sign", kUnary},

      // Parameters, initializers, regularizers, clipping.
      {"paddle.ParamAttr", "ParamAttr", kParamAttr},
      {"paddle.static.ParamAttr", "ParamAttr", kParamAttr},
      {"paddle.fluid.ParamAttr", "ParamAttr", kParamAttr},
      {"paddle.nn.initializer.Constant", "Constant", "value"},
      {"paddle.nn.initializer.Normal", "Normal", "mean std name=-"},
      {"paddle.nn.initializer.TruncatedNormal", "TruncatedNormal", "mean std name=-"},
      {"paddle.nn.initializer.Uniform", "Uniform", "low high name=-"},
      {"paddle.nn.initializer.XavierUniform", "XavierUniform", "fan_in fan_out name=-"},
      {"paddle.nn.initializer.XavierNormal", "XavierNormal", "fan_in fan_out name=-"},
      {"paddle.nn.initializer.KaimingNormal", "KaimingNormal", "fan_in name=-"},
      {"paddle.nn.initializer.KaimingUniform", "KaimingUniform", "fan_in name=-"},
      {"paddle.fluid.initializer.Constant", "Constant", "value force_cpu"},
      {"paddle.fluid.initializer.ConstantInitializer", "Constant", "value force_cpu"},
      {"paddle.fluid.initializer.Normal", "Normal", "loc scale seed"},
      {"paddle.fluid.initializer.NormalInitializer", "Normal", "loc scale seed"},
      {"paddle.fluid.initializer.TruncatedNormal", "TruncatedNormal", "loc scale seed"},
      {"paddle.fluid.initializer.TruncatedNormalInitializer", "TruncatedNormal",
       "loc scale seed"},
      {"paddle.fluid.initializer.Uniform", "Uniform", "low high seed"},
      {"paddle.fluid.initializer.UniformInitializer", "Uniform", "low high seed"},
      {"paddle.fluid.initializer.Xavier", "Xavier", "uniform fan_in fan_out seed"},
      {"paddle.fluid.initializer.XavierInitializer", "Xavier", "uniform fan_in fan_out seed"},
      {"paddle.fluid.initializer.MSRA", "MSRA", "uniform fan_in seed"},
      {"paddle.fluid.initializer.MSRAInitializer", "MSRA", "uniform fan_in seed"},
      {"paddle.regularizer.L2Decay", "L2Decay", "coeff"},
      {"paddle.regularizer.L1Decay", "L1Decay", "coeff"},
      {"paddle.fluid.regularizer.L2Decay", "L2Decay", "regularization_coeff"},
      {"paddle.fluid.regularizer.L2DecayRegularizer", "L2Decay", "regularization_coeff"},
      {"paddle.fluid.regularizer.L1Decay", "L1Decay", "regularization_coeff"},
      {"paddle.fluid.regularizer.L1DecayRegularizer", "L1Decay", "regularization_coeff"},
      {"paddle.nn.ClipGradByGlobalNorm", "ClipGradByGlobalNorm", "clip_norm group_name=-"},
      {"paddle.nn.ClipGradByNorm", "ClipGradByNorm", "clip_norm"},
      {"paddle.nn.ClipGradByValue", "ClipGradByValue", "max min"},
      {"paddle.fluid.clip.GradientClipByGlobalNorm", "ClipGradByGlobalNorm",
       "clip_norm group_name=-"},
      {"paddle.fluid.clip.GradientClipByNorm", "ClipGradByNorm", "clip_norm"},
      {"paddle.fluid.clip.GradientClipByValue", "ClipGradByValue", "max min"},

      // Optimizers and learning-rate schedules.
      {"paddle.optimizer.SGD", "sgd", kSgd},
      {"paddle.optimizer.Momentum", "momentum", kMomentum},
      {"paddle.optimizer.Adam", "adam", kAdam},
      {"paddle.optimizer.AdamW", "adamw", kAdamW},
      {"paddle.optimizer.Adagrad", "adagrad", kAdagrad},
      {"paddle.optimizer.RMSProp", "rmsprop", kRmsProp},
      {"paddle.optimizer.Adamax", "adamax", kAdamax},
      {"paddle.optimizer.Lamb", "lamb", kLamb},
      {"paddle.fluid.optimizer.SGD", "sgd", kFluidSgd},
      {"paddle.fluid.optimizer.SGDOptimizer", "sgd", kFluidSgd},
      {"paddle.fluid.optimizer.Momentum", "momentum", kFluidMomentum},
      {"paddle.fluid.optimizer.MomentumOptimizer", "momentum", kFluidMomentum},
      {"paddle.fluid.optimizer.Adam", "adam", kFluidAdam},
      {"paddle.fluid.optimizer.AdamOptimizer", "adam", kFluidAdam},
      {"paddle.fluid.optimizer.Adagrad", "adagrad", kFluidAdagrad},
      {"paddle.fluid.optimizer.AdagradOptimizer", "adagrad", kFluidAdagrad},
      {"paddle.fluid.optimizer.RMSProp", "rmsprop", kFluidRmsProp},
      {"paddle.fluid.optimizer.RMSPropOptimizer", "rmsprop", kFluidRmsProp},
      {"paddle.fluid.optimizer.Adamax", "adamax", kFluidAdamax},
      {"paddle.fluid.optimizer.AdamaxOptimizer", "adamax", kFluidAdamax},
      {"paddle.fluid.optimizer.Lamb", "lamb", kLamb},
      {"paddle.fluid.optimizer.LambOptimizer", "lamb", kLamb},
      {"paddle.optimizer.lr.PiecewiseDecay", "piecewise_decay", "boundaries values verbose=-"},
      {"paddle.optimizer.lr.ExponentialDecay", "exponential_decay",
       "learning_rate gamma verbose=-"},
      {"paddle.optimizer.lr.CosineAnnealingDecay", "cosine_decay",
       "learning_rate T_max eta_min verbose=-"},
      {"paddle.optimizer.lr.PolynomialDecay", "polynomial_decay",
       "learning_rate decay_steps end_lr=end_learning_rate power cycle verbose=-"},
      {"paddle.optimizer.lr.NoamDecay", "noam_decay",
       "d_model warmup_steps learning_rate verbose=-"},
      {"paddle.optimizer.lr.LinearWarmup", "linear_warmup",
       "learning_rate warmup_steps start_lr end_lr verbose=-"},
      {"paddle.fluid.layers.piecewise_decay", "piecewise_decay", "boundaries values"},
      {"paddle.fluid.layers.exponential_decay", "exponential_decay",
       "learning_rate decay_steps decay_rate=gamma staircase"},
      {"paddle.fluid.layers.natural_exp_decay", "natural_exp_decay",
       "learning_rate decay_steps decay_rate staircase"},
      {"paddle.fluid.layers.inverse_time_decay", "inverse_time_decay",
       "learning_rate decay_steps decay_rate staircase"},
      {"paddle.fluid.layers.polynomial_decay", "polynomial_decay",
       "learning_rate decay_steps end_learning_rate power cycle"},
      {"paddle.fluid.layers.noam_decay", "noam_decay", "d_model warmup_steps learning_rate"},
      {"paddle.fluid.layers.linear_lr_warmup", "linear_warmup",
       "learning_rate warmup_steps start_lr end_lr"},

      // The Fleet lines of a training script.
      {"paddle.distributed.fleet.init", "@fleet_init", "role_maker is_collective strategy"},
      {"paddle.distributed.fleet.DistributedStrategy", "@strategy", ""},
      {"paddle.distributed.fleet.distributed_optimizer", "@distributed_optimizer",
       "optimizer strategy"},
      {"paddle.distributed.fleet.PaddleCloudRoleMaker", "@role_maker", "is_collective"},
      {"paddle.distributed.fleet.base.role_maker.PaddleCloudRoleMaker", "@role_maker",
       "is_collective"},
  };
  std::sort(t.begin(), t.end(),
            [](const PaddleApi& a, const PaddleApi& b) { return a.name < b.name; });
  return t;
}

}  // namespace

const std::vector<PaddleApi>& PaddleApis() {
  static const std::vector<PaddleApi> table = BuildTable();
  return table;
}

const PaddleApi* FindPaddleApi(std::string_view name) {
  const auto& t = PaddleApis();
  auto it = std::lower_bound(t.begin(), t.end(), name,
                             [](const PaddleApi& a, std::string_view n) { return a.name < n; });
  return it != t.end() && it->name == name ? &*it : nullptr;
}

bool IsPaddleModule(std::string_view path) {
  static const std::set<std::string, std::less<>> modules = [] {
    std::set<std::string, std::less<>> out;
    for (const PaddleApi& api : PaddleApis()) {
      std::string_view name = api.name;
      for (size_t dot = name.find('.'); dot != std::string_view::npos;
           dot = name.find('.', dot + 1)) {
        out.insert(std::string(name.substr(0, dot)));
      }
    }
    return out;
  }();
  return modules.count(path) != 0;
}

std::vector<std::string> ClosestPaddleApis(std::string_view name) {
  std::vector<std::string> names;
  for (const PaddleApi& api : PaddleApis()) names.emplace_back(api.name);
  return ClosestMatches(name, names, 3);
}

std::string PaddleApiMarkdown() {
  std::string out =
      "| Paddle name | Fleet layer or op | Parameters (Paddle's, in order; -> renamed, "
      "(ignored) accepted and ignored) |\n|---|---|---|\n";
  for (const PaddleApi& api : PaddleApis()) {
    std::string target(api.target);
    if (target[0] == '@') target = "(built in)";
    std::string params;
    bool keyword_only = false;
    for (const PaddleParam& p : ParsePaddleParams(api.params)) {
      if (!params.empty()) params += ", ";
      if (!p.positional && !keyword_only) {
        params += "keyword only: ";
        keyword_only = true;
      }
      params += "`" + p.paddle + "`";
      if (p.target.empty()) {
        params += " (ignored)";
      } else if (p.target[0] == '@') {
        params += p.target == "@act" ? " (activation after)" : " (adapted)";
      } else if (p.target != p.paddle) {
        params += " -> `" + p.target + "`";
      }
    }
    if (!api.defaults.empty()) params += "; fixed: `" + std::string(api.defaults) + "`";
    out += "| `" + std::string(api.name) + "` | " +
           (target[0] == '(' ? target : "`" + target + "`") + " | " + params + " |\n";
  }
  return out;
}

std::vector<PaddleParam> ParsePaddleParams(std::string_view params) {
  std::vector<PaddleParam> out;
  bool positional = true;
  size_t i = 0;
  while (i < params.size()) {
    while (i < params.size() && params[i] == ' ') ++i;
    size_t end = params.find(' ', i);
    if (end == std::string_view::npos) end = params.size();
    std::string_view word = params.substr(i, end - i);
    i = end;
    if (word.empty()) continue;
    if (word == "|") {
      positional = false;
      continue;
    }
    PaddleParam p;
    p.positional = positional;
    size_t eq = word.find('=');
    p.paddle = std::string(word.substr(0, eq));
    if (eq == std::string_view::npos) {
      p.target = p.paddle;
    } else if (word.substr(eq + 1) != "-") {
      p.target = std::string(word.substr(eq + 1));
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace fleet::frontend
