// Register-only throughput of mma.sync m16n8k16 (f16 x f16 -> f32): the instruction that
// cooperative matrices lower to on NVIDIA GPUs, without any memory traffic.
#include <cstdio>
__global__ void peak(float *out, int iters) {
    unsigned a0 = 0x3c003c00u ^ (threadIdx.x & 1u), a1 = 0x3c003c00u, a2 = 0x3c003c00u, a3 = 0x3c003c00u;
    unsigned b0 = 0x3c003c00u, b1 = 0x3c003c00u;
    float c[8][4] = {};
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
                         : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
    float s = 0;
    for (int j = 0; j < 8; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
    if (s == 1234.5f) out[threadIdx.x] = s;
}
int main() {
    int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    float *out; cudaMalloc(&out, 4096);
    int iters = 4096;
    for (int warps = 4; warps <= 16; warps *= 2) {
        int blocks = sms * 4;
        peak<<<blocks, warps * 32>>>(out, 16);
        cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
        float best = 1e30f;
        for (int r = 0; r < 5; ++r) {
            cudaEventRecord(e0); peak<<<blocks, warps * 32>>>(out, iters); cudaEventRecord(e1);
            cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1); if (ms < best) best = ms;
        }
        double flops = 2.0 * 16 * 8 * 16 * 8 * (double)iters * blocks * warps;
        printf("mma.sync m16n8k16 f16->f32, %d SMs, %d blocks x %d warps: %.1f TFLOP/s\n", sms, blocks, warps, flops / best / 1e9);
    }
    return 0;
}
