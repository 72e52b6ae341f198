/*
 * gecko: the Firefox Profiler writer (gecko.h). Strings go into the
 * profile's one shared table, interned by content; each thread has its own
 * function, frame, stack and resource tables, as the format wants, built
 * with one small map of 4-word keys.
 */
#include "output/gecko.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "output/json.h"
#include "output/procframe.h"
#include "util/array.h"
#include "util/hashtab.h"
#include "util/strtab.h"

enum { CAT_OTHER, CAT_PYTHON, CAT_NATIVE, CAT_GC, CAT_GIL, CAT_CPU, CAT_EXC, NCAT };
static const char *const CAT_NAMES[NCAT] = {"Other", "Python", "Native",   "GC",
                                            "GIL",   "CPU",    "Exception"};
static const char *const CAT_COLORS[NCAT] = {"grey",  "yellow", "blue",     "orange",
                                             "green", "purple", "lightblue"};

/* The thread states shown as markers. */
enum { MK_GIL, MK_WAIT, MK_CPU, MK_EXC, MK_GC, NMK };
static const char *const MK_NAMES[NMK] = {"Has GIL", "Waiting for GIL", "On CPU", "Has exception",
                                          "GC collecting"};
static const int MK_CATS[NMK] = {CAT_GIL, CAT_GIL, CAT_CPU, CAT_EXC, CAT_GC};

/* A map of 4-word keys to indices (their order of insertion). */
struct kmap {
    uint64_t (*keys)[4];
    size_t n, cap;
    struct util_htab t;
};

static uint64_t key_hash(const uint64_t k[4])
{
    return util_hash_u64(
        util_hash_add(util_hash_add(util_hash_add(util_hash_add(0, k[0]), k[1]), k[2]), k[3]));
}

static uint64_t kmap_hash_of(const void *ctx, uint32_t id)
{
    return key_hash(((const uint64_t(*)[4])ctx)[id - 1]);
}

/* The index of key k; *fresh says it was added. 0 or PYS_E_NOMEM. */
static int kmap_get(struct kmap *m, const uint64_t k[4], uint32_t *out, int *fresh)
{
    uint64_t h = key_hash(k);
    uint32_t id;
    *fresh = 0;
    if (m->t.cap)
        for (size_t j = util_htab_first(&m->t, h); (id = m->t.slot[j]);
             j = util_htab_next(&m->t, j))
            if (memcmp(m->keys[id - 1], k, 4 * sizeof(uint64_t)) == 0) {
                *out = id - 1;
                return 0;
            }
    if (m->n >= UINT32_MAX - 1 ||
        util_htab_reserve(&m->t, 64, 1, (uint32_t)m->n + 1, kmap_hash_of, m->keys) < 0 ||
        util_array_reserve((void **)&m->keys, &m->cap, m->n + 1, sizeof *m->keys) < 0)
        return PYS_E_NOMEM;
    memcpy(m->keys[m->n], k, 4 * sizeof(uint64_t));
    id = (uint32_t)++m->n;
    util_htab_set(&m->t, util_htab_free_slot(&m->t, h), id);
    *out = id - 1;
    *fresh = 1;
    return 0;
}

static void kmap_release(struct kmap *m)
{
    free(m->keys);
    util_htab_release(&m->t);
}

/* A growing array of uint32 / uint64. */
struct u32s {
    uint32_t *v;
    size_t n, cap;
};
struct u64s {
    uint64_t *v;
    size_t n, cap;
};
static int push32(struct u32s *a, uint32_t x)
{
    if (util_array_reserve((void **)&a->v, &a->cap, a->n + 1, sizeof *a->v) < 0)
        return PYS_E_NOMEM;
    a->v[a->n++] = x;
    return 0;
}
static int push64(struct u64s *a, uint64_t x)
{
    if (util_array_reserve((void **)&a->v, &a->cap, a->n + 1, sizeof *a->v) < 0)
        return PYS_E_NOMEM;
    a->v[a->n++] = x;
    return 0;
}

struct gthread {
    uint64_t id, ns_id;
    int main;
    char *name; /* its Python name, the last one seen (a copy); NULL: none */
    /* Its process: the profile's, or that of its stacks' process frame
     * (--merge-processes); command NULL when not known. */
    int pid;
    const char *command;
    /* funcs: key (name, file, firstlineno, kind) */
    struct kmap funcs;
    struct u32s func_resource;
    struct kmap resources; /* key (file) */
    struct kmap frames;    /* key (func, line, col, subcategory) */
    struct kmap stacks;    /* key (prefix + 1, frame) */
    struct u64s sample_us;
    struct u32s sample_stack;
    /* markers */
    struct u32s mk_kind;
    struct u64s mk_start, mk_end;
    int open[NMK];
    uint64_t open_at[NMK], last_us;
};

struct out_gecko {
    struct out_rec_meta meta;
    char mode[32], version[64];
    uint64_t start_us;
    struct util_strtab strs; /* the profile's strings, not copied */
    struct kmap ptrs;        /* key (address) -> string id */
    struct u32s ptr_sid;
    struct gthread *threads;
    size_t nthreads, capthreads;
    struct kmap threadmap; /* key (id, ns_id) */
    /* Instructions (frames with an opcode) as subcategories of the Python
     * category, in order of first sight: sub[opcode] is its index (0: not
     * seen; 0 is "Other"), opcode_of[index] the opcode. */
    uint16_t sub[256];
    int16_t opcode_of[257];
    int nsub;
};

static int intern_str(out_gecko *g, const char *s, uint32_t *out)
{
    uint64_t pk[4] = {(uint64_t)(uintptr_t)s, 0, 0, 0};
    uint32_t pi;
    int fresh;
    if (kmap_get(&g->ptrs, pk, &pi, &fresh) < 0)
        return PYS_E_NOMEM;
    if (!fresh) {
        *out = g->ptr_sid.v[pi];
        return 0;
    }
    int64_t sid = util_strtab_add(&g->strs, s, strlen(s));
    if (sid < 0 || push32(&g->ptr_sid, (uint32_t)sid) < 0)
        return PYS_E_NOMEM;
    *out = (uint32_t)sid;
    return 0;
}

out_gecko *out_gecko_new(const struct out_rec_meta *m)
{
    out_gecko *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->meta = *m;
    snprintf(g->mode, sizeof g->mode, "%s", m->mode ? m->mode : "");
    snprintf(g->version, sizeof g->version, "%s",
             m->python_version_text ? m->python_version_text : "");
    g->meta.mode = g->mode;
    g->meta.python_version_text = g->version;
    g->meta.tool = NULL;
    g->start_us = m->start_monotonic_ns / 1000;
    /* "(root)" first, as the profiler's own files have it. */
    uint32_t sid;
    if (intern_str(g, "(root)", &sid) < 0) {
        out_gecko_free(g);
        return NULL;
    }
    return g;
}

static void thread_release(struct gthread *t)
{
    free(t->name);
    kmap_release(&t->funcs);
    free(t->func_resource.v);
    kmap_release(&t->resources);
    kmap_release(&t->frames);
    kmap_release(&t->stacks);
    free(t->sample_us.v);
    free(t->sample_stack.v);
    free(t->mk_kind.v);
    free(t->mk_start.v);
    free(t->mk_end.v);
}

void out_gecko_free(out_gecko *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->nthreads; i++)
        thread_release(&g->threads[i]);
    free(g->threads);
    kmap_release(&g->threadmap);
    kmap_release(&g->ptrs);
    free(g->ptr_sid.v);
    util_strtab_release(&g->strs);
    free(g);
}

static int frame_category(const struct pys_frame *f)
{
    switch (f->kind) {
    case PYS_FRAME_PYTHON:
        return CAT_PYTHON;
    case PYS_FRAME_NATIVE:
        return CAT_NATIVE;
    case PYS_FRAME_GC:
        return CAT_GC;
    default:
        return CAT_OTHER;
    }
}

/* The Python category's subcategory of f's instruction (0: none known). */
static uint32_t subcategory(out_gecko *g, const struct pys_frame *f)
{
    if (f->opcode < 0 || f->opcode > 255)
        return 0;
    if (!g->sub[f->opcode]) {
        g->opcode_of[++g->nsub] = (int16_t)f->opcode;
        g->sub[f->opcode] = (uint16_t)g->nsub;
    }
    return g->sub[f->opcode];
}

/* The stack index of frames (innermost first) in thread t. */
static int thread_stack(out_gecko *g, struct gthread *t, const struct pys_frame *frames, size_t n,
                        uint32_t *out)
{
    uint64_t prefix = 0; /* stack index + 1; 0: the root */
    for (size_t i = n; i-- > 0;) {
        const struct pys_frame *f = &frames[i];
        uint32_t name, file, func, res, frame, stack;
        int fresh;
        if (intern_str(g, f->qualname ? f->qualname : "", &name) < 0 ||
            intern_str(g, f->filename ? f->filename : "", &file) < 0)
            return PYS_E_NOMEM;
        uint64_t fk[4] = {name, file, (uint32_t)f->firstlineno, (uint32_t)f->kind};
        if (kmap_get(&t->funcs, fk, &func, &fresh) < 0)
            return PYS_E_NOMEM;
        if (fresh) {
            uint64_t rk[4] = {file, 0, 0, 0};
            if (kmap_get(&t->resources, rk, &res, &fresh) < 0 || push32(&t->func_resource, res) < 0)
                return PYS_E_NOMEM;
        }
        int marker = f->kind != PYS_FRAME_PYTHON;
        uint64_t rk[4] = {func, (uint32_t)(marker ? -1 : f->lineno),
                          (uint32_t)(marker ? -1 : f->col), marker ? 0 : subcategory(g, f)};
        if (kmap_get(&t->frames, rk, &frame, &fresh) < 0)
            return PYS_E_NOMEM;
        uint64_t sk[4] = {prefix, frame, 0, 0};
        if (kmap_get(&t->stacks, sk, &stack, &fresh) < 0)
            return PYS_E_NOMEM;
        prefix = (uint64_t)stack + 1;
    }
    *out = (uint32_t)(prefix - 1);
    return 0;
}

int out_gecko_sample(out_gecko *g, const struct out_rec_sample *s)
{
    uint64_t t_us = s->t_ns / 1000;
    t_us = t_us >= g->start_us ? t_us - g->start_us : 0;
    for (size_t i = 0; i < s->nthreads; i++) {
        const struct out_rec_thread *th = &s->threads[i];
        if (th->nframes == 0)
            continue;
        uint64_t tk[4] = {th->id, th->ns_id, 0, 0};
        uint32_t ti;
        int fresh;
        if (kmap_get(&g->threadmap, tk, &ti, &fresh) < 0)
            return PYS_E_NOMEM;
        if (fresh) {
            if (util_array_reserve((void **)&g->threads, &g->capthreads, g->nthreads + 1,
                                   sizeof *g->threads) < 0)
                return PYS_E_NOMEM;
            memset(&g->threads[g->nthreads], 0, sizeof *g->threads);
            struct gthread *nt = &g->threads[g->nthreads];
            nt->id = th->id;
            nt->ns_id = th->ns_id;
            nt->pid = g->meta.pid;
            out_stack_process(th->frames, th->nframes, &nt->pid, &nt->command);
            g->nthreads++;
        }
        struct gthread *t = &g->threads[ti];
        if (th->name && (!t->name || strcmp(t->name, th->name) != 0)) {
            char *name = strdup(th->name);
            if (!name)
                return PYS_E_NOMEM;
            free(t->name);
            t->name = name;
        }
        uint32_t stack;
        if (thread_stack(g, t, th->frames, th->nframes, &stack) < 0 ||
            push64(&t->sample_us, t_us) < 0 || push32(&t->sample_stack, stack) < 0)
            return PYS_E_NOMEM;
        t->main |= (th->status & PYS_THREAD_MAIN_THREAD) != 0;
        int gc = 0;
        for (size_t k = 0; k < th->nframes; k++)
            gc |= th->frames[k].kind == PYS_FRAME_GC;
        uint32_t st = th->status;
        int now[NMK] = {(st & PYS_THREAD_HAS_GIL) != 0, (st & PYS_THREAD_GIL_REQUESTED) != 0,
                        (st & PYS_THREAD_ON_CPU) && !(st & PYS_THREAD_UNKNOWN),
                        (st & PYS_THREAD_HAS_EXCEPTION) != 0, gc};
        for (int k = 0; k < NMK; k++) {
            if (now[k] && !t->open[k]) {
                t->open[k] = 1;
                t->open_at[k] = t_us;
            } else if (!now[k] && t->open[k]) {
                t->open[k] = 0;
                if (push32(&t->mk_kind, (uint32_t)k) < 0 ||
                    push64(&t->mk_start, t->open_at[k]) < 0 || push64(&t->mk_end, t_us) < 0)
                    return PYS_E_NOMEM;
            }
        }
        t->last_us = t_us;
    }
    return 0;
}

/* ms with microseconds, exactly. */
static void put_ms(FILE *f, uint64_t us)
{
    fprintf(f, "%" PRIu64 ".%03u", us / 1000, (unsigned)(us % 1000));
}

static void put_u32s(FILE *f, const char *key, const uint32_t *v, size_t n)
{
    fprintf(f, "\"%s\":[", key);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%u", i ? "," : "", v[i]);
    fputs("]", f);
}

/* A column of n copies of text. */
static void put_same(FILE *f, const char *key, const char *text, size_t n)
{
    fprintf(f, "\"%s\":[", key);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%s", i ? "," : "", text);
    fputs("]", f);
}

static void put_int_or_null(FILE *f, int64_t v)
{
    if (v < 0)
        fputs("null", f);
    else
        fprintf(f, "%" PRId64, v);
}

/* The thread's identity: name ("NAME TID" with its Python name, else
 * "MainThread TID" or "Thread TID"), process, registration; ends with a
 * comma. */
static void write_thread_head(const struct gthread *t, FILE *f)
{
    char name[96];
    snprintf(name, sizeof name, "%s %" PRIu64, t->main ? "MainThread" : "Thread", t->id);
    fputs("{\"name\":", f);
    size_t n = t->name ? strlen(t->name) + 24 : 0;
    char *named = n ? malloc(n) : NULL;
    if (named)
        snprintf(named, n, "%s %" PRIu64, t->name, t->id);
    out_json_quote(f, named ? named : name);
    free(named);
    fprintf(f,
            ",\"isMainThread\":%s,\"processStartupTime\":0,\"processShutdownTime\":null,"
            "\"registerTime\":0,\"unregisterTime\":null,\"pausedRanges\":[],",
            t->main ? "true" : "false");
    fprintf(f, "\"pid\":\"%d\",\"tid\":%" PRIu64 ",\"processType\":\"default\",", t->pid, t->id);
    fputs("\"processName\":", f);
    if (t->command && t->command[0]) {
        out_json_quote(f, t->command);
    } else {
        snprintf(name, sizeof name, "Python %d", t->pid);
        out_json_quote(f, name);
    }
    fputc(',', f);
}

/* "samples": one row per sample, its stack and time; ends with a comma. */
static void write_samples(const struct gthread *t, FILE *f)
{
    size_t ns = t->sample_us.n;
    fputs("\"samples\":{", f);
    put_u32s(f, "stack", t->sample_stack.v, ns);
    fputs(",\"time\":[", f);
    for (size_t i = 0; i < ns; i++) {
        if (i)
            fputc(',', f);
        put_ms(f, t->sample_us.v[i]);
    }
    fputs("],", f);
    put_same(f, "eventDelay", "null", ns);
    fprintf(f, ",\"weight\":null,\"weightType\":\"samples\",\"length\":%zu},", ns);
}

/* "stackTable": each stack as (prefix stack, frame), prefix null at the root;
   ends with a comma. */
static void write_stack_table(const struct gthread *t, FILE *f)
{
    size_t nst = t->stacks.n;
    fputs("\"stackTable\":{\"frame\":[", f);
    for (size_t i = 0; i < nst; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", t->stacks.keys[i][1]);
    fputs("],\"category\":[", f);
    for (size_t i = 0; i < nst; i++) {
        uint64_t fr = t->stacks.keys[i][1], func = t->frames.keys[fr][0];
        struct pys_frame kind = {.kind = (int32_t)t->funcs.keys[func][3]};
        fprintf(f, "%s%d", i ? "," : "", frame_category(&kind));
    }
    fputs("],\"subcategory\":[", f);
    for (size_t i = 0; i < nst; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", t->frames.keys[t->stacks.keys[i][1]][3]);
    fputs("],\"prefix\":[", f);
    for (size_t i = 0; i < nst; i++) {
        uint64_t p = t->stacks.keys[i][0];
        if (i)
            fputc(',', f);
        put_int_or_null(f, p ? (int64_t)(p - 1) : -1);
    }
    fprintf(f, "],\"length\":%zu},", nst);
}

/* "frameTable": each frame as (func, line, column); ends with a comma. */
static void write_frame_table(const struct gthread *t, FILE *f)
{
    size_t nf = t->frames.n;
    fputs("\"frameTable\":{", f);
    put_same(f, "address", "-1", nf);
    fputs(",\"category\":[", f);
    for (size_t i = 0; i < nf; i++) {
        struct pys_frame fr = {.kind = (int32_t)t->funcs.keys[t->frames.keys[i][0]][3]};
        fprintf(f, "%s%d", i ? "," : "", frame_category(&fr));
    }
    fputs("],\"subcategory\":[", f);
    for (size_t i = 0; i < nf; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", t->frames.keys[i][3]);
    fputs("],\"func\":[", f);
    for (size_t i = 0; i < nf; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", t->frames.keys[i][0]);
    fputs("],", f);
    put_same(f, "innerWindowID", "null", nf);
    fputc(',', f);
    put_same(f, "implementation", "null", nf);
    fputc(',', f);
    put_same(f, "optimizations", "null", nf);
    fputs(",\"line\":[", f);
    for (size_t i = 0; i < nf; i++) {
        if (i)
            fputc(',', f);
        int32_t v = (int32_t)(uint32_t)t->frames.keys[i][1];
        put_int_or_null(f, v > 0 ? v : -1);
    }
    fputs("],\"column\":[", f);
    for (size_t i = 0; i < nf; i++) {
        if (i)
            fputc(',', f);
        int32_t v = (int32_t)(uint32_t)t->frames.keys[i][2];
        put_int_or_null(f, v);
    }
    fputs("],", f);
    put_same(f, "inlineDepth", "0", nf);
    fputc(',', f);
    put_same(f, "nativeSymbol", "null", nf);
    fprintf(f, ",\"length\":%zu},", nf);
}

/* "funcTable": each function as (name, file, first line, resource); only Python
   functions count as JS, so the profiler's JS-only views show them. Ends with a
   comma. */
static void write_func_table(const struct gthread *t, FILE *f)
{
    size_t nfn = t->funcs.n;
    fputs("\"funcTable\":{\"name\":[", f);
    for (size_t i = 0; i < nfn; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", t->funcs.keys[i][0]);
    fputs("],\"isJS\":[", f);
    for (size_t i = 0; i < nfn; i++)
        fprintf(f, "%s%s", i ? "," : "",
                t->funcs.keys[i][3] == PYS_FRAME_PYTHON ? "true" : "false");
    fputs("],\"relevantForJS\":[", f);
    for (size_t i = 0; i < nfn; i++)
        fprintf(f, "%s%s", i ? "," : "",
                t->funcs.keys[i][3] == PYS_FRAME_PYTHON ? "true" : "false");
    fputs("],", f);
    put_u32s(f, "resource", t->func_resource.v, nfn);
    fputs(",\"fileName\":[", f);
    for (size_t i = 0; i < nfn; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", t->funcs.keys[i][1]);
    fputs("],\"lineNumber\":[", f);
    for (size_t i = 0; i < nfn; i++) {
        if (i)
            fputc(',', f);
        int32_t v = (int32_t)(uint32_t)t->funcs.keys[i][2];
        put_int_or_null(f, t->funcs.keys[i][3] == PYS_FRAME_PYTHON && v > 0 ? v : -1);
    }
    fputs("],", f);
    put_same(f, "columnNumber", "null", nfn);
    fprintf(f, ",\"length\":%zu},", nfn);
}

/* "resourceTable": one per file, named by its path, and the empty
   "nativeSymbols"; ends with a comma. */
static void write_resource_table(const struct gthread *t, FILE *f)
{
    size_t nr = t->resources.n;
    fputs("\"resourceTable\":{", f);
    put_same(f, "lib", "null", nr);
    fputs(",\"name\":[", f);
    for (size_t i = 0; i < nr; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", t->resources.keys[i][0]);
    fputs("],", f);
    put_same(f, "host", "null", nr);
    fputc(',', f);
    put_same(f, "type", "0", nr);
    fprintf(f, ",\"length\":%zu},", nr);
    fputs("\"nativeSymbols\":{\"libIndex\":[],\"address\":[],\"name\":[],\"functionSize\":[],"
          "\"length\":0},",
          f);
}

/* "markers": the closed ones, then those still open at the last sample, which
   this closes there (so it runs once per thread). Ends the thread's object. */
static void write_markers(const out_gecko *g, struct gthread *t, FILE *f)
{
    for (int k = 0; k < NMK; k++)
        if (t->open[k]) {
            t->open[k] = 0;
            if (push32(&t->mk_kind, (uint32_t)k) == 0 && push64(&t->mk_start, t->open_at[k]) == 0)
                push64(&t->mk_end, t->last_us);
        }
    size_t nm = t->mk_end.n;
    fputs("\"markers\":{\"data\":[", f);
    for (size_t i = 0; i < nm; i++)
        fprintf(f, "%s{\"type\":\"PythonThreadState\",\"state\":\"%s\"}", i ? "," : "",
                MK_NAMES[t->mk_kind.v[i]]);
    fputs("],\"name\":[", f);
    for (size_t i = 0; i < nm; i++)
        fprintf(f, "%s%u", i ? "," : "", (unsigned)(g->strs.n + t->mk_kind.v[i]));
    fputs("],\"startTime\":[", f);
    for (size_t i = 0; i < nm; i++) {
        if (i)
            fputc(',', f);
        put_ms(f, t->mk_start.v[i]);
    }
    fputs("],\"endTime\":[", f);
    for (size_t i = 0; i < nm; i++) {
        if (i)
            fputc(',', f);
        put_ms(f, t->mk_end.v[i]);
    }
    fputs("],", f);
    put_same(f, "phase", "1", nm);
    fputs(",\"category\":[", f);
    for (size_t i = 0; i < nm; i++)
        fprintf(f, "%s%d", i ? "," : "", MK_CATS[t->mk_kind.v[i]]);
    fprintf(f, "],\"length\":%zu}}", nm);
}

/* One entry of "threads": the tables of the processed-profile format. */
static void write_thread(const out_gecko *g, struct gthread *t, FILE *f)
{
    write_thread_head(t, f);
    write_samples(t, f);
    write_stack_table(t, f);
    write_frame_table(t, f);
    write_func_table(t, f);
    write_resource_table(t, f);
    write_markers(g, t, f);
}

/* ,"NAME (BASE)": an instruction's subcategory name, as the target's
 * version names it ("opcode N" where it has no name). */
static void put_instruction(FILE *f, uint32_t version, int opcode)
{
    const char *base = NULL;
    const char *name = pys_opcode_name(version, opcode, &base);
    char buf[128];
    if (!name)
        snprintf(buf, sizeof buf, "opcode %d", opcode);
    else if (base)
        snprintf(buf, sizeof buf, "%s (%s)", name, base);
    else
        snprintf(buf, sizeof buf, "%s", name);
    fputc(',', f);
    out_json_quote(f, buf);
}

int out_gecko_write(out_gecko *g, FILE *f)
{
    const struct out_rec_meta *m = &g->meta;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    fputs("{\"meta\":{", f);
    fprintf(f, "\"interval\":");
    put_ms(f, m->interval_ns / 1000);
    /* The start as a date: ms since the epoch. */
    fputs(",\"startTime\":", f);
    put_ms(f, m->start_realtime_ns / 1000);
    fputs(",\"abi\":\"x86_64\",\"oscpu\":\"x86_64\",\"misc\":", f);
    char misc[160];
    snprintf(misc, sizeof misc, "Python %s, %s mode", g->version, g->mode);
    out_json_quote(f, misc);
    fprintf(f,
            ",\"platform\":\"Linux\",\"processType\":0,\"stackwalk\":0,\"toolkit\":\"\","
            "\"version\":32,\"preprocessedProfileVersion\":57,\"appBuildID\":\"\","
            "\"physicalCPUs\":%ld,\"logicalCPUs\":%ld,\"CPUName\":\"\",\"product\":"
            "\"pystrobe\",\"symbolicated\":true,\"importedFrom\":\"pystrobe\",",
            cpus > 0 ? cpus : 1, cpus > 0 ? cpus : 1);
    fputs("\"markerSchema\":[{\"name\":\"PythonThreadState\",\"display\":[\"marker-chart\","
          "\"marker-table\",\"timeline-overview\"],\"chartLabel\":\"{marker.data.state}\","
          "\"tableLabel\":\"{marker.data.state}\",\"tooltipLabel\":\"{marker.data.state}\","
          "\"fields\":[{\"key\":\"state\",\"label\":\"State\",\"format\":\"string\"}]}],",
          f);
    fputs("\"extensions\":{\"id\":[],\"name\":[],\"baseURL\":[],\"length\":0},\"categories\":[", f);
    for (int c = 0; c < NCAT; c++) {
        fprintf(f, "%s{\"name\":\"%s\",\"color\":\"%s\",\"subcategories\":[\"Other\"", c ? "," : "",
                CAT_NAMES[c], CAT_COLORS[c]);
        for (int k = 1; c == CAT_PYTHON && k <= g->nsub; k++)
            put_instruction(f, g->meta.python_version, g->opcode_of[k]);
        fputs("]}", f);
    }
    fputs("]},\"libs\":[],\"threads\":[", f);
    for (size_t i = 0; i < g->nthreads; i++) {
        if (i)
            fputc(',', f);
        write_thread(g, &g->threads[i], f);
    }
    fputs("],\"pages\":[],\"shared\":{\"stringArray\":[", f);
    for (size_t i = 0; i < g->strs.n; i++) {
        if (i)
            fputc(',', f);
        out_json_quote(f, g->strs.v[i].s);
    }
    /* The marker names, after the other strings (write_thread's indices). */
    for (int k = 0; k < NMK; k++) {
        fputc(',', f);
        out_json_quote(f, MK_NAMES[k]);
    }
    fputs("],\"sources\":{\"length\":0,\"uuid\":[],\"filename\":[]}}}\n", f);
    return ferror(f) ? PYS_E_IO : 0;
}
