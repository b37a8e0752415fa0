/*
 * oi_hal_vulkan.h — the Vulkan part of the thin HAL: device selection, buffers, compute pipelines
 * from embedded SPIR-V, descriptor sets, command recording with barriers, submit/wait, copies.
 *
 * Generated Vulkan programs keep all tensors in device-local buffers (arena, persistent state,
 * weights); the host schedule records one command stream per step, flushing it only when the
 * host needs a value the GPU computed (a branch condition, a loop bound, an index) or the caller
 * fetches a variable. Uploads and readbacks go through one host-visible staging buffer: its first
 * `staging_reserved` bytes belong to the caller (generated code keeps dynamic inputs and a
 * status word there), the rest is the transfer area oi_vk_upload / oi_vk_download cycle through.
 *
 * Ordering: every recorded command says which byte ranges of which buffers it reads and writes
 * (a dispatch through `access`, one entry per binding; copies, fills and updates from their
 * arguments). A pipeline barrier is recorded before a command only when it reads a range written
 * since the last barrier, or writes one read or written since then; independent commands (the
 * Q, K and V projections of one token) run without one. The recorded order is the host
 * schedule's order either way.
 *
 * Replay: the commands of a submission are first written to a host-side list; at submission the
 * list is compared with the last OI_VK_REPLAY_SLOTS ones submitted, and a command buffer recorded
 * from an identical list is submitted again instead of recording the list anew (a step whose
 * commands do not change, or recur: a decode step at a cache position seen before, is recorded
 * once). A list holds every value the commands carry (pipelines, descriptor sets, push
 * constants, workgroup counts, buffer ranges, update data), and descriptor sets are never
 * rewritten after create(), so an identical list means an identical command buffer.
 * OI_VK_REPLAY=0 records every submission afresh.
 *
 * Environment: OI_VK_DEVICE picks the physical device (an index, or a substring of its name);
 * OI_VK_PROFILE=1 times every stage of every submission (oi_vk_stage_profile);
 * OI_VK_SPIN_US=N polls a submission's fence for up to N microseconds before sleeping until it
 * signals (default: 2000 on a GPU, 0 on a CPU device; waking a sleeping thread costs ~37 us);
 * OI_VK_VALIDATION=1 enables the Khronos validation layer, with its synchronization validation
 * (which reports a missing barrier as a hazard), and a messenger that counts (and prints) every
 * warning and error, see oi_vk_validation_messages().
 *
 * Versioned with OI_HAL_ABI_VERSION (oi_hal.h).
 */
#ifndef OI_HAL_VULKAN_H
#define OI_HAL_VULKAN_H

#include <stddef.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include "oi_hal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A device-local buffer region: what one tensor (or a whole memory region) occupies. */
typedef struct oi_vk_buffer {
    VkBuffer buffer;
    VkDeviceMemory memory;
    VkDeviceSize size;
} oi_vk_buffer;

typedef struct oi_vk_pipeline {
    VkShaderModule module;
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout layout;
    VkPipeline pipeline;
    uint32_t bindings;        /* storage buffers the shader takes (operands in order) */
    uint32_t push_bytes;      /* push-constant block size (run-time attributes)         */
} oi_vk_pipeline;

/* Optional capabilities of the selected device (oi_vk_context.features). */
#define OI_VK_FEATURE_INT64 0x1u        /* shaderInt64                                   */
#define OI_VK_FEATURE_FP64 0x2u         /* shaderFloat64                                 */
#define OI_VK_FEATURE_INT16 0x4u        /* shaderInt16                                   */
#define OI_VK_FEATURE_STORAGE8 0x8u     /* storageBuffer8BitAccess                       */
#define OI_VK_FEATURE_STORAGE16 0x10u   /* storageBuffer16BitAccess                      */
#define OI_VK_FEATURE_FLOAT16 0x20u     /* shaderFloat16                                 */
#define OI_VK_FEATURE_INT8 0x40u        /* shaderInt8                                    */
#define OI_VK_FEATURE_SUBGROUP 0x80u    /* subgroup arithmetic in compute shaders        */
#define OI_VK_FEATURE_DENORM32 0x100u   /* shaderDenormPreserveFloat32 (float controls)  */
#define OI_VK_FEATURE_COOPMAT 0x200u    /* VK_NV_cooperative_matrix with 16x16x16 f16 x f16 -> f32
                                           subgroup matrices, and vulkanMemoryModel          */

/* A byte range one recorded command reads or writes (`write`: nonzero when it writes). */
typedef struct oi_vk_access {
    VkBuffer buffer;
    VkDeviceSize offset;
    VkDeviceSize bytes;
    uint32_t write;
} oi_vk_access;

/* Accesses remembered since the last barrier; more than this records a barrier. */
#define OI_VK_PENDING_ACCESSES 64u
/* Recorded command buffers kept for replay (see "Replay" above), the least recently used replaced. */
#define OI_VK_REPLAY_SLOTS 128u

/* Copies the copy kernel (oi_vk_copy_kernel) runs: at most this many distinct ones (source,
 * offset, destination, offset, bytes) get a descriptor set; later new ones are transfers. A
 * decode step of the bench decoder makes ~1,050 over a 64-token cache (an append per layer,
 * table and position). */
#define OI_VK_COPY_SETS 4096u

/* A descriptor set of the copy kernel: the source and destination ranges of one copy. */
typedef struct oi_vk_copy_set {
    VkBuffer src, dst;
    VkDeviceSize src_offset, dst_offset, bytes;
    VkDescriptorSet set;
} oi_vk_copy_set;

/* Stages a profiled submission (OI_VK_PROFILE=1) times one by one; the rest are timed as one. */
#define OI_VK_PROFILE_STAGES 1023u

/* A command buffer recorded from a command list, kept for replay. */
typedef struct oi_vk_replay_slot {
    uint64_t hash;            /* of the list                                             */
    uint8_t *list;            /* a copy of the list (compared whole before a replay)     */
    size_t bytes;
    VkCommandBuffer commands;
    uint64_t used;            /* submission count when last submitted (least recently used goes) */
} oi_vk_replay_slot;

/* A short description of the first feature bit set in `missing` ("shaderInt64", ...). */
const char *oi_vk_feature_name(uint32_t missing);

typedef struct oi_vk_context {
    VkInstance instance;      /* the process's, shared by every context (oi_vk_create) */
    VkPhysicalDevice physical;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    VkCommandPool command_pool;
    VkCommandBuffer commands;
    VkFence fence;
    VkDescriptorPool descriptor_pool;
    oi_vk_buffer staging;     /* host-visible, persistently mapped                       */
    void *staging_map;
    VkDeviceSize transfer_offset;  /* start of the transfer area in the staging buffer   */
    VkDeviceSize transfer_bytes;
    oi_vk_buffer scratch;     /* device-local pattern source of oi_vk_fill_bytes         */
    /* the copy kernel (oi_vk_copy_kernel), the pool its sets come from, and a hash table of
     * the sets made so far (2 x OI_VK_COPY_SETS slots, open addressing) */
    oi_vk_pipeline copy;
    VkDescriptorPool copy_pool;
    oi_vk_copy_set *copy_sets;
    uint32_t ncopy_sets;
    int recording;            /* the list holds work not yet submitted                   */
    /* the commands since the last submission, serialised (see "Replay" above) */
    uint8_t *list;
    size_t list_bytes, list_capacity;
    oi_vk_replay_slot replay[OI_VK_REPLAY_SLOTS];
    int replay_off;           /* OI_VK_REPLAY=0                                          */
    VkQueryPool profile_pool; /* OI_VK_PROFILE=1: the timestamps of oi_vk_stage_profile    */
    uint64_t profile_mask;    /* the queue's valid timestamp bits                         */
    uint64_t submitted;       /* submissions so far (the slots' clock)                   */
    /* what the commands recorded since the last barrier access (see "Ordering" above) */
    oi_vk_access pending[OI_VK_PENDING_ACCESSES];
    uint32_t npending;
    uint32_t features;        /* OI_VK_FEATURE_* the device has (and that were enabled)  */
    uint32_t subgroup_size;
    VkPhysicalDeviceProperties properties;
    char device_name[256];
    char vendor_name[16];
} oi_vk_context;

/* Creates the device, on the process's VkInstance (one per validation mode, created by the first
 * call and kept to the process's end: a driver may limit how many instances a process creates).
 * `vendor`/`name` (may be NULL or "") prefer a device whose vendor name / device name contains
 * them (case-insensitive); OI_VK_DEVICE (an index into the physical devices, or a substring of a
 * device name) overrides. The staging buffer holds `staging_reserved` caller bytes followed by a
 * `transfer_bytes` transfer area (uploads and downloads larger than it are split). The
 * descriptor pool holds `max_sets` sets of `max_descriptors` storage-buffer descriptors in all. */
oi_status oi_vk_create(const char *vendor, const char *name, VkDeviceSize staging_reserved,
                       VkDeviceSize transfer_bytes, uint32_t max_sets, uint32_t max_descriptors,
                       oi_vk_context *ctx);
void oi_vk_destroy(oi_vk_context *ctx);

oi_status oi_vk_buffer_create(oi_vk_context *ctx, VkDeviceSize bytes, oi_vk_buffer *out);
void oi_vk_buffer_destroy(oi_vk_context *ctx, oi_vk_buffer *buffer);

/* Pipelines from embedded SPIR-V (words). Each takes `bindings` storage buffers at set 0,
 * bindings 0..n-1, and `push_bytes` of push constants. */
oi_status oi_vk_pipeline_create(oi_vk_context *ctx, const uint32_t *spirv, size_t spirv_bytes, uint32_t bindings,
                                uint32_t push_bytes, oi_vk_pipeline *out);
void oi_vk_pipeline_destroy(oi_vk_context *ctx, oi_vk_pipeline *pipeline);

/* A descriptor set for `pipeline` binding each operand to (buffer, offset, range). */
oi_status oi_vk_descriptor_set(oi_vk_context *ctx, const oi_vk_pipeline *pipeline, const VkBuffer *buffers,
                               const VkDeviceSize *offsets, const VkDeviceSize *ranges, VkDescriptorSet *out);

/* Gives the context a copy kernel: `spirv` is templates/vulkan/glsl/oi_copy.comp compiled (generated
 * programs build it with their shaders). From then on oi_vk_copy runs a copy between device-local
 * buffers whose offsets are multiples of minStorageBufferOffsetAlignment and whose size is a
 * multiple of 4 as a dispatch of this kernel instead of vkCmdCopyBuffer: on an H200 (driver
 * 580) a kernel that waited for a transfer started ~4 us later than one that waited for a kernel,
 * and a decode step's cache appends and reads put two such waits in every layer (the step's
 * device time 522 -> 465 us). Each distinct copy gets a descriptor set binding exactly its two
 * ranges (dynamic offsets would serve all copies of a size with one set, but the validation
 * layer's synchronization checks then report hazards that are not there). Copies from or to
 * the staging buffer stay transfers (host memory). The counters count such a copy as a transfer. */
oi_status oi_vk_copy_kernel(oi_vk_context *ctx, const uint32_t *spirv, size_t spirv_bytes);

/* Recording. Every call appends to the current command buffer (beginning one when needed),
 * after a barrier where it depends on what was recorded before (see "Ordering" above). A
 * dispatch's `access` has one entry per binding of `set`, in binding order. */
oi_status oi_vk_dispatch(oi_vk_context *ctx, const oi_vk_pipeline *pipeline, VkDescriptorSet set,
                         const void *push, uint32_t groups_x, uint32_t groups_y, uint32_t groups_z,
                         const oi_vk_access *access, uint32_t naccess);
oi_status oi_vk_copy(oi_vk_context *ctx, VkBuffer src, VkDeviceSize src_off, VkBuffer dst, VkDeviceSize dst_off,
                     VkDeviceSize bytes);
oi_status oi_vk_fill(oi_vk_context *ctx, VkBuffer dst, VkDeviceSize offset, VkDeviceSize bytes, uint32_t word);
/* Fills `bytes` at any offset with copies of the `elem`-byte `pattern` (1 <= elem <= 8; elem must
 * divide 65536): vkCmdFillBuffer where offset, size and pattern allow it, otherwise copies from
 * the scratch buffer (written with vkCmdUpdateBuffer), all in stream order. */
oi_status oi_vk_fill_bytes(oi_vk_context *ctx, VkBuffer dst, VkDeviceSize offset, VkDeviceSize bytes,
                           const void *pattern, uint32_t elem);
/* Writes `bytes` (<= 65536, a multiple of 4) of host data into a buffer, in stream order. */
oi_status oi_vk_update(oi_vk_context *ctx, VkBuffer dst, VkDeviceSize offset, const void *data, VkDeviceSize bytes);
/* Orders everything recorded so far before everything recorded next (compute and transfer). */
oi_status oi_vk_barrier(oi_vk_context *ctx);

/* Submits what was recorded and waits for it. */
oi_status oi_vk_flush(oi_vk_context *ctx);

/* Host <-> device through the staging buffer (each flushes). */
oi_status oi_vk_upload(oi_vk_context *ctx, VkBuffer dst, VkDeviceSize offset, const void *src, VkDeviceSize bytes);
oi_status oi_vk_download(oi_vk_context *ctx, VkBuffer src, VkDeviceSize offset, void *dst, VkDeviceSize bytes);

/* Validation messages seen since the process started (OI_VK_VALIDATION=1); 0 without the layer. */
uint64_t oi_vk_validation_messages(void);
/* Command buffers submitted since the process started (how often the host waited for the device). */
uint64_t oi_vk_submissions(void);
/* Commands recorded since the process started, all contexts: what a step costs the device beyond
 * its bytes and FLOPs (tools/bench/vulkan_bench.py reports them per token). A dispatch is a kernel
 * launch; a transfer a copy, fill or update command; a barrier an execution and memory dependency
 * (oi_vk_barrier: recorded only where a command touches what one since the last barrier wrote),
 * after which the device drains what ran before it, the cost a chain of small kernels pays. */
uint64_t oi_vk_dispatches(void);
uint64_t oi_vk_transfers(void);
uint64_t oi_vk_barriers(void);
/* Nanoseconds the host spent waiting for submitted work since the process started: of a step's
 * wall time, what the device took after the host had recorded and submitted everything; the
 * rest is the host recording commands. */
uint64_t oi_vk_wait_ns(void);
/* Submissions that replayed a command buffer recorded before (see "Replay" above). */
uint64_t oi_vk_replays(void);
/* Transfers that ran as the copy kernel (oi_vk_copy_kernel), counted in oi_vk_transfers too. */
uint64_t oi_vk_copy_kernels(void);
/* Where a submission's device time goes (OI_VK_PROFILE=1, read at oi_vk_create: every command
 * buffer then writes a GPU timestamp at its start, before each barrier and at its end; without
 * it nothing is timed). A stage is the commands between two barriers: they may overlap, and a
 * stage ends when all of them have. Returns the number of stages of the last profiled submission
 * of the process (0: none yet) and fills, for the first `max`, the stage's device nanoseconds
 * and its kernels and transfers (copies that ran as the copy kernel count as transfers); any of
 * the arrays may be NULL. The timestamps cost a little (an H200 decode step: ~4% more device
 * time); past OI_VK_PROFILE_STAGES stages, the last one holds the rest. */
uint32_t oi_vk_stage_profile(uint64_t *ns, uint32_t *kernels, uint32_t *transfers, uint32_t max);

#ifdef __cplusplus
}
#endif
#endif /* OI_HAL_VULKAN_H */
