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

static uint64_t code_hash_at(const void *ctx, uint32_t id)
{
    return util_hash_u64(((const struct prof_codecache *)ctx)->entries[id].addr);
}

/* Room for one more entry. 0 or PYS_E_NOMEM. */
static int grow(struct prof_codecache *cc)
{
    int rc = util_htab_reserve(&cc->index, 1024, 1, (uint32_t)cc->count + 1, code_hash_at, cc);
    if (rc < 0)
        return rc;
    if (cc->count + 1 >= cc->cap) {
        size_t cap = cc->cap ? cc->cap * 2 : 512;
        struct prof_code *v = realloc(cc->entries, cap * sizeof *v);
        if (!v)
            return PYS_E_NOMEM;
        cc->entries = v;
        cc->cap = cap;
    }
    return 0;
}

int prof_codecache_get(struct prof_codecache *cc, struct prof_intern *in, struct mem *m,
                       const struct cpy_offsets *o, const struct cpy_symbols *sym,
                       uint64_t addr, const struct prof_code **out)
{
    int rc;
    if (cc->count >= CODECACHE_MAX)
        prof_codecache_clear(cc);
    uint64_t h = util_hash_u64(addr);
    uint32_t id = 0;
    if (cc->index.cap) {
        for (size_t j = util_htab_first(&cc->index, h); (id = cc->index.slot[j]);
             j = util_htab_next(&cc->index, j)) {
            struct prof_code *pc = &cc->entries[id];
            if (pc->addr != addr)
                continue;
            if (!pc->stale) {
                cc->hits++;
                *out = pc;
                return 0;
            }
            /* Freed and reused: read it again, into the same entry (the old
             * one stays, still stale, if that fails). */
            cc->stale++;
            break;
        }
    }
    cc->misses++;
    if (!id && (rc = grow(cc)) < 0)
        return rc;
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
    if (id) {
        cpy_code_release(&cc->entries[id].code);
    } else {
        id = (uint32_t)++cc->count;
        util_htab_set(&cc->index, util_htab_free_slot(&cc->index, h), id);
    }
    cc->entries[id] = e;
    *out = &cc->entries[id];
    return 0;
}

static struct prof_code *find(struct prof_codecache *cc, uint64_t addr)
{
    if (!cc->index.cap || addr == 0)
        return NULL;
    uint32_t id;
    for (size_t j = util_htab_first(&cc->index, util_hash_u64(addr)); (id = cc->index.slot[j]);
         j = util_htab_next(&cc->index, j))
        if (cc->entries[id].addr == addr)
            return &cc->entries[id];
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
            mem_recheck_hint_last(m, at[j], len[j]);
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

int prof_codecache_instr_start(struct prof_codecache *cc, struct mem *m,
                               const struct cpy_offsets *o, const struct prof_code *pc,
                               uint64_t idx, uint64_t *start)
{
    /* pc is one of cc's entries: what is kept in it is the cache's own. */
    struct prof_code *e = &cc->entries[pc - cc->entries];
    return cpy_code_instr_start(m, o, &e->code, idx, start);
}

int prof_codecache_opcode(struct prof_codecache *cc, struct mem *m, const struct cpy_offsets *o,
                          const struct prof_code *pc, uint64_t idx, uint8_t *op)
{
    struct prof_code *e = &cc->entries[pc - cc->entries];
    return cpy_code_opcode(m, o, &e->code, idx, op);
}

int prof_codecache_resumes(struct prof_codecache *cc, struct mem *m, const struct cpy_offsets *o,
                           const struct prof_code *pc, uint64_t idx)
{
    struct prof_code *e = &cc->entries[pc - cc->entries];
    return cpy_code_resumes_at(m, o, &e->code, idx);
}

void prof_codecache_clear(struct prof_codecache *cc)
{
    if (cc->memo)
        memset(cc->memo, 0, PROF_LOCMEMO_SIZE * sizeof *cc->memo);
    for (size_t id = 1; id <= cc->count; id++)
        cpy_code_release(&cc->entries[id].code);
    if (cc->index.cap)
        memset(cc->index.slot, 0, cc->index.cap * sizeof *cc->index.slot);
    cc->count = 0;
}

/* Frees without clearing: zeroing the memo and the index only to free
 * them touches every page of both. */
void prof_codecache_release(struct prof_codecache *cc)
{
    for (size_t id = 1; id <= cc->count; id++)
        cpy_code_release(&cc->entries[id].code);
    free(cc->entries);
    util_htab_release(&cc->index);
    free(cc->memo);
    free(cc->segs);
    free(cc->buf);
    memset(cc, 0, sizeof *cc);
}
