// Hopper (sm_90a) primitives of the prefill GEMMs: mbarriers, TMA and bulk copies into shared memory,
// the asynchronous-proxy fence, warpgroup register reallocation and wgmma with A in registers.
// Only kernels compiled for sm_90a include this file (wgmma, setmaxnreg and the tensor-map TMA are
// sm_90a features; SM120 has none of wgmma); on the host every function is an empty stub.
#pragma once
#include "device/pack16.cuh"
#include "device/smem.cuh"
#include "device/wgmma_desc.cuh"

#if defined(__CUDACC__)
namespace b12x::device {

// A CUtensorMap (the driver's 128-byte, 64-byte aligned TMA descriptor), passed to kernels by value
// as a __grid_constant__ parameter so that the TMA unit can read it from parameter space.
struct alignas(64) TmaMap {
  unsigned long long words[16];
};

// ---- mbarriers (shared::cta, 64-bit) ----
B12X_DEV void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// Makes the initialised barriers visible to the async proxy (TMA) and the other threads.
B12X_DEV void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
B12X_DEV void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// One arrival that also announces `bytes` of asynchronous copies completing on this barrier.
B12X_DEV void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// Waits until the phase with parity `parity` has completed.
B12X_DEV void mbar_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// ---- copies into shared memory, completing on an mbarrier ----
// 2-D box of a tensor map at element coordinates (c0 innermost, c1); out-of-range elements are zeros.
B12X_DEV void tma_load_2d(unsigned dst, const TmaMap* map, int c0, int c1, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
// 3-D box (c0 innermost); out-of-range elements are zeros and count towards the box's bytes.
B12X_DEV void tma_load_3d(unsigned dst, const TmaMap* map, int c0, int c1, int c2, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(
          dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}
// Contiguous bytes (a multiple of 16, both addresses 16-byte aligned).
B12X_DEV void bulk_load(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

// The same box multicast to the CTAs of the cluster in cta_mask: each receives it at offset dst of
// its own shared memory and its barrier at offset bar counts the bytes (thread-block clusters).
B12X_DEV void tma_load_2d_multicast(unsigned dst, const TmaMap* map, int c0, int c1, unsigned bar,
                                    unsigned short cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(cta_mask)
      : "memory");
}

// ---- thread-block clusters ----
B12X_DEV unsigned cluster_cta_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// One arrival on the barrier at offset `bar` of CTA `cta` of the cluster (this one or another), with
// the default (CTA-scope) release. Not `.release.cluster`: ptxas turns that into MEMBAR.ALL.GPU +
// MEMBAR.ALL.CTA before every arrival (SASS, 2026-12-05), a GPU-wide fence per stage and warp; the
// consumers that arrive have only read the slot (wgmma, completed by wait_group) and the producer
// that waits refills it through the async proxy, so no cluster-scope ordering of our own writes
// is needed (CUTLASS's cluster pipelines arrive the same way).
B12X_DEV void mbar_arrive_cluster(unsigned bar, unsigned cta) {
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar),
      "r"(cta)
      : "memory");
}
// Every thread of every CTA of the cluster: a barrier over the cluster (whole warps: .aligned).
B12X_DEV void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The GEMMs' pieces that change with kCluster, the CTAs per cluster sharing one box (1: no cluster).
// After the barriers are initialised: the CTA's barrier, or the cluster's (the peers' barriers then
// exist before any copy or arrival reaches them).
template <int kCluster>
B12X_DEV void barriers_ready() {
  if constexpr (kCluster > 1) cluster_sync();
  else __syncthreads();
}
// A box of `rows` rows of `row_bytes` at (c0, c1) into dst of every CTA of the cluster: CTA `rank`
// loads rows [rank rows / kCluster, + rows / kCluster), multicast to all (kCluster 1: a plain load).
// Each CTA's barrier counts the whole box.
template <int kCluster>
B12X_DEV void tma_load_2d_shared(unsigned dst, const TmaMap* map, int c0, int c1, int rows, int row_bytes,
                                 unsigned bar, unsigned rank) {
  if constexpr (kCluster > 1) {
    const int part = rows / kCluster;
    tma_load_2d_multicast(dst + rank * part * row_bytes, map, c0, c1 + static_cast<int>(rank) * part, bar,
                          static_cast<unsigned short>((1u << kCluster) - 1));
  } else {
    tma_load_2d(dst, map, c0, c1, bar);
  }
}
// A consumer warp's release of a slot that every CTA of the cluster fills: one arrival on `bar` in
// each of them (call from one lane).
template <int kCluster>
B12X_DEV void mbar_arrive_all(unsigned bar) {
  if constexpr (kCluster > 1) {
    B12X_UNROLL
    for (int c = 0; c < kCluster; ++c) mbar_arrive_cluster(bar, c);
  } else {
    mbar_arrive(bar);
  }
}
// mbar_arrive_all in the threads where `pred` holds, as predicated instructions: no branch, so code
// around it stays one basic block (a branch among in-flight wgmma makes the compiler copy their
// accumulators at the join, and ptxas serialize them).
template <int kCluster>
B12X_DEV void mbar_arrive_all_if(unsigned bar, bool pred) {
  B12X_UNROLL
  for (int c = 0; c < kCluster; ++c) {
    if constexpr (kCluster > 1)
      asm volatile(
          "{\n.reg .pred p;\n.reg .b32 remote;\nsetp.ne.b32 p, %2, 0;\n"
          "mapa.shared::cluster.u32 remote, %0, %1;\n"
          "@p mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar),
          "r"(c), "r"(static_cast<unsigned>(pred))
          : "memory");
    else
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n@p mbarrier.arrive.shared::cta.b64 _, [%0];\n}\n" ::"r"(bar),
                   "r"(static_cast<unsigned>(pred))
                   : "memory");
  }
}
// Before a cluster kernel's thread exits: its peers may still arrive on its barriers.
template <int kCluster>
B12X_DEV void cluster_exit_sync() {
  if constexpr (kCluster > 1) __syncwarp(), cluster_sync();
}

// 4 bytes by cp.async, zeros instead when !valid (src is not read then); with
// cp_async_arrive_noinc the barrier counts the copy's completion as this thread's arrival.
B12X_DEV void cp_async_4_zfill(unsigned dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0) : "memory");
}
// An arrival on `bar` once every cp.async this thread issued before has landed (the barrier's count
// includes it: .noinc).
B12X_DEV void cp_async_arrive_noinc(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}

// ---- warpgroups ----
template <int kRegs>
B12X_DEV void warpgroup_regs_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs)); }
template <int kRegs>
B12X_DEV void warpgroup_regs_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs)); }
// Named barrier over `threads` threads (ids 1..15; 0 is __syncthreads).
B12X_DEV void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Arrival on named barrier `id` without waiting (the other threads of its `threads` bar.sync on it).
B12X_DEV void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Split-K over CTAs, once the 256 consumer threads (named barrier 1; ctid 0..255) have stored this
// CTA's partial tile: whether it is the last of `splits` CTAs to count itself in *counter (zeroed
// before the launch), which then sums every partial. The first fence orders this CTA's stores
// before its count, the second the count before the last CTA's reads. flag: an int in shared memory.
B12X_DEV bool splitk_last_arrival(unsigned* counter, int splits, int ctid, int* flag) {
  __threadfence();
  named_barrier(1, 256);
  if (ctid == 0) *flag = atomicAdd(counter, 1u) == static_cast<unsigned>(splits - 1);
  named_barrier(1, 256);
  if (*flag == 0) return false;
  __threadfence();
  return true;
}

// ---- wgmma ----
// Orders this warpgroup's register writes (A fragments, accumulators) before the next wgmma.
B12X_DEV void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
B12X_DEV void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Waits until at most kPending committed groups of this warpgroup are still running.
template <int kPending>
B12X_DEV void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory"); }
// Keeps the compiler from moving accesses of v across a wgmma issue / wait.
template <int kN>
B12X_DEV void wgmma_fence_regs(float (&v)[kN]) {
  B12X_UNROLL
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(v[i])::"memory");
}
B12X_DEV void wgmma_fence_regs(unsigned (&v)[4]) {
  B12X_UNROLL
  for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(v[i])::"memory");
}

// (The descriptors, wgmma_desc_sw128 / wgmma_desc_advance: device/wgmma_desc.cuh.)

// The wgmma operand lists below are written out by scripts/gen_wgmma_rs.py (N / 2 accumulators a
// thread). A is the m64k16 fragment of the warpgroup: warp w holds rows 16w .. 16w+15 exactly as
// mma.sync m16n8k16 holds its A (a0: row g, k 2t..2t+1; a1: row g+8; a2: row g, k 2t+8..; a3: row
// g+8, k 2t+8..); D: d[4c + 0, 1] = row g, columns 8c + 2t, +1; d[4c + 2, 3] = row g + 8.
#define B12X_WGMMA_RS_N64(TYPE, SCALE_D)                                      \
  "{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE_D ", 0;\n"                            \
  "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " {"                \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" \
  "}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
#define B12X_WGMMA_ACC_N64(C) \
  C(d[0]), C(d[1]), C(d[2]), C(d[3]), C(d[4]), C(d[5]), C(d[6]), C(d[7]), \
  C(d[8]), C(d[9]), C(d[10]), C(d[11]), C(d[12]), C(d[13]), C(d[14]), C(d[15]), \
  C(d[16]), C(d[17]), C(d[18]), C(d[19]), C(d[20]), C(d[21]), C(d[22]), C(d[23]), \
  C(d[24]), C(d[25]), C(d[26]), C(d[27]), C(d[28]), C(d[29]), C(d[30]), C(d[31])

// D[64 x 64] += A[64 x 16] (registers) . B[16 x 64] (shared, descriptor), FP32 accumulators;
// kAccumulate = false: D = A . B (scale-d 0: the hardware ignores D's old values, so no other
// instruction zeroes them; those would serialize the wgmma in flight on other accumulators).
template <int kT, bool kAccumulate = true>
B12X_DEV void wgmma_rs_n64(float (&d)[32], const unsigned (&a)[4], unsigned long long b_desc) {
#if defined(__CUDA_ARCH__)
  if constexpr (kT == kPackBf16 && kAccumulate)
    asm volatile(B12X_WGMMA_RS_N64("bf16", "1") : B12X_WGMMA_ACC_N64("+f") : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
  else if constexpr (kAccumulate)
    asm volatile(B12X_WGMMA_RS_N64("f16", "1") : B12X_WGMMA_ACC_N64("+f") : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
  else if constexpr (kT == kPackBf16)
    asm volatile(B12X_WGMMA_RS_N64("bf16", "0") : B12X_WGMMA_ACC_N64("+f") : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
  else
    asm volatile(B12X_WGMMA_RS_N64("f16", "0") : B12X_WGMMA_ACC_N64("+f") : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
#else
  (void)d, (void)a, (void)b_desc;
#endif
}
#undef B12X_WGMMA_RS_N64

#define B12X_WGMMA_RS_N128(TYPE, SCALE_D)                                      \
  "{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE_D ", 0;\n"                            \
  "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " {"                \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" \
  "}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
#define B12X_WGMMA_ACC_N128(C) \
  C(d[0]), C(d[1]), C(d[2]), C(d[3]), C(d[4]), C(d[5]), C(d[6]), C(d[7]), \
  C(d[8]), C(d[9]), C(d[10]), C(d[11]), C(d[12]), C(d[13]), C(d[14]), C(d[15]), \
  C(d[16]), C(d[17]), C(d[18]), C(d[19]), C(d[20]), C(d[21]), C(d[22]), C(d[23]), \
  C(d[24]), C(d[25]), C(d[26]), C(d[27]), C(d[28]), C(d[29]), C(d[30]), C(d[31]), \
  C(d[32]), C(d[33]), C(d[34]), C(d[35]), C(d[36]), C(d[37]), C(d[38]), C(d[39]), \
  C(d[40]), C(d[41]), C(d[42]), C(d[43]), C(d[44]), C(d[45]), C(d[46]), C(d[47]), \
  C(d[48]), C(d[49]), C(d[50]), C(d[51]), C(d[52]), C(d[53]), C(d[54]), C(d[55]), \
  C(d[56]), C(d[57]), C(d[58]), C(d[59]), C(d[60]), C(d[61]), C(d[62]), C(d[63])

// D[64 x 128] += A[64 x 16] (registers) . B[16 x 128] (shared, descriptor), FP32 accumulators;
// kAccumulate = false: D = A . B (scale-d 0: the hardware ignores D's old values, so no other
// instruction zeroes them; those would serialize the wgmma in flight on other accumulators).
template <int kT, bool kAccumulate = true>
B12X_DEV void wgmma_rs_n128(float (&d)[64], const unsigned (&a)[4], unsigned long long b_desc) {
#if defined(__CUDA_ARCH__)
  if constexpr (kT == kPackBf16 && kAccumulate)
    asm volatile(B12X_WGMMA_RS_N128("bf16", "1") : B12X_WGMMA_ACC_N128("+f") : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
  else if constexpr (kAccumulate)
    asm volatile(B12X_WGMMA_RS_N128("f16", "1") : B12X_WGMMA_ACC_N128("+f") : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
  else if constexpr (kT == kPackBf16)
    asm volatile(B12X_WGMMA_RS_N128("bf16", "0") : B12X_WGMMA_ACC_N128("+f") : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
  else
    asm volatile(B12X_WGMMA_RS_N128("f16", "0") : B12X_WGMMA_ACC_N128("+f") : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
#else
  (void)d, (void)a, (void)b_desc;
#endif
}
#undef B12X_WGMMA_RS_N128

#define B12X_WGMMA_RS_N256(TYPE, SCALE_D)                                      \
  "{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE_D ", 0;\n"                            \
  "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " {"                \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" \
  "}, {%128, %129, %130, %131}, %132, p, 1, 1, 0;\n}\n"
#define B12X_WGMMA_ACC_N256(C) \
  C(d[0]), C(d[1]), C(d[2]), C(d[3]), C(d[4]), C(d[5]), C(d[6]), C(d[7]), \
  C(d[8]), C(d[9]), C(d[10]), C(d[11]), C(d[12]), C(d[13]), C(d[14]), C(d[15]), \
  C(d[16]), C(d[17]), C(d[18]), C(d[19]), C(d[20]), C(d[21]), C(d[22]), C(d[23]), \
  C(d[24]), C(d[25]), C(d[26]), C(d[27]), C(d[28]), C(d[29]), C(d[30]), C(d[31]), \
  C(d[32]), C(d[33]), C(d[34]), C(d[35]), C(d[36]), C(d[37]), C(d[38]), C(d[39]), \
  C(d[40]), C(d[41]), C(d[42]), C(d[43]), C(d[44]), C(d[45]), C(d[46]), C(d[47]), \
  C(d[48]), C(d[49]), C(d[50]), C(d[51]), C(d[52]), C(d[53]), C(d[54]), C(d[55]), \
  C(d[56]), C(d[57]), C(d[58]), C(d[59]), C(d[60]), C(d[61]), C(d[62]), C(d[63]), \
  C(d[64]), C(d[65]), C(d[66]), C(d[67]), C(d[68]), C(d[69]), C(d[70]), C(d[71]), \
  C(d[72]), C(d[73]), C(d[74]), C(d[75]), C(d[76]), C(d[77]), C(d[78]), C(d[79]), \
  C(d[80]), C(d[81]), C(d[82]), C(d[83]), C(d[84]), C(d[85]), C(d[86]), C(d[87]), \
  C(d[88]), C(d[89]), C(d[90]), C(d[91]), C(d[92]), C(d[93]), C(d[94]), C(d[95]), \
  C(d[96]), C(d[97]), C(d[98]), C(d[99]), C(d[100]), C(d[101]), C(d[102]), C(d[103]), \
  C(d[104]), C(d[105]), C(d[106]), C(d[107]), C(d[108]), C(d[109]), C(d[110]), C(d[111]), \
  C(d[112]), C(d[113]), C(d[114]), C(d[115]), C(d[116]), C(d[117]), C(d[118]), C(d[119]), \
  C(d[120]), C(d[121]), C(d[122]), C(d[123]), C(d[124]), C(d[125]), C(d[126]), C(d[127])

// D[64 x 256] += A[64 x 16] (registers) . B[16 x 256] (shared, descriptor), FP32 accumulators;
// kAccumulate = false: D = A . B (scale-d 0: the hardware ignores D's old values, so no other
// instruction zeroes them; those would serialize the wgmma in flight on other accumulators).
template <int kT, bool kAccumulate = true>
B12X_DEV void wgmma_rs_n256(float (&d)[128], const unsigned (&a)[4], unsigned long long b_desc) {
#if defined(__CUDA_ARCH__)
  if constexpr (kT == kPackBf16 && kAccumulate)
    asm volatile(B12X_WGMMA_RS_N256("bf16", "1") : B12X_WGMMA_ACC_N256("+f") : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
  else if constexpr (kAccumulate)
    asm volatile(B12X_WGMMA_RS_N256("f16", "1") : B12X_WGMMA_ACC_N256("+f") : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
  else if constexpr (kT == kPackBf16)
    asm volatile(B12X_WGMMA_RS_N256("bf16", "0") : B12X_WGMMA_ACC_N256("+f") : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
  else
    asm volatile(B12X_WGMMA_RS_N256("f16", "0") : B12X_WGMMA_ACC_N256("+f") : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
#else
  (void)d, (void)a, (void)b_desc;
#endif
}
#undef B12X_WGMMA_RS_N256

#define B12X_WGMMA_SS_N64(TYPE)                                                \
  "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                      \
  "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " {"                \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" \
  "}, %32, %33, p, 1, 1, 0, 0;\n}\n"

// D[64 x 64] += A[64 x 16] (shared, descriptor) . B[16 x 64] (shared, descriptor), FP32 accumulators.
template <int kT>
B12X_DEV void wgmma_ss_n64(float (&d)[32], unsigned long long a_desc, unsigned long long b_desc) {
#if defined(__CUDA_ARCH__)
  if constexpr (kT == kPackBf16)
    asm volatile(B12X_WGMMA_SS_N64("bf16") : B12X_WGMMA_ACC_N64("+f") : "l"(a_desc), "l"(b_desc));
  else
    asm volatile(B12X_WGMMA_SS_N64("f16") : B12X_WGMMA_ACC_N64("+f") : "l"(a_desc), "l"(b_desc));
#else
  (void)d, (void)a_desc, (void)b_desc;
#endif
}
#undef B12X_WGMMA_SS_N64
#undef B12X_WGMMA_ACC_N64

#define B12X_WGMMA_SS_N128(TYPE)                                                \
  "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                      \
  "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " {"                \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" \
  "}, %64, %65, p, 1, 1, 0, 0;\n}\n"

// D[64 x 128] += A[64 x 16] (shared, descriptor) . B[16 x 128] (shared, descriptor), FP32 accumulators.
template <int kT>
B12X_DEV void wgmma_ss_n128(float (&d)[64], unsigned long long a_desc, unsigned long long b_desc) {
#if defined(__CUDA_ARCH__)
  if constexpr (kT == kPackBf16)
    asm volatile(B12X_WGMMA_SS_N128("bf16") : B12X_WGMMA_ACC_N128("+f") : "l"(a_desc), "l"(b_desc));
  else
    asm volatile(B12X_WGMMA_SS_N128("f16") : B12X_WGMMA_ACC_N128("+f") : "l"(a_desc), "l"(b_desc));
#else
  (void)d, (void)a_desc, (void)b_desc;
#endif
}
#undef B12X_WGMMA_SS_N128
#undef B12X_WGMMA_ACC_N128

#define B12X_WGMMA_SS_N256(TYPE)                                                \
  "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                      \
  "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " {"                \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" \
  "}, %128, %129, p, 1, 1, 0, 0;\n}\n"

// D[64 x 256] += A[64 x 16] (shared, descriptor) . B[16 x 256] (shared, descriptor), FP32 accumulators.
template <int kT>
B12X_DEV void wgmma_ss_n256(float (&d)[128], unsigned long long a_desc, unsigned long long b_desc) {
#if defined(__CUDA_ARCH__)
  if constexpr (kT == kPackBf16)
    asm volatile(B12X_WGMMA_SS_N256("bf16") : B12X_WGMMA_ACC_N256("+f") : "l"(a_desc), "l"(b_desc));
  else
    asm volatile(B12X_WGMMA_SS_N256("f16") : B12X_WGMMA_ACC_N256("+f") : "l"(a_desc), "l"(b_desc));
#else
  (void)d, (void)a_desc, (void)b_desc;
#endif
}
#undef B12X_WGMMA_SS_N256
#undef B12X_WGMMA_ACC_N256

}  // namespace b12x::device
#endif
