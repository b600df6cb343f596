#include "kernels/kernel_util.h"

#include <omp.h>

#include <deque>
#include <thread>

#include "device.h"

namespace fleet_cpu {

void Add(KernelList& list, const char* op_type, int32_t dtype, LaunchFn launch,
         PrepareFn prepare, ReleaseFn release, SupportsFn supports, uint32_t flags) {
  // A deque never moves its elements, so the pointers handed out stay valid.
  static std::deque<FleetKernelDef> storage;
  FleetKernelDef& def = storage.emplace_back();
  def.struct_size = FLEET_STRUCT_SIZE(FleetKernelDef, flags);
  def.op_type = op_type;
  def.device = "cpu";
  def.dtype = dtype;
  def.priority = 0;
  def.supports = supports;
  def.prepare = prepare;
  def.launch = launch;
  def.release = release;
  def.flags = flags;
  list.push_back(&def);
}

const KernelList& AllKernels() {
  static const KernelList list = [] {
    KernelList l;
    AddMathKernels(l);
    AddNnKernels(l);
    AddTensorKernels(l);
    AddOptimizerKernels(l);
    AddSparseKernels(l);
    return l;
  }();
  return list;
}

int Threads(const FleetKernelContext* kc) {
  if (kc != nullptr && kc->num_threads > 0) return kc->num_threads;
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

void UseThreads(const FleetKernelContext* kc) {
  thread_local int current = 0;
  int want = Threads(kc);
  if (want != current) {
    omp_set_num_threads(want);
    current = want;
  }
}

FleetStatus* Error(int32_t code, const std::string& message) {
  return GetHost()->status_new(code, message.c_str());
}

const dnnl::engine& DnnlEngine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& DnnlStream() {
  thread_local dnnl::stream stream(DnnlEngine());
  return stream;
}

dnnl::memory::data_type DnnlType(int32_t fleet_dtype) {
  switch (fleet_dtype) {
    case FLEET_DTYPE_FLOAT32:
      return dnnl::memory::data_type::f32;
    case FLEET_DTYPE_BFLOAT16:
      return dnnl::memory::data_type::bf16;
    case FLEET_DTYPE_FLOAT16:
      return dnnl::memory::data_type::f16;
    case FLEET_DTYPE_INT32:
      return dnnl::memory::data_type::s32;
    case FLEET_DTYPE_INT8:
      return dnnl::memory::data_type::s8;
    case FLEET_DTYPE_UINT8:
      return dnnl::memory::data_type::u8;
    default:
      return dnnl::memory::data_type::undef;
  }
}

}  // namespace fleet_cpu
