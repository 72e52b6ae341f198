/*
 * pprof: the profile as protobuf-c messages (the code protoc-c generates
 * from profile.proto), packed through a buffer that deflates into the file
 * as gzip (zlib): the packed profile is never held whole in memory.
 */
#include "output/pprof.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "output/funcs.h"
#include "profile.pb-c.h"
#include "util/hashtab.h"
#include "util/pyversion.h"

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__ValueType ValueType;
typedef Perftools__Profiles__Sample Sample;
typedef Perftools__Profiles__Label Label;
typedef Perftools__Profiles__Mapping Mapping;
typedef Perftools__Profiles__Location Location;
typedef Perftools__Profiles__Line Line;
typedef Perftools__Profiles__Function Function;

/* The string table: each distinct string once, by content (a profile built
 * from several programs may hold equal strings at different addresses). */
struct strtab {
    char **v; /* the profile's strings and constants, not copied */
    size_t n, cap;
    struct util_htab index; /* 1 + index into v */
};

static uint64_t str_hash_at(const void *ctx, uint32_t id)
{
    const char *s = ((const struct strtab *)ctx)->v[id - 1];
    return util_hash_bytes(s, strlen(s));
}

/* The index of s, added if new; negative on no memory. */
static int64_t str_get(struct strtab *t, const char *s)
{
    if (!s)
        s = "";
    if (t->n >= UINT32_MAX - 1 ||
        util_htab_reserve(&t->index, 1024, 1, (uint32_t)t->n + 1, str_hash_at, t) < 0)
        return PYS_E_NOMEM;
    uint32_t id;
    size_t j = util_htab_first(&t->index, util_hash_bytes(s, strlen(s)));
    for (; (id = t->index.slot[j]); j = util_htab_next(&t->index, j))
        if (strcmp(t->v[id - 1], s) == 0)
            return id - 1;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        char **v = realloc(t->v, cap * sizeof *v);
        if (!v)
            return PYS_E_NOMEM;
        t->v = v;
        t->cap = cap;
    }
    t->v[t->n] = (char *)s; /* protobuf-c's type; never written through */
    util_htab_set(&t->index, j, (uint32_t)(t->n + 1));
    return (int64_t)t->n++;
}

/* Locations: one per (function, line). */
struct loctab {
    Location *v;
    Location **ptr;
    Line *lines;
    Line **line_ptr;
    size_t n, cap;
    struct util_htab index; /* 1 + index into v */
    uint32_t *node_loc;     /* per profile node: location id (1-based), 0 for none */
};

static uint64_t loc_hash(uint64_t fn, int64_t line)
{
    return util_hash_u64(util_hash_add(util_hash_add(0, fn), (uint64_t)line));
}

static uint64_t loc_hash_at(const void *ctx, uint32_t id)
{
    const struct loctab *t = ctx;
    return loc_hash(t->lines[id - 1].function_id, t->lines[id - 1].line);
}

/* The location id of function fn (1-based) at line; 0 on no memory. */
static uint32_t loc_get(struct loctab *t, uint64_t fn, int64_t line)
{
    if (t->n >= UINT32_MAX - 1 ||
        util_htab_reserve(&t->index, 1024, 1, (uint32_t)t->n + 1, loc_hash_at, t) < 0)
        return 0;
    uint32_t id;
    size_t j = util_htab_first(&t->index, loc_hash(fn, line));
    for (; (id = t->index.slot[j]); j = util_htab_next(&t->index, j))
        if (t->lines[id - 1].function_id == fn && t->lines[id - 1].line == line)
            return id;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        Line *lines = realloc(t->lines, cap * sizeof *lines);
        if (!lines)
            return 0;
        t->lines = lines;
        t->cap = cap;
    }
    Line ln = PERFTOOLS__PROFILES__LINE__INIT;
    ln.function_id = fn;
    ln.line = line;
    t->lines[t->n] = ln;
    util_htab_set(&t->index, j, (uint32_t)(t->n + 1));
    return (uint32_t)++t->n;
}

/* Give every location its message, once all are known (t->lines no longer
 * moves). 0 or PYS_E_NOMEM. */
static int loc_finish(struct loctab *t)
{
    size_t n = t->n ? t->n : 1;
    t->v = calloc(n, sizeof *t->v);
    t->ptr = calloc(n, sizeof *t->ptr);
    t->line_ptr = calloc(n, sizeof *t->line_ptr);
    if (!t->v || !t->ptr || !t->line_ptr)
        return PYS_E_NOMEM;
    for (size_t i = 0; i < t->n; i++) {
        Location loc = PERFTOOLS__PROFILES__LOCATION__INIT;
        loc.id = i + 1;
        loc.mapping_id = 1;
        t->line_ptr[i] = &t->lines[i];
        loc.n_line = 1;
        loc.line = &t->line_ptr[i];
        t->v[i] = loc;
        t->ptr[i] = &t->v[i];
    }
    return 0;
}

/* A ProtobufCBuffer that deflates what is appended into f as gzip. */
struct gzbuf {
    ProtobufCBuffer base;
    z_stream z;
    FILE *f;
    int failed;
    unsigned char out[65536];
};

static void gz_run(struct gzbuf *g, int flush)
{
    int zrc;
    do {
        g->z.next_out = g->out;
        g->z.avail_out = sizeof g->out;
        zrc = deflate(&g->z, flush);
        size_t have = sizeof g->out - g->z.avail_out;
        if (zrc == Z_STREAM_ERROR || (have && fwrite(g->out, 1, have, g->f) != have)) {
            g->failed = 1;
            return;
        }
    } while (g->z.avail_out == 0 || (flush == Z_FINISH && zrc != Z_STREAM_END));
}

static void gz_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
    struct gzbuf *g = (struct gzbuf *)b;
    while (len > 0 && !g->failed) {
        /* avail_in is 32 bits wide. */
        uInt chunk = len > (1u << 30) ? (1u << 30) : (uInt)len;
        g->z.next_in = (Bytef *)(uintptr_t)data;
        g->z.avail_in = chunk;
        gz_run(g, Z_NO_FLUSH);
        data += chunk;
        len -= chunk;
    }
}

/* Everything the messages point into. */
struct build {
    const pys_profile *p;
    struct out_funcs fns;
    struct strtab strs;
    struct loctab locs;
    Function *funcs;
    Function **func_ptr;
    Sample *samples;
    Sample **sample_ptr;
    size_t nsamples;
    uint64_t *ids;   /* every sample's location ids, one run after another */
    int64_t *values; /* two per sample */
    Label *labels;   /* LABELS per thread (thread_labels) */
    Label **label_ptr;
    char **thread_names; /* one a thread: the string of its label, owned */
    size_t nthread_names;
    uint64_t interval_ns;
};

static void build_release(struct build *b)
{
    out_funcs_release(&b->fns);
    free(b->strs.v);
    util_htab_release(&b->strs.index);
    free(b->locs.v);
    free(b->locs.ptr);
    free(b->locs.lines);
    free(b->locs.line_ptr);
    util_htab_release(&b->locs.index);
    free(b->locs.node_loc);
    free(b->funcs);
    free(b->func_ptr);
    free(b->samples);
    free(b->sample_ptr);
    free(b->ids);
    free(b->values);
    free(b->labels);
    free(b->label_ptr);
    for (size_t i = 0; i < b->nthread_names; i++)
        free(b->thread_names[i]);
    free(b->thread_names);
}

#define STR(b, s)                                                                                  \
    do {                                                                                           \
        if ((sv = str_get(&(b)->strs, (s))) < 0)                                                   \
            return PYS_E_NOMEM;                                                                    \
    } while (0)

/* Functions, and each profile node's location. */
static int build_functions(struct build *b)
{
    const pys_profile *p = b->p;
    int64_t sv;
    int rc = out_funcs_build(&b->fns, p);
    if (rc < 0)
        return rc;
    size_t nf = b->fns.n ? b->fns.n : 1;
    b->funcs = calloc(nf, sizeof *b->funcs);
    b->func_ptr = calloc(nf, sizeof *b->func_ptr);
    b->locs.node_loc = calloc(b->fns.nnodes ? b->fns.nnodes : 1, sizeof *b->locs.node_loc);
    if (!b->funcs || !b->func_ptr || !b->locs.node_loc)
        return PYS_E_NOMEM;
    for (size_t i = 0; i < b->fns.n; i++) {
        const struct out_func *fn = &b->fns.v[i];
        Function m = PERFTOOLS__PROFILES__FUNCTION__INIT;
        m.id = i + 1;
        STR(b, fn->qualname);
        /* No system_name: pprof would take a name equal to it for a C++ name
         * to simplify, and cut "<module>" and "<lambda>" as template
         * arguments. */
        m.name = sv;
        STR(b, fn->filename);
        m.filename = sv;
        m.start_line = fn->firstlineno;
        b->funcs[i] = m;
        b->func_ptr[i] = &b->funcs[i];
    }
    for (size_t id = 1; id < b->fns.nnodes; id++) {
        uint32_t fn = b->fns.node_fn[id];
        if (fn == OUT_NO_FUNC)
            continue;
        const struct pys_frame *fr = pys_profile_frame(p, pys_profile_node(p, (uint32_t)id)->frame);
        int64_t line = fr->kind == PYS_FRAME_PYTHON && fr->lineno > 0 ? fr->lineno : 0;
        if (!(b->locs.node_loc[id] = loc_get(&b->locs, (uint64_t)fn + 1, line)))
            return PYS_E_NOMEM;
    }
    return loc_finish(&b->locs);
}

/* The thread label's text: "Thread TID", and the thread's name in
 * parentheses where the target gave it one (as the collapsed stacks write
 * it). A new string, or NULL if out of memory. */
static char *thread_label_text(uint64_t tid, const char *name)
{
    size_t size = 48 + (name ? strlen(name) : 0);
    char *s = malloc(size);
    if (!s)
        return NULL;
    if (name)
        snprintf(s, size, "Thread %llu (%s)", (unsigned long long)tid, name);
    else
        snprintf(s, size, "Thread %llu", (unsigned long long)tid);
    return s;
}

/* Labels a thread's samples have at most: thread, thread_id, thread_name. */
#define LABELS 3

/* Thread t's labels: `thread` (thread_label_text), `thread_id` (the
 * number) and, where the target named it, `thread_name` (the name alone,
 * for a filter on it); *n is how many. */
static int thread_labels(struct build *b, size_t t, uint64_t tid, size_t *n)
{
    const char *pyname = pys_profile_thread_name(b->p, tid);
    char *text = thread_label_text(tid, pyname);
    if (!text)
        return PYS_E_NOMEM;
    b->thread_names[b->nthread_names++] = text;
    Label *l = &b->labels[LABELS * t];
    l[0] = (Label)PERFTOOLS__PROFILES__LABEL__INIT;
    l[1] = (Label)PERFTOOLS__PROFILES__LABEL__INIT;
    if ((l[0].key = str_get(&b->strs, "thread")) < 0 || (l[0].str = str_get(&b->strs, text)) < 0 ||
        (l[1].key = str_get(&b->strs, "thread_id")) < 0)
        return PYS_E_NOMEM;
    l[1].num = (int64_t)tid;
    *n = 2;
    if (pyname) {
        l[2] = (Label)PERFTOOLS__PROFILES__LABEL__INIT;
        if ((l[2].key = str_get(&b->strs, "thread_name")) < 0 ||
            (l[2].str = str_get(&b->strs, pyname)) < 0)
            return PYS_E_NOMEM;
        *n = 3;
    }
    for (size_t i = 0; i < *n; i++)
        b->label_ptr[LABELS * t + i] = &l[i];
    return 0;
}

/* One sample per node with self samples below a thread, leaf first. */
static int build_samples(struct build *b)
{
    const pys_profile *p = b->p;
    size_t nn = b->fns.nnodes, nthreads = 0, nids = 0;
    for (uint32_t id = 1; id < nn; id++) {
        const struct pys_profile_node *nd = pys_profile_node(p, id);
        if (pys_profile_is_thread(p, id)) {
            nthreads++;
            continue;
        }
        if (nd->self == 0)
            continue;
        b->nsamples++;
        for (uint32_t x = id; x != 0 && !pys_profile_is_thread(p, x);
             x = pys_profile_node(p, x)->parent)
            nids++;
    }
    size_t ns = b->nsamples ? b->nsamples : 1, nt = nthreads ? nthreads : 1;
    b->samples = calloc(ns, sizeof *b->samples);
    b->sample_ptr = calloc(ns, sizeof *b->sample_ptr);
    b->ids = calloc(nids ? nids : 1, sizeof *b->ids);
    b->values = calloc(2 * ns, sizeof *b->values);
    b->labels = calloc(LABELS * nt, sizeof *b->labels);
    b->label_ptr = calloc(LABELS * nt, sizeof *b->label_ptr);
    b->thread_names = calloc(nt, sizeof *b->thread_names);
    size_t *nlabels = calloc(nt, sizeof *nlabels);
    uint32_t *thread_label = calloc(nn ? nn : 1, sizeof *thread_label);
    if (!b->samples || !b->sample_ptr || !b->ids || !b->values || !b->labels || !b->label_ptr ||
        !b->thread_names || !thread_label || !nlabels) {
        free(thread_label);
        free(nlabels);
        return PYS_E_NOMEM;
    }
    size_t t = 0, s = 0, k = 0;
    int rc = 0;
    for (uint32_t id = 1; id < nn && rc == 0; id++) {
        if (!pys_profile_is_thread(p, id))
            continue;
        rc = thread_labels(b, t, pys_profile_thread(p, id), &nlabels[t]);
        thread_label[id] = (uint32_t)t++;
    }
    for (uint32_t id = 1; id < nn && rc == 0; id++) {
        const struct pys_profile_node *nd = pys_profile_node(p, id);
        if (nd->self == 0 || pys_profile_is_thread(p, id))
            continue;
        Sample m = PERFTOOLS__PROFILES__SAMPLE__INIT;
        m.location_id = &b->ids[k];
        uint32_t x = id;
        for (; x != 0 && !pys_profile_is_thread(p, x); x = pys_profile_node(p, x)->parent)
            b->ids[k++] = b->locs.node_loc[x];
        m.n_location_id = (size_t)(&b->ids[k] - m.location_id);
        m.value = &b->values[2 * s];
        m.n_value = 2;
        m.value[0] = (int64_t)nd->self;
        m.value[1] = (int64_t)(nd->self * b->interval_ns);
        m.label = &b->label_ptr[LABELS * thread_label[x]];
        m.n_label = nlabels[thread_label[x]];
        b->samples[s] = m;
        b->sample_ptr[s] = &b->samples[s];
        s++;
    }
    free(thread_label);
    free(nlabels);
    return rc;
}

int out_pprof_write(FILE *f, const pys_profile *p, uint64_t start_realtime_ns)
{
    struct build b;
    struct gzbuf *g = NULL;
    const struct pys_profile_info *info = pys_profile_info_get(p);
    int cpu = info->mode && strcmp(info->mode, "cpu") == 0;
    int64_t sv;
    int rc;

    memset(&b, 0, sizeof b);
    b.p = p;
    b.interval_ns = info->interval_ns;
    Profile m = PERFTOOLS__PROFILES__PROFILE__INIT;
    ValueType types[2] = {PERFTOOLS__PROFILES__VALUE_TYPE__INIT,
                          PERFTOOLS__PROFILES__VALUE_TYPE__INIT};
    ValueType *type_ptr[2] = {&types[0], &types[1]};
    ValueType period = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
    Mapping map = PERFTOOLS__PROFILES__MAPPING__INIT;
    Mapping *map_ptr = &map;
    int64_t comments[3];
    char comment[3][96];

    if ((rc = str_get(&b.strs, "")) < 0) /* index 0 */
        goto done;
    if ((rc = build_functions(&b)) < 0 || (rc = build_samples(&b)) < 0)
        goto done;
    rc = PYS_E_NOMEM;
#undef STR
#define STR(s)                                                                                     \
    do {                                                                                           \
        if ((sv = str_get(&b.strs, (s))) < 0)                                                      \
            goto done;                                                                             \
    } while (0)
    STR("samples");
    types[0].type = sv;
    STR("count");
    types[0].unit = sv;
    STR(cpu ? "cpu" : "wall");
    types[1].type = period.type = sv;
    STR("nanoseconds");
    types[1].unit = period.unit = sv;
    STR("python");
    map.id = 1;
    map.filename = sv;
    map.has_functions = map.has_filenames = map.has_line_numbers = 1;
    snprintf(comment[0], sizeof comment[0], "pystrobe");
    snprintf(comment[1], sizeof comment[1], "mode %s", info->mode ? info->mode : "wall");
    char version[32];
    util_python_version_text(info->python_version, version, sizeof version);
    snprintf(comment[2], sizeof comment[2], "python %s", version);
    for (int i = 0; i < 3; i++) {
        STR(comment[i]);
        comments[i] = sv;
    }

    m.n_sample_type = 2;
    m.sample_type = type_ptr;
    m.n_sample = b.nsamples;
    m.sample = b.sample_ptr;
    m.n_mapping = 1;
    m.mapping = &map_ptr;
    m.n_location = b.locs.n;
    m.location = b.locs.ptr;
    m.n_function = b.fns.n;
    m.function = b.func_ptr;
    m.n_string_table = b.strs.n;
    m.string_table = b.strs.v;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t now_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    m.duration_nanos = (int64_t)info->duration_ns;
    m.time_nanos = start_realtime_ns ? (int64_t)start_realtime_ns : now_ns - m.duration_nanos;
    m.period_type = &period;
    m.period = (int64_t)info->interval_ns;
    m.n_comment = 3;
    m.comment = comments;
    m.default_sample_type = types[0].type;

    if (!(g = calloc(1, sizeof *g)))
        goto done;
    g->base.append = gz_append;
    g->f = f;
    /* 15 + 16: a gzip header and trailer around the deflate stream. */
    if (deflateInit2(&g->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
        Z_OK) {
        free(g);
        g = NULL;
        goto done;
    }
    perftools__profiles__profile__pack_to_buffer(&m, &g->base);
    if (!g->failed)
        gz_run(g, Z_FINISH);
    deflateEnd(&g->z);
    rc = g->failed || ferror(f) ? PYS_E_IO : 0;
done:
    free(g);
    build_release(&b);
    return rc;
}
