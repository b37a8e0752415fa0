/*
 * tflm_harness.cc — the firmware's main for the TFLM + CMSIS-NN peer (docs/peers.md): one MLPerf
 * Tiny model, embedded as a C array (build.sh: xxd -i into OI_MODEL_DATA), run N times by TFLM's
 * MicroInterpreter with exactly the model's operators (a MicroMutableOpResolver, TFLM's default
 * registrations: with OPTIMIZED_KERNEL_DIR=cmsis_nn those are CMSIS-NN's kernels) in a static
 * tensor arena. N is the command line's number (startup.c: semihosting), so one ELF serves the
 * runs with 1 and with 3 inferences whose instruction counts tools/bench/tflm_peer.py subtracts.
 *
 * Each inference copies a fixed pseudo-random int8 pattern into the input tensor (an LCG, which
 * tflm_peer.py reproduces to run the LiteRT reference kernels on the same input) and invokes the
 * interpreter: the input is copied every time because TFLM's memory planner may reuse the input
 * tensor's bytes for later tensors. After the runs it prints, over semihosting, the arena bytes in
 * use, the stack's high-water mark and the output tensor's bytes in hex, and returns 0 (or the
 * number of the step that failed).
 */
#include <stdint.h>
#include <string.h>

#include <new>

#include "tensorflow/lite/micro/micro_interpreter.h"
#include "tensorflow/lite/micro/micro_mutable_op_resolver.h"
#include "tensorflow/lite/schema/schema_generated.h"

#include OI_MODEL_DATA      // alignas(16) const unsigned char oi_model_data[]; const unsigned int oi_model_data_len

extern "C" {
uint32_t oi_fw_inferences(void);
uint32_t oi_fw_stack_used(void);
void oi_fw_print(const char *text);
}

namespace {

// The operators of each model (their builtin codes in the .tflite), no others.
#if defined(OI_MODEL_KWS_REF_MODEL) || defined(OI_MODEL_VWW_96_INT8)
using Resolver = tflite::MicroMutableOpResolver<6>;
TfLiteStatus add_ops(Resolver &r) {
    if (r.AddAveragePool2D() != kTfLiteOk || r.AddConv2D() != kTfLiteOk || r.AddDepthwiseConv2D() != kTfLiteOk ||
        r.AddFullyConnected() != kTfLiteOk || r.AddReshape() != kTfLiteOk)
        return kTfLiteError;
    return r.AddSoftmax();
}
#elif defined(OI_MODEL_PRETRAINEDRESNET_QUANT)
using Resolver = tflite::MicroMutableOpResolver<6>;
TfLiteStatus add_ops(Resolver &r) {
    if (r.AddAdd() != kTfLiteOk || r.AddAveragePool2D() != kTfLiteOk || r.AddConv2D() != kTfLiteOk ||
        r.AddFullyConnected() != kTfLiteOk || r.AddReshape() != kTfLiteOk)
        return kTfLiteError;
    return r.AddSoftmax();
}
#elif defined(OI_MODEL_AD01_INT8)
using Resolver = tflite::MicroMutableOpResolver<1>;
TfLiteStatus add_ops(Resolver &r) { return r.AddFullyConnected(); }
#else
#error "define OI_MODEL_<NAME> (build.sh)"
#endif

// Larger than any of the four models needs (vww_96_int8: about 100 KiB); the bytes in use are
// reported, not this size. In .oi_bulk (harness.ld), apart from .bss.
constexpr size_t kArenaBytes = 512 * 1024;
alignas(16) __attribute__((section(".oi_bulk"))) uint8_t arena[kArenaBytes];
constexpr size_t kInputMax = 96 * 96 * 3;
__attribute__((section(".oi_bulk"))) int8_t pattern[kInputMax];

// The input pattern: the top 6 bits of a 32-bit LCG (Numerical Recipes' constants) from a fixed
// seed, as a signed number in [-32, 31]. (Noise over all of int8's range drives the softmax of
// kws_ref_model and pretrainedResnet_quant to one 127 and the rest -128, so their outputs would
// check little more than the arg max; a quarter of the range leaves several classes unsaturated.)
void fill_pattern(int8_t *dst, size_t n) {
    uint32_t state = 0x0123abcdu;
    for (size_t i = 0; i < n; ++i) {
        state = state * 1664525u + 1013904223u;
        dst[i] = (int8_t)((int32_t)state >> 26);
    }
}

void print_line(const char *key, uint32_t value) {
    char text[48];
    char digits[12];
    int n = 0;
    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value);
    size_t k = strlen(key);
    memcpy(text, key, k);
    text[k++] = ' ';
    while (n) text[k++] = digits[--n];
    text[k++] = '\n';
    text[k] = '\0';
    oi_fw_print(text);
}

void print_hex(const char *key, const uint8_t *bytes, size_t n) {
    static const char hex[] = "0123456789abcdef";
    char text[80];
    oi_fw_print(key);
    while (n) {
        size_t k = 0;
        for (; n && k < 64; --n, ++bytes) {
            text[k++] = hex[*bytes >> 4];
            text[k++] = hex[*bytes & 15];
        }
        text[k] = '\0';
        oi_fw_print(text);
    }
    oi_fw_print("\n");
}

}  // namespace

int main(void) {
    const uint32_t inferences = oi_fw_inferences();
    const tflite::Model *model = tflite::GetModel(oi_model_data);
    if (model->version() != TFLITE_SCHEMA_VERSION) return 1;
    // the resolver and the interpreter live in .bss for the firmware's life: built in place, never
    // destroyed (a static object would register its destructor with __cxa_atexit)
    alignas(Resolver) static uint8_t resolver_bytes[sizeof(Resolver)];
    alignas(tflite::MicroInterpreter) static uint8_t interpreter_bytes[sizeof(tflite::MicroInterpreter)];
    Resolver &resolver = *new (resolver_bytes) Resolver();
    if (add_ops(resolver) != kTfLiteOk) return 2;
    tflite::MicroInterpreter &interpreter =
        *new (interpreter_bytes) tflite::MicroInterpreter(model, resolver, arena, kArenaBytes);
    if (interpreter.AllocateTensors() != kTfLiteOk) return 3;
    TfLiteTensor *input = interpreter.input(0);
    if (input->type != kTfLiteInt8 || input->bytes > kInputMax) return 4;
    fill_pattern(pattern, input->bytes);
    for (uint32_t i = 0; i < inferences; ++i) {
        memcpy(input->data.int8, pattern, input->bytes);
        if (interpreter.Invoke() != kTfLiteOk) return 5;
    }
    const TfLiteTensor *output = interpreter.output(0);
    print_line("model_bytes", oi_model_data_len);
    print_line("inferences", inferences);
    print_line("arena_used_bytes", (uint32_t)interpreter.arena_used_bytes());
    print_line("stack_used_bytes", oi_fw_stack_used());
    print_hex("output ", output->data.uint8, output->bytes);
    return 0;
}
