#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
// Probe (tools/bench/coopmat2/run.sh; docs/vulkan.md reports it): C[M, N] (f32) = A[M, K] x B[K, N]
// (f16, row-major) with VK_NV_cooperative_matrix2: one BM x BN tile of C per workgroup of THREADS
// invocations, held as one workgroup-scope accumulator; per BK step of K, A's and B's slices are
// loaded through tensor layouts (the driver stages them) and multiplied into it. Tiles go in
// groups of 8 tile rows per sweep over the columns, so the B panels stay in L2. Compile with
// -DTHREADS= -DBM= -DBN= -DBK= (glslang 15 or newer).
layout(local_size_x = THREADS) in;
layout(set = 0, binding = 0) readonly buffer A { float16_t a[]; };
layout(set = 0, binding = 1) readonly buffer B { float16_t b[]; };
layout(set = 0, binding = 2) writeonly buffer C { float c[]; };
layout(push_constant) uniform P { uint M, N, K; } p;
void main() {
    uint tiles_m = (p.M + BM - 1) / BM, tiles_n = (p.N + BN - 1) / BN, t = gl_WorkGroupID.x;
    uint first = (t / (8 * tiles_n)) * 8, rows = min(tiles_m - first, 8);
    uint tr = first + (t % (8 * tiles_n)) % rows, tc = (t % (8 * tiles_n)) / rows;
    tensorLayoutNV<2> la = createTensorLayoutNV(2);
    tensorLayoutNV<2> lb = createTensorLayoutNV(2);
    tensorLayoutNV<2> lc = createTensorLayoutNV(2);
    la = setTensorLayoutDimensionNV(la, p.M, p.K);
    lb = setTensorLayoutDimensionNV(lb, p.K, p.N);
    lc = setTensorLayoutDimensionNV(lc, p.M, p.N);
    coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> acc =
        coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(0.0);
    coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> fa;
    coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> fb;
    for (uint k0 = 0; k0 < p.K; k0 += BK) {
        coopMatLoadTensorNV(fa, a, 0, sliceTensorLayoutNV(la, tr * BM, BM, k0, BK));
        coopMatLoadTensorNV(fb, b, 0, sliceTensorLayoutNV(lb, k0, BK, tc * BN, BN));
        acc = coopMatMulAdd(fa, fb, acc);
    }
    coopMatStoreTensorNV(acc, c, 0, sliceTensorLayoutNV(lc, tr * BM, BM, tc * BN, BN));
}
