/* A QEMU TCG plugin counting the guest instructions a program executes: at exit it appends the
 * count to the file $OI_INSN_COUNT_FILE (tools/bench/qemu_insns.py). Debian packages no
 * qemu-plugin.h, so the few functions of the documented plugin API (version 1, QEMU 7.x) it calls
 * are declared here. The inline add is not atomic: count one guest thread (OI_NUM_THREADS=1). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
typedef struct qemu_info_t qemu_info_t;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, void (*cb)(qemu_plugin_id_t, struct qemu_plugin_tb *));
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op, void *ptr, uint64_t imm);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, void (*cb)(qemu_plugin_id_t, void *), void *userdata);
__attribute__((visibility("default"))) int qemu_plugin_version = 1;
static uint64_t count;
static void trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &count, qemu_plugin_tb_n_insns(tb));
}
static void done(qemu_plugin_id_t id, void *p) {
    (void)id; (void)p;
    const char *path = getenv("OI_INSN_COUNT_FILE");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (f) {
        fprintf(f, "%llu\n", (unsigned long long)count);
        fclose(f);
    }
}
__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
    (void)info; (void)argc; (void)argv;
    qemu_plugin_register_vcpu_tb_trans_cb(id, trans);
    qemu_plugin_register_atexit_cb(id, done, NULL);
    return 0;
}
