// make_nccl_communicators: the CUDA backend's tensor-parallel all-reduce, NCCL on each rank's
// stream (so a recorded forward holds it too). Built when CMake finds NCCL (JET_HAVE_NCCL).
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_factory.h"
#include "backend/communicator.h"

#ifdef JET_HAVE_NCCL
#include <nccl.h>
#endif

namespace jet {

#ifdef JET_HAVE_NCCL
namespace {

void check_nccl(ncclResult_t status, const char* what) {
  JET_CHECK(status == ncclSuccess, "tensor parallel: ", what, " failed: ", ncclGetErrorString(status));
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, cuda::CudaBackend& backend, int rank, int size)
      : comm_(comm), backend_(backend), rank_(rank), size_(size) {}
  ~NcclCommunicator() override { ncclCommDestroy(comm_); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(Tensor& x) override {
    ncclDataType_t type = ncclFloat32;
    switch (x.dtype) {
      case DType::BF16:
        type = ncclBfloat16;
        break;
      case DType::F16:
        type = ncclFloat16;
        break;
      case DType::F32:
        break;
      default:
        JET_ASSERT(false, "tensor parallel: no sum of ", dtype_name(x.dtype), " tensors");
    }
    check_nccl(ncclAllReduce(x.data, x.data, static_cast<size_t>(x.numel()), type, ncclSum, comm_, backend_.stream()),
               "ncclAllReduce");
  }

 private:
  ncclComm_t comm_;
  cuda::CudaBackend& backend_;
  int rank_, size_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(const std::vector<Backend*>& ranks) {
  std::vector<cuda::CudaBackend*> backends;
  std::vector<int> devices;
  for (Backend* b : ranks) {
    auto* cuda_backend = dynamic_cast<cuda::CudaBackend*>(b);
    JET_ASSERT(cuda_backend, "NCCL communicators need CUDA backends");
    backends.push_back(cuda_backend);
    devices.push_back(cuda_backend->device());
  }
  std::vector<ncclComm_t> comms(ranks.size());
  check_nccl(ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), devices.data()), "ncclCommInitAll");
  std::vector<std::unique_ptr<Communicator>> out;
  for (size_t r = 0; r < comms.size(); ++r) {
    out.push_back(std::make_unique<NcclCommunicator>(comms[r], *backends[r], static_cast<int>(r),
                                                     static_cast<int>(comms.size())));
  }
  return out;
}
#else
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(const std::vector<Backend*>&) {
  throw Error(
      "tensor parallel on CUDA needs NCCL, which this build did not find (configure with NCCL installed, "
      "or -DJET_NCCL_ROOT=its prefix)");
}
#endif

}  // namespace jet
