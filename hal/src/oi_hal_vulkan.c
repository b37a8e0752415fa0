/*
 * oi_hal_vulkan.c — Vulkan compute on the thin HAL. See oi_hal_vulkan.h for the contract.
 *
 * Synchronisation: a global memory barrier (compute/transfer writes before compute/transfer
 * reads and writes) is recorded before a command that touches a byte range a command since the
 * last barrier wrote, or writes one such a command read (`order`); commands without such a
 * dependency may overlap. A full barrier costs the GPU a drain: recording one after every
 * command held a decode step on an H100 at ~40% of the speed without barriers. Everything runs
 * on one compute queue, submitted when the host needs a result; what a submission holds is
 * listed first and recorded into a command buffer only when no kept one holds the same
 * commands (see "Replay" in oi_hal_vulkan.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "oi_hal_vulkan.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Bytes of the scratch buffer oi_vk_fill_bytes copies patterns from (a multiple of every
 * element size up to 8, and the most one vkCmdUpdateBuffer writes). */
#define OI_VK_SCRATCH_BYTES 65536u

static atomic_uint_fast64_t validation_messages;
static atomic_uint_fast64_t submissions;
static atomic_uint_fast64_t dispatches;
static atomic_uint_fast64_t transfers;
static atomic_uint_fast64_t barriers;
static atomic_uint_fast64_t wait_ns;

uint64_t oi_vk_validation_messages(void) { return (uint64_t)atomic_load(&validation_messages); }
uint64_t oi_vk_submissions(void) { return (uint64_t)atomic_load(&submissions); }
uint64_t oi_vk_dispatches(void) { return (uint64_t)atomic_load(&dispatches); }
uint64_t oi_vk_transfers(void) { return (uint64_t)atomic_load(&transfers); }
uint64_t oi_vk_barriers(void) { return (uint64_t)atomic_load(&barriers); }
uint64_t oi_vk_wait_ns(void) { return (uint64_t)atomic_load(&wait_ns); }

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT types,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
    (void)types;
    (void)user;
    /* Count warnings and errors: a clean run is one where this stays 0. */
    if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        atomic_fetch_add(&validation_messages, 1);
        fprintf(stderr, "[vulkan validation] %s\n", data && data->pMessage ? data->pMessage : "(no message)");
    }
    return VK_FALSE;
}

const char *oi_vk_feature_name(uint32_t missing) {
    if (missing & OI_VK_FEATURE_INT64) return "shaderInt64";
    if (missing & OI_VK_FEATURE_FP64) return "shaderFloat64";
    if (missing & OI_VK_FEATURE_INT16) return "shaderInt16";
    if (missing & OI_VK_FEATURE_STORAGE8) return "storageBuffer8BitAccess";
    if (missing & OI_VK_FEATURE_STORAGE16) return "storageBuffer16BitAccess";
    if (missing & OI_VK_FEATURE_FLOAT16) return "shaderFloat16";
    if (missing & OI_VK_FEATURE_INT8) return "shaderInt8";
    if (missing & OI_VK_FEATURE_SUBGROUP) return "subgroup arithmetic";
    if (missing & OI_VK_FEATURE_DENORM32) return "shaderDenormPreserveFloat32";
    if (missing & OI_VK_FEATURE_COOPMAT)
        return "cooperative matrices (VK_NV_cooperative_matrix, 16x16x16 f16 -> f32, "
               "vulkanMemoryModel with device scope)";
    return "(none)";
}

static int validation_requested(void) {
    const char *v = getenv("OI_VK_VALIDATION");
    return v && strcmp(v, "1") == 0;
}

static int contains_ci(const char *hay, const char *needle) {
    if (!needle || !*needle) return 1;
    size_t n = strlen(needle);
    for (const char *p = hay; *p; ++p) {
        size_t i = 0;
        while (i < n && p[i] && tolower((unsigned char)p[i]) == tolower((unsigned char)needle[i])) ++i;
        if (i == n) return 1;
    }
    return 0;
}

static const char *vendor_name(uint32_t id) {
    switch (id) {
    case 0x10DE: return "nvidia";
    case 0x1002: return "amd";
    case 0x8086: return "intel";
    case 0x13B5: return "arm";
    case 0x5143: return "qualcomm";
    case 0x10005: return "mesa";
    default: return "unknown";
    }
}

static int has_device_extension(VkPhysicalDevice phys, const char *name) {
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(phys, NULL, &n, NULL) != VK_SUCCESS || n == 0) return 0;
    VkExtensionProperties *props = malloc(n * sizeof *props);
    if (!props) return 0;
    int found = 0;
    if (vkEnumerateDeviceExtensionProperties(phys, NULL, &n, props) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; ++i) found = strcmp(props[i].extensionName, name) == 0;
    free(props);
    return found;
}

/* Whether the device offers the cooperative matrices the GEMM kernels use: 16x16x16 subgroup
 * matrices of f16 A and B with f32 C and result (VK_NV_cooperative_matrix). */
static int has_f16_coopmat(VkInstance instance, VkPhysicalDevice phys) {
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV get =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)vkGetInstanceProcAddr(
            instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
    uint32_t n = 0;
    if (!get || get(phys, &n, NULL) != VK_SUCCESS || n == 0) return 0;
    VkCooperativeMatrixPropertiesNV *props = calloc(n, sizeof *props);
    if (!props) return 0;
    for (uint32_t i = 0; i < n; ++i) props[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
    int found = 0;
    if (get(phys, &n, props) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; ++i)
            found = props[i].MSize == 16 && props[i].NSize == 16 && props[i].KSize == 16 &&
                    props[i].AType == VK_COMPONENT_TYPE_FLOAT16_NV && props[i].BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
                    props[i].CType == VK_COMPONENT_TYPE_FLOAT32_NV && props[i].DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
                    props[i].scope == VK_SCOPE_SUBGROUP_NV;
    free(props);
    return found;
}

static VkPhysicalDevice pick_device(VkInstance instance, const char *vendor, const char *name) {
    uint32_t n = 0;
    if (vkEnumeratePhysicalDevices(instance, &n, NULL) != VK_SUCCESS || n == 0) return VK_NULL_HANDLE;
    VkPhysicalDevice list[16];
    if (n > 16) n = 16;
    if (vkEnumeratePhysicalDevices(instance, &n, list) < 0) return VK_NULL_HANDLE;
    const char *env = getenv("OI_VK_DEVICE");
    if (env && *env) {
        char *end;
        long idx = strtol(env, &end, 10);
        if (*end == '\0') return idx >= 0 && (uint32_t)idx < n ? list[idx] : VK_NULL_HANDLE;
        for (uint32_t i = 0; i < n; ++i) {
            VkPhysicalDeviceProperties p;
            vkGetPhysicalDeviceProperties(list[i], &p);
            if (contains_ci(p.deviceName, env)) return list[i];
        }
        return VK_NULL_HANDLE;
    }
    int best = -1, best_score = -1;
    for (uint32_t i = 0; i < n; ++i) {
        VkPhysicalDeviceProperties p;
        vkGetPhysicalDeviceProperties(list[i], &p);
        int score = 0;
        if (name && *name && contains_ci(p.deviceName, name)) score += 8;
        if (vendor && *vendor && contains_ci(vendor_name(p.vendorID), vendor)) score += 4;
        if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU) score += 2;
        if (score > best_score) {
            best = (int)i;
            best_score = score;
        }
    }
    return list[best];
}

static uint32_t find_memory(VkPhysicalDevice phys, uint32_t type_bits, VkMemoryPropertyFlags want,
                            VkMemoryPropertyFlags fallback) {
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(phys, &mp);
    for (int pass = 0; pass < 2; ++pass) {
        VkMemoryPropertyFlags flags = pass == 0 ? want : fallback;
        for (uint32_t i = 0; i < mp.memoryTypeCount; ++i)
            if ((type_bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & flags) == flags) return i;
    }
    return UINT32_MAX;
}

static oi_status make_buffer(oi_vk_context *ctx, VkDeviceSize bytes, VkMemoryPropertyFlags want,
                             VkMemoryPropertyFlags fallback, oi_vk_buffer *out) {
    memset(out, 0, sizeof *out);
    bytes = (bytes + 255u) & ~(VkDeviceSize)255u;
    if (bytes == 0) bytes = 256;
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bi.size = bytes;
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    if (vkCreateBuffer(ctx->device, &bi, NULL, &out->buffer) != VK_SUCCESS) return OI_ERR_OUT_OF_MEMORY;
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(ctx->device, out->buffer, &req);
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = find_memory(ctx->physical, req.memoryTypeBits, want, fallback);
    if (ai.memoryTypeIndex == UINT32_MAX || vkAllocateMemory(ctx->device, &ai, NULL, &out->memory) != VK_SUCCESS) {
        vkDestroyBuffer(ctx->device, out->buffer, NULL);
        memset(out, 0, sizeof *out);
        return OI_ERR_OUT_OF_MEMORY;
    }
    vkBindBufferMemory(ctx->device, out->buffer, out->memory, 0);
    out->size = bytes;
    return OI_OK;
}

oi_status oi_vk_buffer_create(oi_vk_context *ctx, VkDeviceSize bytes, oi_vk_buffer *out) {
    return make_buffer(ctx, bytes, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0, out);
}

void oi_vk_buffer_destroy(oi_vk_context *ctx, oi_vk_buffer *b) {
    if (!ctx->device || !b) return;
    if (b->buffer) vkDestroyBuffer(ctx->device, b->buffer, NULL);
    if (b->memory) vkFreeMemory(ctx->device, b->memory, NULL);
    memset(b, 0, sizeof *b);
}

/* The process's VkInstance, one per validation mode, created on first use and never destroyed.
 * Executors share it: NVIDIA's driver (580.159 on an H200) enumerates no physical device on the
 * 31st instance a process creates, even when every earlier one was destroyed, so a process that
 * creates executors one after another (a test suite, a service reloading a model) would lose its
 * GPU. Only devices and what hangs off them are per executor. */
typedef struct shared_instance {
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;   /* the validation messenger (validated mode only) */
} shared_instance;

static shared_instance instances[2];   /* [0] plain, [1] with the validation layer */
static pthread_mutex_t instances_lock = PTHREAD_MUTEX_INITIALIZER;

static VkInstance process_instance(void) {
    int validate = validation_requested();
    pthread_mutex_lock(&instances_lock);
    shared_instance *si = &instances[validate];
    if (si->instance) {
        pthread_mutex_unlock(&instances_lock);
        return si->instance;
    }
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "openinfer";
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo ii = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ii.pApplicationInfo = &app;
    const char *layers[] = {"VK_LAYER_KHRONOS_validation"};
    const char *exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME};
    VkDebugUtilsMessengerCreateInfoEXT mi = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    mi.pfnUserCallback = on_message;
    /* synchronization validation reports a command that needed a barrier and got none (order()) */
    const VkValidationFeatureEnableEXT enables[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
    VkValidationFeaturesEXT vf = {.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
    vf.enabledValidationFeatureCount = 1;
    vf.pEnabledValidationFeatures = enables;
    vf.pNext = &mi;   /* the messenger also reports problems of instance creation itself */
    if (validate) {
        ii.enabledLayerCount = 1;
        ii.ppEnabledLayerNames = layers;
        ii.enabledExtensionCount = 2;
        ii.ppEnabledExtensionNames = exts;
        ii.pNext = &vf;
    }
    VkInstance instance = VK_NULL_HANDLE;
    if (vkCreateInstance(&ii, NULL, &instance) == VK_SUCCESS && validate) {
        PFN_vkCreateDebugUtilsMessengerEXT create =
            (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT");
        if (!create || create(instance, &mi, NULL, &si->messenger) != VK_SUCCESS) {
            vkDestroyInstance(instance, NULL);   /* validation without its messenger would count nothing */
            instance = VK_NULL_HANDLE;
        }
    }
    si->instance = instance;
    pthread_mutex_unlock(&instances_lock);
    return instance;
}

oi_status oi_vk_create(const char *vendor, const char *name, VkDeviceSize staging_reserved,
                       VkDeviceSize transfer_bytes, uint32_t max_sets, uint32_t max_descriptors,
                       oi_vk_context *ctx) {
    memset(ctx, 0, sizeof *ctx);
    ctx->instance = process_instance();
    if (!ctx->instance) return OI_ERR_DEVICE;
    ctx->physical = pick_device(ctx->instance, vendor, name);
    if (!ctx->physical) {
        oi_vk_destroy(ctx);
        return OI_ERR_DEVICE;
    }
    vkGetPhysicalDeviceProperties(ctx->physical, &ctx->properties);
    snprintf(ctx->device_name, sizeof ctx->device_name, "%s", ctx->properties.deviceName);
    snprintf(ctx->vendor_name, sizeof ctx->vendor_name, "%s", vendor_name(ctx->properties.vendorID));

    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(ctx->physical, &nq, NULL);
    VkQueueFamilyProperties qf[16];
    if (nq > 16) nq = 16;
    vkGetPhysicalDeviceQueueFamilyProperties(ctx->physical, &nq, qf);
    ctx->queue_family = UINT32_MAX;
    for (uint32_t i = 0; i < nq; ++i)
        if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
            ctx->queue_family = i;
            break;
        }
    if (ctx->queue_family == UINT32_MAX) {
        oi_vk_destroy(ctx);
        return OI_ERR_DEVICE;
    }

    /* Enable the optional features shaders may use when the device has them; the synthesizer
     * checked at bind time that the descriptor (hence the device) has what the program needs. */
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    f11.pNext = &f12;
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    f2.pNext = &f11;
    /* cooperative matrices (the f16 GEMM kernels): only queried where the extension exists */
    VkPhysicalDeviceCooperativeMatrixFeaturesNV fcm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
    int coopmat_ext = has_device_extension(ctx->physical, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    if (coopmat_ext) f12.pNext = &fcm;
    vkGetPhysicalDeviceFeatures2(ctx->physical, &f2);
    VkPhysicalDeviceVulkan12Properties p12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES};
    VkPhysicalDeviceSubgroupProperties sp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    sp.pNext = &p12;
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    p2.pNext = &sp;
    vkGetPhysicalDeviceProperties2(ctx->physical, &p2);
    ctx->subgroup_size = sp.subgroupSize;
    ctx->features = (f2.features.shaderInt64 ? OI_VK_FEATURE_INT64 : 0u) |
                    (f2.features.shaderFloat64 ? OI_VK_FEATURE_FP64 : 0u) |
                    (f2.features.shaderInt16 ? OI_VK_FEATURE_INT16 : 0u) |
                    (f12.storageBuffer8BitAccess ? OI_VK_FEATURE_STORAGE8 : 0u) |
                    (f11.storageBuffer16BitAccess ? OI_VK_FEATURE_STORAGE16 : 0u) |
                    (f12.shaderFloat16 ? OI_VK_FEATURE_FLOAT16 : 0u) |
                    (f12.shaderInt8 ? OI_VK_FEATURE_INT8 : 0u);
    if ((sp.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
        (sp.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT))
        ctx->features |= OI_VK_FEATURE_SUBGROUP;
    if (p12.shaderDenormPreserveFloat32) ctx->features |= OI_VK_FEATURE_DENORM32;
    /* The memory model comes with device scope: with vulkanMemoryModel on and device scope off, a
     * shader may not use Device-scope barriers, which the other kernels' buffer barriers are. */
    int coopmat = coopmat_ext && fcm.cooperativeMatrix && f12.vulkanMemoryModel &&
                  f12.vulkanMemoryModelDeviceScope && f12.shaderFloat16 &&
                  has_f16_coopmat(ctx->instance, ctx->physical);
    if (coopmat) ctx->features |= OI_VK_FEATURE_COOPMAT;
    VkPhysicalDeviceVulkan12Features e12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    e12.storageBuffer8BitAccess = f12.storageBuffer8BitAccess;
    e12.shaderInt8 = f12.shaderInt8;
    e12.shaderFloat16 = f12.shaderFloat16;
    VkPhysicalDeviceCooperativeMatrixFeaturesNV ecm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
    const char *device_exts[] = {VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME};
    if (coopmat) {
        ecm.cooperativeMatrix = VK_TRUE;
        e12.vulkanMemoryModel = VK_TRUE;
        e12.vulkanMemoryModelDeviceScope = VK_TRUE;
        e12.pNext = &ecm;
    }
    VkPhysicalDeviceVulkan11Features e11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    e11.pNext = &e12;
    e11.storageBuffer16BitAccess = f11.storageBuffer16BitAccess;
    VkPhysicalDeviceFeatures2 e2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    e2.pNext = &e11;
    e2.features.shaderInt64 = f2.features.shaderInt64;
    e2.features.shaderFloat64 = f2.features.shaderFloat64;
    e2.features.shaderInt16 = f2.features.shaderInt16;

    float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qi.queueFamilyIndex = ctx->queue_family;
    qi.queueCount = 1;
    qi.pQueuePriorities = &prio;
    VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    di.pNext = &e2;
    di.queueCreateInfoCount = 1;
    di.pQueueCreateInfos = &qi;
    if (coopmat) {
        di.enabledExtensionCount = 1;
        di.ppEnabledExtensionNames = device_exts;
    }
    if (vkCreateDevice(ctx->physical, &di, NULL, &ctx->device) != VK_SUCCESS) {
        oi_vk_destroy(ctx);
        return OI_ERR_DEVICE;
    }
    vkGetDeviceQueue(ctx->device, ctx->queue_family, 0, &ctx->queue);

    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pi.queueFamilyIndex = ctx->queue_family;
    VkCommandBufferAllocateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ci.commandBufferCount = 1;
    ci.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                               .descriptorCount = max_descriptors ? max_descriptors : 1};
    VkDescriptorPoolCreateInfo dpi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    dpi.maxSets = max_sets ? max_sets : 1;
    dpi.poolSizeCount = 1;
    dpi.pPoolSizes = &ps;
    if (vkCreateCommandPool(ctx->device, &pi, NULL, &ctx->command_pool) != VK_SUCCESS ||
        (ci.commandPool = ctx->command_pool, vkAllocateCommandBuffers(ctx->device, &ci, &ctx->commands)) != VK_SUCCESS ||
        vkCreateFence(ctx->device, &fi, NULL, &ctx->fence) != VK_SUCCESS ||
        vkCreateDescriptorPool(ctx->device, &dpi, NULL, &ctx->descriptor_pool) != VK_SUCCESS) {
        oi_vk_destroy(ctx);
        return OI_ERR_DEVICE;
    }
    const char *profile = getenv("OI_VK_PROFILE");
    const uint32_t stamp_bits = qf[ctx->queue_family].timestampValidBits;
    if (profile && strcmp(profile, "0") != 0 && stamp_bits) {
        VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
        qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
        qi.queryCount = OI_VK_PROFILE_STAGES + 1;
        if (vkCreateQueryPool(ctx->device, &qi, NULL, &ctx->profile_pool) != VK_SUCCESS) {
            oi_vk_destroy(ctx);
            return OI_ERR_DEVICE;
        }
        ctx->profile_mask = stamp_bits >= 64 ? UINT64_MAX : (UINT64_C(1) << stamp_bits) - 1u;
    }
    const char *replay = getenv("OI_VK_REPLAY");
    ctx->replay_off = replay && strcmp(replay, "0") == 0;
    /* the transfer area starts 256-aligned after the caller's bytes; at least 64 KiB of it */
    staging_reserved = (staging_reserved + 255u) & ~(VkDeviceSize)255u;
    if (transfer_bytes < 65536u) transfer_bytes = 65536u;
    ctx->transfer_offset = staging_reserved;
    ctx->transfer_bytes = transfer_bytes;
    oi_status st = make_buffer(ctx, staging_reserved + transfer_bytes,
                               VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                               VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, &ctx->staging);
    if (st != OI_OK || vkMapMemory(ctx->device, ctx->staging.memory, 0, VK_WHOLE_SIZE, 0, &ctx->staging_map) != VK_SUCCESS) {
        oi_vk_destroy(ctx);
        return st != OI_OK ? st : OI_ERR_DEVICE;
    }
    if ((st = oi_vk_buffer_create(ctx, OI_VK_SCRATCH_BYTES, &ctx->scratch)) != OI_OK) {
        oi_vk_destroy(ctx);
        return st;
    }
    return OI_OK;
}

/* FNV-1a over 64-bit words; n a multiple of 8 (command list entries are padded to 8 bytes).
 * A byte at a time, hashing a decode step's ~4 KB list before each submission took 12.5 us on a
 * 2-core Zen 3 VM (a word at a time: 1.4 us), host time every replayed token paid. */
static uint64_t fnv1a_words(const uint8_t *p, size_t n) {
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i + 8u <= n; i += 8u) {
        uint64_t w;
        memcpy(&w, p + i, sizeof w);
        h = (h ^ w) * 1099511628211u;
    }
    return h;
}

static void destroy_copy_kernel(oi_vk_context *ctx) {
    if (ctx->copy_pool) vkDestroyDescriptorPool(ctx->device, ctx->copy_pool, NULL);   /* and its sets */
    oi_vk_pipeline_destroy(ctx, &ctx->copy);
    free(ctx->copy_sets);
    ctx->copy_pool = VK_NULL_HANDLE;
    ctx->copy_sets = NULL;
    ctx->ncopy_sets = 0;
}

void oi_vk_destroy(oi_vk_context *ctx) {
    if (!ctx) return;
    if (ctx->device) {
        vkDeviceWaitIdle(ctx->device);
        if (ctx->staging_map) vkUnmapMemory(ctx->device, ctx->staging.memory);
        oi_vk_buffer_destroy(ctx, &ctx->staging);
        oi_vk_buffer_destroy(ctx, &ctx->scratch);
        if (ctx->descriptor_pool) vkDestroyDescriptorPool(ctx->device, ctx->descriptor_pool, NULL);
        destroy_copy_kernel(ctx);
        if (ctx->fence) vkDestroyFence(ctx->device, ctx->fence, NULL);
        if (ctx->profile_pool) vkDestroyQueryPool(ctx->device, ctx->profile_pool, NULL);
        if (ctx->command_pool) vkDestroyCommandPool(ctx->device, ctx->command_pool, NULL);   /* and every buffer */
        vkDestroyDevice(ctx->device, NULL);
    }
    free(ctx->list);
    for (uint32_t i = 0; i < OI_VK_REPLAY_SLOTS; ++i) free(ctx->replay[i].list);
    memset(ctx, 0, sizeof *ctx);
}

oi_status oi_vk_pipeline_create(oi_vk_context *ctx, const uint32_t *spirv, size_t spirv_bytes, uint32_t bindings,
                                uint32_t push_bytes, oi_vk_pipeline *out) {
    memset(out, 0, sizeof *out);
    out->bindings = bindings;
    out->push_bytes = push_bytes;
    VkShaderModuleCreateInfo si = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    si.codeSize = spirv_bytes;
    si.pCode = spirv;
    if (vkCreateShaderModule(ctx->device, &si, NULL, &out->module) != VK_SUCCESS) return OI_ERR_DEVICE;
    VkDescriptorSetLayoutBinding b[16];
    if (bindings > 16) return OI_ERR_INVALID_ARGUMENT;
    for (uint32_t i = 0; i < bindings; ++i) {
        memset(&b[i], 0, sizeof b[i]);
        b[i].binding = i;
        b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        b[i].descriptorCount = 1;
        b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    li.bindingCount = bindings;
    li.pBindings = b;
    VkPushConstantRange range = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = push_bytes};
    VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    pli.setLayoutCount = 1;
    pli.pushConstantRangeCount = push_bytes ? 1u : 0u;
    pli.pPushConstantRanges = &range;
    VkComputePipelineCreateInfo cpi = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    cpi.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    cpi.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    cpi.stage.pName = "main";
    if (vkCreateDescriptorSetLayout(ctx->device, &li, NULL, &out->set_layout) != VK_SUCCESS ||
        (pli.pSetLayouts = &out->set_layout, vkCreatePipelineLayout(ctx->device, &pli, NULL, &out->layout)) != VK_SUCCESS ||
        (cpi.stage.module = out->module, cpi.layout = out->layout,
         vkCreateComputePipelines(ctx->device, VK_NULL_HANDLE, 1, &cpi, NULL, &out->pipeline)) != VK_SUCCESS) {
        oi_vk_pipeline_destroy(ctx, out);
        return OI_ERR_DEVICE;
    }
    return OI_OK;
}

void oi_vk_pipeline_destroy(oi_vk_context *ctx, oi_vk_pipeline *p) {
    if (!ctx->device || !p) return;
    if (p->pipeline) vkDestroyPipeline(ctx->device, p->pipeline, NULL);
    if (p->layout) vkDestroyPipelineLayout(ctx->device, p->layout, NULL);
    if (p->set_layout) vkDestroyDescriptorSetLayout(ctx->device, p->set_layout, NULL);
    if (p->module) vkDestroyShaderModule(ctx->device, p->module, NULL);
    memset(p, 0, sizeof *p);
}

/* A set of p's layout from `pool`, binding buffers[i] at [offsets[i], +ranges[i]). */
static oi_status make_set(oi_vk_context *ctx, VkDescriptorPool pool, const oi_vk_pipeline *p, const VkBuffer *buffers,
                          const VkDeviceSize *offsets, const VkDeviceSize *ranges, VkDescriptorSet *out) {
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = pool;
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &p->set_layout;
    if (vkAllocateDescriptorSets(ctx->device, &ai, out) != VK_SUCCESS) return OI_ERR_OUT_OF_MEMORY;
    VkDescriptorBufferInfo info[16];
    VkWriteDescriptorSet w[16];
    for (uint32_t i = 0; i < p->bindings; ++i) {
        info[i].buffer = buffers[i];
        info[i].offset = offsets[i];
        /* ranges are rounded up to 4 bytes: shaders address 32-bit words of sub-word data */
        info[i].range = (ranges[i] + 3u) & ~(VkDeviceSize)3u;
        memset(&w[i], 0, sizeof w[i]);
        w[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
        w[i].dstSet = *out;
        w[i].dstBinding = i;
        w[i].descriptorCount = 1;
        w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        w[i].pBufferInfo = &info[i];
    }
    vkUpdateDescriptorSets(ctx->device, p->bindings, w, 0, NULL);
    return OI_OK;
}

oi_status oi_vk_descriptor_set(oi_vk_context *ctx, const oi_vk_pipeline *p, const VkBuffer *buffers,
                               const VkDeviceSize *offsets, const VkDeviceSize *ranges, VkDescriptorSet *out) {
    return make_set(ctx, ctx->descriptor_pool, p, buffers, offsets, ranges, out);
}

/* ------------------------------------------------------------ command lists and replay
 * The recording functions below append to ctx->list (see "Replay" in oi_hal_vulkan.h); a
 * submission records the list into a command buffer, or submits the one an identical list was
 * recorded into before. Entries are 8-byte aligned structs without implicit padding (so that
 * equal commands are equal bytes), some followed by their data. */

enum { CMD_BARRIER = 1, CMD_DISPATCH, CMD_COPY, CMD_FILL, CMD_UPDATE };

typedef struct {
    uint32_t kind, push_bytes;             /* followed by the push constants, padded to 8 */
    VkPipeline pipeline;
    VkPipelineLayout layout;
    VkDescriptorSet set;
    uint32_t gx, gy, gz, unused;
} cmd_dispatch;

typedef struct {
    uint32_t kind, regions;                /* followed by the VkBufferCopy regions */
    VkBuffer src, dst;
} cmd_copy;

typedef struct {
    uint32_t kind, word;
    VkBuffer dst;
    VkDeviceSize offset, bytes;
} cmd_fill;                                /* CMD_FILL; CMD_UPDATE: `bytes` of data follow, padded to 8 */

static atomic_uint_fast64_t replays;
uint64_t oi_vk_replays(void) { return (uint64_t)atomic_load(&replays); }
static atomic_uint_fast64_t copy_kernels;
uint64_t oi_vk_copy_kernels(void) { return (uint64_t)atomic_load(&copy_kernels); }

static oi_status put(oi_vk_context *ctx, const void *data, size_t bytes) {
    size_t padded = (bytes + 7u) & ~(size_t)7u;
    if (ctx->list_bytes + padded > ctx->list_capacity) {
        size_t cap = ctx->list_capacity ? ctx->list_capacity : 4096u;
        while (cap < ctx->list_bytes + padded) cap *= 2;
        uint8_t *grown = realloc(ctx->list, cap);
        if (!grown) return OI_ERR_OUT_OF_MEMORY;
        ctx->list = grown;
        ctx->list_capacity = cap;
    }
    memcpy(ctx->list + ctx->list_bytes, data, bytes);
    memset(ctx->list + ctx->list_bytes + bytes, 0, padded - bytes);
    ctx->list_bytes += padded;
    return OI_OK;
}

static oi_status begin(oi_vk_context *ctx) {
    if (ctx->recording) return OI_OK;
    ctx->recording = 1;
    ctx->list_bytes = 0;
    ctx->npending = 0;        /* the previous submission completed before this one began */
    return OI_OK;
}

oi_status oi_vk_barrier(oi_vk_context *ctx) {
    oi_status st = begin(ctx);
    if (st != OI_OK) return st;
    const uint32_t cmd[2] = {CMD_BARRIER, 0};
    if ((st = put(ctx, cmd, sizeof cmd)) != OI_OK) return st;
    atomic_fetch_add(&barriers, 1);
    ctx->npending = 0;
    return OI_OK;
}

static void record_barrier(VkCommandBuffer cb) {
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                       VK_ACCESS_TRANSFER_WRITE_BIT;
    VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    vkCmdPipelineBarrier(cb, stages, stages, 0, 1, &mb, 0, NULL, 0, NULL);
}

static int overlap(const oi_vk_access *a, const oi_vk_access *b) {
    return a->buffer == b->buffer && a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
}

/* Before a command with accesses `acc`: a barrier if one of them reads what a command since the
 * last barrier wrote (read after write), or writes what one read or wrote (write after read /
 * write); then the accesses join the pending set. Begins the list if needed. */
static oi_status order(oi_vk_context *ctx, const oi_vk_access *acc, uint32_t n) {
    oi_status st = begin(ctx);
    if (st != OI_OK) return st;
    int conflict = ctx->npending + n > OI_VK_PENDING_ACCESSES;
    for (uint32_t i = 0; i < n && !conflict; ++i)
        for (uint32_t j = 0; j < ctx->npending && !conflict; ++j)
            conflict = (acc[i].write || ctx->pending[j].write) && overlap(&acc[i], &ctx->pending[j]);
    if (conflict && (st = oi_vk_barrier(ctx)) != OI_OK) return st;
    for (uint32_t i = 0; i < n; ++i) ctx->pending[ctx->npending++] = acc[i];
    return OI_OK;
}

oi_status oi_vk_dispatch(oi_vk_context *ctx, const oi_vk_pipeline *p, VkDescriptorSet set, const void *push,
                         uint32_t gx, uint32_t gy, uint32_t gz, const oi_vk_access *access, uint32_t naccess) {
    oi_status st = order(ctx, access, naccess);
    if (st != OI_OK) return st;
    cmd_dispatch c;
    memset(&c, 0, sizeof c);
    c.kind = CMD_DISPATCH;
    c.push_bytes = p->push_bytes;
    c.pipeline = p->pipeline;
    c.layout = p->layout;
    c.set = set;
    c.gx = gx;
    c.gy = gy;
    c.gz = gz;
    if ((st = put(ctx, &c, sizeof c)) != OI_OK || (p->push_bytes && (st = put(ctx, push, p->push_bytes)) != OI_OK))
        return st;
    atomic_fetch_add(&dispatches, 1);
    return OI_OK;
}

static oi_status put_copy(oi_vk_context *ctx, VkBuffer src, VkBuffer dst, const VkBufferCopy *regions, uint32_t n) {
    cmd_copy c;
    memset(&c, 0, sizeof c);
    c.kind = CMD_COPY;
    c.regions = n;
    c.src = src;
    c.dst = dst;
    oi_status st = put(ctx, &c, sizeof c);
    if (st == OI_OK) st = put(ctx, regions, n * sizeof *regions);
    if (st == OI_OK) atomic_fetch_add(&transfers, 1);
    return st;
}

oi_status oi_vk_copy_kernel(oi_vk_context *ctx, const uint32_t *spirv, size_t spirv_bytes) {
    VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 2 * OI_VK_COPY_SETS};
    VkDescriptorPoolCreateInfo dpi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    dpi.maxSets = OI_VK_COPY_SETS;
    dpi.poolSizeCount = 1;
    dpi.pPoolSizes = &ps;
    oi_status st = oi_vk_pipeline_create(ctx, spirv, spirv_bytes, 2, 4, &ctx->copy);
    if (st == OI_OK && vkCreateDescriptorPool(ctx->device, &dpi, NULL, &ctx->copy_pool) != VK_SUCCESS)
        st = OI_ERR_DEVICE;
    if (st == OI_OK && !(ctx->copy_sets = calloc(2 * OI_VK_COPY_SETS, sizeof *ctx->copy_sets)))
        st = OI_ERR_OUT_OF_MEMORY;
    if (st != OI_OK) destroy_copy_kernel(ctx);     /* copies stay transfers */
    return st;
}

/* The copy kernel's descriptor set binding exactly [src_off, +bytes) of src and [dst_off, +bytes)
 * of dst: the one made for this copy before, or a new one; VK_NULL_HANDLE once OI_VK_COPY_SETS
 * are made (the copy is then a transfer). */
static VkDescriptorSet copy_set(oi_vk_context *ctx, VkBuffer src, VkDeviceSize src_off, VkBuffer dst,
                                VkDeviceSize dst_off, VkDeviceSize bytes) {
    const uint64_t key[5] = {(uint64_t)(uintptr_t)src, src_off, (uint64_t)(uintptr_t)dst, dst_off, bytes};
    uint32_t i = (uint32_t)(fnv1a_words((const uint8_t *)key, sizeof key) % (2 * OI_VK_COPY_SETS));
    for (;; i = (i + 1) % (2 * OI_VK_COPY_SETS)) {    /* at most half the slots are taken */
        oi_vk_copy_set *c = &ctx->copy_sets[i];
        if (!c->set) break;
        if (c->src == src && c->src_offset == src_off && c->dst == dst && c->dst_offset == dst_off && c->bytes == bytes)
            return c->set;
    }
    if (ctx->ncopy_sets == OI_VK_COPY_SETS) return VK_NULL_HANDLE;
    oi_vk_copy_set *c = &ctx->copy_sets[i];
    const VkBuffer buffers[2] = {src, dst};
    const VkDeviceSize offsets[2] = {src_off, dst_off}, ranges[2] = {bytes, bytes};
    if (make_set(ctx, ctx->copy_pool, &ctx->copy, buffers, offsets, ranges, &c->set) != OI_OK) {
        c->set = VK_NULL_HANDLE;
        return VK_NULL_HANDLE;
    }
    c->src = src;
    c->src_offset = src_off;
    c->dst = dst;
    c->dst_offset = dst_off;
    c->bytes = bytes;
    ++ctx->ncopy_sets;
    return c->set;
}

oi_status oi_vk_copy(oi_vk_context *ctx, VkBuffer src, VkDeviceSize src_off, VkBuffer dst, VkDeviceSize dst_off,
                     VkDeviceSize bytes) {
    if (bytes == 0) return OI_OK;
    const oi_vk_access acc[2] = {{src, src_off, bytes, 0}, {dst, dst_off, bytes, 1}};
    const VkPhysicalDeviceLimits *lim = &ctx->properties.limits;
    const VkDeviceSize align = lim->minStorageBufferOffsetAlignment;
    VkDescriptorSet set = VK_NULL_HANDLE;
    if (ctx->copy_sets && src != ctx->staging.buffer && dst != ctx->staging.buffer && bytes % 4u == 0 &&
        src_off % align == 0 && dst_off % align == 0 && bytes <= lim->maxStorageBufferRange && bytes / 4u <= UINT32_MAX)
        set = copy_set(ctx, src, src_off, dst, dst_off, bytes);
    oi_status st = order(ctx, acc, 2);
    if (st != OI_OK) return st;
    if (!set) {
        const VkBufferCopy region = {.srcOffset = src_off, .dstOffset = dst_off, .size = bytes};
        return put_copy(ctx, src, dst, &region, 1);
    }
    cmd_dispatch c;
    memset(&c, 0, sizeof c);
    c.kind = CMD_DISPATCH;
    c.push_bytes = 4;
    c.pipeline = ctx->copy.pipeline;
    c.layout = ctx->copy.layout;
    c.set = set;
    const uint32_t words = (uint32_t)(bytes / 4u), groups = (words + 255u) / 256u;
    c.gx = groups < 4096u ? groups : 4096u;          /* the kernel strides over what one pass leaves */
    c.gy = c.gz = 1;
    if ((st = put(ctx, &c, sizeof c)) != OI_OK || (st = put(ctx, &words, 4)) != OI_OK) return st;
    atomic_fetch_add(&transfers, 1);
    atomic_fetch_add(&copy_kernels, 1);
    return OI_OK;
}

static oi_status put_fill(oi_vk_context *ctx, uint32_t kind, VkBuffer dst, VkDeviceSize offset, VkDeviceSize bytes,
                          uint32_t word, const void *data) {
    cmd_fill c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.word = word;
    c.dst = dst;
    c.offset = offset;
    c.bytes = bytes;
    oi_status st = put(ctx, &c, sizeof c);
    if (st == OI_OK && data) st = put(ctx, data, (size_t)bytes);
    if (st == OI_OK) atomic_fetch_add(&transfers, 1);
    return st;
}

oi_status oi_vk_fill(oi_vk_context *ctx, VkBuffer dst, VkDeviceSize offset, VkDeviceSize bytes, uint32_t word) {
    if (bytes == 0) return OI_OK;
    VkDeviceSize size = (bytes + 3u) & ~(VkDeviceSize)3u;
    const oi_vk_access acc = {dst, offset, size, 1};
    oi_status st = order(ctx, &acc, 1);
    if (st != OI_OK) return st;
    return put_fill(ctx, CMD_FILL, dst, offset, size, word, NULL);
}

oi_status oi_vk_update(oi_vk_context *ctx, VkBuffer dst, VkDeviceSize offset, const void *data, VkDeviceSize bytes) {
    if (bytes == 0) return OI_OK;
    if (bytes > 65536u || bytes % 4u || offset % 4u) return OI_ERR_INVALID_ARGUMENT;
    const oi_vk_access acc = {dst, offset, bytes, 1};
    oi_status st = order(ctx, &acc, 1);
    if (st != OI_OK) return st;
    return put_fill(ctx, CMD_UPDATE, dst, offset, bytes, 0, data);
}

oi_status oi_vk_fill_bytes(oi_vk_context *ctx, VkBuffer dst, VkDeviceSize offset, VkDeviceSize bytes,
                           const void *pattern, uint32_t elem) {
    if (bytes == 0) return OI_OK;
    if (elem == 0 || elem > 8 || OI_VK_SCRATCH_BYTES % elem) return OI_ERR_INVALID_ARGUMENT;
    uint8_t word[8];
    for (uint32_t i = 0; i < 8; ++i) word[i] = ((const uint8_t *)pattern)[i % elem];
    /* a pattern that repeats every 4 bytes fills aligned ranges with vkCmdFillBuffer */
    int periodic = elem <= 4 ? (4 % elem == 0) : memcmp(word, word + 4, 4) == 0;
    if (periodic && offset % 4u == 0 && bytes % 4u == 0) {
        uint32_t w;
        memcpy(&w, word, 4);
        return oi_vk_fill(ctx, dst, offset, bytes, w);
    }
    static uint8_t block[OI_VK_SCRATCH_BYTES];
    VkDeviceSize span = bytes < OI_VK_SCRATCH_BYTES ? (bytes + 7u) & ~(VkDeviceSize)7u : OI_VK_SCRATCH_BYTES;
    for (VkDeviceSize i = 0; i < span; ++i) block[i] = word[i % elem];
    oi_status st = oi_vk_update(ctx, ctx->scratch.buffer, 0, block, span);
    if (st != OI_OK) return st;
    const oi_vk_access acc[2] = {{ctx->scratch.buffer, 0, span, 0}, {dst, offset, bytes, 1}};
    if ((st = order(ctx, acc, 2)) != OI_OK) return st;
    VkBufferCopy regions[64];
    uint32_t n = 0;
    for (VkDeviceSize done = 0; done < bytes;) {
        VkDeviceSize len = bytes - done < OI_VK_SCRATCH_BYTES ? bytes - done : OI_VK_SCRATCH_BYTES;
        regions[n].srcOffset = 0;
        regions[n].dstOffset = offset + done;
        regions[n].size = len;
        done += len;
        if (++n == 64 || done == bytes) {
            if ((st = put_copy(ctx, ctx->scratch.buffer, dst, regions, n)) != OI_OK) return st;
            n = 0;
        }
    }
    return OI_OK;
}

/* Records list[0, bytes) into cb (begun and ended here). */
/* Bytes of the list entry at `at` (its struct and the data that follows it). */
static size_t entry_bytes(const uint8_t *list, size_t at) {
    uint32_t kind;
    memcpy(&kind, list + at, sizeof kind);
    if (kind == CMD_BARRIER) return 8;
    if (kind == CMD_DISPATCH) {
        cmd_dispatch c;
        memcpy(&c, list + at, sizeof c);
        return sizeof c + ((c.push_bytes + 7u) & ~7u);
    }
    if (kind == CMD_COPY) {
        cmd_copy c;
        memcpy(&c, list + at, sizeof c);
        return sizeof c + c.regions * sizeof(VkBufferCopy);
    }
    cmd_fill c;
    memcpy(&c, list + at, sizeof c);
    return sizeof c + (kind == CMD_UPDATE ? ((size_t)c.bytes + 7u) & ~(size_t)7u : 0u);
}

/* Records list[0, bytes) into cb (begun and ended here). With a profile pool (OI_VK_PROFILE), a
 * timestamp at the start, one before each barrier while stages are left (see
 * OI_VK_PROFILE_STAGES) and one at the end. */
static oi_status record(VkCommandBuffer cb, const uint8_t *list, size_t bytes, VkCommandBufferUsageFlags usage,
                        VkQueryPool profile) {
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = usage;
    if (vkBeginCommandBuffer(cb, &bi) != VK_SUCCESS) return OI_ERR_DEVICE;
    uint32_t stamp = 0;
    if (profile) {
        vkCmdResetQueryPool(cb, profile, 0, OI_VK_PROFILE_STAGES + 1);
        vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, profile, stamp++);
    }
    for (size_t at = 0; at < bytes; at += entry_bytes(list, at)) {
        uint32_t kind;
        memcpy(&kind, list + at, sizeof kind);
        if (kind == CMD_BARRIER) {
            if (profile && stamp < OI_VK_PROFILE_STAGES)
                vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, profile, stamp++);
            record_barrier(cb);
        } else if (kind == CMD_DISPATCH) {
            cmd_dispatch c;
            memcpy(&c, list + at, sizeof c);
            vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, c.pipeline);
            vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, c.layout, 0, 1, &c.set, 0, NULL);
            if (c.push_bytes)
                vkCmdPushConstants(cb, c.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, c.push_bytes, list + at + sizeof c);
            vkCmdDispatch(cb, c.gx, c.gy, c.gz);
        } else if (kind == CMD_COPY) {
            cmd_copy c;
            VkBufferCopy regions[64];
            memcpy(&c, list + at, sizeof c);
            memcpy(regions, list + at + sizeof c, c.regions * sizeof *regions);
            vkCmdCopyBuffer(cb, c.src, c.dst, c.regions, regions);
        } else {
            cmd_fill c;
            memcpy(&c, list + at, sizeof c);
            if (kind == CMD_FILL)
                vkCmdFillBuffer(cb, c.dst, c.offset, c.bytes, c.word);
            else
                vkCmdUpdateBuffer(cb, c.dst, c.offset, c.bytes, list + at + sizeof c);
        }
    }
    if (profile) vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, profile, stamp);
    return vkEndCommandBuffer(cb) == VK_SUCCESS ? OI_OK : OI_ERR_DEVICE;
}

/* The last profiled submission's stages (OI_VK_PROFILE), process-wide like the counters. */
static struct {
    pthread_mutex_t lock;
    uint32_t stages;
    uint64_t ns[OI_VK_PROFILE_STAGES];
    uint32_t kernels[OI_VK_PROFILE_STAGES], transfers[OI_VK_PROFILE_STAGES];
} last_profile = {.lock = PTHREAD_MUTEX_INITIALIZER};

uint32_t oi_vk_stage_profile(uint64_t *ns, uint32_t *kernels, uint32_t *transfers, uint32_t max) {
    pthread_mutex_lock(&last_profile.lock);
    const uint32_t n = last_profile.stages;
    for (uint32_t i = 0; i < n && i < max; ++i) {
        if (ns) ns[i] = last_profile.ns[i];
        if (kernels) kernels[i] = last_profile.kernels[i];
        if (transfers) transfers[i] = last_profile.transfers[i];
    }
    pthread_mutex_unlock(&last_profile.lock);
    return n;
}

/* After a profiled submission completed: its timestamps, and what each stage of ctx->list held
 * (the copy kernel's dispatches count as transfers), into last_profile. */
static oi_status keep_profile(oi_vk_context *ctx) {
    uint32_t kernels[OI_VK_PROFILE_STAGES] = {0}, transfers[OI_VK_PROFILE_STAGES] = {0};
    uint32_t stage = 0;                       /* mirrors record(): a barrier starts a stage while some are left */
    for (size_t at = 0; at < ctx->list_bytes; at += entry_bytes(ctx->list, at)) {
        uint32_t kind;
        memcpy(&kind, ctx->list + at, sizeof kind);
        if (kind == CMD_BARRIER) {
            if (stage + 1 < OI_VK_PROFILE_STAGES) ++stage;
        } else if (kind == CMD_DISPATCH) {
            cmd_dispatch c;
            memcpy(&c, ctx->list + at, sizeof c);
            ++*(c.pipeline == ctx->copy.pipeline ? &transfers[stage] : &kernels[stage]);
        } else {
            ++transfers[stage];
        }
    }
    uint64_t stamps[OI_VK_PROFILE_STAGES + 1];
    if (vkGetQueryPoolResults(ctx->device, ctx->profile_pool, 0, stage + 2, sizeof stamps, stamps, sizeof *stamps,
                              VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) != VK_SUCCESS)
        return OI_ERR_DEVICE;
    pthread_mutex_lock(&last_profile.lock);
    last_profile.stages = stage + 1;
    for (uint32_t i = 0; i <= stage; ++i) {
        const uint64_t ticks = (stamps[i + 1] - stamps[i]) & ctx->profile_mask;
        last_profile.ns[i] = (uint64_t)((double)ticks * ctx->properties.limits.timestampPeriod + 0.5);
        last_profile.kernels[i] = kernels[i];
        last_profile.transfers[i] = transfers[i];
    }
    pthread_mutex_unlock(&last_profile.lock);
    return OI_OK;
}

/* The command buffer holding ctx->list: a kept one recorded from an identical list, or the list
 * recorded now into the least recently used slot (OI_VK_REPLAY=0: into ctx->commands). */
static oi_status commands_for_list(oi_vk_context *ctx, VkCommandBuffer *out) {
    ++ctx->submitted;
    if (ctx->replay_off) {
        *out = ctx->commands;
        return record(ctx->commands, ctx->list, ctx->list_bytes, VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
                      ctx->profile_pool);
    }
    const uint64_t h = fnv1a_words(ctx->list, ctx->list_bytes);
    oi_vk_replay_slot *lru = &ctx->replay[0];
    for (uint32_t i = 0; i < OI_VK_REPLAY_SLOTS; ++i) {
        oi_vk_replay_slot *slot = &ctx->replay[i];
        if (slot->commands && slot->hash == h && slot->bytes == ctx->list_bytes &&
            memcmp(slot->list, ctx->list, ctx->list_bytes) == 0) {
            slot->used = ctx->submitted;
            atomic_fetch_add(&replays, 1);
            *out = slot->commands;
            return OI_OK;
        }
        if (slot->used < lru->used) lru = slot;
    }
    if (!lru->commands) {
        VkCommandBufferAllocateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
        ci.commandPool = ctx->command_pool;
        ci.commandBufferCount = 1;
        ci.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
        if (vkAllocateCommandBuffers(ctx->device, &ci, &lru->commands) != VK_SUCCESS) {
            lru->commands = VK_NULL_HANDLE;
            return OI_ERR_DEVICE;
        }
    } else if (vkResetCommandBuffer(lru->commands, 0) != VK_SUCCESS) {
        return OI_ERR_DEVICE;
    }
    uint8_t *copy = realloc(lru->list, ctx->list_bytes ? ctx->list_bytes : 1u);
    if (!copy) return OI_ERR_OUT_OF_MEMORY;
    lru->list = copy;
    memcpy(lru->list, ctx->list, ctx->list_bytes);
    lru->bytes = ctx->list_bytes;
    lru->hash = h;
    lru->used = ctx->submitted;
    *out = lru->commands;
    oi_status st = record(lru->commands, ctx->list, ctx->list_bytes, 0, ctx->profile_pool);
    if (st != OI_OK) lru->bytes = (size_t)-1;    /* never matched again */
    return st;
}

oi_status oi_vk_flush(oi_vk_context *ctx) {
    if (!ctx->recording) return OI_OK;
    ctx->recording = 0;
    VkCommandBuffer cb;
    oi_status st = commands_for_list(ctx, &cb);
    if (st != OI_OK) return st;
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cb;
    if (vkQueueSubmit(ctx->queue, 1, &si, ctx->fence) != VK_SUCCESS) return OI_ERR_DEVICE;
    atomic_fetch_add(&submissions, 1);
    const uint64_t t0 = now_ns();
    /* Poll the fence before sleeping in vkWaitForFences: waking a sleeping thread cost a decode
     * step ~37 us on an H100 (2258 -> 2490 tokens/s polling; docs/vulkan.md). Up to 2 ms on a
     * GPU (longer submissions sleep after that, as before); never on a CPU device (lavapipe),
     * whose own threads need the cores. OI_VK_SPIN_US sets the limit (0: always sleep). */
    static atomic_long spin_env = -2;            /* -2: not read yet, -1: unset */
    if (atomic_load(&spin_env) == -2) {
        const char *env = getenv("OI_VK_SPIN_US");
        atomic_store(&spin_env, env ? atol(env) : -1);
    }
    const long spin_us = atomic_load(&spin_env) >= 0 ? atomic_load(&spin_env)
                         : ctx->properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? 0 : 2000;
    while (spin_us > 0 && vkGetFenceStatus(ctx->device, ctx->fence) == VK_NOT_READY &&
           now_ns() - t0 < (uint64_t)spin_us * 1000u) {
    }
    if (vkWaitForFences(ctx->device, 1, &ctx->fence, VK_TRUE, UINT64_MAX) != VK_SUCCESS) return OI_ERR_DEVICE;
    atomic_fetch_add(&wait_ns, now_ns() - t0);
    vkResetFences(ctx->device, 1, &ctx->fence);
    if (cb == ctx->commands) vkResetCommandBuffer(ctx->commands, 0);
    return ctx->profile_pool ? keep_profile(ctx) : OI_OK;
}

oi_status oi_vk_upload(oi_vk_context *ctx, VkBuffer dst, VkDeviceSize offset, const void *src, VkDeviceSize bytes) {
    const uint8_t *p = src;
    while (bytes) {
        VkDeviceSize n = bytes < ctx->transfer_bytes ? bytes : ctx->transfer_bytes;
        oi_status st = oi_vk_flush(ctx);   /* the staging buffer may still be in use */
        if (st != OI_OK) return st;
        memcpy((uint8_t *)ctx->staging_map + ctx->transfer_offset, p, (size_t)n);
        if ((st = oi_vk_copy(ctx, ctx->staging.buffer, ctx->transfer_offset, dst, offset, n)) != OI_OK ||
            (st = oi_vk_flush(ctx)) != OI_OK)
            return st;
        p += n;
        offset += n;
        bytes -= n;
    }
    return OI_OK;
}

oi_status oi_vk_download(oi_vk_context *ctx, VkBuffer src, VkDeviceSize offset, void *dst, VkDeviceSize bytes) {
    uint8_t *p = dst;
    while (bytes) {
        VkDeviceSize n = bytes < ctx->transfer_bytes ? bytes : ctx->transfer_bytes;
        oi_status st = oi_vk_copy(ctx, src, offset, ctx->staging.buffer, ctx->transfer_offset, n);
        if (st != OI_OK || (st = oi_vk_flush(ctx)) != OI_OK) return st;
        memcpy(p, (const uint8_t *)ctx->staging_map + ctx->transfer_offset, (size_t)n);
        p += n;
        offset += n;
        bytes -= n;
    }
    return OI_OK;
}
