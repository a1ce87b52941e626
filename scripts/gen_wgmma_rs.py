# Writes the register-A wgmma wrappers of src/device/wgmma.cuh (N = 64, 128, 256; BF16 and F16):
#   python3 scripts/gen_wgmma_rs.py > /tmp/w.inc, then replace the block after the comment in wgmma.cuh.
# Per N: one macro for the instruction text (the type is its argument) and one for the accumulator
# operands, so the BF16 and F16 statements differ only in the type name.
out = []
for n in (64, 128, 256):
    regs = n // 2
    dl = [", ".join(f"%{i}" for i in range(s, min(s + 16, regs))) for s in range(0, regs, 16)]
    out.append(f"#define B12X_WGMMA_RS_N{n}(TYPE)                                               \\")
    out.append('  "{\\n.reg .pred p;\\nsetp.ne.b32 p, 1, 0;\\n"                                      \\')
    out.append(f'  "wgmma.mma_async.sync.aligned.m64n{n}k16.f32." TYPE "." TYPE " {{"                \\')
    for j, p in enumerate(dl):
        sep = ", " if j + 1 < len(dl) else ""
        out.append(f'  "{p}{sep}" \\')
    out.append(f'  "}}, {{%{regs}, %{regs + 1}, %{regs + 2}, %{regs + 3}}}, %{regs + 4}, p, 1, 1, 0;\\n}}\\n"')
    ops = [", ".join(f'"+f"(d[{i}])' for i in range(s, min(s + 8, regs))) for s in range(0, regs, 8)]
    out.append(f"#define B12X_WGMMA_ACC_N{n} \\")
    cont = ", \\"
    for j, p in enumerate(ops):
        out.append("  " + p + (cont if j + 1 < len(ops) else ""))
    out.append("")
    out.append(f"// D[64 x {n}] += A[64 x 16] (registers) . B[16 x {n}] (shared, descriptor), FP32 accumulators.")
    out.append("template <int kT>")
    out.append(f"B12X_DEV void wgmma_rs_n{n}(float (&d)[{regs}], const unsigned (&a)[4], unsigned long long b_desc) {{")
    out.append("#if defined(__CUDA_ARCH__)")
    out.append("  if constexpr (kT == kPackBf16)")
    out.append(f'    asm volatile(B12X_WGMMA_RS_N{n}("bf16") : B12X_WGMMA_ACC_N{n} : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));')
    out.append("  else")
    out.append(f'    asm volatile(B12X_WGMMA_RS_N{n}("f16") : B12X_WGMMA_ACC_N{n} : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));')
    out.append("#else")
    out.append("  (void)d, (void)a, (void)b_desc;")
    out.append("#endif")
    out.append("}")
    out.append(f"#undef B12X_WGMMA_RS_N{n}")
    out.append(f"#undef B12X_WGMMA_ACC_N{n}")
    out.append("")
print("\n".join(out))
