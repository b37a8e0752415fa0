/*
 * startup.c — the least a Cortex-M firmware needs before main(): the vector table (the initial
 * stack pointer and the reset handler, which the core reads at address 0), copying .data's
 * initial values from flash, zeroing .bss, turning on the FPU (the program is compiled for the
 * hard-float ABI: the first float instruction would fault with it off), then main() and exit().
 * Your firmware has its own; this one matches mps2-an386.ld.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern uint32_t __stack_top[], __data_load[], __data_start[], __data_end[], __bss_start[], __bss_end[];
int main(void);

_Noreturn void reset(void) {
    memcpy(__data_start, __data_load, (size_t)((uint8_t *)__data_end - (uint8_t *)__data_start));
    memset(__bss_start, 0, (size_t)((uint8_t *)__bss_end - (uint8_t *)__bss_start));
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20;    /* CPACR: CP10, CP11 full access (the FPU) */
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    exit(main());
}

static void fault(void) { exit(99); }

__attribute__((section(".vectors"), used)) static void (*const vectors[16])(void) = {
    (void (*)(void))__stack_top, reset, fault, fault, fault, fault, fault, 0, 0, 0, 0, fault, fault, 0, fault, fault,
};
