/*
 * opcodes: the names of the instructions of each CPython version, from the
 * tables tools/gen_opcodes.py generates out of the versions' own headers
 * (opcodes_gen.c). A byte is named as the version's code holds it: 3.11+'s
 * adaptive code holds specialized forms (BINARY_OP_ADD_INT) and, where
 * sys.monitoring or a tracer is active (3.12+), instrumented ones
 * (INSTRUMENTED_CALL); each is given with the instruction it stands for.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "cpython/cpython.h"

const char *cpy_opcode_name(int minor, int op, const char **base)
{
    if (op < 0 || op > 255)
        return NULL;
    for (size_t i = 0; i < cpy_opcode_tables_count; i++) {
        const struct cpy_opcode_table *t = &cpy_opcode_tables[i];
        if (t->minor != minor)
            continue;
        const char *name = t->names[op];
        if (name && base)
            *base = t->bases && t->bases[op] != op ? t->names[t->bases[op]] : NULL;
        return name;
    }
    return NULL;
}

static const struct cpy_opcode_table *table_of(const struct cpy_offsets *o)
{
    int minor = (int)((o->version >> 16) & 0xff);
    for (size_t i = 0; i < cpy_opcode_tables_count; i++)
        if (cpy_opcode_tables[i].minor == minor)
            return &cpy_opcode_tables[i];
    return NULL;
}

/* c->starts from c's code as it is now. Specialization rewrites an
 * instruction's first byte into another form of the same instruction, with
 * the same caches, so the starts found stay true; instrumentation that hides
 * an instruction (INSTRUMENTED_LINE) ends what can be known. */
static int decode_starts(struct mem *m, const struct cpy_opcode_table *t, struct cpy_code *c)
{
    uint64_t n = c->ncodeunits < CPY_OPCODE_MAX_UNITS ? c->ncodeunits : CPY_OPCODE_MAX_UNITS;
    uint8_t *code = malloc(n ? 2 * n : 1);
    uint8_t *starts = calloc(n / 8 + 1, 1);
    int rc = PYS_E_NOMEM;
    if (!code || !starts)
        goto fail;
    if (n && (rc = mem_read(m, c->code_bytes, code, 2 * n)) < 0)
        goto fail;
    uint64_t i = 0;
    while (i < n) {
        uint8_t op = code[2 * i], caches = t->caches[op];
        starts[i / 8] |= (uint8_t)(1u << (i % 8));
        if (caches == 255 || !t->names[op]) {
            i++; /* this one starts here; where the next does is not known */
            break;
        }
        i += 1 + (uint64_t)caches;
    }
    c->starts = starts;
    c->starts_units = i < n ? i : n;
    free(code);
    return 0;
fail:
    free(code);
    free(starts);
    return rc;
}

int cpy_code_instr_start(struct mem *m, const struct cpy_offsets *o, struct cpy_code *c,
                         uint64_t idx, uint64_t *start)
{
    if (o->traits.position != CPY_POS_PREV_INSTR) {
        *start = idx;
        return 0;
    }
    if (!c->starts) {
        /* Looked up once per code object: the torn checks ask this of
         * every caller of every 3.11 walk. */
        const struct cpy_opcode_table *t = table_of(o);
        int rc;
        if (!t || !t->caches)
            return PYS_E_NOTFOUND;
        if ((rc = decode_starts(m, t, c)) < 0)
            return rc;
    }
    if (idx >= c->starts_units)
        return PYS_E_NOTFOUND;
    /* No instruction has more than 255 cache units. */
    for (uint64_t k = 0; k <= idx && k <= 256; k++)
        if (c->starts[(idx - k) / 8] & (1u << ((idx - k) % 8))) {
            *start = idx - k;
            return 0;
        }
    return PYS_E_NOTFOUND;
}

int cpy_code_opcode(struct mem *m, const struct cpy_offsets *o, struct cpy_code *c, uint64_t idx,
                    uint8_t *op)
{
    if (!CPY_HAS(o, code_object, co_code))
        return PYS_E_NOTFOUND;
    if (!c->bytecode) {
        uint64_t n = c->ncodeunits < CPY_OPCODE_MAX_UNITS ? c->ncodeunits : CPY_OPCODE_MAX_UNITS;
        uint8_t *code = malloc(n ? 2 * n : 1);
        int rc;
        if (!code)
            return PYS_E_NOMEM;
        if (n && (rc = mem_read(m, c->code_bytes, code, 2 * n)) < 0) {
            free(code);
            return rc;
        }
        c->bytecode = code;
        c->bytecode_units = n;
    }
    if (idx >= c->bytecode_units)
        return PYS_E_NOTFOUND;
    *op = c->bytecode[2 * idx];
    return 0;
}

/* Whether op, in any of its forms, is SEND or FOR_ITER: the instructions
 * that resume a generator's frame, inline (SEND_GEN, FOR_ITER_GEN, from
 * 3.12) or through C. */
static int resumes_op(const struct cpy_opcode_table *t, uint8_t op)
{
    const char *name = t->names[t->bases ? t->bases[op] : op];
    if (!name)
        name = t->names[op];
    return name && (strcmp(name, "SEND") == 0 || strcmp(name, "FOR_ITER") == 0 ||
                    strncmp(name, "SEND_", 5) == 0 || strncmp(name, "FOR_ITER_", 9) == 0 ||
                    strcmp(name, "INSTRUMENTED_FOR_ITER") == 0);
}

int cpy_code_resumes_slow(struct mem *m, const struct cpy_offsets *o, struct cpy_code *c,
                          uint64_t idx)
{
    const struct cpy_opcode_table *t = table_of(o);
    if (!t || !t->caches || !CPY_HAS(o, code_object, co_code_adaptive))
        return PYS_E_NOTFOUND;
    uint64_t n = c->ncodeunits < CPY_OPCODE_MAX_UNITS ? c->ncodeunits : CPY_OPCODE_MAX_UNITS;
    uint8_t *code = malloc(n ? 2 * n : 1);
    uint8_t *bits = calloc(n / 8 + 1, 1);
    if (!code || !bits) {
        free(code);
        free(bits);
        return PYS_E_NOMEM;
    }
    uint64_t i = 0;
    /* Unreadable code: nothing known of it, and not read again. */
    if (n && mem_read(m, c->code_bytes, code, 2 * n) < 0)
        n = 0;
    while (i < n) {
        uint8_t op = code[2 * i], caches = t->caches[op];
        if (caches == 255 || !t->names[op])
            break; /* where the next instruction starts is not known */
        if (resumes_op(t, op))
            for (uint64_t k = i; k <= i + caches && k < n; k++)
                bits[k / 8] |= (uint8_t)(1u << (k % 8));
        i += 1 + (uint64_t)caches;
    }
    c->resumes = bits;
    c->resumes_units = i < n ? i : n;
    free(code);
    return idx < c->resumes_units ? (c->resumes[idx / 8] >> (idx % 8)) & 1 : -1;
}
