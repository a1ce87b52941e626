# Writes the register-A and shared-A wgmma wrappers of src/device/wgmma.cuh (N = 64, 128, 256; BF16 and F16):
#   python3 scripts/gen_wgmma_rs.py > /tmp/w.inc, then replace the block after the comment in wgmma.cuh.
# Per N: one macro for the instruction text (arguments: the type, and scale-d: 1 accumulates into D,
# 0 overwrites it) and one for the accumulator operands (argument: the constraint, "+f"), so the
# four statements differ only in those.
out = []


def instruction_head(n, macro, setp):
    """The instruction macro's first lines: the scale-d predicate, the opcode, D's N / 2 operands."""
    regs = n // 2
    dl = [", ".join(f"%{i}" for i in range(s, min(s + 16, regs))) for s in range(0, regs, 16)]
    out.append(macro)
    out.append(setp)
    out.append(f'  "wgmma.mma_async.sync.aligned.m64n{n}k16.f32." TYPE "." TYPE " {{"                \\')
    for j, p in enumerate(dl):
        sep = ", " if j + 1 < len(dl) else ""
        out.append(f'  "{p}{sep}" \\')


for n in (64, 128, 256):
    regs = n // 2
    instruction_head(n, f"#define B12X_WGMMA_RS_N{n}(TYPE, SCALE_D)                                      \\",
                     '  "{\\n.reg .pred p;\\nsetp.ne.b32 p, " SCALE_D ", 0;\\n"                            \\')
    out.append(f'  "}}, {{%{regs}, %{regs + 1}, %{regs + 2}, %{regs + 3}}}, %{regs + 4}, p, 1, 1, 0;\\n}}\\n"')
    ops = [", ".join(f'C(d[{i}])' for i in range(s, min(s + 8, regs))) for s in range(0, regs, 8)]
    out.append(f"#define B12X_WGMMA_ACC_N{n}(C) \\")
    cont = ", \\"
    for j, p in enumerate(ops):
        out.append("  " + p + (cont if j + 1 < len(ops) else ""))
    out.append("")
    out.append(f"// D[64 x {n}] += A[64 x 16] (registers) . B[16 x {n}] (shared, descriptor), FP32 accumulators;")
    out.append("// kAccumulate = false: D = A . B (scale-d 0: the hardware ignores D's old values, so no other")
    out.append("// instruction zeroes them; those would serialize the wgmma in flight on other accumulators).")
    out.append("template <int kT, bool kAccumulate = true>")
    out.append(f"B12X_DEV void wgmma_rs_n{n}(float (&d)[{regs}], const unsigned (&a)[4], unsigned long long b_desc) {{")
    out.append("#if defined(__CUDA_ARCH__)")
    for t, acc, cond in (("bf16", True, "if constexpr (kT == kPackBf16 && kAccumulate)"),
                         ("f16", True, "else if constexpr (kAccumulate)"),
                         ("bf16", False, "else if constexpr (kT == kPackBf16)"), ("f16", False, "else")):
        # "+f" in both: with "=f" each overwriting wgmma starts a new value, and the compiler joins
        # them with moves of in-flight accumulators (which ptxas answers by serializing the wgmma).
        sd, c = ('"1"', '"+f"') if acc else ('"0"', '"+f"')
        out.append("  " + cond)
        out.append(f'    asm volatile(B12X_WGMMA_RS_N{n}("{t}", {sd}) : B12X_WGMMA_ACC_N{n}({c}) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));')
    out.append("#else")
    out.append("  (void)d, (void)a, (void)b_desc;")
    out.append("#endif")
    out.append("}")
    out.append(f"#undef B12X_WGMMA_RS_N{n}")
    out.append("")
# Both operands from shared memory (descriptors; K-major, no transpose): the prefill kernel's dense
# 16-bit weights (checkpoint layout, loaded by TMA with the 128-byte swizzle).
for n in (64, 128, 256):
    regs = n // 2
    instruction_head(n, f"#define B12X_WGMMA_SS_N{n}(TYPE)                                                \\",
                     '  "{\\n.reg .pred p;\\nsetp.ne.b32 p, 1, 0;\\n"                                      \\')
    out.append(f'  "}}, %{regs}, %{regs + 1}, p, 1, 1, 0, 0;\\n}}\\n"')
    out.append("")
    out.append(f"// D[64 x {n}] += A[64 x 16] (shared, descriptor) . B[16 x {n}] (shared, descriptor), FP32 accumulators.")
    out.append("template <int kT>")
    out.append(f"B12X_DEV void wgmma_ss_n{n}(float (&d)[{regs}], unsigned long long a_desc, unsigned long long b_desc) {{")
    out.append("#if defined(__CUDA_ARCH__)")
    out.append("  if constexpr (kT == kPackBf16)")
    out.append(f'    asm volatile(B12X_WGMMA_SS_N{n}("bf16") : B12X_WGMMA_ACC_N{n}("+f") : "l"(a_desc), "l"(b_desc));')
    out.append("  else")
    out.append(f'    asm volatile(B12X_WGMMA_SS_N{n}("f16") : B12X_WGMMA_ACC_N{n}("+f") : "l"(a_desc), "l"(b_desc));')
    out.append("#else")
    out.append("  (void)d, (void)a_desc, (void)b_desc;")
    out.append("#endif")
    out.append("}")
    out.append(f"#undef B12X_WGMMA_SS_N{n}")
    out.append(f"#undef B12X_WGMMA_ACC_N{n}")
    out.append("")
print("\n".join(out))

