/*
 * live_agg: the live view's counts. live_data_sample is a sink of the
 * sample stream and runs on the sampling thread: it counts the sample's
 * thread states, and now and then publishes the profile's counts under a
 * lock it only tries (live.h says how). live_table_build runs on the UI
 * thread and turns a scope of the published counts into rows: a
 * function's (or line's) own samples, its total samples (each stack
 * counted once, however often the function is on it), and the callers and
 * callees of one selected row.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/live.h"
#include "util/array.h"

#define NS_PER_S 1000000000ull

/* How long the UI waits for the publication it asked for: one sample at
 * the slowest rates the view is any use at, and short enough that a key
 * never feels slow. Past it the UI shows the last publication. */
#define PUBLISH_WAIT_MS 50

void live_data_init(struct live_data *d, const struct rec *r)
{
    memset(d, 0, sizeof *d);
    pthread_mutex_init(&d->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&d->published, &ca);
    pthread_condattr_destroy(&ca);
    d->r = r;
    atomic_init(&d->want, 0);
    atomic_init(&d->quit, 0);
}

void live_data_release(struct live_data *d)
{
    free(d->nodes);
    free(d->frames);
    free(d->now.v);
    free(d->mark.v);
    free(d->base.v);
    free(d->next.v);
    for (size_t i = 0; i < LIVE_BUCKETS; i++)
        free(d->bucket[i].d.v);
    pys_profile_free(d->own);
    pthread_cond_destroy(&d->published);
    pthread_mutex_destroy(&d->mu);
}

void live_data_reset(struct live_data *d)
{
    pthread_mutex_lock(&d->mu);
    d->reset = 1;
    pthread_mutex_unlock(&d->mu);
    atomic_store(&d->want, 1);
}

/* --- thread states ----------------------------------------------------------- */

/* The counts of thread id in c, looked for from *hint on (a snapshot's
 * threads come in the same order each time, so the next one is likely
 * after the last found), named name unless NULL; NULL once
 * LIVE_MAX_THREADS are taken. */
static struct live_counts *thread_counts(struct live_tally *c, uint64_t id, const char *name,
                                         size_t *hint)
{
    for (size_t k = 0, i = *hint; k < c->nth; k++, i++) {
        if (i >= c->nth)
            i = 0;
        if (c->th[i].id == id) {
            *hint = i + 1;
            if (name)
                c->th[i].name = name;
            return &c->th[i].c;
        }
    }
    if (c->nth == LIVE_MAX_THREADS)
        return NULL;
    c->th[c->nth].id = id;
    c->th[c->nth].name = name;
    memset(&c->th[c->nth].c, 0, sizeof c->th[c->nth].c);
    *hint = c->nth + 1;
    return &c->th[c->nth++].c;
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

/* to += from, thread by thread. */
static void tally_add(struct live_tally *to, const struct live_tally *from)
{
    size_t hint = 0;
    to->snaps += from->snaps;
    to->failed += from->failed;
    counts_add(&to->all, &from->all);
    for (size_t i = 0; i < from->nth; i++) {
        struct live_counts *c = thread_counts(to, from->th[i].id, from->th[i].name, &hint);
        if (c)
            counts_add(c, &from->th[i].c);
    }
}

/* The state of one thread-sample (gc: look for a <GC> frame). */
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

/* Count one sample's states into c (snap NULL: it failed as a whole),
 * each thread with its Python name (the main interpreter's threads, from
 * session s); stacks are looked through for a <GC> frame only where a
 * collection was running. */
static void tally_sample(struct live_tally *c, pys_session *s, const struct pys_snapshot *snap,
                         size_t *hint)
{
    int failed = 0;
    c->snaps++;
    if (!snap) {
        c->failed++;
        return;
    }
    for (size_t i = 0; i < snap->ninterps; i++) {
        const struct pys_interp *in = &snap->interps[i];
        for (size_t k = 0; k < in->nthreads; k++) {
            const struct pys_thread *t = &in->threads[k];
            if (t->error) {
                failed = 1;
                continue;
            }
            struct live_counts one, *tc;
            thread_state(&one, t, in->gc_running);
            counts_add(&c->all, &one);
            const char *name = s && in->id == 0 ? pys_session_thread_name(s, t->thread_id) : NULL;
            if ((tc = thread_counts(c, t->host_id ? t->host_id : t->native_id, name, hint)))
                counts_add(tc, &one);
        }
    }
    c->failed += (uint64_t)failed;
}

/* --- the stacks: a profile's counts, published ------------------------------ */

/* Add snap's stacks that pass the filters to d->own, as the run adds them
 * to its profile when it keeps them as sampled. 0, or PYS_E_NOMEM. */
static int own_add(struct live_data *d, const struct pys_snapshot *snap)
{
    if (!d->own) {
        if (!(d->own = pys_profile_new()))
            return PYS_E_NOMEM;
        pys_profile_set_max_memory(d->own, d->r->max_memory);
        pys_profile_count_opcodes(d->own, d->r->opcodes);
    }
    for (size_t i = 0; i < snap->ninterps; i++) {
        const struct pys_interp *in = &snap->interps[i];
        for (size_t k = 0; k < in->nthreads; k++) {
            const struct pys_thread *t = &in->threads[k];
            if (t->error || t->nframes == 0 || !rec_thread_matches(d->r, t))
                continue;
            uint64_t id = t->host_id ? t->host_id : t->native_id;
            int rc = pys_profile_add(d->own, id, t->frames, t->nframes, 1);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

static int cnts_push(struct live_cnts *c, uint64_t key, uint64_t n)
{
    if (util_array_reserve((void **)&c->v, &c->cap, c->n + 1, sizeof *c->v) < 0)
        return PYS_E_NOMEM;
    c->v[c->n++] = (struct live_cnt){key, n};
    return 0;
}

static int cnts_copy(struct live_cnts *to, const struct live_cnts *from)
{
    if (util_array_reserve((void **)&to->v, &to->cap, from->n, sizeof *to->v) < 0)
        return PYS_E_NOMEM;
    if (from->n)
        memcpy(to->v, from->v, from->n * sizeof *to->v);
    to->n = from->n;
    return 0;
}

/* to = a - b, of cumulative lists (b: a's counts as they were earlier,
 * so that its keys are among a's). 0, or PYS_E_NOMEM. */
static int cnts_diff(struct live_cnts *to, const struct live_cnts *a, const struct live_cnts *b)
{
    to->n = 0;
    if (util_array_reserve((void **)&to->v, &to->cap, a->n, sizeof *to->v) < 0)
        return PYS_E_NOMEM;
    for (size_t i = 0, j = 0; i < a->n; i++) {
        uint64_t n = a->v[i].n;
        while (j < b->n && b->v[j].key < a->v[i].key)
            j++;
        if (j < b->n && b->v[j].key == a->v[i].key)
            n -= b->v[j].n;
        if (n)
            to->v[to->n++] = (struct live_cnt){a->v[i].key, n};
    }
    return 0;
}

/* Copy the nodes p made since the last publication, and the frames they
 * name. 0, or PYS_E_NOMEM (what was copied stays). */
static int mirror_sync(struct live_data *d, const pys_profile *p)
{
    size_t n = pys_profile_nodes(p);
    if (util_array_reserve((void **)&d->nodes, &d->capnodes, n, sizeof *d->nodes) < 0)
        return PYS_E_NOMEM;
    for (size_t id = d->nnodes; id < n; id++) {
        struct pys_profile_node nd;
        (void)pys_profile_node_peek(p, (uint32_t)id, &nd); /* id < n */
        /* Frame ids are made in order, each below the table's count. */
        while (d->nframes <= nd.frame) {
            if (util_array_reserve((void **)&d->frames, &d->capframes, d->nframes + 1,
                                   sizeof *d->frames) < 0)
                return PYS_E_NOMEM;
            const struct pys_frame *f = pys_profile_frame(p, (uint32_t)d->nframes);
            d->frames[d->nframes++] = f ? *f : (struct pys_frame){0};
        }
        uint64_t thread =
            pys_profile_is_thread(p, (uint32_t)id) ? pys_profile_thread(p, (uint32_t)id) : 0;
        d->nodes[id] = (struct live_node){id ? nd.parent : 0, nd.frame, thread};
        d->nnodes = id + 1;
    }
    return 0;
}

/* p's cumulative counts into d->next. 0, or PYS_E_NOMEM. Only the self
 * counts are read (pys_profile_node_peek): this runs on the sampling thread,
 * which must not pay for the profile's totals. */
static int counts_read(struct live_data *d, const pys_profile *p)
{
    struct live_cnts *c = &d->next;
    size_t n = pys_profile_nodes(p);
    c->n = 0;
    /* Room for every node's count at once: the loop below only stores. */
    if (util_array_reserve((void **)&c->v, &c->cap, n, sizeof *c->v) < 0)
        return PYS_E_NOMEM;
    for (uint32_t id = 1; id < n; id++) {
        struct pys_profile_node nd;
        (void)pys_profile_node_peek(p, id, &nd); /* id < n */
        uint64_t key = (uint64_t)id << 32;
        if (nd.self && c->n < c->cap)
            c->v[c->n++] = (struct live_cnt){key, nd.self};
        else if (nd.self && cnts_push(c, key, nd.self) < 0)
            return PYS_E_NOMEM;
        if (!d->r->opcodes)
            continue;
        struct pys_opcode_count buf[64];
        int k = pys_profile_node_opcodes(p, id, buf, sizeof buf / sizeof buf[0]);
        if (k < 0)
            return k;
        if (k > (int)(sizeof buf / sizeof buf[0]))
            k = (int)(sizeof buf / sizeof buf[0]);
        for (int i = 0; i < k; i++)
            if (cnts_push(c, key | (uint32_t)(buf[i].opcode + 1), buf[i].count) < 0)
                return PYS_E_NOMEM;
    }
    return 0;
}

/* Start counting again at t (under mu): from nothing the first time, else
 * from the counts published now. 0, or PYS_E_NOMEM (nothing changed). */
static int restart(struct live_data *d, uint64_t t)
{
    int first = d->start_ns == 0;
    if (util_array_reserve((void **)&d->base.v, &d->base.cap, d->now.n, sizeof *d->base.v) < 0 ||
        util_array_reserve((void **)&d->mark.v, &d->mark.cap, d->now.n, sizeof *d->mark.v) < 0)
        return PYS_E_NOMEM;
    if (first) {
        d->base.n = d->mark.n = 0;
    } else {
        (void)cnts_copy(&d->base, &d->now);
        (void)cnts_copy(&d->mark, &d->now);
        memset(&d->cum, 0, sizeof d->cum);
        memset(&d->pub, 0, sizeof d->pub);
    }
    memset(&d->whole_t, 0, sizeof d->whole_t);
    for (size_t i = 0; i < LIVE_BUCKETS; i++) {
        d->bucket[i].sec = 0;
        d->bucket[i].d.n = 0;
        memset(&d->bucket[i].t, 0, sizeof d->bucket[i].t);
    }
    d->cur = 0;
    d->start_ns = t;
    d->reset = 0;
    return 0;
}

/* Close the filling bucket if second sec has begun, and make the bucket of
 * sec the filling one (under mu). 0, or PYS_E_NOMEM (retried at the next
 * publication: counts are cumulative). */
static int roll(struct live_data *d, uint64_t sec)
{
    struct live_bucket *b = &d->bucket[d->cur];
    if (b->sec == sec)
        return 0;
    if (cnts_diff(&b->d, &d->now, &d->mark) < 0 || cnts_copy(&d->mark, &d->now) < 0)
        return PYS_E_NOMEM;
    b->t = d->pub;
    tally_add(&d->whole_t, &d->pub);
    memset(&d->cum, 0, sizeof d->cum);
    memset(&d->pub, 0, sizeof d->pub);
    if (sec < b->sec || sec - b->sec >= LIVE_BUCKETS) {
        for (size_t i = 0; i < LIVE_BUCKETS; i++) {
            d->bucket[i].d.n = 0;
            memset(&d->bucket[i].t, 0, sizeof d->bucket[i].t);
        }
        d->cur = 0;
        d->bucket[0].sec = sec;
        return 0;
    }
    for (uint64_t s = b->sec + 1; s <= sec; s++) {
        d->cur = (d->cur + 1) % LIVE_BUCKETS;
        struct live_bucket *c = &d->bucket[d->cur];
        c->d.n = 0;
        memset(&c->t, 0, sizeof c->t);
        c->sec = s;
    }
    return 0;
}

/* Publish the counts as of the sample begun at t (under mu): the profile's
 * new nodes and its counts, the states, the run's facts; a reset asked
 * for, or the filling bucket closed if its second is over. Then wake the
 * UI. 0, or PYS_E_NOMEM (the last publication stays, or part of it). */
static int publish(struct live_data *d, uint64_t t)
{
    int rc = 0;
    if (d->prof && ((rc = mirror_sync(d, d->prof)) < 0 || (rc = counts_read(d, d->prof)) < 0))
        return rc;
    if (d->prof) {
        struct live_cnts x = d->now;
        d->now = d->next;
        d->next = x;
    }
    d->pub = d->cum;
    d->run = d->at;
    if (d->reset || d->start_ns == 0)
        rc = restart(d, d->start_ns == 0 ? d->first_ns : t);
    else
        rc = roll(d, (t - d->start_ns) / NS_PER_S);
    if (d->start_ns)
        d->edge_ns = d->start_ns + (d->bucket[d->cur].sec + 1) * NS_PER_S;
    d->seq++;
    atomic_store(&d->want, 0);
    pthread_cond_broadcast(&d->published);
    return rc;
}

int live_data_sample(void *ctx, const struct rec_sample *smp)
{
    struct live_data *d = ctx;
    if (atomic_load_explicit(&d->quit, memory_order_relaxed))
        return PYS_E_INVAL; /* the user's `q`: sampling ends */
    /* The run's profile when it has the stacks as sampled, else d->own:
     * the first one used stays (node ids are a profile's own). Out of
     * memory loses counts on the screen only: the profile that is written
     * is the sampling loop's. */
    pys_profile *p = smp->prof;
    if (!p || d->own) {
        if (smp->snap && (!d->prof || d->own))
            (void)own_add(d, smp->snap);
        p = d->own;
    }
    if (!d->prof)
        d->prof = p;
    if (d->first_ns == 0)
        d->first_ns = smp->t_ns;
    tally_sample(&d->cum, smp->s, smp->snap, &d->hint);
    d->at.last_ns = smp->end_ns;
    d->at.samples = smp->info->samples;
    d->at.failed = smp->info->failed;
    d->at.missed = smp->info->missed;
    d->at.s = smp->s;
    d->last_t = smp->t_ns;
    if (smp->snap) {
        size_t n = 0;
        for (size_t i = 0; i < smp->snap->ninterps; i++)
            n += smp->snap->interps[i].nthreads;
        d->at.nthreads = n;
    }
    if (smp->t_ns < d->edge_ns && !atomic_load_explicit(&d->want, memory_order_relaxed))
        return 0;
    /* The UI is building its table: publish at a later sample. */
    if (pthread_mutex_trylock(&d->mu) != 0)
        return 0;
    (void)publish(d, smp->t_ns);
    pthread_mutex_unlock(&d->mu);
    return 0;
}

void live_data_finish(struct live_data *d)
{
    pthread_mutex_lock(&d->mu);
    if (d->first_ns)
        (void)publish(d, d->last_t);
    d->finished = 1;
    pthread_cond_broadcast(&d->published);
    pthread_mutex_unlock(&d->mu);
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

/* --opcodes, by line: node id's instructions in the scope (t->nodeops,
 * combined), counted for row k (the outermost frame of the row on each
 * stack, as its total). 0 or PYS_E_NOMEM. */
static int table_add_ops(struct live_table *t, uint32_t id, long k)
{
    size_t lo = 0, hi = t->nnodeops;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->nodeops[mid].row < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < t->nnodeops && t->nodeops[lo].row == id; lo++) {
        if (util_array_reserve((void **)&t->ops, &t->capops, t->nops + 1, sizeof *t->ops) < 0)
            return PYS_E_NOMEM;
        t->ops[t->nops++] =
            (struct live_op){(uint32_t)k, t->nodeops[lo].opcode, t->nodeops[lo].count};
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

/* Add k times (1, or -1 as (uint64_t)-1) the counts c to the scope's:
 * a node's into t->tn, its instructions' into t->nodeops. 0 or
 * PYS_E_NOMEM. */
static int scope_add(struct live_table *t, const struct live_cnts *c, size_t nn, uint64_t k)
{
    for (size_t i = 0; i < c->n; i++) {
        uint32_t id = (uint32_t)(c->v[i].key >> 32), sub = (uint32_t)c->v[i].key;
        if (id >= nn)
            continue;
        if (sub == 0) {
            t->tn[id].self += k * c->v[i].n;
            continue;
        }
        if (util_array_reserve((void **)&t->nodeops, &t->capnodeops, t->nnodeops + 1,
                               sizeof *t->nodeops) < 0)
            return PYS_E_NOMEM;
        t->nodeops[t->nnodeops++] = (struct live_op){id, (int32_t)(sub - 1), k * c->v[i].n};
    }
    return 0;
}

/* The scope's instructions by node and opcode, each once, none zero. */
static void scope_ops(struct live_table *t)
{
    if (t->nnodeops)
        qsort(t->nodeops, t->nnodeops, sizeof *t->nodeops, by_row_op);
    size_t n = 0;
    for (size_t i = 0; i < t->nnodeops;) {
        struct live_op o = t->nodeops[i];
        while (++i < t->nnodeops && t->nodeops[i].row == o.row && t->nodeops[i].opcode == o.opcode)
            o.count += t->nodeops[i].count;
        if (o.count)
            t->nodeops[n++] = o;
    }
    t->nnodeops = n;
}

/* Totals from the scope's self counts, and the children with samples in
 * the scope linked in id order (a parent's id is below its children's). */
static void scope_tree(struct live_table *t, const struct live_data *d)
{
    size_t nn = d->nnodes;
    for (size_t id = 0; id < nn; id++) {
        struct live_tnode *x = &t->tn[id];
        x->total = x->self;
        x->first_child = x->next_sibling = x->row = 0;
    }
    for (size_t id = nn; id-- > 1;) {
        struct live_tnode *x = &t->tn[id], *par = &t->tn[d->nodes[id].parent];
        if (x->total == 0)
            continue;
        par->total += x->total;
        x->next_sibling = par->first_child;
        par->first_child = (uint32_t)id;
    }
}

/* Count frame node id (of row k, whose caller's row is pk + 1, 0 none)
 * into its row. 0 or PYS_E_NOMEM. */
static int table_node(struct live_table *t, uint32_t id, long k, uint32_t pk,
                      const struct live_scope *sc)
{
    const struct live_tnode *x = &t->tn[id];
    struct live_row *w = &t->rows[k];
    w->own += x->self;
    if (w->onpath++ == 0) {
        w->total += x->total;
        if (sc->by_line && t->python_version && table_add_ops(t, id, k) < 0)
            return PYS_E_NOMEM;
        if (is_sel(w, sc)) {
            if (pk)
                t->rows[pk - 1].up += x->total;
            else
                t->top_callers += x->total;
        }
    }
    if (pk && is_sel(&t->rows[pk - 1], sc))
        w->down += x->total;
    return 0;
}

/* The row of published frame f (< d->nframes), as table_row, looked up
 * once a build per frame: nodes far outnumber frames. -1 if out of memory. */
static long frame_row(struct live_table *t, const struct live_data *d, uint32_t f, int lines)
{
    if (t->frow[f] == 0) {
        long k = table_row(t, &d->frames[f], lines);
        if (k < 0)
            return -1;
        t->frow[f] = (uint32_t)k + 1;
    }
    return (long)t->frow[f] - 1;
}

/* Count the scope's stacks into t: a depth-first walk of the nodes with
 * samples in it, each entered once (children have larger ids than their
 * parent and siblings link forward, so it ends). */
static int table_add_tree(struct live_table *t, const struct live_data *d,
                          const struct live_scope *sc)
{
    uint32_t id = d->nnodes > 1 ? t->tn[0].first_child : 0;
    while (id != 0) {
        const struct live_node *nd = &d->nodes[id];
        int descend = 1;
        if (nd->parent == 0) { /* a thread's node */
            descend = !sc->one_thread || nd->thread == sc->thread;
        } else if (nd->frame != 0 && nd->frame < d->nframes) {
            long k = frame_row(t, d, nd->frame, sc->by_line);
            if (k < 0 || table_node(t, id, k, t->tn[nd->parent].row, sc) < 0)
                return PYS_E_NOMEM;
            t->tn[id].row = (uint32_t)k + 1;
        }
        if (descend && t->tn[id].first_child > id) {
            id = t->tn[id].first_child;
            continue;
        }
        /* Leave id and the callers it was the last callee of. */
        for (;;) {
            const struct live_tnode *x = &t->tn[id];
            if (x->row)
                t->rows[x->row - 1].onpath--;
            if (x->next_sibling > id) {
                id = x->next_sibling;
                break;
            }
            id = d->nodes[id].parent;
            if (id == 0)
                break;
        }
    }
    return 0;
}

static void scope_counts(struct live_table *t, const struct live_tally *c, int one, uint64_t thread)
{
    t->snaps += c->snaps;
    t->failed += c->failed;
    if (!one) {
        counts_add(&t->counts, &c->all);
    } else {
        for (size_t i = 0; i < c->nth; i++)
            if (c->th[i].id == thread)
                counts_add(&t->counts, &c->th[i].c);
    }
    for (size_t i = 0; i < c->nth && t->nthreads < LIVE_MAX_THREADS; i++)
        if (c->th[i].c.samples) {
            t->thread_names[t->nthreads] = c->th[i].name;
            t->threads[t->nthreads++] = c->th[i].id;
        }
}

/* Ask for a publication and wait for it a little (under mu, which the
 * wait lets go of): none comes once sampling ended. */
static void await_publication(struct live_data *d)
{
    if (d->finished)
        return;
    uint64_t seq = d->seq;
    atomic_store(&d->want, 1);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += PUBLISH_WAIT_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    while (d->seq == seq && !d->finished)
        if (pthread_cond_timedwait(&d->published, &d->mu, &ts) == ETIMEDOUT)
            break;
}

/* The scope's counts into t->tn, t->nodeops and *c (under mu): the last
 * LIVE_WINDOW_S seconds (buckets), or all since counting (re)started. The
 * states are added oldest first, so that the threads keep the order they
 * were first seen in (the order `t` cycles through). */
static int scope_collect(struct live_table *t, const struct live_data *d, int window,
                         struct live_tally *c)
{
    size_t nn = d->nnodes;
    int rc = 0;
    memset(c, 0, sizeof *c);
    if (scope_add(t, &d->now, nn, 1) < 0 ||
        scope_add(t, window ? &d->mark : &d->base, nn, (uint64_t)-1) < 0)
        return PYS_E_NOMEM;
    uint64_t now = d->bucket[d->cur].sec, oldest = now;
    for (size_t k = 1; window && k < LIVE_BUCKETS; k++) {
        const struct live_bucket *b = &d->bucket[(d->cur + k) % LIVE_BUCKETS];
        if (b->t.snaps == 0 || b->sec + LIVE_WINDOW_S < now)
            continue;
        oldest = b->sec < oldest ? b->sec : oldest;
        tally_add(c, &b->t);
        if (rc == 0)
            rc = scope_add(t, &b->d, nn, 1);
    }
    if (!window)
        tally_add(c, &d->whole_t);
    tally_add(c, &d->pub);
    uint64_t from = window ? d->start_ns + oldest * NS_PER_S : d->start_ns;
    t->span_ns = d->run.last_ns > from ? d->run.last_ns - from : 0;
    return rc;
}

int live_table_build(struct live_table *t, struct live_data *d, const struct live_scope *sc)
{
    int rc = 0;
    struct live_tally c;
    t->n = 0;
    t->nops = 0;
    t->nnodeops = 0;
    if (t->index)
        memset(t->index, 0, t->icap * sizeof *t->index);
    t->snaps = t->failed = t->top_callers = 0;
    memset(&t->counts, 0, sizeof t->counts);
    t->sel = -1;
    t->nthreads = 0;

    pthread_mutex_lock(&d->mu);
    await_publication(d);
    /* --opcodes: the version names the instructions (0: none counted). */
    t->python_version = d->r->opcodes && d->run.s ? pys_session_python_version(d->run.s) : 0;
    if (util_array_reserve((void **)&t->tn, &t->ncap, d->nnodes ? d->nnodes : 1, sizeof *t->tn) <
        0) {
        rc = PYS_E_NOMEM;
        memset(&c, 0, sizeof c);
    } else if (util_array_reserve((void **)&t->frow, &t->capfrow, d->nframes ? d->nframes : 1,
                                  sizeof *t->frow) < 0) {
        rc = PYS_E_NOMEM;
        memset(&c, 0, sizeof c);
    } else {
        memset(t->tn, 0, d->nnodes * sizeof *t->tn);
        memset(t->frow, 0, d->nframes * sizeof *t->frow);
        rc = scope_collect(t, d, sc->window, &c);
    }
    scope_counts(t, &c, sc->one_thread, sc->thread);
    if (rc == 0) {
        scope_ops(t);
        scope_tree(t, d);
        rc = table_add_tree(t, d, sc);
    }
    t->run_samples = d->run.samples;
    t->run_failed = d->run.failed;
    t->run_missed = d->run.missed;
    t->live_threads = d->run.nthreads;
    t->version = d->run.s ? pys_session_python_version_text(d->run.s) : NULL;
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
    free(t->tn);
    free(t->frow);
    free(t->nodeops);
    free(t->ops);
    memset(t, 0, sizeof *t);
}
