/*
 * flamegraph: write a profile into the embedded HTML page. The page's text is
 * copied up to its data marker, the profile follows as JSON (format in
 * flamegraph.h), then the rest of the page. Names are written once each, into
 * a string table, and nodes as parallel arrays of numbers, which keeps the
 * page small and quick for the browser to parse: some 30 bytes per node.
 */
#include "output/flamegraph.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "output/json.h"
#include "util/hashtab.h"

#include "flamegraph_html.h" /* out_flamegraph_html, generated from flamegraph.html */

/* Where the data goes in the page: the whole content of the data <script>. */
#define DATA_MARK "@PYSTROBE_DATA@"
#define DATA_FORMAT_VERSION 1
#define DEFAULT_TITLE "pystrobe flame graph"

/* Integers above this lose precision as JavaScript numbers. */
#define JS_MAX_SAFE_INT (((uint64_t)1 << 53) - 1)

/* Distinct strings by content, in order of first appearance. */
struct strtab {
    const char **strs;
    size_t n, cap;
    struct util_htab index; /* 1 + index into strs */
};

enum field { F_PARENT, F_NAME, F_FILE, F_LINE, F_FIRST, F_KIND, F_SELF, F_TOTAL };

static const struct {
    enum field field;
    const char *key;
} NODE_FIELDS[] = {
    {F_PARENT, "parent"}, {F_NAME, "name"}, {F_FILE, "file"}, {F_LINE, "line"},
    {F_FIRST, "first"},   {F_KIND, "kind"}, {F_SELF, "self"}, {F_TOTAL, "total"},
};

static uint64_t str_hash(const char *s)
{
    return util_hash_bytes(s, strlen(s));
}

static uint64_t strtab_hash_at(const void *ctx, uint32_t id)
{
    return str_hash(((const struct strtab *)ctx)->strs[id - 1]);
}

/* The index of s (NULL counts as ""), added if new; -1 if out of memory. The
 * table keeps the pointer, not a copy. */
static int32_t strtab_add(struct strtab *t, const char *s)
{
    if (!s)
        s = "";
    if (t->n >= INT32_MAX ||
        util_htab_reserve(&t->index, 256, 1, (uint32_t)t->n + 1, strtab_hash_at, t) < 0)
        return -1;
    uint32_t id;
    size_t j = util_htab_first(&t->index, str_hash(s));
    for (; (id = t->index.slot[j]); j = util_htab_next(&t->index, j))
        if (strcmp(t->strs[id - 1], s) == 0)
            return (int32_t)(id - 1);
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        const char **strs = realloc(t->strs, cap * sizeof *strs);
        if (!strs)
            return -1;
        t->strs = strs;
        t->cap = cap;
    }
    t->strs[t->n] = s;
    util_htab_set(&t->index, j, (uint32_t)(t->n + 1));
    return (int32_t)t->n++;
}

static void strtab_release(struct strtab *t)
{
    free(t->strs);
    util_htab_release(&t->index);
    memset(t, 0, sizeof *t);
}

static int64_t clamp_u64(uint64_t v)
{
    return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

static int64_t node_field(const pys_profile *p, const int32_t *ix, uint32_t id, enum field fd)
{
    const struct pys_profile_node *nd = pys_profile_node(p, id);
    const struct pys_frame *frame = pys_profile_frame(p, nd->frame); /* NULL: root, thread */
    switch (fd) {
    case F_PARENT:
        return id == 0 ? -1 : (int64_t)nd->parent;
    case F_NAME:
        return frame ? ix[2 * (size_t)id] : -1;
    case F_FILE:
        return frame ? ix[2 * (size_t)id + 1] : -1;
    case F_LINE:
        return frame && frame->lineno >= 0 ? frame->lineno : -1;
    case F_FIRST:
        return frame && frame->firstlineno >= 0 ? frame->firstlineno : -1;
    case F_KIND:
        return frame ? frame->kind : -1;
    case F_SELF:
        return clamp_u64(nd->self);
    case F_TOTAL:
        return clamp_u64(nd->total);
    }
    return -1;
}

static void write_info(struct out_json *j, const struct pys_profile_info *in)
{
    out_json_begin_object(j);
    out_json_key(j, "pid");
    out_json_int(j, in->pid);
    out_json_key(j, "python_version");
    out_json_int(j, in->python_version);
    out_json_key(j, "mode");
    if (in->mode)
        out_json_string(j, in->mode);
    else
        out_json_null(j);
    out_json_key(j, "samples");
    out_json_int(j, clamp_u64(in->samples));
    out_json_key(j, "duration_ns");
    out_json_int(j, clamp_u64(in->duration_ns));
    out_json_key(j, "interval_ns");
    out_json_int(j, clamp_u64(in->interval_ns));
    out_json_key(j, "failed");
    out_json_int(j, clamp_u64(in->failed));
    out_json_key(j, "missed");
    out_json_int(j, clamp_u64(in->missed));
    out_json_end_object(j);
}

static void write_threads(struct out_json *j, const pys_profile *p, size_t n)
{
    out_json_begin_array(j);
    for (uint32_t id = 1; id < n; id++) {
        if (!pys_profile_is_thread(p, id))
            continue;
        uint64_t thread = pys_profile_thread(p, id);
        out_json_begin_array(j);
        out_json_int(j, id);
        if (thread <= JS_MAX_SAFE_INT) {
            out_json_int(j, (int64_t)thread);
        } else {
            char buf[24];
            snprintf(buf, sizeof buf, "%" PRIu64, thread);
            out_json_string(j, buf);
        }
        const char *name = pys_profile_thread_name(p, thread);
        struct pys_thread_states st;
        int states = pys_profile_thread_states(p, thread, &st) == 0;
        if (name)
            out_json_string(j, name);
        else if (states)
            out_json_null(j);
        /* Its states: [samples, gil, gil_wait, cpu_known, cpu, gc, exception]. */
        if (states) {
            const uint64_t v[] = {st.samples, st.gil, st.gil_wait, st.cpu_known,
                                  st.cpu,     st.gc,  st.exception};
            out_json_begin_array(j);
            for (size_t k = 0; k < sizeof v / sizeof v[0]; k++)
                out_json_int(j, clamp_u64(v[k]));
            out_json_end_array(j);
        }
        out_json_end_array(j);
    }
    out_json_end_array(j);
}

/* Samples of a node at an instruction (pys_profile_node_opcodes), with the
 * instruction's names as string indexes (-1: none). */
struct op_row {
    uint32_t node;
    int32_t opcode, name, base;
    uint64_t count;
};

struct op_rows {
    struct op_row *v;
    size_t n, cap;
};

/* Every node's instructions, their names added to st. 0 or PYS_E_NOMEM. */
static int collect_opcodes(const pys_profile *p, size_t n, struct strtab *st, struct op_rows *out)
{
    uint32_t version = pys_profile_info_get(p)->python_version;
    struct pys_opcode_count buf[256];
    for (uint32_t id = 1; id < n; id++) {
        int k = pys_profile_node_opcodes(p, id, buf, sizeof buf / sizeof buf[0]);
        if (k < 0)
            return k;
        if (k > (int)(sizeof buf / sizeof buf[0]))
            k = (int)(sizeof buf / sizeof buf[0]);
        for (int i = 0; i < k; i++) {
            if (out->n == out->cap) {
                size_t cap = out->cap ? 2 * out->cap : 256;
                struct op_row *v = realloc(out->v, cap * sizeof *v);
                if (!v)
                    return PYS_E_NOMEM;
                out->v = v;
                out->cap = cap;
            }
            const char *base = NULL;
            const char *name = pys_opcode_name(version, buf[i].opcode, &base);
            struct op_row r = {id, buf[i].opcode, name ? strtab_add(st, name) : -1,
                               base ? strtab_add(st, base) : -1, buf[i].count};
            if ((name && r.name < 0) || (base && r.base < 0))
                return PYS_E_NOMEM;
            out->v[out->n++] = r;
        }
    }
    return 0;
}

static void write_opcodes(struct out_json *j, const struct op_rows *ops)
{
    static const char *const keys[] = {"node", "opcode", "name", "base", "count"};
    out_json_begin_object(j);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        out_json_key(j, keys[k]);
        out_json_begin_array(j);
        for (size_t i = 0; i < ops->n; i++) {
            const struct op_row *r = &ops->v[i];
            out_json_int(j, k == 0   ? (int64_t)r->node
                            : k == 1 ? r->opcode
                            : k == 2 ? r->name
                            : k == 3 ? r->base
                                     : clamp_u64(r->count));
        }
        out_json_end_array(j);
    }
    out_json_end_object(j);
}

static void write_data(FILE *f, const pys_profile *p, const char *title, const struct strtab *st,
                       const int32_t *ix, size_t n, const struct op_rows *ops)
{
    struct out_json j;
    out_json_init(&j, f);
    out_json_begin_object(&j);
    out_json_key(&j, "format");
    out_json_string(&j, "pystrobe-flamegraph");
    out_json_key(&j, "version");
    out_json_int(&j, DATA_FORMAT_VERSION);
    out_json_key(&j, "title");
    out_json_string(&j, title);
    out_json_key(&j, "info");
    write_info(&j, pys_profile_info_get(p));
    out_json_key(&j, "strings");
    out_json_begin_array(&j);
    for (size_t i = 0; i < st->n; i++)
        out_json_string(&j, st->strs[i]);
    out_json_end_array(&j);
    out_json_key(&j, "threads");
    write_threads(&j, p, n);
    out_json_key(&j, "nodes");
    out_json_begin_object(&j);
    for (size_t k = 0; k < sizeof NODE_FIELDS / sizeof NODE_FIELDS[0]; k++) {
        out_json_key(&j, NODE_FIELDS[k].key);
        out_json_begin_array(&j);
        for (uint32_t id = 0; id < n; id++)
            out_json_int(&j, node_field(p, ix, id, NODE_FIELDS[k].field));
        out_json_end_array(&j);
    }
    out_json_end_object(&j);
    if (ops->n) {
        out_json_key(&j, "opcodes");
        write_opcodes(&j, ops);
    }
    out_json_end_object(&j);
}

int out_flamegraph_write(FILE *f, const pys_profile *p, const char *title)
{
    const char *page = out_flamegraph_html;
    const char *mark = strstr(page, DATA_MARK);
    size_t n = pys_profile_nodes(p);
    struct strtab st = {0};
    int32_t *ix = NULL; /* per node: string index of qualname, then of filename */
    struct op_rows ops = {0};
    int rc = PYS_E_NOMEM;

    /* The page is ours and fixed at build time; the test suite renders it. */
    if (!mark || strstr(mark + 1, DATA_MARK))
        return PYS_E_INVAL;
    ix = calloc(2 * n, sizeof *ix);
    if (!ix)
        goto out;
    for (uint32_t id = 1; id < n; id++) {
        const struct pys_frame *fr = pys_profile_frame(p, pys_profile_node(p, id)->frame);
        if (!fr) /* a thread node */
            continue;
        ix[2 * (size_t)id] = strtab_add(&st, fr->qualname);
        ix[2 * (size_t)id + 1] = strtab_add(&st, fr->filename);
        if (ix[2 * (size_t)id] < 0 || ix[2 * (size_t)id + 1] < 0)
            goto out;
    }
    if ((rc = collect_opcodes(p, n, &st, &ops)) < 0)
        goto out;

    fwrite(page, 1, (size_t)(mark - page), f);
    write_data(f, p, title ? title : DEFAULT_TITLE, &st, ix, n, &ops);
    fputs(mark + strlen(DATA_MARK), f);
    rc = fflush(f) != 0 || ferror(f) ? PYS_E_IO : 0;
out:
    free(ix);
    free(ops.v);
    strtab_release(&st);
    return rc;
}
