/*
 * jsonl: the JSON lines writer (jsonl.h). Strings are interned by content
 * (two sessions of one run may hold equal names at different addresses),
 * through a cache by address; frames by their string ids and location.
 */
#include "output/jsonl.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "output/json.h"
#include "util/array.h"
#include "util/hashtab.h"
#include "util/strtab.h"

#define CHUNK 256

struct jframe {
    uint32_t path, func;
    int32_t line, end_line, col, end_col, opcode;
    uint64_t self, cumulative, stamp;
};

struct jptr {
    const char *p;
    uint32_t sid;
};

struct out_jsonl {
    char run_id[33];
    uint64_t interval_us, start_ns;
    uint32_t version; /* the target's, for the instructions' names */
    char mode[32];
    int samples;
    FILE *spool;
    struct util_strtab strs; /* the caller's strings: valid as long as the writer */
    size_t strs_out;         /* strings defined in the spool so far */
    struct jptr *ptrs;       /* address -> string id */
    size_t nptrs, capptrs;
    struct util_htab ptrtab;
    struct jframe *frames;
    size_t nframes, capframes, frames_out;
    struct util_htab frametab;
    uint64_t stacks, serial;
    uint32_t *ids; /* a thread's frame ids, scratch */
    size_t capids;
};

static uint64_t ptr_hash_of(const void *ctx, uint32_t id)
{
    return util_hash_u64((uint64_t)(uintptr_t)((const struct jptr *)ctx)[id - 1].p);
}

static uint64_t frame_key_hash(const struct jframe *f)
{
    uint64_t h = util_hash_add(0, f->path);
    h = util_hash_add(h, f->func);
    h = util_hash_add(h, (uint32_t)f->line);
    h = util_hash_add(h, (uint32_t)f->end_line);
    h = util_hash_add(h, (uint32_t)f->col);
    h = util_hash_add(h, (uint32_t)f->end_col);
    h = util_hash_add(h, (uint32_t)f->opcode);
    return util_hash_u64(h);
}

static uint64_t frame_hash_of(const void *ctx, uint32_t id)
{
    return frame_key_hash(&((const struct jframe *)ctx)[id - 1]);
}

out_jsonl *out_jsonl_new(const struct out_rec_meta *m, int samples, FILE *spool)
{
    out_jsonl *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    /* The run's id: a function of the run (pid, start date), so a replay
     * writes the id the live run wrote. */
    uint64_t a =
        util_hash_u64(util_hash_add(util_hash_add(0, (uint64_t)m->pid), m->start_realtime_ns));
    uint64_t b = util_hash_u64(util_hash_add(a, m->start_monotonic_ns));
    snprintf(j->run_id, sizeof j->run_id, "%016" PRIx64 "%016" PRIx64, a, b);
    j->interval_us = m->interval_ns / 1000;
    j->start_ns = m->start_monotonic_ns;
    j->version = m->python_version;
    snprintf(j->mode, sizeof j->mode, "%s", m->mode ? m->mode : "");
    j->samples = samples;
    j->spool = spool;
    return j;
}

void out_jsonl_free(out_jsonl *j)
{
    if (!j)
        return;
    util_strtab_release(&j->strs);
    free(j->ptrs);
    free(j->frames);
    free(j->ids);
    util_htab_release(&j->ptrtab);
    util_htab_release(&j->frametab);
    free(j);
}

uint64_t out_jsonl_stacks(const out_jsonl *j)
{
    return j->stacks;
}

/* The id of string s (0-based), by content. */
static int intern_str(out_jsonl *j, const char *s, uint32_t *out)
{
    uint64_t hp = util_hash_u64((uint64_t)(uintptr_t)s);
    uint32_t id;
    if (j->ptrtab.cap)
        for (size_t k = util_htab_first(&j->ptrtab, hp); (id = j->ptrtab.slot[k]);
             k = util_htab_next(&j->ptrtab, k))
            if (j->ptrs[id - 1].p == s) {
                *out = j->ptrs[id - 1].sid;
                return 0;
            }
    int64_t sid = util_strtab_add(&j->strs, s, strlen(s));
    if (sid < 0)
        return PYS_E_NOMEM;
    if (util_htab_reserve(&j->ptrtab, 256, 1, (uint32_t)j->nptrs + 1, ptr_hash_of, j->ptrs) < 0 ||
        util_array_reserve((void **)&j->ptrs, &j->capptrs, j->nptrs + 1, sizeof *j->ptrs) < 0)
        return PYS_E_NOMEM;
    j->ptrs[j->nptrs] = (struct jptr){s, (uint32_t)sid};
    id = (uint32_t)++j->nptrs;
    util_htab_set(&j->ptrtab, util_htab_free_slot(&j->ptrtab, hp), id);
    *out = (uint32_t)sid;
    return 0;
}

static int intern_frame(out_jsonl *j, const struct pys_frame *f, uint32_t *out)
{
    struct jframe k;
    memset(&k, 0, sizeof k);
    /* The function's name first, as the reference interns them. */
    if (intern_str(j, f->qualname ? f->qualname : "", &k.func) < 0 ||
        intern_str(j, f->filename ? f->filename : "", &k.path) < 0)
        return PYS_E_NOMEM;
    int marker = f->kind != PYS_FRAME_PYTHON;
    k.line = marker || f->lineno < 0 ? 0 : f->lineno;
    k.end_line = marker ? -1 : f->end_lineno;
    k.col = marker ? -1 : f->col;
    k.end_col = marker ? -1 : f->end_col;
    k.opcode = marker || f->opcode < 0 ? -1 : f->opcode;
    uint64_t h = frame_key_hash(&k);
    uint32_t id;
    if (j->frametab.cap)
        for (size_t x = util_htab_first(&j->frametab, h); (id = j->frametab.slot[x]);
             x = util_htab_next(&j->frametab, x)) {
            const struct jframe *g = &j->frames[id - 1];
            if (g->path == k.path && g->func == k.func && g->line == k.line &&
                g->end_line == k.end_line && g->col == k.col && g->end_col == k.end_col &&
                g->opcode == k.opcode) {
                *out = id - 1;
                return 0;
            }
        }
    if (util_htab_reserve(&j->frametab, 256, 1, (uint32_t)j->nframes + 1, frame_hash_of,
                          j->frames) < 0 ||
        util_array_reserve((void **)&j->frames, &j->capframes, j->nframes + 1, sizeof *j->frames) <
            0)
        return PYS_E_NOMEM;
    j->frames[j->nframes] = k;
    id = (uint32_t)++j->nframes;
    util_htab_set(&j->frametab, util_htab_free_slot(&j->frametab, h), id);
    *out = id - 1;
    return 0;
}

static void head(out_jsonl *j, FILE *f, const char *type)
{
    fprintf(f, "{\"type\":\"%s\",\"v\":0,\"run_id\":\"%s\"", type, j->run_id);
}

/* string_table records for strings [from, to). */
static void put_strings(out_jsonl *j, FILE *f, size_t from, size_t to)
{
    for (size_t s = from; s < to; s += CHUNK) {
        head(j, f, "string_table");
        fputs(",\"strings\":[", f);
        for (size_t i = s; i < to && i < s + CHUNK; i++) {
            fprintf(f, "%s{\"str_id\":%zu,\"value\":", i > s ? "," : "", i);
            out_json_quote(f, j->strs.v[i].s);
            fputc('}', f);
        }
        fputs("]}\n", f);
    }
}

/* ,"opcode":N,"opname":"NAME"[,"opbase":"BASE"] (as dump --json names
 * them; no opname where the version has no such instruction). */
static void put_opcode(const out_jsonl *j, FILE *f, int32_t opcode)
{
    const char *base = NULL;
    const char *name = pys_opcode_name(j->version, opcode, &base);
    fprintf(f, ",\"opcode\":%d", (int)opcode);
    if (name) {
        fputs(",\"opname\":", f);
        out_json_quote(f, name);
    }
    if (base) {
        fputs(",\"opbase\":", f);
        out_json_quote(f, base);
    }
}

static void put_frames(out_jsonl *j, FILE *f, size_t from, size_t to)
{
    for (size_t s = from; s < to; s += CHUNK) {
        head(j, f, "frame_table");
        fputs(",\"frames\":[", f);
        for (size_t i = s; i < to && i < s + CHUNK; i++) {
            const struct jframe *g = &j->frames[i];
            fprintf(f, "%s{\"frame_id\":%zu,\"path_str_id\":%u,\"func_str_id\":%u,\"line\":%d",
                    i > s ? "," : "", i, g->path, g->func, g->line);
            if (g->end_line > 0)
                fprintf(f, ",\"end_line\":%d", g->end_line);
            if (g->col >= 0)
                fprintf(f, ",\"col\":%d", g->col);
            if (g->end_col >= 0)
                fprintf(f, ",\"end_col\":%d", g->end_col);
            if (g->opcode >= 0)
                put_opcode(j, f, g->opcode);
            fputc('}', f);
        }
        fputs("]}\n", f);
    }
}

int out_jsonl_sample(out_jsonl *j, const struct out_rec_sample *s)
{
    /* Ids first (their definitions precede the sample record). */
    size_t total = 0;
    for (size_t i = 0; i < s->nthreads; i++)
        total += s->threads[i].nframes;
    if (total > j->capids) {
        uint32_t *p = realloc(j->ids, total * sizeof *p);
        if (!p)
            return PYS_E_NOMEM;
        j->ids = p;
        j->capids = total;
    }
    size_t at = 0;
    for (size_t i = 0; i < s->nthreads; i++) {
        const struct out_rec_thread *t = &s->threads[i];
        if (t->nframes == 0)
            continue;
        j->stacks++;
        j->serial++;
        for (size_t k = 0; k < t->nframes; k++) {
            uint32_t id;
            if (intern_frame(j, &t->frames[k], &id) < 0)
                return PYS_E_NOMEM;
            j->ids[at + k] = id;
            struct jframe *g = &j->frames[id];
            if (k == 0)
                g->self++;
            if (g->stamp != j->serial) { /* once per stack */
                g->stamp = j->serial;
                g->cumulative++;
            }
        }
        at += t->nframes;
    }
    if (!j->samples)
        return 0;
    FILE *f = j->spool;
    put_strings(j, f, j->strs_out, j->strs.n);
    put_frames(j, f, j->frames_out, j->nframes);
    j->strs_out = j->strs.n;
    j->frames_out = j->nframes;
    head(j, f, "sample");
    /* In microseconds, as a recording stores times. */
    uint64_t t_us = s->t_ns / 1000, start_us = j->start_ns / 1000;
    fprintf(f, ",\"t_us\":%" PRIu64, t_us >= start_us ? t_us - start_us : 0);
    if (s->rc)
        fprintf(f, ",\"rc\":%d", s->rc);
    fputs(",\"threads\":[", f);
    at = 0;
    for (size_t i = 0; i < s->nthreads; i++) {
        const struct out_rec_thread *t = &s->threads[i];
        fprintf(f, "%s{\"tid\":%" PRIu64, i ? "," : "", t->id);
        if (t->ns_id)
            fprintf(f, ",\"ns_tid\":%" PRIu64, t->ns_id);
        fprintf(f, ",\"status\":%u,\"frames\":[", t->status);
        for (size_t k = 0; k < t->nframes; k++)
            fprintf(f, "%s%u", k ? "," : "", j->ids[at + k]);
        fputs("]}", f);
        at += t->nframes;
    }
    fputs("]}\n", f);
    return ferror(f) ? PYS_E_IO : 0;
}

int out_jsonl_write(out_jsonl *j, FILE *f)
{
    head(j, f, "meta");
    fprintf(f, ",\"sample_interval_usec\":%" PRIu64, j->interval_us);
    if (j->mode[0])
        fprintf(f, ",\"mode\":\"%s\"", j->mode);
    fputs("}\n", f);
    if (j->samples) {
        char buf[65536];
        size_t n;
        if (fflush(j->spool) != 0 || fseek(j->spool, 0, SEEK_SET) != 0)
            return PYS_E_IO;
        while ((n = fread(buf, 1, sizeof buf, j->spool)) > 0)
            fwrite(buf, 1, n, f);
        if (ferror(j->spool))
            return PYS_E_IO;
    }
    put_strings(j, f, j->strs_out, j->strs.n);
    put_frames(j, f, j->frames_out, j->nframes);
    for (size_t s = 0; s < j->nframes; s += CHUNK) {
        head(j, f, "agg");
        fprintf(f,
                ",\"kind\":\"frame\",\"scope\":\"final\",\"samples_total\":%" PRIu64
                ",\"entries\":[",
                j->stacks);
        for (size_t i = s; i < j->nframes && i < s + CHUNK; i++)
            fprintf(f, "%s{\"frame_id\":%zu,\"self\":%" PRIu64 ",\"cumulative\":%" PRIu64 "}",
                    i > s ? "," : "", i, j->frames[i].self, j->frames[i].cumulative);
        fputs("]}\n", f);
    }
    head(j, f, "end");
    fprintf(f, ",\"samples_total\":%" PRIu64 "}\n", j->stacks);
    return ferror(f) ? PYS_E_IO : 0;
}
