# Writes the register-A wgmma wrappers of src/device/wgmma.cuh (N = 64, 128, 256; BF16 and F16):
#   python3 scripts/gen_wgmma_rs.py > /tmp/w.inc, then replace the block after the comment in wgmma.cuh.
out = []
for n in (64, 128, 256):
    regs = n // 2
    out.append(f"// D[64 x {n}] += A[64 x 16] (registers) . B[16 x {n}] (shared, descriptor), FP32 accumulators.")
    out.append("template <int kT>")
    out.append(f"B12X_DEV void wgmma_rs_n{n}(float (&d)[{regs}], const unsigned (&a)[4], unsigned long long b_desc) {{")
    out.append("#if defined(__CUDA_ARCH__)")
    dl = ", ".join(f"%{i}" for i in range(regs))
    al = ", ".join(f"%{regs + i}" for i in range(4))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    for t, name in (("kPackBf16", "bf16"), ("kPackF16", "f16")):
        kw = "if constexpr" if name == "bf16" else "else"
        cond = f"(kT == {t}) " if name == "bf16" else ""
        out.append(f"  {kw} {cond}{{".replace("  else {", "  else {"))
        out.append("    asm volatile(")
        out.append('        "{\\n.reg .pred p;\\nsetp.ne.b32 p, 1, 0;\\n"')
        out.append(f'        "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{name}.{name} "')
        # split the d list into lines of 16
        parts = [", ".join(f"%{i}" for i in range(s, min(s + 16, regs))) for s in range(0, regs, 16)]
        out.append('        "{"')
        for j, p in enumerate(parts):
            sep = ", " if j + 1 < len(parts) else ""
            out.append(f'        "{p}{sep}"')
        out.append(f'        "}}, {{{al}}}, %{regs + 4}, p, 1, 1, 0;\\n}}\\n"')
        op_parts = [", ".join(f'"+f"(d[{i}])' for i in range(s, min(s + 8, regs))) for s in range(0, regs, 8)]
        out.append("        : " + (",\n          ".join(op_parts)))
        out.append('        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));')
        out.append("  }")
    out.append("#else")
    out.append("  (void)d, (void)a, (void)b_desc;")
    out.append("#endif")
    out.append("}")
    out.append("")
print("\n".join(out))
