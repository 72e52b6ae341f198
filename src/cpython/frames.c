/*
 * frames: walk one thread's chain of frames: PyFrameObjects linked by f_back
 * (3.8-3.10), or _PyInterpreterFrames linked by previous (3.11+).
 *
 * Frames owned by the thread live in its data stack chunks, so the walk first
 * copies those chunks (a few large reads) and then follows `previous` inside
 * the copy; a frame outside them (a generator's or coroutine's frame, an entry
 * frame on the C stack, 3.15's base frame) is read directly. The chain is
 * bounded and checked for cycles, and on 3.15 it must end at the thread's
 * base frame, which tells a complete walk from one torn by a racing target.
 */
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "cpython/cpython.h"


/* struct _PyStackChunk, unchanged from 3.11 to 3.15: previous, size, top,
 * then the frames. */
#define CHUNK_PREVIOUS 0
#define CHUNK_SIZE 8
#define CHUNK_HEADER 24

void cpy_stack_release(struct cpy_stack *st)
{
    free(st->buf);
    free(st->frame);
    free(st->second);
    free(st->seen);
    memset(st, 0, sizeof *st);
}

static int grow(uint8_t **buf, size_t *cap, size_t need)
{
    return mem_grow_buffer(buf, cap, need < 16384 ? 16384 : need) < 0 ? PYS_E_NOMEM : 0;
}

/* A walk starts with no window of frames read on their own. */
static void no_window(struct cpy_stack *st)
{
    st->win_len = 0;
    st->last_direct = 0;
}

/* The smallest page size; data stack chunks are mapped in whole pages. */
#define PAGE 4096u
/* What copy_above asks the next prefetch to take from the current chunk: at
 * most this much, and this much above the top. */
#define NOTE_MAX (64u << 10)
#define NOTE_SLACK 1024u
/* What a whole walk asks the next prefetch to take past the current
 * chunk's top (grown_end). */
#define GROWN_SLACK 2048u

/* struct _PyStackChunk's top: slots (pointers) in use, for chunks that are
 * not the current one. */
#define CHUNK_TOP 16
#define CHUNK_MIN CPY_CHUNK_MIN

/* Read chunk bytes: past the prefetch (quiet) or through it. */
static int read_chunk(struct mem *m, int quiet, uint64_t addr, uint8_t *buf, size_t len)
{
    return quiet ? mem_read_fresh(m, addr, buf, len) : mem_read(m, addr, buf, len);
}

/* Older chunks read ahead in one system call, at most. */
#define AHEAD_MAX 16

/* Bytes of older chunks already in st->buf: a chunk's first len bytes at off. */
struct ahead {
    uint64_t addr;
    size_t off, len;
};

/*
 * For a chunk at addr that the last copy did not meet (the stack grew into
 * new chunks since): how many chunks right after it in memory to read with
 * it, and in *from where in st->older to go on from (st->nolder: nowhere).
 * CPython maps each new chunk right below the last one, so the older chunks
 * most often follow it: guess them up to the first one the last copy met
 * (its successors are known from there) or the one that holds stop; with
 * neither within reach, guess nothing. A wrong guess reads bytes that no
 * chunk header names, and they go unused.
 */
static size_t guess_older(const struct cpy_stack *st, uint64_t addr, uint64_t stop, size_t *from)
{
    *from = st->nolder;
    for (size_t k = 1; k <= AHEAD_MAX; k++) {
        uint64_t a = addr + (uint64_t)k * CHUNK_MIN;
        if (stop >= a - CHUNK_MIN && stop < a)
            return k - 1; /* stop is in the chunk before a */
        for (size_t j = 0; j < st->nolder; j++)
            if (st->older[j].addr == a) {
                *from = j;
                return k - 1;
            }
    }
    return 0;
}

/*
 * The older chunks to read in the same system call as the chunk at addr,
 * past the prefetch: those that came after addr in the last copy
 * (st->older), or those guess_older expects, down to the one that holds
 * stop (if in the list). Fills segs (no buffers yet)
 * with at most max, of at most `room` bytes in all (*bytes); returns how
 * many.
 */
static size_t older_after(const struct cpy_stack *st, uint64_t addr, uint64_t stop,
                          struct mem_seg *segs, size_t max, size_t room, size_t *bytes)
{
    size_t n = 0, j = 0, total = 0;
    while (j < st->nolder && st->older[j].addr != addr)
        j++;
    if (j < st->nolder) {
        j++;
    } else {
        size_t k = guess_older(st, addr, stop, &j);
        for (size_t i = 1; i <= k && n < max && CHUNK_MIN <= room - total; i++) {
            segs[n++] = (struct mem_seg){addr + i * (uint64_t)CHUNK_MIN, NULL, CHUNK_MIN};
            total += CHUNK_MIN;
        }
    }
    for (; j < st->nolder && n < max; j++) {
        size_t len = st->older[j].len > CHUNK_MIN ? st->older[j].len : CHUNK_MIN;
        if (len > room - total)
            break;
        segs[n++] = (struct mem_seg){st->older[j].addr, NULL, len};
        total += len;
        if (stop >= st->older[j].addr && stop - st->older[j].addr < len)
            break; /* the walk ends in this one */
    }
    *bytes = total;
    return n;
}

/* Record the n chunks read ahead, back to back in st->buf from off on, in
 * ahead[] (*nahead), and the end of the bytes read ahead in *ahead_end. */
static void keep_ahead(const struct mem_seg *segs, size_t n, size_t off, struct ahead *ahead,
                       size_t *nahead, size_t *ahead_end)
{
    for (size_t k = 0; k < n; k++) {
        if (*nahead < AHEAD_MAX)
            ahead[(*nahead)++] = (struct ahead){segs[k].addr, off, segs[k].len};
        off += segs[k].len;
    }
    if (off > *ahead_end)
        *ahead_end = off;
}

/*
 * Read the start of the older chunk at addr into st->buf at `at`: its first
 * CHUNK_MIN bytes. CPython allocates no chunk smaller and moves to a new one
 * only when a frame no longer fits, so these nearly always hold the header
 * and all the chunk's frames. Where the walk reads past the prefetch (quiet),
 * the same system call also reads the chunks that came after addr in the
 * last copy (st->older), or those guess_older expects, back to back after
 * it, as far as they are still mapped: those go to ahead[] (*nahead, their
 * end *ahead_end). A chunk
 * shorter than CPython's still gives its header. Sets *have to the bytes of
 * addr's chunk now at `at`.
 */
static int read_older(struct mem *m, struct cpy_stack *st, uint64_t addr, uint64_t stop,
                      size_t at, int quiet, struct ahead *ahead, size_t *nahead,
                      size_t *ahead_end, size_t *have)
{
    int rc;
    *have = CHUNK_MIN <= CPY_MAX_CHUNK_BYTES - at ? CHUNK_MIN : CHUNK_HEADER;
    if ((rc = grow(&st->buf, &st->cap, at + *have)) < 0)
        return rc;
    if (*have == CHUNK_HEADER) /* no room for a whole one */
        return read_chunk(m, quiet, addr, st->buf + at, CHUNK_HEADER);
    if (!quiet) {
        /* Through the prefetch, which may hold it. */
        rc = mem_read(m, addr, st->buf + at, CHUNK_MIN);
        if (rc == 0 || rc == PYS_E_EXITED || rc == PYS_E_NOMEM)
            return rc;
        *have = CHUNK_HEADER;
        return mem_read(m, addr, st->buf + at, CHUNK_HEADER);
    }
    /* The header and the rest as two pieces: a chunk gone costs one failed
     * call, a short one (not CPython's) still gives its header. */
    struct mem_seg segs[2 + AHEAD_MAX];
    size_t n = 0, end = at + CHUNK_MIN;
    segs[n++] = (struct mem_seg){addr, NULL, CHUNK_HEADER};
    segs[n++] = (struct mem_seg){addr + CHUNK_HEADER, NULL, CHUNK_MIN - CHUNK_HEADER};
    size_t more = 0;
    n += older_after(st, addr, stop, segs + n, AHEAD_MAX, CPY_MAX_CHUNK_BYTES - end, &more);
    end += more;
    if ((rc = grow(&st->buf, &st->cap, end)) < 0)
        return rc;
    size_t off = at;
    for (size_t k = 0; k < n; k++) {
        segs[k].buf = st->buf + off;
        off += segs[k].len;
    }
    int got = mem_readv_some(m, segs, n);
    if (got <= 0)
        return got < 0 ? got : PYS_E_BADADDR;
    *have = got == 1 ? CHUNK_HEADER : CHUNK_MIN;
    if (got > 2)
        keep_ahead(segs + 2, (size_t)got - 2, at + CHUNK_MIN, ahead, nahead, ahead_end);
    else if (at + CHUNK_MIN > *ahead_end)
        *ahead_end = at + CHUNK_MIN;
    return 0;
}

/*
 * Where the next read-ahead expects the older chunks, after a copy that met
 * these (older[], in order) below the current chunk `cur`, all of them
 * (whole) or down to a stop: those met; after a copy that stopped early,
 * then those that came after the last of them in the last list. A stack
 * that unwound into chunks the last list holds, in its order, keeps that
 * list: its newer chunks are where CPython maps them again when the stack
 * grows back.
 */
static void remember_older(struct cpy_stack *st, uint64_t cur, int whole, uint64_t *older,
                           size_t *older_len, size_t nolder)
{
    size_t i = 0, k = 0;
    while (i < st->nolder && st->older[i].addr != cur)
        i++;
    if (i < st->nolder && nolder < st->nolder - i) {
        while (k < nolder && st->older[i + 1 + k].addr == older[k])
            k++;
        /* A whole copy ends the list: nothing older is left after it. */
        if (k == nolder && (!whole || i + 1 + nolder == st->nolder)) {
            for (k = 0; k < nolder; k++)
                st->older[i + 1 + k].len = older_len[k];
            return;
        }
    }
    if (!whole && nolder == 0)
        return;
    size_t n = nolder;
    if (!whole) {
        size_t j = 0;
        while (j < st->nolder && st->older[j].addr != older[nolder - 1])
            j++;
        for (j++; j < st->nolder && n < CPY_OLDER_MAX; j++, n++) {
            older[n] = st->older[j].addr;
            older_len[n] = st->older[j].len;
        }
    }
    for (i = 0; i < n; i++) {
        st->older[i].addr = older[i];
        st->older[i].len = older_len[i];
    }
    st->nolder = n;
}

/*
 * Where the next prefetch's copy of thread t's current chunk ends: past
 * its top by GROWN_SLACK, within the chunk's first CHUNK_MIN bytes (mapped
 * whatever its size) or else the top's page. A stack a few frames deeper
 * at the next sample is then still in that batch: read past it, the walk
 * would be checked by a later read, which a fast-changing stack fails the
 * more often, and the samples kept would lean to shallow stacks (the
 * deeper a stack, the likelier it is deeper than every recent one).
 */
static uint64_t grown_end(const struct cpy_thread *t)
{
    uint64_t top = t->datastack_top;
    uint64_t page_end = (top + PAGE - 1) & ~(uint64_t)(PAGE - 1);
    uint64_t limit = t->datastack_chunk + CHUNK_MIN > page_end ? t->datastack_chunk + CHUNK_MIN
                                                               : page_end;
    return limit - top > GROWN_SLACK ? top + GROWN_SLACK : limit;
}

/*
 * The current chunk at addr, len bytes, into st->buf at `at`, and in the
 * same call the older chunks the walk is expected to go on into (unless the
 * prefetch holds this one), kept as read ahead (keep_ahead). 0 or an error.
 */
static int read_current_and_older(struct mem *m, struct cpy_stack *st, uint64_t addr,
                                  uint64_t stop, size_t at, uint64_t len, struct ahead *ahead,
                                  size_t *nahead, size_t *ahead_end)
{
    struct mem_seg more[AHEAD_MAX];
    size_t bytes = 0, off = at + len;
    size_t n = older_after(st, addr, stop, more, AHEAD_MAX, CPY_MAX_CHUNK_BYTES - off, &bytes);
    int rc;
    if ((rc = grow(&st->buf, &st->cap, off + bytes)) < 0)
        return rc;
    for (size_t k = 0; k < n; k++) {
        more[k].buf = st->buf + off;
        off += more[k].len;
    }
    if ((rc = mem_read_then(m, addr, st->buf + at, len, more, n)) < 0)
        return rc;
    keep_ahead(more, (size_t)rc, at + len, ahead, nahead, ahead_end);
    return 0;
}

/*
 * Copy the used part of the thread's data stack chunks into st: the current
 * chunk up to the thread's datastack_top (one read, header included), each
 * older one up to its own top (read_older, then the rest if it is longer).
 * All of them, or (stop != 0) down to the chunk that holds stop. Older
 * chunks are read past the prefetch when st->older_once says no later walk
 * is expected to need them. A whole copy (stop == 0) ends early, without an
 * error, once `budget` bytes or CPY_MAX_CHUNKS chunks are copied: a walk
 * that goes below them reads those frames on their own (frame_bytes).
 */
static int copy_chunks(struct mem *m, const struct cpy_thread *t, struct cpy_stack *st,
                       uint64_t stop, size_t budget)
{
    uint64_t addr = t->datastack_chunk;
    size_t used = 0, nahead = 0, ahead_end = 0, nolder = 0;
    struct ahead ahead[AHEAD_MAX];
    uint64_t older[CPY_OLDER_MAX];
    size_t older_len[CPY_OLDER_MAX];
    int rc;

    st->nchunks = 0;
    no_window(st);
    for (int current = 1; addr != 0; current = 0) {
        uint64_t size, prev, len = 0;
        int quiet = !current && st->older_once;
        size_t at = used, have = 0;
        if (stop == 0 && (used >= budget || st->nchunks == CPY_MAX_CHUNKS))
            break;
        if (st->nchunks == CPY_MAX_CHUNKS)
            return PYS_E_TOODEEP;
        if (current && t->datastack_top > addr + CHUNK_HEADER &&
            t->datastack_top - addr <= CPY_MAX_CHUNK_BYTES - used)
            len = t->datastack_top - addr;
        if (len == 0) {
            /* An older chunk: its top is in its header. */
            uint64_t top;
            size_t k = 0;
            while (k < nahead && ahead[k].addr != addr)
                k++;
            if (k < nahead) {
                at = ahead[k].off;
                have = ahead[k].len;
            } else {
                /* Never over bytes read ahead and not used yet. */
                at = used > ahead_end ? used : ahead_end;
                rc = read_older(m, st, addr, stop, at, quiet, ahead, &nahead, &ahead_end, &have);
                if (rc < 0)
                    return rc;
            }
            memcpy(&top, st->buf + at + CHUNK_TOP, 8);
            if (top > (CPY_MAX_CHUNK_BYTES - CHUNK_HEADER) / 8)
                return PYS_E_CORRUPT;
            len = CHUNK_HEADER + top * 8;
            if (len > have && at < ahead_end) {
                /* Longer than the bytes read ahead: read it whole past them. */
                at = used > ahead_end ? used : ahead_end;
                have = 0;
            }
        }
        if (len < CHUNK_HEADER || len > CPY_MAX_CHUNK_BYTES - at)
            return PYS_E_CORRUPT;
        if ((rc = grow(&st->buf, &st->cap, at + len)) < 0)
            return rc;
        if (current && st->older_once && !(stop >= addr && stop < addr + len)) {
            if ((rc = read_current_and_older(m, st, addr, stop, at, len, ahead, &nahead,
                                             &ahead_end)) < 0)
                return rc;
            have = len;
        }
        if (current && have == 0) {
            rc = mem_read_noting(m, addr, st->buf + at, len, addr, (size_t)(grown_end(t) - addr));
            if (rc < 0)
                return rc;
        } else if (len > have) {
            rc = read_chunk(m, quiet, addr + have, st->buf + at + have, len - have);
            if (rc < 0)
                return rc;
        }
        memcpy(&prev, st->buf + at + CHUNK_PREVIOUS, 8);
        memcpy(&size, st->buf + at + CHUNK_SIZE, 8);
        if (size < len)
            return PYS_E_CORRUPT;
        /* Frames live after the header: that is the region recorded. */
        st->chunks[st->nchunks].addr = addr + CHUNK_HEADER;
        st->chunks[st->nchunks].off = at + CHUNK_HEADER;
        st->chunks[st->nchunks].len = len - CHUNK_HEADER;
        st->nchunks++;
        if (at + len > used)
            used = at + len;
        if (!current && nolder < CPY_OLDER_MAX) {
            older[nolder] = addr;
            older_len[nolder++] = len;
        }
        if (stop != 0 && stop >= addr + CHUNK_HEADER && stop < addr + len)
            break;
        addr = prev;
    }
    remember_older(st, t->datastack_chunk, addr == 0, older, older_len, nolder);
    st->regions = st->nchunks;
    st->direct = 0;
    return 0;
}

/* Whether stop lies in the current chunk, with the frames above it
 * (copy_above's one read). */
static int above_in_current(const struct cpy_thread *t, uint64_t stop)
{
    uint64_t chunk = t->datastack_chunk, top = t->datastack_top;
    return chunk != 0 && stop >= chunk + CHUNK_HEADER && stop < top &&
           top - stop <= CPY_MAX_CHUNK_BYTES;
}

/* Whether addr may be a frame in the thread's data stack: in its current
 * chunk, or in one of the older chunks the last copy met. */
static int on_data_stack(const struct cpy_thread *t, const struct cpy_stack *st, uint64_t addr)
{
    if (addr >= t->datastack_chunk && addr < t->datastack_top)
        return 1;
    for (size_t j = 0; j < st->nolder; j++) {
        size_t len = st->older[j].len > CHUNK_MIN ? st->older[j].len : CHUNK_MIN;
        if (addr >= st->older[j].addr && addr - st->older[j].addr < len)
            return 1;
    }
    return 0;
}

/*
 * For a walk down to the frame at stop, which lies in the current chunk
 * (above_in_current): the frames above it are [stop, datastack_top) (the
 * thread's own frames; a generator's lives elsewhere and is read on its
 * own): copy that in one read.
 */
static int copy_above(struct mem *m, const struct cpy_thread *t, struct cpy_stack *st,
                      uint64_t stop)
{
    uint64_t chunk = t->datastack_chunk, top = t->datastack_top;
    size_t len = (size_t)(top - stop);
    no_window(st);
    /* The next sample reads above some stop in this chunk, up to about the
     * same top: have its prefetch take the chunk's used part (from
     * st->note_from if set) and a little more (mapped, in the same page or
     * chunk), within bounds. */
    uint64_t page_end = (top + PAGE - 1) & ~(uint64_t)(PAGE - 1);
    uint64_t note_end = page_end - top > NOTE_SLACK ? top + NOTE_SLACK : page_end;
    uint64_t note_start = note_end - chunk > NOTE_MAX ? stop : chunk;
    if (st->note_from > note_start)
        note_start = st->note_from < stop ? st->note_from : stop;
    size_t note_len = (size_t)(note_end - note_start);
    int rc = grow(&st->buf, &st->cap, len);
    if (rc == 0 && st->nafter > 0 && (rc = grow(&st->second, &st->second_cap, len)) == 0) {
        rc = mem_read_twice(m, stop, st->buf, st->second, len, st->after, st->nafter,
                            note_start, note_len);
        if (rc == 1) {
            st->second_addr = stop;
            st->second_len = len;
            st->second_mark = mem_mark(m);
            rc = 0;
        }
    } else if (rc == 0) {
        rc = mem_read_noting(m, stop, st->buf, len, note_start, note_len);
    }
    if (rc < 0)
        return rc;
    st->chunks[0].addr = stop;
    st->chunks[0].off = 0;
    st->chunks[0].len = len;
    st->nchunks = 1;
    st->regions = 1;
    st->direct = 0;
    return 0;
}

size_t cpy_frame_pos_field(const struct cpy_offsets *o, uint64_t *off)
{
    if (o->traits.frames == CPY_FRAMES_OBJECT) {
        *off = o->interpreter_frame.lasti;
        return 4;
    }
    *off = o->interpreter_frame.instr_ptr;
    return 8;
}

uint64_t cpy_frame_pos_value(const struct cpy_offsets *o, uint64_t word)
{
    if (o->traits.frames == CPY_FRAMES_OBJECT)
        return (uint64_t)(int64_t)(int32_t)(uint32_t)word;
    return word;
}

/* FRAME_OWNED_BY_INTERPRETER (3.12+): the owner of 3.15's base frame. */
#define OWNER_INTERPRETER 3

/* The bytes of the frame at addr: inside a copied chunk or the thread
 * state's copy, or read now. 3.15's base frame, outside the thread state's
 * copy (thread_readlen in offsets.h), is not read: it lives in the thread state as
 * long as the thread, owned by the interpreter, with no caller and None as
 * its code, and those are its bytes here. */
static int frame_bytes(struct mem *m, const struct cpy_offsets *o, const struct cpy_thread *t,
                       struct cpy_stack *st, uint64_t addr, const uint8_t **out)
{
    size_t fsize = (size_t)o->interpreter_frame.size;
    if (t->copy && addr >= t->copy_addr && addr - t->copy_addr <= t->copy_len &&
        fsize <= t->copy_len - (addr - t->copy_addr)) {
        *out = t->copy + (addr - t->copy_addr);
        return 0;
    }
    if (addr != 0 && addr == t->base_frame && fsize <= sizeof st->base) {
        memset(st->base, 0, fsize);
        memcpy(st->base + o->interpreter_frame.executable, &t->base_code, 8);
        st->base[o->interpreter_frame.owner] = OWNER_INTERPRETER;
        *out = st->base;
        return 0;
    }
    for (size_t i = 0; i < st->nchunks; i++) {
        uint64_t a = st->chunks[i].addr;
        size_t len = st->chunks[i].len;
        if (addr >= a && addr - a <= len && fsize <= len - (addr - a)) {
            *out = st->buf + st->chunks[i].off + (addr - a);
            return 0;
        }
    }
    st->regions++;
    st->direct++;
    if (st->win_len && addr >= st->win_addr && addr - st->win_addr <= st->win_len &&
        fsize <= st->win_len - (addr - st->win_addr)) {
        *out = st->frame + (addr - st->win_addr);
        return 0;
    }
    /* Just below the last frame read on its own, within a page of it: a
     * walk down a stretch of data stack that no copy holds (a chunk whose
     * recorded top fell behind). Take the rest of the page below it in the
     * same read, rather than one read per frame. */
    uint64_t lo = addr;
    if (st->last_direct && addr < st->last_direct && st->last_direct - addr < PAGE)
        lo = addr & ~(uint64_t)(PAGE - 1);
    size_t len = (size_t)(addr - lo) + fsize;
    int rc = grow(&st->frame, &st->frame_cap, len);
    if (rc == 0)
        rc = mem_read(m, lo, st->frame, len);
    st->win_len = 0;
    if (rc < 0)
        return rc;
    st->win_addr = lo;
    st->win_len = len;
    st->last_direct = addr;
    *out = st->frame + (addr - lo);
    return 0;
}

/* Brent's cycle detection: compare each address with a checkpoint that
 * moves to the current address at every power of two steps. (The walks
 * are bounded by the frames they may keep.) */
struct cycle {
    uint64_t checkpoint;
    size_t power, steps;
};

static int cycle_step(struct cycle *c, uint64_t addr)
{
    if (addr == c->checkpoint)
        return PYS_E_TOODEEP;
    if (++c->steps == c->power) {
        c->checkpoint = addr;
        c->power *= 2;
        c->steps = 0;
    }
    return 0;
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/*
 * A walk that filled out[0..n), as many frames as it may, with a caller
 * still below them (next): the chain is longer than n. Cut it above its
 * n-th frame, keeping n - 1 (room for a marker that says so), unless it is
 * cyclic: Brent's check meets a cycle only some steps after the chain
 * enters it, which may be past the cut, so a chain is taken as long only if
 * no address comes twice among the frames read and next.
 */
static int cut_walk(struct cpy_stack *st, const struct cpy_raw_frame *out, size_t n, uint64_t next)
{
    if (next % 8 != 0)
        return PYS_E_CORRUPT;
    if (n == 0) {
        st->cut = next;
        return 0;
    }
    if (n + 1 > st->seen_cap) {
        uint64_t *seen = realloc(st->seen, (n + 1) * sizeof *seen);
        if (!seen)
            return PYS_E_NOMEM;
        st->seen = seen;
        st->seen_cap = n + 1;
    }
    for (size_t i = 0; i < n; i++)
        st->seen[i] = out[i].addr;
    st->seen[n] = next;
    qsort(st->seen, n + 1, sizeof *st->seen, compare_u64);
    for (size_t i = 0; i < n; i++)
        if (st->seen[i] == st->seen[i + 1])
            return PYS_E_TOODEEP;
    st->cut = out[n - 1].addr;
    return (int)n - 1;
}

size_t cpy_frame_object_head(const struct cpy_offsets *o)
{
    const struct cpy_frame_offsets *f = &o->interpreter_frame;
    uint64_t need = f->executable + 8;
    if (f->previous + 8 > need)
        need = f->previous + 8;
    if (f->lasti + 4 > need)
        need = f->lasti + 4;
    if (CPY_HAS(o, interpreter_frame, executing) && f->executing + 1 > need)
        need = f->executing + 1;
    size_t head = (size_t)((need + 7) & ~(uint64_t)7);
    return head < f->size ? head : (size_t)f->size;
}

/* 3.8-3.10: every frame is a PyFrameObject on the heap, generators' too. */
static int walk_objects(struct mem *m, const struct cpy_offsets *o, const struct cpy_thread *t,
                        struct cpy_stack *st, struct cpy_raw_frame *out, size_t max)
{
    const struct cpy_frame_offsets *f = &o->interpreter_frame;
    /* Only the fields the walk reads, up to the last of them: the object's
     * head (and so is each span the next batch replays). */
    size_t fsize = cpy_frame_object_head(o);
    struct cycle cy = {0, 1, 0};
    size_t n = 0;
    int rc;
    if ((rc = grow(&st->frame, &st->frame_cap, fsize)) < 0)
        return rc;
    st->nchunks = 0;
    st->regions = 0;
    st->direct = 0;
    st->passed_bottom = 0;
    no_window(st);
    for (uint64_t addr = t->current_frame; addr != 0;) {
        uint64_t code, prev;
        int32_t lasti;
        if (n == max)
            return cut_walk(st, out, n, addr);
        if ((rc = cycle_step(&cy, addr)) < 0)
            return rc;
        if (addr % 8 != 0)
            return PYS_E_CORRUPT;
        if ((rc = mem_read(m, addr, st->frame, fsize)) < 0)
            return rc;
        st->regions++;
        st->direct++;
        memcpy(&code, st->frame + f->executable, 8);
        memcpy(&prev, st->frame + f->previous, 8);
        memcpy(&lasti, st->frame + f->lasti, 4);
        /* Every frame on a live stack is executing; a suspended generator's
         * frame (its f_back NULL) here means the stack moved under the walk.
         * Not always the top frame: the interpreter makes a frame the
         * thread's current one before it marks it executing (a call, a
         * generator resumed) and unmarks it before it makes the caller
         * current again (a return, a yield), its caller linked all along.
         * Such a top, its caller set, is passed over as its caller's
         * moment, as Python itself shows it: the caller is checked like any
         * other frame (executing, read again), and a frame read after it
         * returned (freed, its stale caller kept) leads to that caller's
         * stack at its own moment, or to a frame not executing below the
         * top. On a stopped target the top is passed over even alone; on
         * a running one, a top without a caller that has not started (the
         * bottom frame of a stack being entered: a thread's first, each
         * call from C with no Python frame below) too, if a later read
         * finds it so and current (passed_bottom, core/torn.c). */
        if (CPY_HAS(o, interpreter_frame, executing) &&
            st->frame[f->executing] != o->traits.executing) {
            if (n == 0 && addr == t->current_frame && (st->stopped || prev != 0)) {
                addr = prev;
                continue;
            }
            if (n == 0 && addr == t->current_frame && prev == 0 && lasti == -1) {
                st->passed_bottom = addr;
                return 0;
            }
            return PYS_E_CORRUPT;
        }
        out[n].addr = addr;
        out[n].code = code;
        out[n].instr_ptr = (uint64_t)(int64_t)lasti;
        out[n].owner = 0;
        out[n].shim = code == 0;
        out[n].entry = 0;
        out[n].running = 0;
        out[n].inferred = 0;
        out[n].loose = 0;
        n++;
        addr = prev;
    }
    return (int)n;
}

/* The largest frame owner any version uses (3.14's FRAME_OWNED_BY_CSTACK):
 * a frame whose owner byte is beyond it is memory read while it was
 * reused. */
#define OWNER_MAX 4

/* Parse the _PyInterpreterFrame bytes fb at addr into *rf; its previous. */
static uint64_t parse_frame(const struct cpy_offsets *o, uint64_t addr, const uint8_t *fb,
                            struct cpy_raw_frame *rf)
{
    const struct cpy_frame_offsets *f = &o->interpreter_frame;
    uint64_t exe, prev, ip;
    memcpy(&exe, fb + f->executable, 8);
    memcpy(&prev, fb + f->previous, 8);
    memcpy(&ip, fb + f->instr_ptr, 8);
    uint8_t owner = fb[f->owner];
    exe &= ~o->stackref_mask;
    rf->addr = addr;
    rf->code = exe;
    rf->instr_ptr = ip;
    rf->owner = owner;
    rf->shim = owner >= o->first_shim_owner || exe == 0;
    rf->entry = CPY_HAS(o, interpreter_frame, is_entry) && fb[f->is_entry] != 0;
    rf->running = 0;
    rf->inferred = 0;
    rf->loose = 0;
    if (CPY_HAS(o, interpreter_frame, stacktop)) {
        int32_t top;
        memcpy(&top, fb + f->stacktop, 4);
        rf->running = top == -1;
    }
    return prev;
}

/* The caller of frame rf, copied with `previous` prev: prev, or for a
 * generator's frame copied suspended, st->link_caller if it is
 * st->link_frame, else the first of those st->gen_caller gives whose frame
 * runs the code object it ran then (rf marked inferred, *want its code, or
 * 0 for a link_caller: its position is its own). */
static int follow(struct mem *m, const struct cpy_offsets *o, const struct cpy_thread *t,
                  struct cpy_stack *st, struct cpy_raw_frame *rf, uint64_t prev, uint64_t want[2],
                  uint64_t *next)
{
    uint64_t c;
    want[0] = 0;
    *next = prev;
    if (prev == 0 && st->link_frame != 0 && rf->addr == st->link_frame && !rf->shim) {
        rf->inferred = 1;
        *next = st->link_caller;
        return 0;
    }
    if (prev != 0 || !st->gen_caller || rf->owner != CPY_OWNER_GENERATOR || rf->shim)
        return 0;
    for (size_t k = 0; st->gen_caller(st->gen_ctx, rf->addr, rf->code, k, &c, want); k++) {
        const uint8_t *fb;
        uint64_t exe;
        int rc;
        if (c == 0 || c % 8 != 0)
            continue;
        if ((rc = frame_bytes(m, o, t, st, c, &fb)) < 0)
            return rc;
        memcpy(&exe, fb + o->interpreter_frame.executable, 8);
        if ((exe & ~o->stackref_mask) != want[0])
            continue;
        rf->inferred = 1;
        *next = c;
        return 0;
    }
    want[0] = 0;
    return 0;
}

/* The caller of an inferred frame, just parsed into rf: its code must be
 * the one it had then, and its position is the call's then. */
static int caller_fits(struct cpy_raw_frame *rf, const uint64_t want[2])
{
    if (!want[0])
        return 1;
    if (rf->code != want[0])
        return 0;
    rf->instr_ptr = want[1];
    rf->loose = 1;
    return 1;
}

int cpy_stack_walk_to(struct mem *m, const struct cpy_offsets *o, const struct cpy_thread *t,
                      struct cpy_stack *st, uint64_t stop, struct cpy_raw_frame *out, size_t max,
                      uint64_t *stop_prev)
{
    struct cycle cy = {0, 1, 0};
    size_t n = 0;
    int rc;
    if (o->traits.frames == CPY_FRAMES_OBJECT)
        return PYS_E_INVAL;
    st->second_len = 0;
    st->cut = 0;
    /* With stop outside the current chunk (an entry frame on the C stack
     * below a run of generators), the chunks are copied only once the walk
     * reaches them: a walk that stays among frames read on their own does
     * not read, nor have the next prefetch read, a data stack it never
     * looks at. */
    int lazy = !above_in_current(t, stop);
    if (lazy) {
        st->nchunks = 0;
        st->regions = 0;
        st->direct = 0;
        no_window(st);
    } else if ((rc = copy_above(m, t, st, stop)) < 0) {
        return rc;
    }
    /* With stop in the current chunk, a walk that goes below it there, or
     * reaches a data stack frame outside it (an older chunk's: older than
     * every frame of the current one), has passed stop: it is not on the
     * chain (an anchor gone stale). Said at once, not after reading the
     * rest of the stack frame by frame. */
    uint64_t chunk = t->datastack_chunk, top = t->datastack_top;
    int in_current = chunk != 0 && stop >= chunk + CHUNK_HEADER && stop < top;
    uint64_t want[2] = {0, 0};
    for (uint64_t addr = t->current_frame; addr != 0;) {
        const uint8_t *fb = NULL;
        if ((rc = cycle_step(&cy, addr)) < 0)
            return rc;
        if (addr % 8 != 0)
            return PYS_E_CORRUPT;
        if (in_current && addr >= chunk && addr < stop)
            return PYS_E_NOTFOUND;
        if (lazy && on_data_stack(t, st, addr)) {
            size_t regions = st->regions, direct = st->direct;
            if ((rc = copy_chunks(m, t, st, stop, SIZE_MAX)) < 0)
                return rc;
            st->regions += regions;
            st->direct = direct;
            lazy = 0;
        }
        if ((rc = frame_bytes(m, o, t, st, addr, &fb)) < 0)
            return rc;
        if (n == max)
            return PYS_E_TOODEEP;
        uint64_t prev = parse_frame(o, addr, fb, &out[n++]);
        if (out[n - 1].owner > OWNER_MAX || !caller_fits(&out[n - 1], want))
            return PYS_E_CORRUPT;
        if (in_current && out[n - 1].owner == CPY_OWNER_THREAD && (addr < chunk || addr >= top))
            return PYS_E_NOTFOUND;
        if (addr == stop) {
            *stop_prev = prev;
            return (int)n;
        }
        if ((rc = follow(m, o, t, st, &out[n - 1], prev, want, &addr)) < 0)
            return rc;
    }
    /* The whole chain, without stop: NOTFOUND. A chain that ends short of
     * the base frame (a suspended generator's, its caller unlinked) was read
     * while it changed: a whole walk of it would fail the same way. */
    if (CPY_HAS(o, thread_state, base_frame) && t->base_frame != 0 && n > 0 &&
        out[n - 1].addr != t->base_frame)
        return PYS_E_CORRUPT;
    return PYS_E_NOTFOUND;
}

int cpy_stack_walk(struct mem *m, const struct cpy_offsets *o, const struct cpy_thread *t,
                   struct cpy_stack *st, struct cpy_raw_frame *out, size_t max)
{
    st->cut = 0;
    if (o->traits.frames == CPY_FRAMES_OBJECT)
        return walk_objects(m, o, t, st, out, max);

    uint64_t addr = t->current_frame, last = 0;
    struct cycle cy = {0, 1, 0};
    size_t n = 0;
    int rc;

    /* The chunks that hold the frames the walk may keep, at four times the
     * smallest frame each (a frame with some 30 local variables and stack
     * slots; the default limit's stays inside the snapshot's prefetch): a
     * stack much deeper than that (cut) is not copied whole at each walk,
     * and never fails for its depth alone. Frames beyond are read a page at
     * a time. */
    /* 3.11-3.12: no current frame while the data stack holds frames is a
     * cframe not filled in yet (cpy_stack_entering_root), not an idle
     * thread. */
    if (o->traits.frames == CPY_FRAMES_CFRAME && addr == 0 && t->datastack_chunk != 0 &&
        t->datastack_top > t->datastack_chunk + CHUNK_HEADER + 8)
        return PYS_E_CORRUPT;
    uint64_t want[2] = {0, 0};
    size_t per = 4 * (size_t)(o->interpreter_frame.size ? o->interpreter_frame.size : 1);
    size_t budget = max < CPY_MAX_CHUNK_BYTES / 2 / per ? max * per : CPY_MAX_CHUNK_BYTES / 2;
    if ((rc = copy_chunks(m, t, st, 0, budget)) < 0)
        return rc;
    while (addr != 0) {
        const uint8_t *fb = NULL;
        if (n == max)
            return cut_walk(st, out, n, addr);
        if ((rc = cycle_step(&cy, addr)) < 0)
            return rc;
        if (addr % 8 != 0)
            return PYS_E_CORRUPT;
        if ((rc = frame_bytes(m, o, t, st, addr, &fb)) < 0)
            return rc;
        uint64_t prev = parse_frame(o, addr, fb, &out[n++]);
        if (out[n - 1].owner > OWNER_MAX || !caller_fits(&out[n - 1], want))
            return PYS_E_CORRUPT;
        /* The frame a link_frame yields to has resumed, or is about to:
         * running, its position its own. */
        if (n > 1 && out[n - 2].inferred && out[n - 2].addr == st->link_frame)
            out[n - 1].loose = 1;
        last = addr;
        if ((rc = follow(m, o, t, st, &out[n - 1], prev, want, &addr)) < 0)
            return rc;
    }
    if (CPY_HAS(o, thread_state, base_frame) && t->base_frame != 0 && last != t->base_frame &&
        t->current_frame != 0)
        return PYS_E_CORRUPT;
    /* A whole stack starts where C entered the interpreter: an entry (shim)
     * frame from 3.12, a frame marked is_entry in 3.11. Anything else at the
     * bottom (a generator's frame, suspended: previous NULL) is a walk that
     * raced with the target. */
    if (n > 0) {
        const struct cpy_raw_frame *bottom = &out[n - 1];
        int whole = CPY_HAS(o, interpreter_frame, is_entry) ? bottom->entry : bottom->shim;
        if (!whole)
            return PYS_E_CORRUPT;
        /* Every entry frame has code (a trampoline's, or None), the base
         * frame aside: one with none is memory read while it was reused.
         * Taken for an entry frame, it would show the thread with no
         * Python frame at all: a sample lost silently, neither kept nor
         * failed. */
        if (bottom->code == 0 && bottom->addr != t->base_frame)
            return PYS_E_CORRUPT;
        /* 3.11: a generator keeps is_entry from its last resume from C, and
         * is marked running a moment before its caller is linked: a
         * generator at the bottom is taken as a walk that raced with a
         * resume. (A thread whose outermost Python frame really is a
         * generator, driven from C, cannot be read on 3.11.) */
        if (CPY_HAS(o, interpreter_frame, is_entry) && bottom->owner == CPY_OWNER_GENERATOR)
            return PYS_E_CORRUPT;
    }
    return (int)n;
}

/* --- 3.11-3.12: a thread caught entering a C-level call of the evaluation loop --- */

/* How far the root search below follows a chain, and at most how many
 * exception states it goes down. */
#define ROOT_STEPS 4096
#define ROOT_EXC_ITEMS 256
/* In 3.11 and 3.12 a generator's exception state (gi_exc_state) lies this
 * far before its frame (gi_iframe): the state, then origin or finalizer,
 * three flags and the frame state, padded. */
#define GEN_EXC_TO_FRAME 32

/*
 * The innermost generator (or coroutine) frame of thread t that runs, from
 * the thread's chain of exception states: each generator resumed pushes its
 * own (tstate->exc_info) before it runs and pops it as it yields or
 * returns, so the chain lists the running generators, innermost first. With
 * `entering`, the innermost is the one being entered, not linked to its
 * caller yet: the next is taken. A generator whose frame is `leaving` (0:
 * none) is passed over wherever it is. 0 in *out: none.
 */
static int running_generator(struct mem *m, const struct cpy_offsets *o,
                             const struct cpy_thread *t, int entering, uint64_t leaving,
                             uint64_t *out)
{
    const struct cpy_frame_offsets *f = &o->interpreter_frame;
    uint64_t item, tend = t->addr + o->thread_state.size;
    memcpy(&item, t->copy + o->thread_state.exc_info, 8);
    *out = 0;
    for (int i = 0; item != 0 && !(item >= t->addr && item < tend); i++) {
        uint64_t frame = item + GEN_EXC_TO_FRAME, prev;
        uint8_t owner;
        int rc;
        if (i == ROOT_EXC_ITEMS || item % 8 != 0)
            return PYS_E_CORRUPT;
        if ((rc = mem_read_fresh(m, frame + f->owner, &owner, 1)) < 0 ||
            (rc = mem_read_fresh(m, frame + f->previous, &prev, 8)) < 0)
            return rc;
        if (owner != CPY_OWNER_GENERATOR)
            return PYS_E_CORRUPT;
        if ((i > 0 || !entering) && frame != leaving) {
            *out = frame;
            return prev != 0 ? 0 : PYS_E_CORRUPT; /* running: linked */
        }
        if ((rc = mem_read_fresh(m, item + o->err_stackitem.previous_item, &item, 8)) < 0)
            return rc;
    }
    return 0;
}

/* Whether the walker knows how many words a frame of a code object takes
 * on the data stack (frame_words). */
static int frame_words_known(const struct cpy_offsets *o)
{
    return CPY_HAS(o, code_object, framesize) ||
           (CPY_HAS(o, code_object, nlocalsplus) && CPY_HAS(o, code_object, stacksize) &&
            CPY_HAS(o, interpreter_frame, localsplus));
}

/*
 * Into *words, how many words a frame of code object `code` takes on the
 * data stack: its co_framesize (3.12), or, where code objects have none
 * (3.11), what that sums: the frame's header (up to localsplus), its fast
 * locals and its evaluation stack. A count out of range is PYS_E_CORRUPT.
 */
static int frame_words(struct mem *m, const struct cpy_offsets *o, uint64_t code,
                       int32_t *words)
{
    int32_t nlocals, nstack;
    int rc;
    if (CPY_HAS(o, code_object, framesize))
        return mem_read_fresh(m, code + o->code_object.framesize, words, 4);
    if ((rc = mem_read_fresh(m, code + o->code_object.nlocalsplus, &nlocals, 4)) < 0 ||
        (rc = mem_read_fresh(m, code + o->code_object.stacksize, &nstack, 4)) < 0)
        return rc;
    if (nlocals < 0 || nlocals > CPY_MAX_LOCALS || nstack < 0 || nstack > CPY_MAX_LOCALS)
        return PYS_E_CORRUPT;
    *words = nlocals + nstack + (int32_t)(o->interpreter_frame.localsplus / 8);
    return 0;
}

/*
 * The innermost frame on thread t's data stack that has started: the
 * current chunk's frames lie back to back from its first slot (its second
 * in the thread's first chunk) to datastack_top, each frame_words words
 * long. One not started yet (its position one unit before its code) is
 * being entered, not linked to its caller yet: the one below it is taken,
 * and *unstarted says so. 0 in *out when the chunk holds none.
 */
static int top_started_frame(struct mem *m, const struct cpy_offsets *o,
                             const struct cpy_symbols *sym, const struct cpy_thread *t,
                             uint64_t *out, int *unstarted)
{
    const struct cpy_frame_offsets *f = &o->interpreter_frame;
    uint64_t chunk = t->datastack_chunk, top = t->datastack_top, prev, addr;
    int rc;
    *out = 0;
    *unstarted = 0;
    if (chunk == 0 || sym->code_type == 0)
        return PYS_E_CORRUPT;
    if ((rc = mem_read_fresh(m, chunk + CHUNK_PREVIOUS, &prev, 8)) < 0)
        return rc;
    addr = chunk + CHUNK_HEADER + (prev == 0 ? 8 : 0);
    if (top < addr || top - addr > CPY_CHUNK_MIN * 64u)
        return PYS_E_CORRUPT;
    for (size_t n = 0; addr < top; n++) {
        uint64_t code, pos, type;
        int32_t words;
        uint8_t owner;
        if (n == ROOT_STEPS)
            return PYS_E_TOODEEP;
        if ((rc = mem_read_fresh(m, addr + f->executable, &code, 8)) < 0 ||
            (rc = mem_read_fresh(m, addr + f->instr_ptr, &pos, 8)) < 0 ||
            (rc = mem_read_fresh(m, addr + f->owner, &owner, 1)) < 0 ||
            (rc = mem_read_fresh(m, code + o->pyobject.ob_type, &type, 8)) < 0 ||
            (rc = frame_words(m, o, code, &words)) < 0)
            return rc;
        if (owner != CPY_OWNER_THREAD || type != sym->code_type || words <= 0 ||
            (uint64_t)words * 8 > top - addr)
            return PYS_E_CORRUPT;
        *unstarted = pos == code + o->code_object.co_code_adaptive - 2;
        if (!*unstarted)
            *out = addr;
        addr += (uint64_t)words * 8;
    }
    return 0;
}

/* Whether the chain from frame `from` passes through frame `to`: 1 or 0,
 * or an error. */
static int on_chain(struct mem *m, const struct cpy_offsets *o, uint64_t from, uint64_t to)
{
    for (size_t n = 0; from != 0; n++) {
        int rc;
        if (from == to)
            return 1;
        if (n == ROOT_STEPS || from % 8 != 0)
            return PYS_E_TOODEEP;
        if ((rc = mem_read_fresh(m, from + o->interpreter_frame.previous, &from, 8)) < 0)
            return rc;
    }
    return 0;
}

/* Of frames gen (a running generator's) and top (the data stack's), either
 * 0, the innermost: the one whose chain passes through the other. */
static int inner_of(struct mem *m, const struct cpy_offsets *o, uint64_t gen, uint64_t top,
                    uint64_t *root)
{
    if (gen == 0 || top == 0) {
        *root = gen ? gen : top;
        return *root ? 0 : PYS_E_NOTFOUND;
    }
    int gen_inner = on_chain(m, o, gen, top);
    if (gen_inner < 0)
        return gen_inner;
    if (!gen_inner && on_chain(m, o, top, gen) != 1)
        return PYS_E_CORRUPT;
    *root = gen_inner ? gen : top;
    return 0;
}

int cpy_stack_entering_root(struct mem *m, const struct cpy_offsets *o,
                            const struct cpy_symbols *sym, const struct cpy_thread *t,
                            uint64_t *root)
{
    uint64_t gen, top;
    int rc, unstarted;
    if (o->traits.frames != CPY_FRAMES_CFRAME || !t->copy ||
        !frame_words_known(o))
        return PYS_E_INVAL;
    /* What is being entered from C: the data stack's top frame, not
     * started yet (a function called from C), else the innermost running
     * generator (one resumed from C). */
    if ((rc = top_started_frame(m, o, sym, t, &top, &unstarted)) < 0 ||
        (rc = running_generator(m, o, t, !unstarted, 0, &gen)) < 0)
        return rc;
    return inner_of(m, o, gen, top, root);
}

int cpy_stack_yield_caller(struct mem *m, const struct cpy_offsets *o,
                           const struct cpy_symbols *sym, const struct cpy_thread *t,
                           uint64_t frame, uint64_t *caller)
{
    uint64_t gen, top;
    int rc, unstarted;
    if (o->traits.frames != CPY_FRAMES_CFRAME || CPY_HAS(o, interpreter_frame, is_entry) ||
        !t->copy || !frame_words_known(o) || frame == 0)
        return PYS_E_INVAL;
    uint64_t prev;
    uint8_t owner;
    if ((rc = mem_read_fresh(m, frame + o->interpreter_frame.owner, &owner, 1)) < 0 ||
        (rc = mem_read_fresh(m, frame + o->interpreter_frame.previous, &prev, 8)) < 0)
        return rc;
    if (owner != CPY_OWNER_GENERATOR || prev != 0)
        return PYS_E_NOTFOUND;
    if ((rc = top_started_frame(m, o, sym, t, &top, &unstarted)) < 0 ||
        (rc = running_generator(m, o, t, 0, frame, &gen)) < 0)
        return rc;
    return inner_of(m, o, gen, top, caller);
}
