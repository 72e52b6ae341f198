/*
 * live_agg: the live view's counts. live_data_sample is a sink of the
 * sample stream and runs on the sampling thread: it never waits, it only
 * tries the lock (live.h says how). live_table_build runs on the UI thread
 * and turns the counts into rows: a function's (or line's) own samples, its
 * total samples (each stack counted once, however often the function is on
 * it), and the callers and callees of one selected row.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/live.h"

void live_data_init(struct live_data *d, const struct rec *r)
{
    memset(d, 0, sizeof *d);
    pthread_mutex_init(&d->mu, NULL);
    d->r = r;
    atomic_init(&d->quit, 0);
}

static void part_clear(struct live_part *p)
{
    pys_profile_free(p->prof);
    memset(p, 0, sizeof *p);
}

void live_data_release(struct live_data *d)
{
    part_clear(&d->whole);
    for (size_t i = 0; i < LIVE_BUCKETS; i++)
        part_clear(&d->bucket[i]);
    part_clear(&d->spill);
    free(d->scratch);
    pthread_mutex_destroy(&d->mu);
}

void live_data_reset(struct live_data *d)
{
    pthread_mutex_lock(&d->mu);
    d->reset = 1;
    pthread_mutex_unlock(&d->mu);
}

/* The counts of thread id in p; NULL once LIVE_MAX_THREADS are taken. */
static struct live_counts *thread_counts(struct live_part *p, uint64_t id)
{
    for (size_t i = 0; i < p->nth; i++)
        if (p->th[i].id == id)
            return &p->th[i].c;
    if (p->nth == LIVE_MAX_THREADS)
        return NULL;
    p->th[p->nth].id = id;
    memset(&p->th[p->nth].c, 0, sizeof p->th[p->nth].c);
    return &p->th[p->nth++].c;
}

static void counts_add(struct live_counts *to, const struct live_counts *c)
{
    to->samples += c->samples;
    to->gil += c->gil;
    to->gil_wait += c->gil_wait;
    to->cpu += c->cpu;
    to->cpu_known += c->cpu_known;
    to->exc += c->exc;
    to->gc += c->gc;
}

/* The state of one thread-sample. */
static void thread_state(struct live_counts *c, const struct pys_thread *t, int gc)
{
    c->samples = 1;
    c->gil = (t->status & PYS_THREAD_HAS_GIL) != 0;
    c->gil_wait = (t->status & PYS_THREAD_GIL_REQUESTED) != 0;
    c->cpu_known = (t->status & PYS_THREAD_UNKNOWN) == 0;
    c->cpu = c->cpu_known && (t->status & PYS_THREAD_ON_CPU);
    c->exc = (t->status & PYS_THREAD_HAS_EXCEPTION) != 0;
    c->gc = 0;
    for (size_t i = 0; gc && i < t->nframes; i++)
        if (t->frames[i].kind == PYS_FRAME_GC) {
            c->gc = 1;
            break;
        }
}

static int part_stack(struct live_part *p, const struct rec *r, uint64_t id,
                      const struct pys_frame *f, size_t n, uint64_t w)
{
    if (!p->prof) {
        p->prof = pys_profile_new();
        if (!p->prof)
            return PYS_E_NOMEM;
        pys_profile_set_max_memory(p->prof, r->max_memory);
        pys_profile_count_opcodes(p->prof, r->opcodes);
    }
    return pys_profile_add(p->prof, id, f, n, w);
}

/* Add one sample to p. 0, or PYS_E_NOMEM (the sample partly counted). */
static int part_add(struct live_part *p, const struct rec *r, const struct pys_snapshot *snap)
{
    int failed = 0, rc = 0;
    p->snaps++;
    if (!snap) {
        p->failed++;
        return 0;
    }
    for (size_t i = 0; i < snap->ninterps; i++) {
        const struct pys_interp *in = &snap->interps[i];
        for (size_t k = 0; k < in->nthreads; k++) {
            const struct pys_thread *t = &in->threads[k];
            if (t->error) {
                failed = 1;
                continue;
            }
            uint64_t id = t->host_id ? t->host_id : t->native_id;
            struct live_counts one;
            thread_state(&one, t, r->gc);
            counts_add(&p->all, &one);
            struct live_counts *c = thread_counts(p, id);
            if (c)
                counts_add(c, &one);
            if (t->nframes && rec_thread_matches(r, t) && rc == 0)
                rc = part_stack(p, r, id, t->frames, t->nframes, 1);
        }
    }
    p->failed += (uint64_t)failed;
    return rc;
}

/* Add the counts of `from` to `to`, stacks included. 0, or PYS_E_NOMEM. */
static int part_merge(struct live_data *d, struct live_part *to, const struct live_part *from)
{
    to->snaps += from->snaps;
    to->failed += from->failed;
    counts_add(&to->all, &from->all);
    for (size_t i = 0; i < from->nth; i++) {
        struct live_counts *c = thread_counts(to, from->th[i].id);
        if (c)
            counts_add(c, &from->th[i].c);
    }
    if (!from->prof)
        return 0;
    size_t nn = pys_profile_nodes(from->prof);
    for (uint32_t id = 1; id < nn; id++) {
        const struct pys_profile_node *nd = pys_profile_node(from->prof, id);
        if (nd->self == 0 || pys_profile_is_thread(from->prof, id))
            continue;
        /* The stack from this node up to its thread, innermost first;
         * parents have smaller ids, so the walk ends. */
        size_t n = 0;
        uint32_t at = id, thread = 0;
        while (at != 0) {
            const struct pys_profile_node *a = pys_profile_node(from->prof, at);
            if (pys_profile_is_thread(from->prof, at)) {
                thread = at;
                break;
            }
            if (n == d->scratch_cap) {
                size_t cap = d->scratch_cap ? 2 * d->scratch_cap : 256;
                struct pys_frame *f = realloc(d->scratch, cap * sizeof *f);
                if (!f)
                    return PYS_E_NOMEM;
                d->scratch = f;
                d->scratch_cap = cap;
            }
            const struct pys_frame *fr = pys_profile_frame(from->prof, a->frame);
            if (fr)
                d->scratch[n++] = *fr;
            at = a->parent;
        }
        if (n == 0 || thread == 0)
            continue;
        int rc =
            part_stack(to, d->r, pys_profile_thread(from->prof, thread), d->scratch, n, nd->self);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Make the bucket of second sec the one filling (under mu). */
static void rotate(struct live_data *d, uint64_t sec)
{
    struct live_part *b = &d->bucket[d->cur];
    if (b->sec == sec)
        return;
    if (sec < b->sec || sec - b->sec >= LIVE_BUCKETS) {
        for (size_t i = 0; i < LIVE_BUCKETS; i++)
            part_clear(&d->bucket[i]);
        d->cur = 0;
        d->bucket[0].sec = sec;
        return;
    }
    for (uint64_t s = b->sec + 1; s <= sec; s++) {
        d->cur = (d->cur + 1) % LIVE_BUCKETS;
        part_clear(&d->bucket[d->cur]);
        d->bucket[d->cur].sec = s;
    }
}

int live_data_sample(void *ctx, const struct rec_sample *smp)
{
    struct live_data *d = ctx;
    if (atomic_load_explicit(&d->quit, memory_order_relaxed))
        return PYS_E_INVAL; /* the user's `q`: sampling ends */
    if (pthread_mutex_trylock(&d->mu) != 0) {
        /* The UI is copying the counts: keep this sample aside. */
        (void)part_add(&d->spill, d->r, smp->snap);
        d->spilled = 1;
        return 0;
    }
    if (d->reset || d->start_ns == 0) {
        part_clear(&d->whole);
        for (size_t i = 0; i < LIVE_BUCKETS; i++)
            part_clear(&d->bucket[i]);
        d->cur = 0;
        d->start_ns = smp->t_ns;
        d->reset = 0;
    }
    rotate(d, (smp->t_ns - d->start_ns) / 1000000000u);
    struct live_part *b = &d->bucket[d->cur];
    if (d->spilled) {
        /* Counted as of now: the spill covers the UI's short hold. */
        (void)part_merge(d, &d->whole, &d->spill);
        (void)part_merge(d, b, &d->spill);
        part_clear(&d->spill);
        d->spilled = 0;
    }
    /* Out of memory loses counts on the screen only: the profile that is
     * written is the sampling loop's own. */
    (void)part_add(&d->whole, d->r, smp->snap);
    (void)part_add(b, d->r, smp->snap);
    d->last_ns = smp->end_ns;
    d->run_samples = smp->info->samples;
    d->run_failed = smp->info->failed;
    d->run_missed = smp->info->missed;
    d->s = smp->s;
    if (smp->snap) {
        size_t n = 0;
        for (size_t i = 0; i < smp->snap->ninterps; i++)
            n += smp->snap->interps[i].nthreads;
        d->nthreads = n;
    }
    pthread_mutex_unlock(&d->mu);
    return 0;
}

/* --- the table (UI thread) ------------------------------------------------ */

static uint64_t row_hash(const char *file, const char *name, int32_t line, int32_t kind)
{
    uint64_t h = (uint64_t)(uintptr_t)file * 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t)(uintptr_t)name * 0xc2b2ae3d27d4eb4full;
    h ^= ((uint64_t)(uint32_t)line << 8 | (uint32_t)kind) * 0x165667b19e3779f9ull;
    return h ^ (h >> 29);
}

static int table_grow_index(struct live_table *t)
{
    size_t cap = t->icap ? 2 * t->icap : 1024;
    uint32_t *ix = calloc(cap, sizeof *ix);
    if (!ix)
        return PYS_E_NOMEM;
    for (size_t i = 0; i < t->n; i++) {
        const struct live_row *w = &t->rows[i];
        size_t h = row_hash(w->file, w->name, w->line, w->kind) & (cap - 1);
        while (ix[h])
            h = (h + 1) & (cap - 1);
        ix[h] = (uint32_t)i + 1;
    }
    free(t->index);
    t->index = ix;
    t->icap = cap;
    return 0;
}

/* The row of frame f in the scope's keying; -1 if out of memory. */
static long table_row(struct live_table *t, const struct pys_frame *f, int lines)
{
    int32_t line = lines ? f->lineno : f->firstlineno;
    if (f->kind != PYS_FRAME_PYTHON)
        line = -1;
    if (2 * (t->n + 1) > t->icap && table_grow_index(t) < 0)
        return -1;
    size_t h = row_hash(f->filename, f->qualname, line, f->kind) & (t->icap - 1);
    while (t->index[h]) {
        struct live_row *w = &t->rows[t->index[h] - 1];
        if (w->file == f->filename && w->name == f->qualname && w->line == line &&
            w->kind == f->kind)
            return (long)t->index[h] - 1;
        h = (h + 1) & (t->icap - 1);
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 256;
        struct live_row *rows = realloc(t->rows, cap * sizeof *rows);
        if (!rows)
            return -1;
        t->rows = rows;
        t->cap = cap;
    }
    t->rows[t->n] =
        (struct live_row){f->filename, f->qualname, line, f->kind, 0, 0, 0, 0, 0, -1, 0, 0};
    t->index[h] = (uint32_t)t->n + 1;
    return (long)t->n++;
}

static int is_sel(const struct live_row *w, const struct live_scope *sc)
{
    return sc->sel_file && w->file == sc->sel_file && w->name == sc->sel_name &&
           w->line == sc->sel_line && w->kind == sc->sel_kind;
}

/* --opcodes, by line: node id's instructions, counted for row k (the
 * outermost frame of the row on each stack, as its total). 0 or
 * PYS_E_NOMEM. */
static int table_add_ops(struct live_table *t, const pys_profile *p, uint32_t id, long k)
{
    struct pys_opcode_count buf[64];
    int n = pys_profile_node_opcodes(p, id, buf, sizeof buf / sizeof buf[0]);
    if (n < 0)
        return n;
    if (n > (int)(sizeof buf / sizeof buf[0]))
        n = (int)(sizeof buf / sizeof buf[0]);
    for (int i = 0; i < n; i++) {
        if (t->nops == t->capops) {
            size_t cap = t->capops ? 2 * t->capops : 256;
            struct live_op *v = realloc(t->ops, cap * sizeof *v);
            if (!v)
                return PYS_E_NOMEM;
            t->ops = v;
            t->capops = cap;
        }
        t->ops[t->nops++] = (struct live_op){(uint32_t)k, buf[i].opcode, buf[i].count};
    }
    return 0;
}

static int by_row_op(const void *a, const void *b)
{
    const struct live_op *x = a, *y = b;
    if (x->row != y->row)
        return x->row < y->row ? -1 : 1;
    return (x->opcode > y->opcode) - (x->opcode < y->opcode);
}

/* Each row's most sampled instruction, from the instructions counted. */
static void table_top_ops(struct live_table *t)
{
    if (t->nops)
        qsort(t->ops, t->nops, sizeof *t->ops, by_row_op);
    for (size_t i = 0; i < t->nops;) {
        struct live_op o = t->ops[i];
        while (++i < t->nops && t->ops[i].row == o.row && t->ops[i].opcode == o.opcode)
            o.count += t->ops[i].count;
        struct live_row *w = &t->rows[o.row];
        w->op_all += o.count;
        if (o.count > w->op_count) {
            w->op = o.opcode;
            w->op_count = o.count;
        }
    }
}

/* Count one profile's stacks into t: a depth-first walk, each node entered
 * once (parents have smaller ids and siblings link forward, so it ends). */
static int table_add_profile(struct live_table *t, const pys_profile *p,
                             const struct live_scope *sc)
{
    size_t nn = pys_profile_nodes(p);
    if (nn < 2)
        return 0;
    if (nn > t->ncap) {
        uint32_t *nr = realloc(t->node_row, nn * sizeof *nr);
        if (!nr)
            return PYS_E_NOMEM;
        t->node_row = nr;
        t->ncap = nn;
    }
    t->node_row[0] = 0;
    uint32_t id = pys_profile_node(p, 0)->first_child;
    while (id != 0 && id < nn) {
        const struct pys_profile_node *nd = pys_profile_node(p, id);
        int descend = 1;
        t->node_row[id] = 0;
        if (pys_profile_is_thread(p, id)) {
            descend = !sc->one_thread || pys_profile_thread(p, id) == sc->thread;
        } else {
            const struct pys_frame *f = pys_profile_frame(p, nd->frame);
            long k = f ? table_row(t, f, sc->by_line) : -2;
            if (k == -1)
                return PYS_E_NOMEM;
            if (k >= 0) {
                struct live_row *w = &t->rows[k];
                uint32_t pk = nd->parent < nn ? t->node_row[nd->parent] : 0;
                t->node_row[id] = (uint32_t)k + 1;
                w->own += nd->self;
                if (w->onpath++ == 0) {
                    w->total += nd->total;
                    if (sc->by_line && t->python_version && table_add_ops(t, p, id, k) < 0)
                        return PYS_E_NOMEM;
                    if (is_sel(w, sc)) {
                        if (pk)
                            t->rows[pk - 1].up += nd->total;
                        else
                            t->top_callers += nd->total;
                    }
                }
                if (pk && is_sel(&t->rows[pk - 1], sc))
                    w->down += nd->total;
            }
        }
        if (descend && nd->first_child > id && nd->first_child < nn) {
            id = nd->first_child;
            continue;
        }
        /* Leave id and the callers it was the last callee of. */
        for (;;) {
            const struct pys_profile_node *a = pys_profile_node(p, id);
            if (t->node_row[id])
                t->rows[t->node_row[id] - 1].onpath--;
            if (a->next_sibling > id && a->next_sibling < nn) {
                id = a->next_sibling;
                break;
            }
            if (a->parent >= id) { /* not a tree: stop */
                id = 0;
                break;
            }
            id = a->parent;
            if (id == 0)
                break;
        }
    }
    return 0;
}

static void scope_counts(struct live_table *t, const struct live_part *p, int one, uint64_t thread)
{
    t->snaps += p->snaps;
    t->failed += p->failed;
    if (!one) {
        counts_add(&t->counts, &p->all);
    } else {
        for (size_t i = 0; i < p->nth; i++)
            if (p->th[i].id == thread)
                counts_add(&t->counts, &p->th[i].c);
    }
    for (size_t i = 0; i < p->nth; i++) {
        size_t k = 0;
        while (k < t->nthreads && t->threads[k] != p->th[i].id)
            k++;
        if (k == t->nthreads && t->nthreads < LIVE_MAX_THREADS)
            t->threads[t->nthreads++] = p->th[i].id;
    }
}

int live_table_build(struct live_table *t, struct live_data *d, const struct live_scope *sc)
{
    int rc = 0;
    t->n = 0;
    t->nops = 0;
    if (t->index)
        memset(t->index, 0, t->icap * sizeof *t->index);
    t->snaps = t->failed = t->top_callers = 0;
    memset(&t->counts, 0, sizeof t->counts);
    t->sel = -1;

    pthread_mutex_lock(&d->mu);
    /* --opcodes: the version names the instructions (0: none counted). */
    t->python_version = d->r->opcodes && d->s ? pys_session_python_version(d->s) : 0;
    /* The whole run's threads, whatever the scope: the list to cycle. */
    t->nthreads = 0;
    if (sc->window) {
        uint64_t now = d->bucket[d->cur].sec, oldest = now;
        for (size_t i = 0; i < LIVE_BUCKETS; i++) {
            const struct live_part *b = &d->bucket[i];
            if (b->snaps == 0 || b->sec + LIVE_WINDOW_S < now)
                continue;
            oldest = b->sec < oldest ? b->sec : oldest;
            scope_counts(t, b, sc->one_thread, sc->thread);
            if (b->prof && rc == 0)
                rc = table_add_profile(t, b->prof, sc);
        }
        uint64_t from = d->start_ns + oldest * 1000000000u;
        t->span_ns = d->last_ns > from ? d->last_ns - from : 0;
    } else {
        scope_counts(t, &d->whole, sc->one_thread, sc->thread);
        if (d->whole.prof)
            rc = table_add_profile(t, d->whole.prof, sc);
        t->span_ns = d->last_ns > d->start_ns ? d->last_ns - d->start_ns : 0;
    }
    t->run_samples = d->run_samples;
    t->run_failed = d->run_failed;
    t->run_missed = d->run_missed;
    t->live_threads = d->nthreads;
    t->version = d->s ? pys_session_python_version_text(d->s) : NULL;
    pthread_mutex_unlock(&d->mu);

    table_top_ops(t);
    for (size_t i = 0; i < t->n; i++)
        if (is_sel(&t->rows[i], sc))
            t->sel = (long)i;
    return rc;
}

void live_table_release(struct live_table *t)
{
    free(t->rows);
    free(t->index);
    free(t->node_row);
    free(t->ops);
    memset(t, 0, sizeof *t);
}
