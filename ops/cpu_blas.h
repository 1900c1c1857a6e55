// The host BLAS as the kernels that tile their own work call it: the Fortran sgemm_ that
// torch's CPU build links and exports (MKL in the pip wheel), and a scope that keeps MKL
// single-threaded on the calling thread. Torch-free.
//
// Why the scope: attention kernels (ops/attention_ops.cc, ops/llm_paged_attention_ops.cc)
// call the BLAS on small tiles from every compute thread at once. Left to itself MKL starts
// an OpenMP team per call on the cores the other compute threads are using: the
// llama_decode prefill's SDPA took 608 us per call instead of 180, its paged_attention
// 2.4 ms instead of 0.1.
#ifndef TORCH_XXNPU_OPS_CPU_BLAS_H_
#define TORCH_XXNPU_OPS_CPU_BLAS_H_

extern "C" {
void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c,
            const int* ldc);
// mkl_service.h's per-thread thread count; weak, so another BLAS links without it.
int MKL_Set_Num_Threads_Local(int nt) __attribute__((weak));
}

namespace xxnpu {

// MKL single-threaded on the calling thread for a scope (a no-op with another BLAS).
class SingleThreadedBlas {
 public:
  SingleThreadedBlas() {
    if (MKL_Set_Num_Threads_Local != nullptr) previous_ = MKL_Set_Num_Threads_Local(1);
  }
  ~SingleThreadedBlas() {
    if (MKL_Set_Num_Threads_Local != nullptr) MKL_Set_Num_Threads_Local(previous_);
  }
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace xxnpu

#endif  // TORCH_XXNPU_OPS_CPU_BLAS_H_
