/*
 * startup.c — reset and host I/O of the TFLM peer's firmware (tools/bench/tflm/build.sh), the
 * equivalent of templates/c/firmware_startup.c.j2 for this harness (harness.ld lays it out).
 *
 * Reset: copy .data from its load address, zero .bss, give the FPU (and Helium, which shares its
 * registers) to the program (CPACR: CP10 and CP11 full access), paint the stack below the current
 * stack pointer with a pattern, run the C++ constructors, then main(), and end the emulation with
 * its return value. oi_fw_stack_used() scans the paint from the bottom after the inferences: the
 * first word not the pattern is the deepest the stack went (the high-water mark). A fault ends the
 * emulation with status 99; a call for heap memory (_sbrk: nothing in TFLM should allocate) with 98.
 *
 * Host I/O is Arm semihosting (BKPT 0xAB, the operation in r0, its argument block in r1), which QEMU
 * serves with -semihosting-config enable=on,target=native: the command line (-append) gives the
 * number of inferences, and the harness prints its report with SYS_WRITE0 (QEMU's stdout).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

extern uint32_t __oi_stack_top[], __oi_stack_limit[], __oi_data_load[], __oi_data_start[], __oi_data_end[],
    __oi_bss_start[], __oi_bss_end[];
extern void (*__oi_init_array_start[])(void), (*__oi_init_array_end[])(void);
int main(void);

enum { SYS_WRITE0 = 0x04, SYS_GET_CMDLINE = 0x15, SYS_EXIT_EXTENDED = 0x20 };
#define STACK_PAINT 0xC5AC5AC5u

static int32_t semihost(int32_t op, void *args) {
    register int32_t r0 __asm__("r0") = op;
    register void *r1 __asm__("r1") = args;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

/* Ends the emulation with exit status `code` (SYS_EXIT_EXTENDED: plain SYS_EXIT takes a reason only). */
_Noreturn void oi_fw_exit(int code) {
    uint32_t args[2] = {0x20026u, (uint32_t)code};     /* ADP_Stopped_ApplicationExit, its code */
    for (;;) semihost(SYS_EXIT_EXTENDED, args);
}

void oi_fw_print(const char *text) { semihost(SYS_WRITE0, (void *)text); }

/* The number the command line's second word spells (the first is the firmware's name), or 1. */
uint32_t oi_fw_inferences(void) {
    static char cmdline[256];
    uint32_t args[2] = {(uint32_t)(uintptr_t)cmdline, sizeof cmdline - 1};
    if (semihost(SYS_GET_CMDLINE, args) != 0) return 1;
    const char *c = cmdline;
    while (*c && *c != ' ') ++c;
    while (*c == ' ') ++c;
    uint32_t n = 0;
    for (; *c >= '0' && *c <= '9'; ++c) n = n * 10 + (uint32_t)(*c - '0');
    return n ? n : 1;
}

/* Bytes of stack used so far: from the top down to the lowest word whose paint was overwritten. */
uint32_t oi_fw_stack_used(void) {
    const uint32_t *p = __oi_stack_limit;
    while (p < __oi_stack_top && *p == STACK_PAINT) ++p;
    return (uint32_t)((uintptr_t)__oi_stack_top - (uintptr_t)p);
}

/* No heap: any call for one ends the run (status 98), so the RAM reported is all the RAM used. */
void *_sbrk(ptrdiff_t increment) {
    (void)increment;
    oi_fw_exit(98);
}

_Noreturn void oi_fw_reset(void) {
    memcpy(__oi_data_start, __oi_data_load, (size_t)((uint8_t *)__oi_data_end - (uint8_t *)__oi_data_start));
    memset(__oi_bss_start, 0, (size_t)((uint8_t *)__oi_bss_end - (uint8_t *)__oi_bss_start));
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20;    /* CPACR: CP10, CP11 full access */
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    /* the paint stops 64 words below this frame's stack pointer (the loop itself pushes nothing) */
    uint32_t *sp;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    for (volatile uint32_t *p = __oi_stack_limit; p < sp - 64; ++p) *p = STACK_PAINT;
    for (void (**ctor)(void) = __oi_init_array_start; ctor < __oi_init_array_end; ++ctor) (*ctor)();
    oi_fw_exit(main());
}

static void oi_fw_fault(void) { oi_fw_exit(99); }

/* The vector table: the initial stack, reset, then the exceptions (NMI, HardFault, MemManage,
 * BusFault, UsageFault, SecureFault, reserved, SVCall, DebugMonitor, reserved, PendSV, SysTick). */
__attribute__((section(".oi_vectors"), used)) static void (*const vectors[16])(void) = {
    (void (*)(void))__oi_stack_top, oi_fw_reset, oi_fw_fault, oi_fw_fault, oi_fw_fault, oi_fw_fault,
    oi_fw_fault, oi_fw_fault, 0, 0, 0, oi_fw_fault, oi_fw_fault, 0, oi_fw_fault, oi_fw_fault,
};
