/* Probe: time one f16 GEMM compute shader (C f32 = A f16 x B f16, all row-major) on Vulkan with
 * VK_NV_cooperative_matrix2 enabled, and check 64 elements of C against a double-precision sum.
 * Not part of the generated code: it measures what docs/vulkan.md reports about
 * VK_NV_cooperative_matrix2 (run.sh builds and runs it on the device tool's GPU).
 *
 * usage: vk_gemm SHADER.spv M N K BM BN REPS
 *   the shader (gemm_cm2.comp) computes one BM x BN tile of C per workgroup, push constants
 *   {M, N, K}, bindings 0 A, 1 B, 2 C; the figure is the best of 5 submissions of REPS
 *   dispatches each, timed with timestamps. */
#include <vulkan/vulkan.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#define CK(x) do { VkResult r_ = (x); if (r_ != VK_SUCCESS) { fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, r_); exit(1); } } while (0)

static VkDevice dev; static VkPhysicalDevice phys;
static uint32_t memtype(uint32_t bits, VkMemoryPropertyFlags want) {
    VkPhysicalDeviceMemoryProperties mp; vkGetPhysicalDeviceMemoryProperties(phys, &mp);
    for (uint32_t i = 0; i < mp.memoryTypeCount; ++i)
        if ((bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) return i;
    fprintf(stderr, "no memory type\n"); exit(1);
}
static void mkbuf(VkDeviceSize size, VkBufferUsageFlags use, VkMemoryPropertyFlags want, VkBuffer *b, VkDeviceMemory *m) {
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size, .usage = use};
    CK(vkCreateBuffer(dev, &bi, NULL, b));
    VkMemoryRequirements rq; vkGetBufferMemoryRequirements(dev, *b, &rq);
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = rq.size,
                               .memoryTypeIndex = memtype(rq.memoryTypeBits, want)};
    CK(vkAllocateMemory(dev, &ai, NULL, m)); CK(vkBindBufferMemory(dev, *b, *m, 0));
}
static float h2f(uint16_t h) { _Float16 f; memcpy(&f, &h, 2); return (float)f; }
static uint16_t f2h(float x) { _Float16 f = (_Float16)x; uint16_t h; memcpy(&h, &f, 2); return h; }

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: %s SHADER.spv M N K BM BN REPS\n", argv[0]);
        return 2;
    }
    uint32_t M = atoi(argv[2]), N = atoi(argv[3]), K = atoi(argv[4]), BM = atoi(argv[5]), BN = atoi(argv[6]);
    int reps = atoi(argv[7]);
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = VK_API_VERSION_1_3};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkInstance inst; CK(vkCreateInstance(&ici, NULL, &inst));
    uint32_t n = 8; VkPhysicalDevice pds[8]; CK(vkEnumeratePhysicalDevices(inst, &n, pds));
    phys = pds[0];
    for (uint32_t i = 0; i < n; ++i) {
        VkPhysicalDeviceProperties p; vkGetPhysicalDeviceProperties(pds[i], &p);
        if (p.vendorID == 0x10de) { phys = pds[i]; break; }
    }
    VkPhysicalDeviceProperties props; vkGetPhysicalDeviceProperties(phys, &props);
    printf("device %s, api %u.%u.%u, shared %u\n", props.deviceName, VK_API_VERSION_MAJOR(props.apiVersion),
           VK_API_VERSION_MINOR(props.apiVersion), VK_API_VERSION_PATCH(props.apiVersion),
           props.limits.maxComputeSharedMemorySize);
    VkPhysicalDeviceCooperativeMatrix2FeaturesNV f_cm2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV};
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR f_cm = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR, .pNext = &f_cm2};
    VkPhysicalDeviceVulkan13Features f13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES, .pNext = &f_cm};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = &f13};
    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = &f12};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
    vkGetPhysicalDeviceFeatures2(phys, &f2);
    printf("cm2: workgroupScope %u flexibleDims %u reductions %u conversions %u perElement %u tensorAddr %u blockLoads %u; khr cm %u\n",
           f_cm2.cooperativeMatrixWorkgroupScope, f_cm2.cooperativeMatrixFlexibleDimensions,
           f_cm2.cooperativeMatrixReductions, f_cm2.cooperativeMatrixConversions,
           f_cm2.cooperativeMatrixPerElementOperations, f_cm2.cooperativeMatrixTensorAddressing,
           f_cm2.cooperativeMatrixBlockLoads, f_cm.cooperativeMatrix);
    VkPhysicalDeviceCooperativeMatrix2PropertiesNV p_cm2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &p_cm2};
    vkGetPhysicalDeviceProperties2(phys, &p2);
    printf("cm2 props: wg granularity %u, wg max dim %u, reserved shared %u\n",
           p_cm2.cooperativeMatrixWorkgroupScopeMaxWorkgroupSize, p_cm2.cooperativeMatrixFlexibleDimensionsMaxDimension,
           p_cm2.cooperativeMatrixWorkgroupScopeReservedSharedMemory);
    PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV flex =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV)vkGetInstanceProcAddr(inst, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV");
    if (flex) {
        uint32_t nf = 0; flex(phys, &nf, NULL);
        VkCooperativeMatrixFlexibleDimensionsPropertiesNV *fp = calloc(nf, sizeof *fp);
        for (uint32_t i = 0; i < nf; ++i) fp[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV;
        flex(phys, &nf, fp);
        for (uint32_t i = 0; i < nf; ++i)
            if (fp[i].AType == VK_COMPONENT_TYPE_FLOAT16_KHR && fp[i].CType == VK_COMPONENT_TYPE_FLOAT32_KHR)
                printf("flex: gran %ux%ux%u A%d B%d C%d R%d scope %d wg %u\n", fp[i].MGranularity, fp[i].NGranularity,
                       fp[i].KGranularity, fp[i].AType, fp[i].BType, fp[i].CType, fp[i].ResultType, fp[i].scope,
                       fp[i].workgroupInvocations);
    }
    const char *exts[] = {VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME, VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME};
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = 0, .queueCount = 1, .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &f2, .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qi, .enabledExtensionCount = 2, .ppEnabledExtensionNames = exts};
    f_cm2.pNext = NULL;
    CK(vkCreateDevice(phys, &dci, NULL, &dev));
    VkQueue q; vkGetDeviceQueue(dev, 0, 0, &q);

    size_t sa = (size_t)M * K * 2, sb = (size_t)K * N * 2, sc = (size_t)M * N * 4;
    VkBuffer ba, bb, bc, st; VkDeviceMemory ma, mb, mc, mst;
    VkBufferUsageFlags u = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT;
    mkbuf(sa, u, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &ba, &ma);
    mkbuf(sb, u, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &bb, &mb);
    mkbuf(sc, u, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &bc, &mc);
    size_t sst = sa + sb + sc;
    mkbuf(sst, u, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, &st, &mst);
    uint8_t *host; CK(vkMapMemory(dev, mst, 0, VK_WHOLE_SIZE, 0, (void **)&host));
    uint16_t *ha = (uint16_t *)host, *hb = (uint16_t *)(host + sa); float *hc = (float *)(host + sa + sb);
    srand(1);
    for (size_t i = 0; i < (size_t)M * K; ++i) ha[i] = f2h((float)rand() / RAND_MAX - 0.5f);
    for (size_t i = 0; i < (size_t)K * N; ++i) hb[i] = f2h((float)rand() / RAND_MAX - 0.5f);

    FILE *fs = fopen(argv[1], "rb"); fseek(fs, 0, SEEK_END); long ns = ftell(fs); fseek(fs, 0, SEEK_SET);
    uint32_t *code = malloc(ns); if (fread(code, 1, ns, fs) != (size_t)ns) return 1; fclose(fs);
    VkShaderModuleCreateInfo smi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = ns, .pCode = code};
    VkShaderModule sm; CK(vkCreateShaderModule(dev, &smi, NULL, &sm));
    VkDescriptorSetLayoutBinding bnd[3];
    for (int i = 0; i < 3; ++i) bnd[i] = (VkDescriptorSetLayoutBinding){i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, NULL};
    VkDescriptorSetLayoutCreateInfo dli = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, .bindingCount = 3, .pBindings = bnd};
    VkDescriptorSetLayout dl; CK(vkCreateDescriptorSetLayout(dev, &dli, NULL, &dl));
    VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, 12};
    VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1, .pSetLayouts = &dl,
                                      .pushConstantRangeCount = 1, .pPushConstantRanges = &pcr};
    VkPipelineLayout pl; CK(vkCreatePipelineLayout(dev, &pli, NULL, &pl));
    VkComputePipelineCreateInfo cpi = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = sm, .pName = "main"},
        .layout = pl};
    VkPipeline pipe; CK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cpi, NULL, &pipe));
    VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 3};
    VkDescriptorPoolCreateInfo dpi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = 1, .poolSizeCount = 1, .pPoolSizes = &ps};
    VkDescriptorPool dp; CK(vkCreateDescriptorPool(dev, &dpi, NULL, &dp));
    VkDescriptorSetAllocateInfo dai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, .descriptorPool = dp, .descriptorSetCount = 1, .pSetLayouts = &dl};
    VkDescriptorSet ds; CK(vkAllocateDescriptorSets(dev, &dai, &ds));
    VkDescriptorBufferInfo dbi[3] = {{ba, 0, VK_WHOLE_SIZE}, {bb, 0, VK_WHOLE_SIZE}, {bc, 0, VK_WHOLE_SIZE}};
    VkWriteDescriptorSet w[3];
    for (int i = 0; i < 3; ++i) w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = ds, .dstBinding = i,
                                                              .descriptorCount = 1, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .pBufferInfo = &dbi[i]};
    vkUpdateDescriptorSets(dev, 3, w, 0, NULL);
    VkCommandPoolCreateInfo cpci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                 .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, .queueFamilyIndex = 0};
    VkCommandPool cp; CK(vkCreateCommandPool(dev, &cpci, NULL, &cp));
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = cp, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    VkCommandBuffer cb; CK(vkAllocateCommandBuffers(dev, &cai, &cb));
    VkQueryPoolCreateInfo qpi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = 2};
    VkQueryPool qp; CK(vkCreateQueryPool(dev, &qpi, NULL, &qp));
    /* uploads before the first dispatch; each dispatch (writing C) before the next and the readback */
    VkMemoryBarrier upload = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_SHADER_READ_BIT};
    VkMemoryBarrier after = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                             .dstAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT};
    uint32_t pc[3] = {M, N, K};
    uint32_t groups = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    double best = 1e30;
    for (int round = 0; round < 6; ++round) {
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
        CK(vkBeginCommandBuffer(cb, &bi));
        if (round == 0) {
            VkBufferCopy c1 = {0, 0, sa}, c2 = {sa, 0, sb};
            vkCmdCopyBuffer(cb, st, ba, 1, &c1); vkCmdCopyBuffer(cb, st, bb, 1, &c2);
            vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &upload, 0, NULL, 0, NULL);
        }
        vkCmdResetQueryPool(cb, qp, 0, 2);
        vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
        vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds, 0, NULL);
        vkCmdPushConstants(cb, pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, 12, pc);
        vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, qp, 0);
        int r = round == 0 ? 1 : reps;
        for (int i = 0; i < r; ++i) {
            vkCmdDispatch(cb, groups, 1, 1);
            vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &after, 0, NULL, 0, NULL);
        }
        vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 1);
        if (round == 0) { VkBufferCopy c3 = {0, sa + sb, sc}; vkCmdCopyBuffer(cb, bc, st, 1, &c3); }
        CK(vkEndCommandBuffer(cb));
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
        CK(vkQueueSubmit(q, 1, &si, VK_NULL_HANDLE)); CK(vkQueueWaitIdle(q));
        uint64_t ts[2]; CK(vkGetQueryPoolResults(dev, qp, 0, 2, sizeof ts, ts, 8, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
        double s = (ts[1] - ts[0]) * props.limits.timestampPeriod * 1e-9 / r;
        if (round == 0) {
            double maxerr = 0;
            for (int t = 0; t < 64; ++t) {
                uint32_t i = (uint32_t)(((uint64_t)t * 2654435761u) % M), j = (uint32_t)(((uint64_t)t * 40503u + 7) % N);
                if (t == 0) { i = M - 1; j = N - 1; }
                double ref = 0; for (uint32_t kk = 0; kk < K; ++kk) ref += (double)h2f(ha[(size_t)i * K + kk]) * h2f(hb[(size_t)kk * N + j]);
                double e = fabs(ref - hc[(size_t)i * N + j]); if (e > maxerr) maxerr = e;
            }
            printf("check: max abs err over 64 samples %.3g\n", maxerr);
        } else if (s < best) best = s;
    }
    printf("RESULT %s %ux%ux%u: %.3f ms, %.1f TFLOP/s\n", argv[1], M, N, K, best * 1e3, 2.0 * M * N * K / best / 1e12);
    return 0;
}
