/*
 * codecache: code objects read from the target, by address. A frame's code
 * object is read once (names, file, line table) and then found by a hash
 * lookup. Entries are dropped when the caller learns the target may have
 * freed code objects (the interpreter's code generation counter moved).
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* Beyond this many code objects the cache starts over rather than grow. */
#define CODECACHE_MAX (1u << 20)

static size_t slot_of(uint64_t addr, size_t cap)
{
    addr ^= addr >> 33;
    addr *= 0xff51afd7ed558ccdull;
    addr ^= addr >> 33;
    return (size_t)addr & (cap - 1);
}

static int grow(struct prof_codecache *cc)
{
    size_t cap = cc->cap ? cc->cap * 2 : 1024;
    struct prof_code *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return PYS_E_NOMEM;
    for (size_t i = 0; i < cc->cap; i++) {
        if (!cc->slots[i].addr)
            continue;
        size_t j = slot_of(cc->slots[i].addr, cap);
        while (slots[j].addr)
            j = (j + 1) & (cap - 1);
        slots[j] = cc->slots[i];
    }
    free(cc->slots);
    cc->slots = slots;
    cc->cap = cap;
    return 0;
}

int prof_codecache_get(struct prof_codecache *cc, struct prof_intern *in, struct mem *m,
                       const struct cpy_offsets *o, const struct cpy_symbols *sym,
                       uint64_t addr, const struct prof_code **out)
{
    int rc;
    if (cc->count >= CODECACHE_MAX)
        prof_codecache_clear(cc);
    if ((cc->count + 1) * 2 > cc->cap && (rc = grow(cc)) < 0)
        return rc;
    size_t j = slot_of(addr, cc->cap);
    int replace = 0;
    for (; cc->slots[j].addr; j = (j + 1) & (cc->cap - 1)) {
        if (cc->slots[j].addr != addr)
            continue;
        if (!cc->slots[j].stale) {
            cc->hits++;
            *out = &cc->slots[j];
            return 0;
        }
        /* Freed and reused: read it again, into the same slot (the old
         * entry stays, still stale, if that fails). */
        cc->stale++;
        replace = 1;
        break;
    }
    cc->misses++;
    struct prof_code e;
    memset(&e, 0, sizeof e);
    if ((rc = cpy_code_read(m, o, sym, addr, &e.code)) < 0)
        return rc;
    e.filename = prof_intern_str(in, e.code.filename, strlen(e.code.filename));
    e.qualname = prof_intern_str(in, e.code.qualname, strlen(e.code.qualname));
    free(e.code.filename);
    free(e.code.qualname);
    e.code.filename = e.code.qualname = NULL;
    if (!e.filename || !e.qualname) {
        cpy_code_release(&e.code);
        return PYS_E_NOMEM;
    }
    e.addr = addr;
    e.id = ++cc->next_id;
    if (replace)
        cpy_code_release(&cc->slots[j].code);
    else
        cc->count++;
    cc->slots[j] = e;
    *out = &cc->slots[j];
    return 0;
}

static struct prof_code *find(struct prof_codecache *cc, uint64_t addr)
{
    if (!cc->cap || addr == 0)
        return NULL;
    for (size_t j = slot_of(addr, cc->cap); cc->slots[j].addr; j = (j + 1) & (cc->cap - 1))
        if (cc->slots[j].addr == addr)
            return &cc->slots[j];
    return NULL;
}

static int cmp_seg(const void *a, const void *b)
{
    const struct mem_seg *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* By address: insertion sort for a few (qsort allocates for more). */
static void sort_segs(struct mem_seg *v, size_t n)
{
    if (n > 64) {
        qsort(v, n, sizeof *v, cmp_seg);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        struct mem_seg x = v[i];
        size_t j = i;
        for (; j > 0 && v[j - 1].addr > x.addr; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

/* The pieces that show a cached object unchanged: its head, and its names'
 * length and hash (16 bytes each). */
static void key_pieces(const struct cpy_offsets *o, const struct prof_code *pc, uint64_t at[3],
                       size_t len[3])
{
    at[0] = pc->addr;
    len[0] = (size_t)o->code_object.size;
    at[1] = pc->code.key.filename + o->unicode_object.length;
    at[2] = pc->code.key.qualname + o->unicode_object.length;
    len[1] = len[2] = 16;
}

void prof_codecache_hint(struct prof_codecache *cc, struct mem *m, const struct cpy_offsets *o,
                         const uint64_t *addrs, size_t n)
{
    cc->hints++;
    for (size_t i = 0; i < n; i++) {
        struct prof_code *pc = find(cc, addrs[i]);
        if (!pc || pc->stale || pc->hinted == cc->hints)
            continue;
        pc->hinted = cc->hints;
        uint64_t at[3];
        size_t len[3];
        key_pieces(o, pc, at, len);
        for (int j = 0; j < 3; j++)
            mem_recheck_hint(m, at[j], len[j]);
    }
}

int prof_codecache_rechecked(struct prof_codecache *cc, struct mem *m,
                             const struct cpy_offsets *o, uint64_t *addrs, size_t n,
                             size_t *missing)
{
    int stale = 0;
    *missing = 0;
    cc->checks++;
    for (size_t i = 0; i < n; i++) {
        struct prof_code *pc = find(cc, addrs[i]);
        if (!pc || pc->stale || pc->checked == cc->checks)
            continue;
        pc->checked = cc->checks;
        uint64_t at[3];
        size_t len[3];
        const uint8_t *v[3];
        key_pieces(o, pc, at, len);
        int have = 1;
        for (int j = 0; j < 3 && have; j++)
            have = (v[j] = mem_recheck_view(m, at[j], len[j])) != NULL;
        if (!have) {
            addrs[(*missing)++] = addrs[i];
            continue;
        }
        struct cpy_code_key now;
        cpy_code_key_parse(o, v[0], v[1], v[2], &now);
        if (!cpy_code_key_equal(&now, &pc->code.key)) {
            pc->stale = 1;
            stale++;
        }
    }
    return stale;
}

int prof_codecache_check(struct prof_codecache *cc, struct mem *m, const struct cpy_offsets *o,
                         const uint64_t *addrs, size_t n)
{
    size_t hlen = (size_t)o->code_object.size, per = hlen + 32, k = 0;
    cc->checks++;
    /* 3 pieces per object, then the same sorted by address. */
    if (n * 6 > cc->segs_cap) {
        struct mem_seg *v = realloc(cc->segs, n * 6 * sizeof *v);
        if (!v)
            return PYS_E_NOMEM;
        cc->segs = v;
        cc->segs_cap = n * 6;
    }
    if (n * per > cc->buf_cap) {
        uint8_t *b = realloc(cc->buf, n * per);
        if (!b)
            return PYS_E_NOMEM;
        cc->buf = b;
        cc->buf_cap = n * per;
    }
    /* Each cached object once: its head, and its names' length and hash. */
    for (size_t i = 0; i < n; i++) {
        struct prof_code *pc = find(cc, addrs[i]);
        if (!pc || pc->stale || pc->checked == cc->checks)
            continue;
        pc->checked = cc->checks;
        uint8_t *b = cc->buf + k * per;
        uint64_t at[3];
        size_t len[3];
        key_pieces(o, pc, at, len);
        cc->segs[3 * k] = (struct mem_seg){at[0], b, len[0]};
        cc->segs[3 * k + 1] = (struct mem_seg){at[1], b + hlen, len[1]};
        cc->segs[3 * k + 2] = (struct mem_seg){at[2], b + hlen + 16, len[2]};
        k++;
    }
    if (k == 0)
        return 0;
    /* Read in address order: a module's code objects share their file
     * name, and pieces close together are read as one span. */
    struct mem_seg *by_addr = cc->segs + 3 * n;
    memcpy(by_addr, cc->segs, 3 * k * sizeof *by_addr);
    sort_segs(by_addr, 3 * k);
    int rc = mem_readv_fresh(m, by_addr, 3 * k), stale = 0;
    for (size_t i = 0; i < k; i++) {
        struct prof_code *pc = find(cc, cc->segs[3 * i].addr);
        struct cpy_code_key now;
        if (rc == 0) {
            const uint8_t *b = cc->buf + i * per;
            cpy_code_key_parse(o, b, b + hlen, b + hlen + 16, &now);
        }
        /* Unreadable counts as changed: it is read again (and fails then). */
        if (rc < 0 || !cpy_code_key_equal(&now, &pc->code.key)) {
            pc->stale = 1;
            stale++;
        }
    }
    return rc == PYS_E_EXITED ? rc : stale;
}

int prof_codecache_locate(struct prof_codecache *cc, const struct cpy_offsets *o,
                          const struct prof_code *pc, const struct cpy_raw_frame *f,
                          int32_t *lasti, struct cpy_location *loc)
{
    if (!cc->memo)
        cc->memo = calloc(PROF_LOCMEMO_SIZE, sizeof *cc->memo);
    struct prof_locmemo *e = NULL;
    if (cc->memo) {
        uint64_t h = (pc->id * 0x9e3779b97f4a7c15ull) ^ (f->instr_ptr * 0xbf58476d1ce4e5b9ull);
        e = &cc->memo[(h ^ (h >> 29)) & (PROF_LOCMEMO_SIZE - 1)];
        if (e->code == pc->id && e->position == f->instr_ptr) {
            *lasti = e->lasti;
            *loc = e->loc;
            return 0;
        }
    }
    int rc = cpy_code_locate(o, &pc->code, f, lasti, loc);
    if (rc == 0 && e) {
        e->code = pc->id;
        e->position = f->instr_ptr;
        e->lasti = *lasti;
        e->loc = *loc;
    }
    return rc;
}

void prof_codecache_clear(struct prof_codecache *cc)
{
    if (cc->memo)
        memset(cc->memo, 0, PROF_LOCMEMO_SIZE * sizeof *cc->memo);
    for (size_t i = 0; i < cc->cap; i++) {
        if (cc->slots[i].addr)
            cpy_code_release(&cc->slots[i].code);
        memset(&cc->slots[i], 0, sizeof cc->slots[i]);
    }
    cc->count = 0;
}

void prof_codecache_release(struct prof_codecache *cc)
{
    prof_codecache_clear(cc);
    free(cc->slots);
    free(cc->memo);
    free(cc->segs);
    free(cc->buf);
    memset(cc, 0, sizeof *cc);
}
