"""The exact size of a generated C program's context object (`struct oi_NAME`,
templates/c/model.c.j2) on the target's ABI: what NAME_CONTEXT_BYTES says, so that a caller of
`create_in()` (a microcontroller's firmware) reserves what the program uses and not a bound.

C lays a struct out field by field: each at the next multiple of its alignment, the whole
rounded up to the largest alignment. Every field of the context is a pointer (the target's
`pointer_bytes`, openinfer/targets/isa.py, aligned as its size), a fixed-width integer (uint64_t
and int64_t aligned to 8 on every ABI the targets use: LP64 and the Arm EABI), an int, a byte
array, a struct of those, or the 64-aligned kernel workspace. `context_bytes` lists the fields in
the template's order; the template checks `sizeof(struct) == NAME_CONTEXT_BYTES` at compile time
(_Static_assert), so a field added to one and not the other stops every build.
"""

from __future__ import annotations

#: (size, alignment) of one field
Field = tuple[int, int]


def struct(fields: list[Field]) -> Field:
    """The size and alignment of a struct of `fields`, in order."""
    offset, align = 0, 1
    for size, a in fields:
        offset = -(-offset // a) * a + size
        align = max(align, a)
    return -(-offset // align) * align, align


def context_bytes(ctx: dict, pointer: int) -> int:
    """sizeof(struct oi_NAME) for the template context `ctx` (CRenderer.context, with
    scratch_bytes) on an ABI of `pointer`-byte pointers."""
    ptr: Field = (pointer, pointer)
    u64: Field = (8, 8)
    int32: Field = (4, 4)

    def array(n: int, f: Field) -> Field:
        return n * f[0], f[1]

    oinf = struct([ptr, u64, int32, int32, u64, u64, int32])                # oi_oinf (oi_hal.h)
    kctx = struct([ptr, ptr, ptr, ptr])                                     # oi_kctx: pool, scratch, workers', size_t
    frame = struct([ptr] * len(ctx["frame_fields"]) + [int32])              # its buffers, a consumer's status
    fields = [oinf, int32, ptr, ptr, ptr, kctx]                             # file, owns_heap, arena, persistent, pool
    if ctx["scratch_bytes"]:
        fields.append(ptr)                                                  # worker_scratch
    fields += [frame] * (1 + len(ctx["consumers"]))
    fields += [ptr] * len(ctx["weights"])
    fields += [array(pt["count"], ptr) for pt in ctx["prefix_tables"]]
    fields += [ptr] * (len(ctx["persistents"]) + len(ctx["consts"]))
    fields += [array(len(d["shape"]), u64) for d in ctx["dynamic_vars"]]
    fields += [u64] * len(ctx["sizes"])
    fields += [(ctx["inputs_bytes"], 1), array(max(1, len(ctx["bindables"])), ptr)]
    fields += [int32, ptr, ptr, (ctx["error_bytes"], 1)]                    # pending, hook, hook_user, error
    if ctx["scratch_bytes"]:
        fields.append((ctx["scratch_bytes"], 64))
    return struct(fields)[0]
