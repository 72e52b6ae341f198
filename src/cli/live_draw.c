/*
 * live_draw: what the live view's screen shows, drawn with ncurses from the
 * UI thread's own table (never from the counts the sampler fills).
 *
 *   header   pid, command, version, time sampled, mode, thread shown;
 *            samples, rate asked and achieved, failures, threads;
 *            the shares of thread-samples holding or waiting for the GIL,
 *            on CPU, in GC and handling an exception; the view's state
 *   table    a row a function (or line), columns dropping as the screen
 *            narrows, or the callers and callees of the selected row
 *   footer   the keys, or the filter being typed
 *
 * Strings from the target are UTF-8; widths count code points.
 */
#include <curses.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/live.h"

static const unsigned REFRESH_MS[LIVE_REFRESH_N] = {100, 250, 500, 1000, 2000, 5000, 10000};

unsigned live_refresh_ms(int ix)
{
    return REFRESH_MS[ix < 0 ? 0 : ix >= LIVE_REFRESH_N ? LIVE_REFRESH_N - 1 : ix];
}

static const char *const SORT_NAMES[LIVE_SORT_N] = {"own", "total", "name", "file"};

/* --- text helpers ---------------------------------------------------------- */

/* Code points in s (its bytes that do not continue a UTF-8 sequence). */
static size_t width_of(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        w += ((unsigned char)*s & 0xc0) != 0x80;
    return w;
}

/* The byte offset of code point n in s (or its end). */
static size_t offset_of(const char *s, size_t n)
{
    size_t i = 0;
    for (size_t w = 0; s[i]; i++) {
        if (((unsigned char)s[i] & 0xc0) != 0x80) {
            if (w == n)
                return i;
            w++;
        }
    }
    return i;
}

/* A line being composed, at most `cols` code points wide. */
struct line {
    char b[4096];
    size_t len, w, cols;
};

static void put_n(struct line *l, const char *s, size_t bytes, size_t w)
{
    if (l->w + w > l->cols || l->len + bytes >= sizeof l->b)
        return;
    memcpy(l->b + l->len, s, bytes);
    l->len += bytes;
    l->w += w;
    l->b[l->len] = '\0';
}

/* s in exactly `width` columns: padded (on the left if right), or shortened
 * in the middle with "..." when longer, keeping a third of what is kept from
 * its start if tail (a path: its file name matters most), else half. */
static void put_cut(struct line *l, const char *s, size_t width, int right, int tail_bias)
{
    size_t w = width_of(s);
    if (w <= width) {
        for (size_t i = 0; right && i < width - w; i++)
            put_n(l, " ", 1, 1);
        put_n(l, s, strlen(s), w);
        for (size_t i = 0; !right && i < width - w; i++)
            put_n(l, " ", 1, 1);
        return;
    }
    if (width < 5) {
        put_n(l, s, offset_of(s, width), width);
        return;
    }
    size_t head = tail_bias ? (width - 3) / 3 : (width - 3) / 2, tail = width - 3 - head;
    put_n(l, s, offset_of(s, head), head);
    put_n(l, "...", 3, 3);
    size_t from = offset_of(s, w - tail);
    put_n(l, s + from, strlen(s + from), tail);
}

static void put_field(struct line *l, const char *s, size_t width, int right)
{
    put_cut(l, s, width, right, 0);
}

/* s, cut at the line's end. */
static void put_text(struct line *l, const char *s)
{
    size_t room = l->cols - l->w, w = width_of(s);
    size_t n = w <= room ? w : room;
    put_n(l, s, offset_of(s, n), n);
}

static void line_start(struct line *l, size_t cols)
{
    l->len = l->w = 0;
    l->b[0] = '\0';
    l->cols = cols < sizeof l->b / 4 ? cols : sizeof l->b / 4;
}

static void show(int y, const struct line *l, attr_t a)
{
    move(y, 0);
    clrtoeol();
    if (a)
        attron(a);
    addstr(l->b);
    if (a) {
        for (size_t i = l->w; i < l->cols; i++)
            addch(' ');
        attroff(a);
    }
}

static double pct(uint64_t a, uint64_t b)
{
    return b ? 100.0 * (double)a / (double)b : 0.0;
}

static void fmt_count(char *b, size_t n, uint64_t v)
{
    if (v < 10000000ull)
        snprintf(b, n, "%llu", (unsigned long long)v);
    else if (v < 10000000000ull)
        snprintf(b, n, "%.1fM", (double)v / 1e6);
    else
        snprintf(b, n, "%.1fG", (double)v / 1e9);
}

static void fmt_secs(char *b, size_t n, uint64_t samples, uint64_t interval_ns)
{
    double s = (double)samples * (double)interval_ns / 1e9;
    if (s < 100)
        snprintf(b, n, "%.3fs", s);
    else if (s < 100000)
        snprintf(b, n, "%.0fs", s);
    else
        snprintf(b, n, "%.0fh", s / 3600);
}

static void fmt_location(char *b, size_t n, const struct live_row *w)
{
    if (w->kind != PYS_FRAME_PYTHON || w->line < 0)
        snprintf(b, n, "%s", w->file ? w->file : "?");
    else
        snprintf(b, n, "%s:%d", w->file ? w->file : "?", (int)w->line);
}

static const char *row_name(const struct live_row *w)
{
    return w->name ? w->name : "?";
}

/* --- order ------------------------------------------------------------------- */

static int cmp_rows(const void *a, const void *b, void *ctx)
{
    const struct live_ui *u = ctx;
    const struct live_row *x = &u->t.rows[*(const size_t *)a];
    const struct live_row *y = &u->t.rows[*(const size_t *)b];
    int c = 0;
    switch (u->sort) {
    case LIVE_SORT_OWN:
        c = (x->own < y->own) - (x->own > y->own);
        if (!c)
            c = (x->total < y->total) - (x->total > y->total);
        break;
    case LIVE_SORT_TOTAL:
        c = (x->total < y->total) - (x->total > y->total);
        if (!c)
            c = (x->own < y->own) - (x->own > y->own);
        break;
    case LIVE_SORT_NAME:
        c = strcmp(row_name(x), row_name(y));
        break;
    case LIVE_SORT_FILE:
        c = strcmp(x->file ? x->file : "", y->file ? y->file : "");
        if (!c)
            c = (x->line > y->line) - (x->line < y->line);
        break;
    default:
        break;
    }
    if (!c)
        c = strcmp(row_name(x), row_name(y));
    if (!c)
        c = (x->line > y->line) - (x->line < y->line);
    return c;
}

static int matches(const struct live_row *w, const char *filter)
{
    if (!filter[0])
        return 1;
    return (w->name && strcasestr(w->name, filter)) || (w->file && strcasestr(w->file, filter));
}

void live_order(struct live_ui *u)
{
    if (u->ocap < u->t.n) {
        size_t *o = realloc(u->order, u->t.n * sizeof *o);
        if (!o) {
            u->norder = 0;
            return;
        }
        u->order = o;
        u->ocap = u->t.n;
    }
    u->norder = 0;
    for (size_t i = 0; i < u->t.n; i++)
        if ((u->t.rows[i].own || u->t.rows[i].total) && matches(&u->t.rows[i], u->filter))
            u->order[u->norder++] = i;
    if (u->norder > 1)
        qsort_r(u->order, u->norder, sizeof *u->order, cmp_rows, u);
    /* The selection stays on its row as rows move, unless it is on the top
     * row: that one follows whatever is hottest. */
    if (u->t.sel >= 0 && (u->pos > 0 || u->tree))
        for (size_t i = 0; i < u->norder; i++)
            if ((long)u->order[i] == u->t.sel)
                u->pos = (long)i;
    if (u->pos >= (long)u->norder)
        u->pos = (long)u->norder - 1;
    if (u->pos < 0)
        u->pos = 0;
}

/* --- header ---------------------------------------------------------------- */

/* A field of a header or key line: its text in full and in brief (empty:
 * the same), and how much it matters (the least is dropped first). */
struct field {
    char full[160], brief[96];
    int keep;
};

#define NFIELDS 12

static void field_set(struct field *f, int keep, const char *brief, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void field_set(struct field *f, int keep, const char *brief, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->full, sizeof f->full, fmt, ap);
    va_end(ap);
    snprintf(f->brief, sizeof f->brief, "%s", brief ? brief : "");
    f->keep = keep;
}

static const char *field_text(const struct field *f, int brief)
{
    return brief && f->brief[0] ? f->brief : f->full;
}

/* Columns the fields that are on take, joined by separators of sepw. */
static size_t fields_width(const struct field *f, size_t n, const int *on, int brief, size_t sepw)
{
    size_t w = 0, k = 0;
    for (size_t i = 0; i < n; i++)
        if (on[i])
            w += (k++ ? sepw : 0) + width_of(field_text(&f[i], brief));
    return w;
}

/* The fields, joined by sep, in the room left on l: in full if they fit;
 * else in brief, the least important dropped until the rest fit (and in
 * full again if the rest fit so). A line is never cut at its edge: a field
 * alone wider than the line is shortened in its middle. */
static void put_fields(struct line *l, const struct field *f, size_t n, const char *sep)
{
    int on[NFIELDS] = {0};
    if (n > NFIELDS)
        n = NFIELDS;
    size_t room = l->cols - l->w, sepw = width_of(sep), left = n;
    for (size_t i = 0; i < n; i++)
        on[i] = 1;
    int brief = fields_width(f, n, on, 0, sepw) > room;
    while (brief && left > 1 && fields_width(f, n, on, 1, sepw) > room) {
        size_t drop = n;
        for (size_t i = 0; i < n; i++)
            if (on[i] && (drop == n || f[i].keep <= f[drop].keep))
                drop = i;
        on[drop] = 0;
        left--;
    }
    if (brief && fields_width(f, n, on, 0, sepw) <= room)
        brief = 0;
    for (size_t i = 0, k = 0; i < n; i++) {
        if (!on[i])
            continue;
        if (k++)
            put_text(l, sep);
        const char *t = field_text(&f[i], brief);
        size_t w = width_of(t);
        if (w > l->cols - l->w)
            put_cut(l, t, l->cols - l->w, 0, 0);
        else
            put_n(l, t, strlen(t), w);
    }
}

/* Code points of a thread's name shown in the header. */
#define THREAD_NAME_SHOWN 24

/* name (NULL: none) as the header shows it, into buf (n bytes): its first
 * THREAD_NAME_SHOWN code points, control characters as '?', "~" after a
 * cut. Returns 0 if there is nothing to show. */
static int thread_name_shown(const char *name, char *buf, size_t n)
{
    size_t len = 0, w = 0;
    if (!name || !*name || n < 8)
        return 0;
    for (; *name && len + 5 < n; name++) {
        unsigned char c = (unsigned char)*name;
        if ((c & 0xc0) != 0x80 && w++ == THREAD_NAME_SHOWN)
            break;
        buf[len++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    if (*name)
        buf[len++] = '~';
    buf[len] = '\0';
    return 1;
}

static void header_title(struct live_ui *u, size_t cols)
{
    const struct live_table *t = &u->t;
    uint64_t up = (u->now_ns - u->t0_ns) / 1000000000u;
    const char *ver = t->version ? t->version : "?";
    struct field f[6];
    char b[96];
    field_set(&f[0], 1, "pystrobe", "pystrobe live");
    field_set(&f[1], 9, NULL, "pid %d", u->pid);
    snprintf(b, sizeof b, "py %s", ver);
    field_set(&f[2], 6, b, "Python %s", ver);
    field_set(&f[3], 5, NULL, "up %llu:%02llu:%02llu", (unsigned long long)(up / 3600),
              (unsigned long long)(up / 60 % 60), (unsigned long long)(up % 60));
    field_set(&f[4], 7, u->mode, "%s mode", u->mode);
    if (u->thread_ix == 0) {
        field_set(&f[5], 8, NULL, "thread all (%zu)", t->nthreads);
    } else {
        /* With its Python name where it has one; without, where room is short. */
        char tb[96], name[THREAD_NAME_SHOWN * 4 + 8];
        snprintf(tb, sizeof tb, "thread %llu (%zu/%zu)", (unsigned long long)u->sc.thread,
                 u->thread_ix, t->nthreads);
        if (thread_name_shown(t->thread_names[u->thread_ix - 1], name, sizeof name))
            field_set(&f[5], 8, tb, "thread %llu %s (%zu/%zu)", (unsigned long long)u->sc.thread,
                      name, u->thread_ix, t->nthreads);
        else
            field_set(&f[5], 8, NULL, "%s", tb);
    }
    struct line l;
    line_start(&l, cols);
    put_fields(&l, f, 6, " | ");
    show(0, &l, A_BOLD);

    line_start(&l, cols);
    put_text(&l, "cmd: ");
    if (width_of(u->cmd) > l.cols - l.w) /* its start and its end: the program, its arguments */
        put_cut(&l, u->cmd, l.cols - l.w, 0, 0);
    else
        put_text(&l, u->cmd);
    show(1, &l, 0);
}

static void header_counts(struct live_ui *u, size_t cols)
{
    const struct live_table *t = &u->t;
    char n1[32], n2[32], b[96];
    double secs = (double)t->span_ns / 1e9, rate = secs > 0 ? (double)t->snaps / secs : 0.0;
    fmt_count(n1, sizeof n1, t->snaps);
    fmt_count(n2, sizeof n2, t->run_samples);
    struct field f[5];
    snprintf(b, sizeof b, "samples %s", n1);
    field_set(&f[0], 8, b, "samples %s (run %s)", n1, n2);
    snprintf(b, sizeof b, "rate %.0f of %.0f/s", rate, u->rate_hz);
    field_set(&f[1], 9, b, "rate %.0f/s of %.0f/s", rate, u->rate_hz);
    snprintf(b, sizeof b, "failed %.1f%%", pct(t->failed, t->snaps));
    field_set(&f[2], 7, b, "failed %llu (%.1f%%)", (unsigned long long)t->failed,
              pct(t->failed, t->snaps));
    field_set(&f[3], 5, NULL, "missed %llu", (unsigned long long)t->run_missed);
    field_set(&f[4], 6, NULL, "threads %zu", t->live_threads);
    struct line l;
    line_start(&l, cols);
    put_fields(&l, f, 5, " | ");
    show(2, &l, 0);

    const struct live_counts *c = &t->counts;
    char cpu[32];
    if (c->cpu_known)
        snprintf(cpu, sizeof cpu, "%.1f%%", pct(c->cpu, c->cpu_known));
    else
        snprintf(cpu, sizeof cpu, "n/a");
    snprintf(b, sizeof b, "GIL %.1f%%", pct(c->gil, c->samples));
    field_set(&f[0], 9, b, "GIL held %.1f%%", pct(c->gil, c->samples));
    snprintf(b, sizeof b, "wait %.1f%%", pct(c->gil_wait, c->samples));
    field_set(&f[1], 7, b, "GIL wait %.1f%%", pct(c->gil_wait, c->samples));
    snprintf(b, sizeof b, "CPU %s", cpu);
    field_set(&f[2], 8, b, "on CPU %s", cpu);
    field_set(&f[3], 6, NULL, "GC %.1f%%", pct(c->gc, c->samples));
    snprintf(b, sizeof b, "exc %.1f%%", pct(c->exc, c->samples));
    field_set(&f[4], 5, b, "exception %.1f%%", pct(c->exc, c->samples));
    line_start(&l, cols);
    put_fields(&l, f, 5, " | ");
    show(3, &l, 0);
}

static void draw_header(struct live_ui *u, size_t cols)
{
    header_title(u, cols);
    header_counts(u, cols);
    struct line l;
    line_start(&l, cols);
    if (u->finished) {
        put_text(&l, u->banner);
        show(4, &l, A_REVERSE | A_BOLD);
        return;
    }
    struct field f[6];
    size_t n = 0;
    field_set(&f[n++], 6, u->sc.by_line ? NULL : "funcs", "%s",
              u->sc.by_line ? "lines" : "functions");
    field_set(&f[n++], 7, NULL, "%s",
              u->sc.window ? "last " LIVE_STR(LIVE_WINDOW_S) "s" : "whole run");
    field_set(&f[n++], 8, NULL, "sort %s", SORT_NAMES[u->sort]);
    char b[32];
    snprintf(b, sizeof b, "%gs", live_refresh_ms(u->refresh_ix) / 1000.0);
    field_set(&f[n++], 5, b, "refresh %s", b);
    if (u->paused)
        field_set(&f[n++], 10, NULL, "[PAUSED]");
    if (u->filter[0])
        field_set(&f[n++], 10, NULL, "[filter: %s]", u->filter);
    put_fields(&l, f, n, " | ");
    show(4, &l, 0);
}

/* --- the table ---------------------------------------------------------- */

enum col { C_OWN, C_OWNP, C_TOTAL, C_TOTALP, C_OWNT, C_TOTALT, C_NCOL };
static const struct {
    const char *title;
    size_t width;
} COLUMN[C_NCOL] = {
    {"own", 8}, {"own%", 6}, {"total", 8}, {"total%", 7}, {"own t", 9}, {"total t", 9},
};
/* Dropped first as the screen narrows, then the location. */
static const enum col DROP[] = {C_TOTALT, C_OWNT, C_TOTALP};

struct layout {
    int on[C_NCOL];
    int loc;
    size_t name_w, loc_w;
};

static struct layout lay_out(size_t cols)
{
    struct layout y = {{1, 1, 1, 1, 1, 1}, 1, 0, 0};
    size_t di = 0;
    for (;;) {
        size_t fixed = 0;
        for (int c = 0; c < C_NCOL; c++)
            fixed += y.on[c] ? COLUMN[c].width + 1 : 0;
        /* The name needs room before the location does. */
        size_t need = fixed + (y.loc ? 24 + 21 : 16);
        if (need <= cols || (!y.loc && di == sizeof DROP / sizeof DROP[0] && !y.on[C_TOTAL])) {
            size_t rest = cols > fixed ? cols - fixed : 0;
            if (y.loc) {
                y.loc_w = rest * 2 / 5;
                y.loc_w = y.loc_w < 20 ? 20 : y.loc_w > 60 ? 60 : y.loc_w;
                y.name_w = rest - y.loc_w - 1;
            } else {
                y.name_w = rest;
            }
            return y;
        }
        if (di < sizeof DROP / sizeof DROP[0])
            y.on[DROP[di++]] = 0;
        else if (y.loc)
            y.loc = 0;
        else
            y.on[C_TOTAL] = 0;
    }
}

static void draw_row(struct line *l, const struct live_ui *u, const struct layout *y,
                     const struct live_row *w)
{
    char b[1024];
    uint64_t n = u->t.snaps;
    for (int c = 0; c < C_NCOL; c++) {
        if (!y->on[c])
            continue;
        switch (c) {
        case C_OWN:
            fmt_count(b, sizeof b, w->own);
            break;
        case C_OWNP:
            snprintf(b, sizeof b, "%.1f", pct(w->own, n));
            break;
        case C_TOTAL:
            fmt_count(b, sizeof b, w->total);
            break;
        case C_TOTALP:
            snprintf(b, sizeof b, "%.1f", pct(w->total, n));
            break;
        case C_OWNT:
            fmt_secs(b, sizeof b, w->own, u->interval_ns);
            break;
        default:
            fmt_secs(b, sizeof b, w->total, u->interval_ns);
            break;
        }
        put_field(l, b, COLUMN[c].width, 1);
        put_n(l, " ", 1, 1);
    }
    if (u->sc.by_line && w->op_all) {
        /* --opcodes: the line's most sampled instruction after its name. */
        const char *op = pys_opcode_name(u->t.python_version, w->op, NULL);
        char opn[32];
        if (!op)
            snprintf(opn, sizeof opn, "opcode %d", (int)w->op);
        snprintf(b, sizeof b, "%s  [%s %.0f%%]", row_name(w), op ? op : opn,
                 pct(w->op_count, w->op_all));
        put_field(l, b, y->name_w, 0);
    } else {
        put_field(l, row_name(w), y->name_w, 0);
    }
    if (y->loc) {
        put_n(l, " ", 1, 1);
        fmt_location(b, sizeof b, w);
        put_cut(l, b, y->loc_w, 0, 1);
    }
}

static void draw_titles(const struct live_ui *u, const struct layout *y, size_t cols, int row)
{
    struct line l;
    char b[64];
    line_start(&l, cols);
    for (int c = 0; c < C_NCOL; c++) {
        if (!y->on[c])
            continue;
        int sorted = (c == C_OWN && u->sort == LIVE_SORT_OWN) ||
                     (c == C_TOTAL && u->sort == LIVE_SORT_TOTAL);
        snprintf(b, sizeof b, "%s%s", sorted ? "v" : "", COLUMN[c].title);
        put_field(&l, b, COLUMN[c].width, 1);
        put_n(&l, " ", 1, 1);
    }
    put_field(&l, u->sort == LIVE_SORT_NAME ? "vfunction" : "function", y->name_w, 0);
    if (y->loc) {
        put_n(&l, " ", 1, 1);
        put_field(&l, u->sort == LIVE_SORT_FILE ? "vfile:line" : "file:line", y->loc_w, 0);
    }
    show(row, &l, A_REVERSE);
}

static void draw_table(struct live_ui *u, size_t cols, int first, int last)
{
    struct layout y = lay_out(cols);
    struct line l;
    draw_titles(u, &y, cols, first);
    int rows = last - first;
    if (rows < 1)
        return;
    if (u->pos < u->top)
        u->top = u->pos;
    if (u->pos >= u->top + rows)
        u->top = u->pos - rows + 1;
    if (u->top < 0)
        u->top = 0;
    for (int i = 0; i < rows; i++) {
        long k = u->top + i;
        line_start(&l, cols);
        if (k < (long)u->norder) {
            draw_row(&l, u, &y, &u->t.rows[u->order[k]]);
            show(first + 1 + i, &l, k == u->pos ? A_REVERSE : 0);
        } else {
            if (u->norder == 0 && i == 0)
                put_text(&l, u->filter[0] ? "  (no function matches the filter)"
                                          : "  (no samples yet)");
            show(first + 1 + i, &l, 0);
        }
    }
}

/* --- the call tree of the selected row ------------------------------------------- */

static int cmp_up(const void *a, const void *b, void *ctx)
{
    const struct live_row *r = ctx;
    uint64_t x = r[*(const size_t *)a].up, y = r[*(const size_t *)b].up;
    return (x < y) - (x > y);
}

static int cmp_down(const void *a, const void *b, void *ctx)
{
    const struct live_row *r = ctx;
    uint64_t x = r[*(const size_t *)a].down, y = r[*(const size_t *)b].down;
    return (x < y) - (x > y);
}

/* Lines of one side of the tree (callers: up, else callees), from row y on;
 * returns the next row. */
static int draw_side(struct live_ui *u, size_t *ix, size_t cols, int y, int last, int up,
                     const char *indent)
{
    struct line l;
    char b[1024], c[32];
    size_t n = 0;
    for (size_t i = 0; i < u->t.n; i++)
        if (up ? u->t.rows[i].up : u->t.rows[i].down)
            ix[n++] = i;
    if (n > 1)
        qsort_r(ix, n, sizeof *ix, up ? cmp_up : cmp_down, u->t.rows);
    if (up && u->t.top_callers && y < last) {
        line_start(&l, cols);
        fmt_count(c, sizeof c, u->t.top_callers);
        snprintf(b, sizeof b, "%8s %5.1f%%  %s(top of the thread's stack)", c,
                 pct(u->t.top_callers, u->t.snaps), indent);
        put_text(&l, b);
        show(y++, &l, 0);
    }
    if (n == 0 && !(up && u->t.top_callers) && y < last) {
        line_start(&l, cols);
        snprintf(b, sizeof b, "%8s %6s  %s(none)", "", "", indent);
        put_text(&l, b);
        show(y++, &l, 0);
    }
    for (size_t i = 0; i < n && y < last; i++) {
        const struct live_row *w = &u->t.rows[ix[i]];
        uint64_t v = up ? w->up : w->down;
        line_start(&l, cols);
        fmt_count(c, sizeof c, v);
        snprintf(b, sizeof b, "%8s %5.1f%%  %s%s  ", c, pct(v, u->t.snaps), indent, row_name(w));
        put_text(&l, b);
        fmt_location(b, sizeof b, w);
        put_text(&l, b);
        show(y++, &l, 0);
    }
    return y;
}

static void draw_tree(struct live_ui *u, size_t cols, int first, int last)
{
    struct line l;
    char b[1024], own[32], tot[32], loc[1024];
    line_start(&l, cols);
    if (u->t.sel < 0) {
        put_text(&l, "call tree: the row has no samples in this view (Esc: back)");
        show(first, &l, A_REVERSE);
        for (int y = first + 1; y <= last; y++) {
            move(y, 0);
            clrtoeol();
        }
        return;
    }
    const struct live_row *w = &u->t.rows[u->t.sel];
    put_text(&l, "callers and callees (Esc, Enter or Left: back)");
    show(first, &l, A_REVERSE);
    int y = first + 1;
    line_start(&l, cols);
    put_text(&l, "callers:");
    show(y++, &l, A_BOLD);
    size_t *ix = malloc((u->t.n ? u->t.n : 1) * sizeof *ix);
    if (!ix)
        return;
    y = draw_side(u, ix, cols, y, last, 1, "  ");
    if (y < last) {
        fmt_count(own, sizeof own, w->own);
        fmt_count(tot, sizeof tot, w->total);
        fmt_location(loc, sizeof loc, w);
        line_start(&l, cols);
        snprintf(b, sizeof b, "%8s %5.1f%%  > ", tot, pct(w->total, u->t.snaps));
        put_text(&l, b);
        put_text(&l, row_name(w));
        put_text(&l, "  ");
        put_text(&l, loc);
        snprintf(b, sizeof b, "  (own %s, %.1f%%)", own, pct(w->own, u->t.snaps));
        put_text(&l, b);
        show(y++, &l, A_BOLD);
    }
    if (y < last) {
        line_start(&l, cols);
        put_text(&l, "callees:");
        show(y++, &l, A_BOLD);
    }
    y = draw_side(u, ix, cols, y, last, 0, "      ");
    free(ix);
    for (; y <= last; y++) {
        move(y, 0);
        clrtoeol();
    }
}

/* --- help, footer, whole screen -------------------------------------------- */

static const char *const HELP[] = {
    "pystrobe live: keys",
    "",
    "  q          quit (the profile is written with -o)",
    "  s / S      next / previous sort column",
    "  p          pause the display (sampling goes on)",
    "  r          reset the counts",
    "  + / -      refresh faster / slower",
    "  /          filter by name or file (Enter: apply, Esc: cancel)",
    "  c          clear the filter",
    "  t, Right   next thread (all, then each);  Left: previous",
    "  Up / Down  move between rows",
    "  Enter      callers and callees of the row",
    "  l          rows: functions / lines",
    "  w          counts: whole run / last " LIVE_STR(LIVE_WINDOW_S) " seconds",
    "  h, ?       this help (any key closes it)",
};

static void draw_help(size_t cols, int lines)
{
    size_t n = sizeof HELP / sizeof HELP[0], wmax = 0;
    for (size_t i = 0; i < n; i++)
        wmax = width_of(HELP[i]) > wmax ? width_of(HELP[i]) : wmax;
    size_t w = wmax + 4 < cols ? wmax + 4 : cols;
    int top = lines > (int)n + 2 ? (lines - (int)n - 2) / 2 : 0;
    size_t left = (cols - w) / 2;
    struct line l;
    for (size_t i = 0; i < n + 2 && top + (int)i < lines; i++) {
        line_start(&l, w);
        if (i > 0 && i <= n) {
            put_text(&l, "  ");
            put_text(&l, HELP[i - 1]);
        }
        while (l.w < l.cols)
            put_n(&l, " ", 1, 1);
        move(top + (int)i, (int)left);
        attron(A_REVERSE);
        addstr(l.b);
        attroff(A_REVERSE);
    }
}

/* The keys of the footer: in full, in brief, how much each matters. */
static const struct {
    const char *full, *brief;
    int keep, finished; /* shown when sampling has ended too */
} KEYS[] = {
    {"q quit", NULL, 10, 1},
    {"s/S sort", "s sort", 8, 1},
    {"p pause", NULL, 5, 0},
    {"r reset", NULL, 3, 0},
    {"+/- refresh", NULL, 2, 0},
    {"/ filter", NULL, 6, 1},
    {"t/<- -> thread", "t thread", 7, 1},
    {"Enter tree", NULL, 4, 1},
    {"l lines", NULL, 1, 0},
    {"w window", NULL, 1, 0},
    {"h help", NULL, 9, 1},
};

static void draw_footer(const struct live_ui *u, size_t cols, int row)
{
    struct line l;
    line_start(&l, cols);
    if (u->prompt) {
        put_text(&l, "filter: ");
        put_text(&l, u->edit);
        put_text(&l, "_");
    } else {
        struct field f[NFIELDS];
        size_t n = 0;
        for (size_t i = 0; i < sizeof KEYS / sizeof KEYS[0] && n < NFIELDS; i++)
            if (!u->finished || KEYS[i].finished)
                field_set(&f[n++], KEYS[i].keep, u->finished ? NULL : KEYS[i].brief, "%s",
                          u->finished && KEYS[i].brief ? KEYS[i].brief : KEYS[i].full);
        put_fields(&l, f, n, "  ");
    }
    show(row, &l, 0);
}

void live_draw(struct live_ui *u)
{
    int lines = LINES, cols = COLS;
    erase();
    if (cols < LIVE_MIN_COLS || lines < LIVE_MIN_LINES) {
        struct line l;
        char b[128];
        line_start(&l, (size_t)(cols > 0 ? cols : 0));
        snprintf(b, sizeof b, "too small: %dx%d (need %dx%d)", cols, lines, LIVE_MIN_COLS,
                 LIVE_MIN_LINES);
        put_text(&l, b);
        show(lines / 2, &l, 0);
        refresh();
        return;
    }
    draw_header(u, (size_t)cols);
    if (u->tree)
        draw_tree(u, (size_t)cols, 5, lines - 2);
    else
        draw_table(u, (size_t)cols, 5, lines - 2);
    draw_footer(u, (size_t)cols, lines - 1);
    if (u->help)
        draw_help((size_t)cols, lines);
    refresh();
}
