/* A QEMU TCG plugin counting the guest instructions a program executes, per function: each
 * translated block counts towards the symbol of its first instruction, and at exit the plugin
 * appends "symbol count" lines, then "--", to the file $OI_INSN_COUNT_FILE
 * (tools/bench/qemu_insns.py: a step's count is their sum, or per function with --by-function).
 * Debian packages no qemu-plugin.h, so the few functions of the documented plugin API (version 1,
 * QEMU 7.x) it calls are declared here. The inline adds are not atomic: count one guest thread
 * (OI_NUM_THREADS=1). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef struct qemu_info_t qemu_info_t;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, void (*cb)(qemu_plugin_id_t, struct qemu_plugin_tb *));
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
const char *qemu_plugin_insn_symbol(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op, void *ptr, uint64_t imm);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, void (*cb)(qemu_plugin_id_t, void *), void *userdata);
__attribute__((visibility("default"))) int qemu_plugin_version = 1;
#define MAX_SYMBOLS 4096    /* beyond: counted as the last one */
static const char *names[MAX_SYMBOLS];
static uint64_t counts[MAX_SYMBOLS];
static int n_names;
static void trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    const char *s = qemu_plugin_insn_symbol(qemu_plugin_tb_get_insn(tb, 0));
    if (!s) s = "?";
    int i = 0;
    while (i < n_names && strcmp(names[i], s)) ++i;
    if (i == n_names) {
        if (n_names == MAX_SYMBOLS) i = MAX_SYMBOLS - 1;
        else names[n_names++] = strdup(s);
    }
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &counts[i], qemu_plugin_tb_n_insns(tb));
}
static void done(qemu_plugin_id_t id, void *p) {
    (void)id; (void)p;
    const char *path = getenv("OI_INSN_COUNT_FILE");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (!f) return;
    for (int i = 0; i < n_names; ++i) fprintf(f, "%s %llu\n", names[i], (unsigned long long)counts[i]);
    fprintf(f, "--\n");
    fclose(f);
}
__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
    (void)info; (void)argc; (void)argv;
    qemu_plugin_register_vcpu_tb_trans_cb(id, trans);
    qemu_plugin_register_atexit_cb(id, done, NULL);
    return 0;
}
