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
#include "util/strtab.h"

#include "flamegraph_html.h" /* out_flamegraph_html, generated from flamegraph.html */

/* Where the data goes in the page: the whole content of the data <script>. */
#define DATA_MARK "@PYSTROBE_DATA@"
#define DATA_FORMAT_VERSION 1
#define DEFAULT_TITLE "pystrobe flame graph"

/* Integers above this lose precision as JavaScript numbers. */
#define JS_MAX_SAFE_INT (((uint64_t)1 << 53) - 1)

enum field { F_PARENT, F_NAME, F_FILE, F_LINE, F_FIRST, F_KIND, F_SELF, F_TOTAL };

static const struct {
    enum field field;
    const char *key;
} NODE_FIELDS[] = {
    {F_PARENT, "parent"}, {F_NAME, "name"}, {F_FILE, "file"}, {F_LINE, "line"},
    {F_FIRST, "first"},   {F_KIND, "kind"}, {F_SELF, "self"}, {F_TOTAL, "total"},
};

/* The index of s in st (NULL counts as ""), added if new; -1 if out of
 * memory. The table keeps the pointer, not a copy. */
static int32_t strtab_add(struct util_strtab *st, const char *s)
{
    if (!s)
        s = "";
    if (st->n >= INT32_MAX)
        return -1;
    return (int32_t)util_strtab_add(st, s, strlen(s));
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
    out_json_string_or_null(j, in->mode);
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
static int collect_opcodes(const pys_profile *p, size_t n, struct util_strtab *st,
                           struct op_rows *out)
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

/* Opens the page's data object with what every page has: its format,
 * title and the profile's facts. */
static void write_head(struct out_json *j, const pys_profile *p, const char *title)
{
    out_json_begin_object(j);
    out_json_key(j, "format");
    out_json_string(j, "pystrobe-flamegraph");
    out_json_key(j, "version");
    out_json_int(j, DATA_FORMAT_VERSION);
    out_json_key(j, "title");
    out_json_string(j, title);
    out_json_key(j, "info");
    write_info(j, pys_profile_info_get(p));
}

static void write_strings(struct out_json *j, const struct util_strtab *st)
{
    out_json_key(j, "strings");
    out_json_begin_array(j);
    for (size_t i = 0; i < st->n; i++)
        out_json_string(j, st->v[i].s);
    out_json_end_array(j);
}

/* Where the page takes its data, or NULL if the page has lost its one
 * marker (the page is ours and fixed at build time; the tests render it). */
static const char *data_mark(void)
{
    const char *mark = strstr(out_flamegraph_html, DATA_MARK);
    return mark && !strstr(mark + 1, DATA_MARK) ? mark : NULL;
}

/* The page up to its data; page_end writes the rest once the data is in. */
static void page_begin(FILE *f, const char *mark)
{
    fwrite(out_flamegraph_html, 1, (size_t)(mark - out_flamegraph_html), f);
}

static int page_end(FILE *f, const char *mark)
{
    fputs(mark + strlen(DATA_MARK), f);
    return fflush(f) != 0 || ferror(f) ? PYS_E_IO : 0;
}

static void write_data(FILE *f, const pys_profile *p, const char *title,
                       const struct util_strtab *st, const int32_t *ix, size_t n,
                       const struct op_rows *ops)
{
    struct out_json j;
    out_json_init(&j, f);
    write_head(&j, p, title);
    write_strings(&j, st);
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
    const char *mark = data_mark();
    size_t n = pys_profile_nodes(p);
    struct util_strtab st = {0};
    int32_t *ix = NULL; /* per node: string index of qualname, then of filename */
    struct op_rows ops = {0};
    int rc = PYS_E_NOMEM;

    if (!mark)
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

    page_begin(f, mark);
    write_data(f, p, title ? title : DEFAULT_TITLE, &st, ix, n, &ops);
    rc = page_end(f, mark);
out:
    free(ix);
    free(ops.v);
    util_strtab_release(&st);
    return rc;
}

/* --- the differential page ---------------------------------------------- */

/* A node of the merged tree: a path of (kind, function, file) from the
 * root, lines left out, every thread under one node (thread ids differ
 * from run to run). c* are the current profile's samples, b* the
 * baseline's as recorded; the page scales them by current / baseline
 * samples. */
struct dnode {
    uint32_t parent;
    int32_t name, file, first, kind;
    uint64_t cself, ctotal, bself, btotal;
    uint64_t self, total; /* what the page draws (see diff_widths) */
};

struct dtree {
    struct dnode *v;
    size_t n, cap;
    struct util_htab index; /* 1 + node id, by (parent, kind, name, file) */
    struct util_strtab st;
};

static uint64_t dnode_hash(const struct dnode *d)
{
    uint64_t h = util_hash_add(0, d->parent);
    h = util_hash_add(h, (uint64_t)(uint32_t)d->kind);
    h = util_hash_add(h, (uint64_t)(uint32_t)d->name);
    return util_hash_u64(util_hash_add(h, (uint64_t)(uint32_t)d->file));
}

static uint64_t dtree_hash_at(const void *ctx, uint32_t id)
{
    return dnode_hash(&((const struct dtree *)ctx)->v[id - 1]);
}

/* The merged node for frame fr under parent; -1 if out of memory. */
static int64_t dtree_child(struct dtree *t, uint32_t parent, const struct pys_frame *fr)
{
    struct dnode key = {.parent = parent, .kind = fr->kind, .first = -1};
    key.name = strtab_add(&t->st, fr->qualname);
    key.file = strtab_add(&t->st, fr->filename);
    if (key.name < 0 || key.file < 0 || t->n >= INT32_MAX ||
        util_htab_reserve(&t->index, 256, 1, (uint32_t)t->n + 1, dtree_hash_at, t) < 0)
        return -1;
    uint32_t id;
    size_t j = util_htab_first(&t->index, dnode_hash(&key));
    for (; (id = t->index.slot[j]); j = util_htab_next(&t->index, j)) {
        const struct dnode *d = &t->v[id - 1];
        if (d->parent == parent && d->kind == key.kind && d->name == key.name &&
            d->file == key.file)
            return id - 1;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        struct dnode *v = realloc(t->v, cap * sizeof *v);
        if (!v)
            return -1;
        t->v = v;
        t->cap = cap;
    }
    key.first = fr->firstlineno >= 0 ? fr->firstlineno : -1;
    t->v[t->n] = key;
    util_htab_set(&t->index, j, (uint32_t)(t->n + 1));
    return (int64_t)t->n++;
}

/* Add profile p into t (baseline: its samples go to b*). Node 0 is the
 * root, node 1 the one thread node. 0 or PYS_E_NOMEM. */
static int dtree_add(struct dtree *t, const pys_profile *p, int baseline)
{
    size_t n = pys_profile_nodes(p);
    uint32_t *map = calloc(n ? n : 1, sizeof *map);
    if (!map)
        return PYS_E_NOMEM;
    for (uint32_t id = 1; id < n; id++) {
        const struct pys_profile_node *nd = pys_profile_node(p, id);
        const struct pys_frame *fr = pys_profile_frame(p, nd->frame);
        uint32_t m = 1; /* a thread node */
        if (fr) {
            int64_t c = dtree_child(t, map[nd->parent], fr);
            if (c < 0) {
                free(map);
                return PYS_E_NOMEM;
            }
            m = (uint32_t)c;
        }
        map[id] = m;
        struct dnode *d = &t->v[m];
        *(baseline ? &d->bself : &d->cself) += nd->self;
        *(baseline ? &d->btotal : &d->ctotal) += nd->total;
    }
    free(map);
    return 0;
}

/* What the page draws: a node of the current profile its current samples
 * plus the scaled samples of the baseline-only paths below it; a path only
 * in the baseline its scaled baseline samples, rounded up so that it stays
 * visible. Children have larger ids than their parents. */
static void diff_widths(struct dtree *t, uint64_t cur, uint64_t base)
{
    for (size_t i = 0; i < t->n; i++) {
        struct dnode *d = &t->v[i];
        d->self = d->ctotal || i < 2 ? d->cself
                                     : (d->bself * cur + (base ? base - 1 : 0)) / (base ? base : 1);
        d->total = d->self;
    }
    for (size_t i = t->n; i-- > 1;)
        t->v[t->v[i].parent].total += t->v[i].total;
}

static void write_diff_data(FILE *f, const struct dtree *t, const pys_profile *cur,
                            const char *title, const char *baseline_name, uint64_t ncur,
                            uint64_t nbase)
{
    struct out_json j;
    out_json_init(&j, f);
    write_head(&j, cur, title);
    out_json_key(&j, "diff");
    out_json_begin_object(&j);
    out_json_key(&j, "baseline");
    out_json_string(&j, baseline_name ? baseline_name : "");
    out_json_key(&j, "baseline_samples");
    out_json_int(&j, clamp_u64(nbase));
    out_json_key(&j, "current_samples");
    out_json_int(&j, clamp_u64(ncur));
    out_json_end_object(&j);
    write_strings(&j, &t->st);
    out_json_key(&j, "threads");
    out_json_begin_array(&j);
    out_json_begin_array(&j);
    out_json_int(&j, 1);
    out_json_int(&j, 0);
    out_json_string(&j, "all threads");
    out_json_end_array(&j);
    out_json_end_array(&j);
    out_json_key(&j, "nodes");
    out_json_begin_object(&j);
    static const char *const keys[] = {"parent", "name",  "file",  "line",  "first",  "kind",
                                       "self",   "total", "cself", "bself", "btotal", "only"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        out_json_key(&j, keys[k]);
        out_json_begin_array(&j);
        for (size_t i = 0; i < t->n; i++) {
            const struct dnode *d = &t->v[i];
            int frame = i >= 2;
            int64_t v = -1;
            switch (k) {
            case 0:
                v = i == 0 ? -1 : (int64_t)d->parent;
                break;
            case 1:
                v = frame ? d->name : -1;
                break;
            case 2:
                v = frame ? d->file : -1;
                break;
            case 3:
                v = -1;
                break; /* lines are not compared */
            case 4:
                v = frame ? d->first : -1;
                break;
            case 5:
                v = frame ? d->kind : -1;
                break;
            case 6:
                v = clamp_u64(d->self);
                break;
            case 7:
                v = clamp_u64(d->total);
                break;
            case 8:
                v = clamp_u64(d->cself);
                break;
            case 9:
                v = clamp_u64(d->bself);
                break;
            case 10:
                v = clamp_u64(d->btotal);
                break;
            default: /* 0 both, 1 only in the current profile, 2 only in the baseline */
                v = d->ctotal && d->btotal ? 0 : d->ctotal ? 1 : 2;
            }
            out_json_int(&j, v);
        }
        out_json_end_array(&j);
    }
    out_json_end_object(&j);
    out_json_end_object(&j);
}

int out_flamegraph_write_diff(FILE *f, const pys_profile *cur, const pys_profile *base,
                              const char *title, const char *baseline_name)
{
    const char *mark = data_mark();
    struct dtree t = {0};
    int rc = PYS_E_NOMEM;

    if (!mark)
        return PYS_E_INVAL;
    if (!(t.v = calloc(256, sizeof *t.v)))
        goto out;
    t.cap = 256;
    t.n = 2; /* the root, the one thread node */
    t.v[1].parent = 0;
    t.v[0].first = t.v[1].first = t.v[0].name = t.v[1].name = t.v[0].file = t.v[1].file = -1;
    t.v[0].kind = t.v[1].kind = -1;
    if (dtree_add(&t, cur, 0) < 0 || dtree_add(&t, base, 1) < 0)
        goto out;
    /* Thread stacks, the samples of either side. */
    uint64_t ncur = pys_profile_nodes(cur) ? pys_profile_node(cur, 0)->total : 0;
    uint64_t nbase = pys_profile_nodes(base) ? pys_profile_node(base, 0)->total : 0;
    t.v[0].ctotal = t.v[1].ctotal = ncur;
    t.v[0].btotal = t.v[1].btotal = nbase;
    diff_widths(&t, ncur, nbase);
    page_begin(f, mark);
    write_diff_data(f, &t, cur, title ? title : "pystrobe differential flame graph", baseline_name,
                    ncur, nbase);
    rc = page_end(f, mark);
out:
    free(t.v);
    util_htab_release(&t.index);
    util_strtab_release(&t.st);
    return rc;
}
