/*
 * mem: reads from a memory source (mem.h: a live process, an image, ...)
 * behind one interface: the batched prefetch and its plan, second copies,
 * coalescing of close reads, counters. Nothing here depends on the kind of
 * source.
 */
#include "mem/mem.h"

#include <string.h>

#include <pystrobe/pystrobe.h>

#include "platform/platform.h"
#include "util/array.h"

/* Bounds on a prefetch: spans recorded and bytes re-read per snapshot. A
 * sample of a few hundred threads stays well inside. */
#define PREFETCH_MAX_SPANS 8192
#define PREFETCH_MAX_BYTES (4u << 20)
/* Spans closer than this are read as one. */
#define PREFETCH_MERGE_GAP 256
/* The smallest page: spans meeting in one are in one mapping. */
#define MEM_PAGE_MASK (~(uint64_t)(MEM_PAGE_SIZE - 1))
/* Spans stay in the prefetch this many snapshots after their last read. */
#define KEEP_SNAPSHOTS 16
/* ... if at most this long (or the log has a span from the same start). */
#define KEEP_MAX_LEN 1024
/* mem_readv_fresh: segments closer than this are read as one span of at
 * most COALESCE_MAX_HULL bytes, COALESCE_MAX_BYTES in all. */
#define COALESCE_GAP 512
/* A batch is taken as paused when it took this much more than twice the
 * usual time of recent batches of its kind for what it read (judge_batch):
 * well past the noise of a quiet machine (a few microseconds), well short
 * of a preemption (milliseconds).
 * Its second copies are then dropped, and the walks read again: against
 * the fastest batch, a loaded machine's common short preemptions would
 * have every stack at rest read twice. */
#define BATCH_SLOW_NS 10000u
/* ... and as paused for its walks' top frames (mem_batch_paused) when it
 * took this much, and a quarter, more than the fastest recent batch: a
 * microsecond lets a fast target call and return a few times; a batch's
 * own jitter (a plan a few frames longer, caches) stays under a quarter.
 * Against the fastest, not the mean: the mean takes in the pauses
 * themselves (a loaded machine's, a cold first batch's), and a pause
 * shorter than what they add to it would go unseen. */
#define BATCH_PAUSE_NS 1000u
/* What one system call costs beyond its pieces, in pages (batch_cost). */
#define BATCH_CALL_UNITS 3u
/* Second copies (mem_recheck_hint) closer than this are read as one. */
#define RECHECK_MERGE_GAP 2048
/* ... into spans of at most this many bytes. */
#define RECHECK_MERGED_MAX (64u << 10)
_Static_assert(RECHECK_MERGE_GAP < 4096, "a gap between second copies holds no whole page");
#define COALESCE_MAX_HULL (256u << 10)
#define COALESCE_MAX_BYTES (8u << 20)
_Static_assert(COALESCE_GAP < 4096, "a gap between a hull's segments holds no whole page");

#include <stdlib.h>

void mem_init(struct mem *m, struct mem_source *src)
{
    memset(m, 0, sizeof *m);
    m->src = src;
    m->keep_snapshots = KEEP_SNAPSHOTS;
}

void mem_stats_add(const struct mem *m, struct mem_stats *sum)
{
    sum->reads += m->stats.reads;
    sum->pieces += m->stats.pieces;
    sum->prefetched += m->stats.prefetched;
    sum->bytes += m->stats.bytes;
    sum->failures += m->stats.failures;
    sum->writes += m->stats.writes;
    sum->batches += m->stats.batches;
    sum->paused += m->stats.paused;
}

void mem_set_keep(struct mem *m, uint64_t snapshots)
{
    m->keep_snapshots = snapshots;
}

void mem_set_source(struct mem *m, struct mem_source *src)
{
    m->src = src;
}

uint64_t mem_clock_ns(struct mem *m)
{
    return m->src ? m->src->ops->clock_ns(m->src) : 0;
}

void mem_init_process(struct mem *m, int pid)
{
    mem_init(m, NULL);
    mem_proc_init(&m->own.proc, pid);
    m->src = &m->own.proc.base;
}

void mem_release(struct mem *m)
{
    free(m->log);
    free(m->pf);
    free(m->pfbuf);
    free(m->plan);
    free(m->rplan);
    m->rplan = NULL;
    m->caprplan = 0;
    free(m->planlog);
    free(m->keep);
    free(m->keep2);
    m->keep = m->keep2 = NULL;
    m->nkeep = m->capkeep = m->capkeep2 = 0;
    free(m->rcbuf);
    m->rcbuf = NULL;
    free(m->ord);
    m->ord = NULL;
    m->capord = m->ninner = m->ninner_prev = m->ninner_cur = 0;
    m->rccap = m->nrc = m->nrc_prev = m->nrc_cur = 0;
    free(m->hull);
    free(m->hullbuf);
    free(m->moved);
    m->hull = NULL;
    m->hullbuf = NULL;
    m->moved = NULL;
    m->caphull = m->caphullbuf = m->capmoved = 0;
    m->log = m->pf = m->plan = m->planlog = NULL;
    m->pfbuf = NULL;
    m->nlog = m->caplog = m->npf = m->cappf = m->pfcap = 0;
    m->nplan = m->capplan = m->nplanlog = m->capplanlog = 0;
}

void mem_init_image(struct mem *m, const struct mem_region *regions, size_t n)
{
    mem_init(m, NULL);
    mem_image_init(&m->own.image, regions, n);
    m->src = &m->own.image.base;
}

/* Record a read for the next snapshot's prefetch. */
int mem_grow_buffer(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 4096;
    while (n < need)
        n *= 2;
    uint8_t *p = realloc(*buf, n);
    if (!p)
        return -1;
    /* Touched now, not by the kernel's first copy into it. */
    memset(p + *cap, 0, n - *cap);
    *buf = p;
    *cap = n;
    return 0;
}

static void log_span(struct mem *m, uint64_t addr, size_t len)
{
    if (!m->logging || m->nlog >= PREFETCH_MAX_SPANS)
        return;
    if (m->nlog == m->caplog) {
        size_t cap = m->caplog ? m->caplog * 2 : 64;
        struct mem_span *v = realloc(m->log, cap * sizeof *v);
        if (!v)
            return;
        m->log = v;
        m->caplog = cap;
    }
    m->log[m->nlog].addr = addr;
    m->log[m->nlog].len = len;
    m->log[m->nlog].off = 0;
    m->nlog++;
}

/* How many of the n spans v (sorted by address) start at or before addr:
 * the one that may hold addr is the last of them. */
static size_t spans_upto(const struct mem_span *v, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The prefetched copy of [addr, addr + len), or NULL. */
static const uint8_t *prefetched(const struct mem *m, uint64_t addr, size_t len)
{
    size_t lo = spans_upto(m->pf, m->npf, addr);
    if (lo == 0)
        return NULL;
    const struct mem_span *p = &m->pf[lo - 1];
    if (addr - p->addr > p->len || len > p->len - (addr - p->addr))
        return NULL;
    return m->pfbuf + p->off + (addr - p->addr);
}

int mem_in_batch(const struct mem *m, uint64_t addr, size_t len)
{
    return prefetched(m, addr, len) != NULL;
}

int mem_batch_copied_after(const struct mem *m, uint64_t a, size_t alen, uint64_t b, size_t blen)
{
    /* pfbuf holds the pieces in the order they were read (read_plan). */
    const uint8_t *pa = prefetched(m, a, alen), *pb = prefetched(m, b, blen);
    return pa && pb && pa >= pb + blen;
}

static int read_now(struct mem *m, uint64_t addr, void *buf, size_t len)
{
    int rc;
    m->stats.reads++;
    m->epoch++;
    m->stats.pieces++;
    m->stats.bytes += len;
    rc = m->src ? m->src->ops->read(m->src, addr, buf, len) : PYS_E_BADADDR;
    if (rc < 0)
        m->stats.failures++;
    return rc;
}

int mem_read_fresh(struct mem *m, uint64_t addr, void *buf, size_t len)
{
    if (len == 0)
        return 0;
    if (addr == 0 || addr + len < addr)
        return PYS_E_BADADDR;
    return read_now(m, addr, buf, len);
}

int mem_read(struct mem *m, uint64_t addr, void *buf, size_t len)
{
    return mem_read_noting(m, addr, buf, len, addr, len);
}

/* Record a read of [addr, addr + len) for the next prefetch: as the note
 * [note_addr, note_addr + note_len) if that holds it. */
static void log_noted(struct mem *m, uint64_t addr, size_t len, uint64_t note_addr,
                      size_t note_len)
{
    if (note_addr > addr || note_addr + note_len < note_addr ||
        note_addr + note_len < addr + len)
        log_span(m, addr, len);
    else
        log_span(m, note_addr, note_len);
}

int mem_read_noting(struct mem *m, uint64_t addr, void *buf, size_t len, uint64_t note_addr,
                    size_t note_len)
{
    if (len == 0)
        return 0;
    if (addr == 0 || addr + len < addr)
        return PYS_E_BADADDR;
    const uint8_t *p = m->npf ? prefetched(m, addr, len) : NULL;
    if (p) {
        memcpy(buf, p, len);
        m->stats.prefetched++;
        log_noted(m, addr, len, note_addr, note_len);
        return 0;
    }
    m->outside++;
    int rc = read_now(m, addr, buf, len);
    if (rc == 0)
        log_noted(m, addr, len, note_addr, note_len);
    return rc;
}

int mem_read_twice(struct mem *m, uint64_t addr, void *buf, void *second, size_t len,
                   const struct mem_seg *after, size_t nafter, uint64_t note_addr,
                   size_t note_len)
{
    if (len == 0 || addr == 0 || addr + len < addr || nafter > MEM_TWICE_AFTER_MAX ||
        (m->npf && prefetched(m, addr, len)))
        return mem_read_noting(m, addr, buf, len, note_addr, note_len);
    struct mem_seg segs[2 + MEM_TWICE_AFTER_MAX];
    segs[0] = (struct mem_seg){addr, buf, len};
    segs[1] = (struct mem_seg){addr, second, len};
    if (nafter > 0)
        memcpy(segs + 2, after, nafter * sizeof *after);
    m->outside++;
    int got = mem_readv_some(m, segs, 2 + nafter);
    if (got <= 0) /* not even the first copy: unmapped, or the errors it tells */
        return got < 0 ? got : PYS_E_BADADDR;
    log_noted(m, addr, len, note_addr, note_len);
    return (size_t)got == 2 + nafter;
}

int mem_read_then(struct mem *m, uint64_t addr, void *buf, size_t len,
                  const struct mem_seg *more, size_t nmore)
{
    if (len == 0 || addr == 0 || addr + len < addr || nmore == 0 || nmore > MEM_THEN_MAX ||
        (m->npf && prefetched(m, addr, len)))
        return mem_read(m, addr, buf, len);
    struct mem_seg segs[1 + MEM_THEN_MAX];
    segs[0] = (struct mem_seg){addr, buf, len};
    memcpy(segs + 1, more, nmore * sizeof *more);
    m->outside++;
    int got = mem_readv_some(m, segs, 1 + nmore);
    if (got <= 0) /* not even the first: unmapped, or the errors it tells */
        return got < 0 ? got : PYS_E_BADADDR;
    log_noted(m, addr, len, addr, len);
    return got - 1;
}

static int cmp_span(const void *a, const void *b)
{
    const struct mem_span *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->len < y->len ? -1 : x->len > y->len;
}

/* A snapshot's log is a few dozen spans, mostly in order already: insertion
 * sort there (qsort's merge sort costs more than the rest of the plan). */
static void sort_spans(struct mem_span *v, size_t n)
{
    if (n > 64) {
        qsort(v, n, sizeof *v, cmp_span);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        struct mem_span x = v[i];
        size_t j = i;
        for (; j > 0 && cmp_span(&v[j - 1], &x) > 0; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

static int grow_spans(struct mem_span **v, size_t *cap, size_t n)
{
    if (n <= *cap)
        return 0;
    struct mem_span *p = realloc(*v, n * sizeof *p);
    if (!p)
        return -1;
    *v = p;
    *cap = n;
    return 0;
}

/* Read b with a (b starts at or after a): when the gap between them is
 * small, or lies within the page where a ends (mapped, then, since a's last
 * byte and b's first are). The kernel pins and looks up each piece of a
 * process_vm_readv on its own, which costs far more than copying a few
 * hundred bytes more. */
static int same_or_near(const struct mem_span *a, const struct mem_span *b)
{
    uint64_t end = a->addr + a->len;
    return b->addr <= end + PREFETCH_MERGE_GAP ||
           (a->len > 0 && (b->addr & MEM_PAGE_MASK) == ((end - 1) & MEM_PAGE_MASK));
}

/* Whether one of the n sorted spans v starts at addr. */
static int starts_in(const struct mem_span *v, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo].addr == addr;
}

/*
 * Turn the log into the plan: sorted, merged spans. A sampled program reads
 * the same spans snapshot after snapshot: then last time's plan is reused.
 * Spans read in any of the last keep_snapshots snapshots stay in it (`keep`,
 * sorted, off = the snapshot that last read them): a stack that comes and
 * goes (generators resumed in turn, a leaf called now and then) is then
 * still read in the one batch, not on its own. Not for longer, even while
 * the log stays the same: the entry frame a whole walk read once would
 * otherwise cost every batch a page until the log next changed. Not a large
 * span, though, unless this log reads a span from the same start (a stack
 * copy that may grow back): a stack the walk has left (a chunk that is no
 * longer the current one, the chunks a whole walk read once) would cost its
 * every page in each of those batches.
 */
static int make_plan(struct mem *m)
{
    if (m->nlog == m->nplanlog && memcmp(m->log, m->planlog, m->nlog * sizeof *m->log) == 0) {
        m->planlog_last = m->snapshots;
        if (m->snapshots < m->keep_expiry)
            return 0;
    }
    if (grow_spans(&m->planlog, &m->capplanlog, m->nlog) < 0 ||
        grow_spans(&m->keep2, &m->capkeep2, m->nkeep + m->nlog) < 0 ||
        grow_spans(&m->plan, &m->capplan, m->nkeep + m->nlog) < 0) {
        m->nplan = m->nplanlog = m->nkeep = 0;
        return -1;
    }
    memcpy(m->planlog, m->log, m->nlog * sizeof *m->log);
    m->nplanlog = m->nlog;
    /* This log, sorted, then merged with the kept spans still young. */
    struct mem_span *fresh = m->plan;
    memcpy(fresh, m->log, m->nlog * sizeof *m->log);
    sort_spans(fresh, m->nlog);
    size_t a = 0, b = 0, nk = 0;
    while (a < m->nkeep || b < m->nlog) {
        struct mem_span x;
        if (b == m->nlog || (a < m->nkeep && cmp_span(&m->keep[a], &fresh[b]) < 0)) {
            x = m->keep[a++];
            /* The last plan's own spans were read by every log since. */
            if (x.off == m->plan_snap)
                x.off = m->planlog_last;
            if (m->snapshots - x.off > m->keep_snapshots ||
                (x.len > KEEP_MAX_LEN && !starts_in(fresh, m->nlog, x.addr)))
                continue;
        } else {
            x = fresh[b++];
            x.off = m->snapshots;
        }
        if (nk && m->keep2[nk - 1].addr == x.addr && m->keep2[nk - 1].len == x.len) {
            if (x.off > m->keep2[nk - 1].off)
                m->keep2[nk - 1].off = x.off;
            continue;
        }
        if (nk == PREFETCH_MAX_SPANS)
            break;
        m->keep2[nk++] = x;
    }
    struct mem_span *t = m->keep;
    size_t tc = m->capkeep;
    m->keep = m->keep2;
    m->capkeep = m->capkeep2;
    m->nkeep = nk;
    m->keep2 = t;
    m->capkeep2 = tc;
    /* The same log again reuses this plan, until the first span kept from
     * an older log is due to leave it. */
    m->plan_snap = m->planlog_last = m->snapshots;
    m->keep_expiry = UINT64_MAX;
    for (size_t i = 0; i < nk; i++)
        if (m->keep[i].off < m->snapshots && m->keep[i].off + m->keep_snapshots + 1 < m->keep_expiry)
            m->keep_expiry = m->keep[i].off + m->keep_snapshots + 1;
    size_t n = 0;
    for (size_t i = 0; i < nk; i++) {
        struct mem_span sp = m->keep[i];
        sp.off = 0;
        if (n && same_or_near(&m->plan[n - 1], &sp)) {
            uint64_t end = sp.addr + sp.len, cur = m->plan[n - 1].addr + m->plan[n - 1].len;
            if (end > cur)
                m->plan[n - 1].len = (size_t)(end - m->plan[n - 1].addr);
        } else {
            m->plan[n++] = sp;
        }
    }
    m->nplan = n;
    return 0;
}

void mem_prefetch_late(struct mem *m, uint64_t addr)
{
    m->late_addr = addr;
}

int mem_prefetch_late_value(const struct mem *m, uint64_t *out)
{
    if (!m->late_ok)
        return 0;
    *out = m->late_val;
    return 1;
}

/*
 * A plan span that failed to read (unmapped since: a data-stack chunk the
 * target freed) leaves `keep` at once, and the next batch makes a new plan:
 * kept on, it would fail again in every batch until it expired, each time
 * one more system call that takes the target's mmap_lock. A span this
 * snapshot's walk reads is planned again from the log if read again.
 */
static void drop_kept(struct mem *m, const struct mem_span *bad)
{
    size_t k = 0;
    for (size_t j = 0; j < m->nkeep; j++)
        if (m->keep[j].addr < bad->addr || m->keep[j].addr - bad->addr >= bad->len)
            m->keep[k++] = m->keep[j];
    m->nkeep = k;
    m->keep_expiry = 0;
}

/* Whether one of m->inner (sorted) lies in [addr, addr + len). */
static int holds_inner(const struct mem *m, uint64_t addr, size_t len)
{
    size_t lo = util_lower_bound_u64(m->inner, m->ninner, addr);
    return lo < m->ninner && m->inner[lo] - addr < len;
}

/*
 * The order the n plan spans are read in, into m->ord: by address, then
 * those holding an address of m->inner, in the order those were hinted
 * (m->inner_seq: a span holding several goes by the first), and the one at
 * `last` (if < n) left out (it is read at the very end). 0, or -1 if there
 * is no room for it (then plain_index gives the order).
 */
static int issue_order(struct mem *m, const struct mem_span *plan, size_t n, size_t last)
{
    if (2 * n > m->capord) {
        size_t *v = realloc(m->ord, 2 * n * sizeof *v);
        if (!v)
            return -1;
        m->ord = v;
        m->capord = 2 * n;
    }
    /* The upper half: whether each span is placed already (or is last). */
    size_t k = 0, *placed = m->ord + n;
    for (size_t i = 0; i < n; i++) {
        placed[i] = i == last || holds_inner(m, plan[i].addr, plan[i].len);
        if (!placed[i])
            m->ord[k++] = i;
    }
    for (size_t i = 0; i < n; i++)
        placed[i] = i == last || !holds_inner(m, plan[i].addr, plan[i].len);
    for (size_t j = 0; j < m->ninner; j++) {
        size_t i = spans_upto(plan, n, m->inner_seq[j]);
        if (i == 0 || m->inner_seq[j] - plan[i - 1].addr >= plan[i - 1].len || placed[i - 1])
            continue;
        placed[i - 1] = 1;
        m->ord[k++] = i - 1;
    }
    return 0;
}

/* Without m->ord: every span by address, but the one at `last` (if < n)
 * moved to the end. */
static size_t plain_index(size_t p, size_t last, size_t n)
{
    if (last >= n || p < last)
        return p;
    return p + 1 < n ? p + 1 : last;
}

/* The order of the second copies, into rord: those holding an address of
 * m->inner first, in the reverse of the order those were hinted (so that
 * a caller's two copies bracket its callee's), then the others by address
 * downwards, those hinted to come last (mem_recheck_hint_last) after all. */
static void recheck_order(const struct mem *m, size_t *rord)
{
    uint8_t placed[2 * MEM_RECHECK_MAX] = {0};
    size_t k = 0;
    for (size_t j = m->ninner; j-- > 0;) {
        size_t i = spans_upto(m->rc, m->nrc, m->inner_seq[j]);
        if (i == 0 || m->inner_seq[j] - m->rc[i - 1].addr >= m->rc[i - 1].len || placed[i - 1])
            continue;
        placed[i - 1] = 1;
        rord[k++] = i - 1;
    }
    for (uint8_t last = 0; last < 2; last++)
        for (size_t j = m->nrc; j-- > 0;)
            if (!placed[j] && m->rc_last_kind[j] == last)
                rord[k++] = j;
}

/* Record plan span idx, read into pfbuf at off, in pf (issue order). */
static void plan_read(struct mem *m, const struct mem_span *plan, size_t idx, size_t off)
{
    m->pf[m->npf] = plan[idx];
    m->pf[m->npf].off = off;
    m->stats.bytes += plan[idx].len;
    m->npf++;
}

/*
 * Read the plan's n spans into pfbuf in one batch (a span that fails,
 * unmapped since, is dropped and the batch goes on after it), and m->pf to
 * find them, sorted by address. Then the second copies (m->rc), in the
 * reverse order of their addresses, as the spans are read in theirs: the
 * spans read last are copied again soonest, so that little happens between
 * the two copies. The late word comes last of all: when a span holds it,
 * that span is read last in its stead (one piece fewer); else the word is
 * one more piece at the end.
 */
static void judge_batch(struct mem *m, int retry, uint64_t took, uint64_t cost);
static uint64_t batch_cost(const struct mem_seg *seg, size_t n);

static void read_plan(struct mem *m, const struct mem_span *plan, size_t n, int retry)
{
    struct mem_seg seg[MEM_BATCH_MAX + 1 + 2 * MEM_RECHECK_MAX];
    size_t last = n; /* the plan span holding the late word, read last */
    for (size_t i = 0; m->late_addr != 0 && i < n; i++) {
        if (plan[i].len >= 8 && m->late_addr >= plan[i].addr &&
            m->late_addr - plan[i].addr <= plan[i].len - 8) {
            last = i;
            break;
        }
    }
    int ordered = issue_order(m, plan, n, last) == 0;
    size_t rord[2 * MEM_RECHECK_MAX];
    recheck_order(m, rord);
#define ISSUE(p) (ordered ? m->ord[p] : plain_index(p, last, n))
    uint64_t start = m->src->ops->clock_ns(m->src), cost = 0;
    /* The spans in issue order (ISSUE) but the last one: `plain`. */
    size_t plain = last < n ? n - 1 : n, i = 0, off = 0;
    int rc_left = m->nrc > 0, tail_left = last < n || m->late_addr != 0, rc_read = 0;
    while (i < plain || rc_left || tail_left) {
        size_t k = 0, o = off;
        for (; k < MEM_BATCH_MAX && i + k < plain; k++) {
            const struct mem_span *sp = &plan[ISSUE(i + k)];
            seg[k] = (struct mem_seg){sp->addr, m->pfbuf + o, sp->len};
            o += sp->len;
        }
        /* After the spans' last call: the second copies, then the tail. */
        int final = i + k == plain;
        size_t r = final && rc_left ? m->nrc : 0, total = k + r;
        for (size_t j = 0; j < r; j++) {
            const struct mem_span *sp = &m->rc[rord[j]];
            seg[k + j] = (struct mem_seg){sp->addr, m->rcbuf + sp->off, sp->len};
        }
        int tail = final && tail_left;
        if (tail)
            seg[total++] = last < n
                               ? (struct mem_seg){plan[last].addr, m->pfbuf + o, plan[last].len}
                               : (struct mem_seg){m->late_addr, &m->late_val, 8};
        m->stats.reads++;
        m->epoch++;
        m->stats.pieces += total;
        cost += batch_cost(seg, total);
        int rc = m->src->ops->readv(m->src, seg, total);
        size_t got = rc < 0 ? 0 : (size_t)rc;
        for (size_t j = 0; j < k && j < got; j++) {
            size_t idx = ISSUE(i + j);
            plan_read(m, plan, idx, off);
            off += plan[idx].len;
        }
        if (got < k) {
            /* A span that failed: dropped, the rest read in the next call. */
            m->stats.failures++;
            drop_kept(m, &plan[ISSUE(i + got)]);
            off += plan[ISSUE(i + got)].len;
            i += got + 1;
            continue;
        }
        i += k;
        if (!final)
            continue;
        if (r > 0) {
            rc_left = 0;
            rc_read = got >= k + r;
            if (!rc_read) {
                /* A second copy failed: none is used; the tail is read on. */
                m->stats.failures++;
                continue;
            }
        }
        if (tail) {
            tail_left = 0;
            if (got < total) {
                m->stats.failures += last < n;
            } else if (last < n) {
                /* Read last, so last in pf: move it to its place by address. */
                size_t at = 0;
                while (at < m->npf && m->pf[at].addr < plan[last].addr)
                    at++;
                memmove(&m->pf[at + 1], &m->pf[at], (m->npf - at) * sizeof *m->pf);
                m->pf[at] = plan[last];
                m->pf[at].off = off;
                m->stats.bytes += plan[last].len;
                m->npf++;
                memcpy(&m->late_val, m->pfbuf + off + (m->late_addr - plan[last].addr), 8);
                m->late_ok = 1;
            } else {
                m->late_ok = 1;
            }
        }
    }
#undef ISSUE
    /* pf is looked up by address: the inner spans, read after the others,
     * go back to their places. */
    if (ordered && m->ninner > 0)
        sort_spans(m->pf, m->npf);
    judge_batch(m, retry, m->src->ops->clock_ns(m->src) - start, cost);
    if (!rc_read)
        m->nrc = 0;
}

/*
 * A batch that took `took` ns for `cost` units of work (batch_cost), a
 * retry's or a snapshot's. Its time is judged per unit against the recent
 * batches of its kind: plans differ from batch to batch (a deeper stack,
 * a retry's fewer spans), and the kernel's time grows with their pieces.
 * One far slower than those was paused (its thread preempted, the VM's CPU
 * taken away) while the target ran on: long enough, maybe, for a chain
 * that changed under the first copy to have come back to what it was by
 * the second. Its second copies are not used: the walks that needed them
 * are read again. Paused at all (past the fastest one's time for its cost
 * and its jitter, BATCH_PAUSE_NS), or the first of its kind (nothing to
 * tell a pause by), its walks check their top frames too (core/torn.c).
 */
static void judge_batch(struct mem *m, int retry, uint64_t took, uint64_t cost)
{
    uint64_t *recent = m->recent_ns[retry], fast = UINT64_MAX, sum = 0;
    size_t n = m->recent_n[retry];
    if (cost == 0)
        cost = 1;
    for (size_t i = 0; i < n; i++)
        if (recent[i] < fast)
            fast = recent[i];
    /* Their usual time a unit: the mean, each counted at most four times
     * the fastest (a preempted batch among them says nothing of the
     * others). Kept in 1/16 ns. */
    for (size_t i = 0; i < n; i++)
        sum += recent[i] < 4 * fast ? recent[i] : 4 * fast;
    uint64_t expect = n ? fast * cost / 16 : 0, usual = n ? sum / n * cost / 16 : 0;
    m->paused = n == 0 || took > expect + expect / 4 + BATCH_PAUSE_NS;
    if (n > 0 && took > 2 * usual + BATCH_SLOW_NS)
        m->nrc = 0;
    recent[m->recent_at[retry]] = took * 16 / cost;
    m->recent_at[retry] = (m->recent_at[retry] + 1) % MEM_BATCH_RECENT;
    if (m->recent_n[retry] < MEM_BATCH_RECENT)
        m->recent_n[retry]++;
    m->stats.batches++;
    m->stats.paused += (uint64_t)m->paused;
}

/*
 * What n segments of one call cost the kernel, in units of the time it
 * takes to pin and copy one page: each segment is pinned and looked up
 * page by page, however few bytes it takes of each, and the call itself
 * costs about BATCH_CALL_UNITS pages (timings: bench/MECHANISMS.md).
 */
static uint64_t batch_cost(const struct mem_seg *seg, size_t n)
{
    uint64_t units = BATCH_CALL_UNITS;
    for (size_t i = 0; i < n; i++)
        if (seg[i].len > 0)
            units += (seg[i].addr + seg[i].len - 1) / MEM_PAGE_SIZE - seg[i].addr / MEM_PAGE_SIZE + 1;
    return units;
}

static void prefetch(struct mem *m, int retry);

void mem_prefetch_begin(struct mem *m)
{
    memcpy(m->rc_prev, m->rc_cur, m->nrc_cur * sizeof *m->rc_cur);
    m->nrc_prev = m->nrc_cur;
    m->nrc_cur = 0;
    memcpy(m->inner_prev, m->inner_cur, m->ninner_cur * sizeof *m->inner_cur);
    m->ninner_prev = m->ninner_cur;
    m->ninner_cur = 0;
    m->snapshots++;
    prefetch(m, 0);
    m->nlog = 0;
    m->log_mark = 0;
    m->logging = m->src != NULL;
}

void mem_log_mark(struct mem *m)
{
    m->log_mark = m->nlog;
}

size_t mem_log_marked(const struct mem *m)
{
    return m->log_mark;
}

void mem_log_mark_at(struct mem *m, size_t at)
{
    m->log_mark = at < m->nlog ? at : m->nlog;
}

void mem_prefetch_hint(struct mem *m, uint64_t addr, size_t len)
{
    int logging = m->logging;
    m->logging = m->src != NULL;
    log_span(m, addr, len);
    m->logging = logging;
}

void mem_prefetch_retry(struct mem *m)
{
    prefetch(m, 1);
}

/* A second copy hinted: `last` (RC_LAST) for one read after all the
 * others. Kept in the span's off until plan_recheck. */
#define RC_LAST 1u

static void recheck_hint(struct mem *m, uint64_t addr, size_t len, size_t last)
{
    if (!m->src || addr == 0 || len == 0 || len > MEM_RECHECK_SPAN)
        return;
    /* Next to the span hinted last (a walk's frames, one after another),
     * and of its kind: one span the longer. */
    if (m->nrc_cur > 0 && m->rc_cur[m->nrc_cur - 1].off == last) {
        struct mem_span *l = &m->rc_cur[m->nrc_cur - 1];
        uint64_t lo = addr < l->addr ? addr : l->addr;
        uint64_t hi = addr + len > l->addr + l->len ? addr + len : l->addr + l->len;
        if (hi - lo <= l->len + len + RECHECK_MERGE_GAP && hi - lo <= RECHECK_MERGED_MAX) {
            l->addr = lo;
            l->len = (size_t)(hi - lo);
            return;
        }
    }
    if (m->nrc_cur == MEM_RECHECK_MAX)
        return;
    m->rc_cur[m->nrc_cur++] = (struct mem_span){addr, len, last};
}

void mem_recheck_hint(struct mem *m, uint64_t addr, size_t len)
{
    recheck_hint(m, addr, len, 0);
}

void mem_recheck_hint_last(struct mem *m, uint64_t addr, size_t len)
{
    recheck_hint(m, addr, len, RC_LAST);
}

void mem_inner_hint(struct mem *m, uint64_t addr)
{
    if (m->src && addr != 0 && m->ninner_cur < MEM_INNER_MAX)
        m->inner_cur[m->ninner_cur++] = addr;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The addresses a batch reads innermost (m->inner, sorted): the last
 * snapshot's hints, and on a retry this one's so far. */
static void plan_inner(struct mem *m, int retry)
{
    size_t n = m->ninner_prev;
    memcpy(m->inner, m->inner_prev, n * sizeof *m->inner);
    if (retry) {
        memcpy(m->inner + n, m->inner_cur, m->ninner_cur * sizeof *m->inner);
        n += m->ninner_cur;
    }
    memcpy(m->inner_seq, m->inner, n * sizeof *m->inner);
    if (n > 1)
        qsort(m->inner, n, sizeof *m->inner, cmp_u64);
    m->ninner = n;
}

const uint8_t *mem_recheck_view(struct mem *m, uint64_t addr, size_t len)
{
    /* Lookups come in runs within one span: the last one found first. */
    for (size_t k = 0; k < m->nrc; k++) {
        size_t i = (m->rc_last + k) % m->nrc;
        const struct mem_span *sp = &m->rc[i];
        if (addr >= sp->addr && len <= sp->len && addr - sp->addr <= sp->len - len) {
            m->rc_last = i;
            return m->rcbuf + sp->off + (addr - sp->addr);
        }
    }
    return NULL;
}

/* The spans to read a second time: the last snapshot's hints, and on a retry
 * this one's so far. 0, or -1 if no room. */
static int plan_recheck(struct mem *m, int retry)
{
    size_t n = 0, bytes = 0;
    for (size_t i = 0; i < m->nrc_prev; i++)
        m->rc[n++] = m->rc_prev[i];
    for (size_t i = 0; retry && i < m->nrc_cur; i++)
        m->rc[n++] = m->rc_cur[i];
    /* Spans close together are read as one: a piece costs the kernel more
     * than a few hundred bytes copied (51 threads' anchors, 1.4 KB apart in
     * the heap, are one piece rather than 51). */
    sort_spans(m->rc, n);
    size_t merged = 0;
    for (size_t i = 0; i < n; i++) {
        struct mem_span *last = merged ? &m->rc[merged - 1] : NULL;
        uint64_t end = last ? last->addr + last->len : 0;
        if (last && m->rc[i].addr <= end + RECHECK_MERGE_GAP &&
            m->rc[i].addr + m->rc[i].len - last->addr <= RECHECK_MERGED_MAX) {
            uint64_t e = m->rc[i].addr + m->rc[i].len;
            if (e > end)
                last->len = (size_t)(e - last->addr);
            /* Read last only if all it holds may be. */
            m->rc_last_kind[merged - 1] &= (uint8_t)(m->rc[i].off == RC_LAST);
        } else {
            m->rc_last_kind[merged] = m->rc[i].off == RC_LAST;
            m->rc[merged++] = m->rc[i];
        }
    }
    n = merged;
    for (size_t i = 0; i < n; i++) {
        m->rc[i].off = bytes;
        bytes += m->rc[i].len;
    }
    if (mem_grow_buffer(&m->rcbuf, &m->rccap, bytes) < 0)
        return -1;
    m->nrc = n;
    return 0;
}

/*
 * A retry's plan, in m->rplan: the spans of m->plan but those that hold
 * reads made before mem_log_mark only. Spans that hold reads made since, or
 * none this snapshot (kept from recent plans: frames that come and go),
 * stay. Returns how many, or n (m->plan itself) if no room.
 */
static size_t retry_plan(struct mem *m, size_t n)
{
    if (m->log_mark == 0 || grow_spans(&m->rplan, &m->caprplan, n) < 0)
        return n;
    /* Flags in off: 1, read before the mark; 2, since. */
    for (size_t j = 0; j < n; j++) {
        m->rplan[j] = m->plan[j];
        m->rplan[j].off = 0;
    }
    for (size_t i = 0; i < m->nlog; i++) {
        uint64_t a = m->log[i].addr;
        size_t lo = spans_upto(m->rplan, n, a);
        if (lo > 0 && a - m->rplan[lo - 1].addr < m->rplan[lo - 1].len)
            m->rplan[lo - 1].off |= i < m->log_mark ? 1u : 2u;
    }
    size_t k = 0;
    for (size_t j = 0; j < n; j++)
        if (m->rplan[j].off != 1)
            m->rplan[k++] = m->rplan[j];
    return k;
}

/* Read the plan made from the log (and the spans kept) in one batch. */
static void prefetch(struct mem *m, int retry)
{
    m->npf = 0;
    m->late_ok = 0;
    m->nrc = 0;
    m->paused = 0;
    plan_inner(m, retry);
    if (m->src && m->nlog > 0 && plan_recheck(m, retry) == 0 && make_plan(m) == 0) {
        size_t n = m->nplan, bytes = 0;
        for (size_t i = 0; i < n; i++)
            bytes += m->plan[i].len;
        int ok = bytes <= PREFETCH_MAX_BYTES && mem_grow_buffer(&m->pfbuf, &m->pfcap, bytes) == 0;
        if (ok && n > m->cappf) {
            struct mem_span *v = realloc(m->pf, n * sizeof *v);
            ok = v != NULL;
            if (ok) {
                m->pf = v;
                m->cappf = n;
            }
        }
        if (ok && retry) {
            size_t k = retry_plan(m, n);
            read_plan(m, k < n ? m->rplan : m->plan, k, 1);
        } else if (ok) {
            read_plan(m, m->plan, n, 0);
        }
    }
    if (m->npf == 0)
        m->nrc = 0; /* nothing read: no second copies either */
}

void mem_prefetch_end(struct mem *m)
{
    m->npf = 0;
    m->nrc = 0;
}

int mem_read_u64(struct mem *m, uint64_t addr, uint64_t *out)
{
    uint64_t v;
    int rc = mem_read(m, addr, &v, sizeof v);
    if (rc == 0)
        *out = v;
    return rc;
}

int mem_write(struct mem *m, uint64_t addr, const void *buf, size_t len)
{
    if (addr == 0 || addr + len < addr)
        return PYS_E_BADADDR;
    m->stats.writes++;
    return m->src ? m->src->ops->write(m->src, addr, buf, len) : PYS_E_BADADDR;
}

int mem_write_u64(struct mem *m, uint64_t addr, uint64_t v)
{
    return mem_write(m, addr, &v, sizeof v);
}

static int readv_now(struct mem *m, const struct mem_seg *segs, size_t n)
{
    if (!m->src)
        return n > 0 ? PYS_E_BADADDR : 0;
    size_t done = 0;
    while (done < n) {
        const struct mem_seg *ps = segs + done;
        size_t k = 0;
        for (; k < MEM_BATCH_MAX && done + k < n; k++) {
            if (ps[k].addr == 0)
                return PYS_E_BADADDR;
            m->stats.bytes += ps[k].len;
        }
        m->stats.reads++;
        m->epoch++;
        m->stats.pieces += k;
        int got = m->src->ops->readv(m->src, ps, k);
        if (got < 0) {
            m->stats.failures++;
            return got;
        }
        if ((size_t)got < k) {
            /* A segment failed: read it alone to learn why. */
            m->stats.failures++;
            int rc = mem_read_fresh(m, ps[got].addr, ps[got].buf, ps[got].len);
            if (rc < 0)
                return rc;
            done += (size_t)got + 1;
            continue;
        }
        done += k;
    }
    return 0;
}

int mem_readv_some(struct mem *m, const struct mem_seg *segs, size_t n)
{
    size_t k = 0;
    if (n > MEM_BATCH_MAX)
        n = MEM_BATCH_MAX;
    if (!m->src)
        return 0;
    for (; k < n && segs[k].addr != 0; k++)
        m->stats.bytes += segs[k].len;
    if (k == 0)
        return 0;
    m->stats.reads++;
    m->epoch++;
    m->stats.pieces += k;
    int got = m->src->ops->readv(m->src, segs, k);
    if (got == PYS_E_BADADDR)
        got = 0;
    if (got <= 0)
        m->stats.failures++;
    return got;
}

/* Grow the coalescing scratch (hulls and their bytes) to n hulls, `bytes`. */
static int grow_hulls(struct mem *m, size_t n, size_t bytes)
{
    if (n > m->caphull) {
        struct mem_seg *v = realloc(m->hull, n * sizeof *v);
        if (!v)
            return -1;
        m->hull = v;
        m->caphull = n;
    }
    return mem_grow_buffer(&m->hullbuf, &m->caphullbuf, bytes);
}

/* The extent of the hull that starts at segs[i] (of n): *lo, *hi, and the
 * segment after it. */
static size_t hull_at(const struct mem_seg *segs, size_t n, size_t i, uint64_t *lo, uint64_t *hi)
{
    *lo = segs[i].addr;
    *hi = segs[i].addr + segs[i].len;
    size_t j = i + 1;
    for (; j < n; j++) {
        uint64_t a = segs[j].addr, b = segs[j].addr + segs[j].len;
        uint64_t nlo = a < *lo ? a : *lo, nhi = b > *hi ? b : *hi;
        if (b < a || a > *hi + COALESCE_GAP || b + COALESCE_GAP < *lo ||
            nhi - nlo > COALESCE_MAX_HULL)
            break;
        *lo = nlo;
        *hi = nhi;
    }
    return j;
}

/*
 * Plan the hulls of segs (n >= 1, none wrapping around) into m->hull, their
 * bytes in m->hullbuf, `copies` times over (1, or 2: the same hulls again
 * after the first ones, into bytes of their own, the first ones in the
 * reverse order: hull h's first copy at m->hull[nh - 1 - h], its second at
 * m->hull[nh + h]). The hulls of one copy, or 0 when they are not worth it
 * (as many as the segments) and worth is asked, or cannot be had (too many
 * bytes, no memory).
 */
static size_t plan_hulls(struct mem *m, const struct mem_seg *segs, size_t n, int copies,
                         int worth)
{
    size_t nh = 0, bytes = 0;
    uint64_t lo, hi;
    for (size_t i = 0; i < n; nh++) {
        if (segs[i].addr + segs[i].len < segs[i].addr)
            return 0;
        i = hull_at(segs, n, i, &lo, &hi);
        bytes += (size_t)(hi - lo);
    }
    if ((worth && nh == n) || bytes > COALESCE_MAX_BYTES / 2 ||
        grow_hulls(m, (size_t)copies * nh, (size_t)copies * bytes) < 0)
        return 0;
    size_t off = 0, h = 0;
    for (size_t i = 0; i < n; h++) {
        i = hull_at(segs, n, i, &lo, &hi);
        for (int c = 0; c < copies; c++)
            m->hull[copies == 2 && c == 0 ? nh - 1 - h : h + (size_t)c * nh] =
                (struct mem_seg){lo, m->hullbuf + off + (size_t)c * bytes, (size_t)(hi - lo)};
        off += (size_t)(hi - lo);
    }
    return nh;
}

/*
 * Read many small segments, most of them a few bytes apart (fields of
 * consecutive frames), as a few spans: the kernel pins and looks up each
 * piece of a process_vm_readv separately, so one span of a few KiB costs
 * far less than a hundred 8-byte pieces of it. Runs of segments (in the
 * given order) whose hull stays within COALESCE_GAP of each next one are
 * read as that hull, then copied out. If a hull cannot be read, the whole
 * read fails with its error.
 */
int mem_readv_fresh(struct mem *m, const struct mem_seg *segs, size_t n)
{
    size_t nh = n < 2 ? 0 : plan_hulls(m, segs, n, 1, 1);
    if (nh == 0)
        return readv_now(m, segs, n);
    /* A hull is covered by its segments and gaps of under a page: it can
     * only fail where one of its segments would, with the same error. (The
     * segments read one by one would cost a piece each, and a chain that
     * moved under a deep walk unmaps chunks that hundreds of them lie in.) */
    int rc = readv_now(m, m->hull, nh);
    if (rc < 0)
        return rc;
    for (size_t i = 0, k = 0; k < nh; k++) {
        const struct mem_seg *hl = &m->hull[k];
        for (; i < n && segs[i].addr >= hl->addr && segs[i].addr + segs[i].len <= hl->addr + hl->len;
             i++)
            memcpy(segs[i].buf, (uint8_t *)hl->buf + (segs[i].addr - hl->addr), segs[i].len);
    }
    return 0;
}

int mem_readv_fresh_twice(struct mem *m, const struct mem_seg *segs, size_t n,
                          const uint8_t **moved)
{
    size_t nh = n ? plan_hulls(m, segs, n, 2, 0) : 0;
    if (n && (nh == 0 || mem_grow_buffer(&m->moved, &m->capmoved, n) < 0))
        return PYS_E_NOMEM;
    int rc = n ? readv_now(m, m->hull, 2 * nh) : 0;
    if (rc < 0)
        return rc;
    for (size_t i = 0, k = 0; k < nh; k++) {
        const struct mem_seg *first = &m->hull[nh - 1 - k], *hl = &m->hull[nh + k];
        for (; i < n && segs[i].addr >= hl->addr && segs[i].addr + segs[i].len <= hl->addr + hl->len;
             i++) {
            size_t off = (size_t)(segs[i].addr - hl->addr);
            memcpy(segs[i].buf, (uint8_t *)hl->buf + off, segs[i].len);
            m->moved[i] = memcmp((uint8_t *)first->buf + off, (uint8_t *)hl->buf + off,
                                 segs[i].len) != 0;
        }
    }
    *moved = m->moved;
    return 0;
}

int mem_readv(struct mem *m, const struct mem_seg *segs, size_t n)
{
    size_t hit = 0;
    if (m->npf) {
        for (; hit < n; hit++)
            if (!prefetched(m, segs[hit].addr, segs[hit].len))
                break;
    }
    int rc = 0;
    if (m->npf && hit == n) {
        for (size_t i = 0; i < n; i++)
            memcpy(segs[i].buf, prefetched(m, segs[i].addr, segs[i].len), segs[i].len);
        m->stats.prefetched += n;
    } else {
        m->outside++;
        rc = mem_readv_fresh(m, segs, n);
    }
    if (rc == 0)
        for (size_t i = 0; i < n; i++)
            log_span(m, segs[i].addr, segs[i].len);
    return rc;
}
