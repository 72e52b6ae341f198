/*
 * Unit tests of the live view's counts (cli/live_agg.c). A known sequence
 * of samples goes through the sink as the sampling loop hands it over;
 * the tables built from it must show, for the whole run since a reset and
 * for the last seconds, by function and by line, for all threads and for
 * one, the own and total samples of each row and the states that a plain
 * recount of the same samples gives. Both ways the sink gets its stacks
 * are run: read from the run's profile (filled here as record_loop.c
 * fills it, with pys_profile_add), and added to its own. The UI holding
 * the lock for a while (the sink never waits for it) loses no sample.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/live_agg.c"

/* record_loop.c's filter: the tests' struct rec asks for wall mode with no
 * thread filter, in which it keeps every thread. */
int rec_thread_matches(const struct rec *r, const struct pys_thread *t)
{
    (void)r;
    (void)t;
    return 1;
}

#define FUNCS 5
#define THREADS 3
#define MAX_DEPTH 8
#define SAMPLES 420
#define RESET_AT 150 /* the sample that sees the reset */

static const char *const files[FUNCS] = {"a.py", "a.py", "b.py", "b.py", "c.py"};
static const char *const names[FUNCS] = {"main", "run", "work", "leaf", "helper"};
static const int32_t first_lines[FUNCS] = {1, 10, 3, 30, 7};
/* Thread 2 has no host id: the profile knows it by its native id. */
static const uint64_t host_ids[THREADS] = {101, 102, 0};
static const uint64_t native_ids[THREADS] = {101, 102, 203};

struct tsample {
    int error;
    uint32_t status;
    size_t n;
    struct pys_frame f[MAX_DEPTH]; /* innermost first */
};

struct sample {
    uint64_t t_ns;
    int failed; /* failed as a whole: no snapshot */
    int gc;     /* a collection ran: thread 0's leaf is a <GC> frame */
    struct tsample th[THREADS];
    int64_t sec; /* the window's bucket it counts in; -1: before the reset */
};

static struct sample samples[SAMPLES];
static uint64_t last_sec; /* the bucket filling at the end */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

static struct pys_frame frame_of(int fn, int32_t line)
{
    return (struct pys_frame){.filename = files[fn],
                              .qualname = names[fn],
                              .firstlineno = first_lines[fn],
                              .lineno = line,
                              .end_lineno = line,
                              .col = -1,
                              .end_col = -1,
                              .lasti = -1,
                              .kind = PYS_FRAME_PYTHON,
                              .opcode = -1};
}

/* Whether the UI holds the lock while sample j is taken (it builds its
 * table): over a bucket's edge, and over the sample that sees the reset. */
static int held(size_t j)
{
    return (j >= 40 && j <= 58) || (j >= RESET_AT && j <= RESET_AT + 4);
}

/* Which bucket each sample counts in. The sink publishes at the first
 * sample past the filling bucket's second, or after a reset was asked for,
 * that finds the lock free; that sample counts before the publication: in
 * the bucket it closes, or before the reset. */
static void assign_buckets(void)
{
    uint64_t start = samples[0].t_ns, edge = start + NS_PER_S, cur = 0;
    int reset = 0;
    for (size_t j = 0; j < SAMPLES; j++) {
        struct sample *s = &samples[j];
        reset |= j == RESET_AT;
        s->sec = (int64_t)cur;
        if (held(j) || (s->t_ns < edge && !reset))
            continue;
        if (reset) {
            for (size_t i = 0; i <= j; i++)
                samples[i].sec = -1;
            start = s->t_ns;
            cur = 0;
            reset = 0;
        } else {
            cur = (s->t_ns - start) / NS_PER_S;
        }
        edge = start + (cur + 1) * NS_PER_S;
    }
    last_sec = cur;
}

/* Make the samples: a few stacks and states per thread, repeats and
 * recursion included, 60 to 90 ms apart, some failed. */
static void make_samples(void)
{
    uint64_t t = 5 * NS_PER_S;
    for (size_t j = 0; j < SAMPLES; j++) {
        struct sample *s = &samples[j];
        s->t_ns = t;
        t += (60 + next_rand() % 31) * 1000000ull;
        s->failed = next_rand() % 25 == 0;
        for (size_t k = 0; k < THREADS; k++) {
            struct tsample *ts = &s->th[k];
            /* Thread 0 cannot be read at the end: it is not among the
             * threads of the last bucket. */
            ts->error = next_rand() % 20 == 0 || (k == 0 && j >= SAMPLES - 30);
            ts->status =
                next_rand() & (PYS_THREAD_HAS_GIL | PYS_THREAD_ON_CPU | PYS_THREAD_UNKNOWN |
                               PYS_THREAD_HAS_EXCEPTION | PYS_THREAD_GIL_REQUESTED);
            ts->n = next_rand() % 7 == 0 ? 0 : 1 + next_rand() % (MAX_DEPTH - 1);
            /* Outermost main, then a path through the others (a function
             * may come again: it counts once in its total). */
            for (size_t i = 0; i < ts->n; i++) {
                int fn = i == 0 ? 0 : 1 + (int)(next_rand() % (FUNCS - 1));
                int32_t line = first_lines[fn] + (int32_t)(next_rand() % 3);
                ts->f[ts->n - 1 - i] = frame_of(fn, line);
            }
        }
        s->gc = j % 9 == 0 && s->th[0].n > 1;
        if (s->gc)
            s->th[0].f[0] = (struct pys_frame){.filename = "~",
                                               .qualname = "<GC>",
                                               .firstlineno = -1,
                                               .lineno = -1,
                                               .end_lineno = -1,
                                               .col = -1,
                                               .end_col = -1,
                                               .lasti = -1,
                                               .kind = PYS_FRAME_GC,
                                               .opcode = -1};
    }
    assign_buckets();
}

/* Feed every sample to d, as record_loop.c does: into prof first (NULL:
 * the sink keeps its own), the reset asked for before RESET_AT. */
static void feed_all(struct live_data *d, pys_profile *prof)
{
    struct pys_profile_info info = {0};
    for (size_t j = 0; j < SAMPLES; j++) {
        const struct sample *s = &samples[j];
        struct pys_thread th[THREADS];
        for (size_t k = 0; k < THREADS; k++) {
            const struct tsample *ts = &s->th[k];
            th[k] = (struct pys_thread){.native_id = native_ids[k],
                                        .host_id = host_ids[k],
                                        .status = ts->status,
                                        .error = ts->error,
                                        .nframes = ts->error ? 0 : ts->n,
                                        .frames = ts->f};
            uint64_t id = host_ids[k] ? host_ids[k] : native_ids[k];
            if (prof && !s->failed && !ts->error && ts->n)
                assert_int_equal(pys_profile_add(prof, id, ts->f, ts->n, 1), 0);
        }
        struct pys_interp in = {.id = 0, .nthreads = THREADS, .threads = th, .gc_running = s->gc};
        struct pys_snapshot snap = {1, &in};
        info.samples++;
        struct rec_sample smp = {s->t_ns,
                                 s->t_ns + 1000,
                                 s->failed ? NULL : &snap,
                                 s->failed ? PYS_E_CORRUPT : 0,
                                 NULL,
                                 &info,
                                 prof,
                                 prof};
        if (j == RESET_AT)
            live_data_reset(d);
        if (held(j))
            assert_int_equal(pthread_mutex_lock(&d->mu), 0);
        assert_int_equal(live_data_sample(d, &smp), 0);
        if (held(j))
            assert_int_equal(pthread_mutex_unlock(&d->mu), 0);
    }
    live_data_finish(d);
}

struct want_row {
    const char *file, *name;
    int32_t line;
    uint64_t own, total;
    int seen; /* scratch: on the stack being counted */
};

struct want {
    struct want_row rows[FUNCS * 3 + 1];
    size_t n;
    uint64_t snaps, failed;
    struct live_counts c;
    uint64_t threads[THREADS]; /* in the order first seen */
    size_t nthreads;
};

static struct want_row *want_row(struct want *w, const struct pys_frame *f, int by_line)
{
    int32_t line = f->kind != PYS_FRAME_PYTHON ? -1 : by_line ? f->lineno : f->firstlineno;
    for (size_t i = 0; i < w->n; i++)
        if (w->rows[i].name == f->qualname && w->rows[i].line == line)
            return &w->rows[i];
    w->rows[w->n] = (struct want_row){f->filename, f->qualname, line, 0, 0, 0};
    return &w->rows[w->n++];
}

/* The recount: the samples in the scope (window: the last LIVE_WINDOW_S
 * seconds' buckets), of every thread or of thread index one (-1: all). */
static void recount(struct want *w, int window, int by_line, int one)
{
    memset(w, 0, sizeof *w);
    for (size_t j = 0; j < SAMPLES; j++) {
        const struct sample *s = &samples[j];
        if (s->sec < 0 || (window && (uint64_t)s->sec + LIVE_WINDOW_S < last_sec))
            continue;
        w->snaps++;
        int failed = s->failed;
        for (size_t k = 0; k < THREADS && !s->failed; k++) {
            const struct tsample *ts = &s->th[k];
            if (ts->error) {
                failed = 1;
                continue;
            }
            uint64_t id = host_ids[k] ? host_ids[k] : native_ids[k];
            size_t at = 0;
            while (at < w->nthreads && w->threads[at] != id)
                at++;
            if (at == w->nthreads)
                w->threads[w->nthreads++] = id;
            if (one >= 0 && (int)k != one)
                continue;
            uint32_t st = ts->status;
            w->c.samples++;
            w->c.gil += (st & PYS_THREAD_HAS_GIL) != 0;
            w->c.gil_wait += (st & PYS_THREAD_GIL_REQUESTED) != 0;
            w->c.cpu_known += !(st & PYS_THREAD_UNKNOWN);
            w->c.cpu += !(st & PYS_THREAD_UNKNOWN) && (st & PYS_THREAD_ON_CPU);
            w->c.exc += (st & PYS_THREAD_HAS_EXCEPTION) != 0;
            w->c.gc += ts->n && ts->f[0].kind == PYS_FRAME_GC;
            for (size_t i = 0; i < ts->n; i++) {
                struct want_row *r = want_row(w, &ts->f[i], by_line);
                r->own += i == 0;
                r->total += r->seen++ == 0;
            }
            for (size_t i = 0; i < w->n; i++)
                w->rows[i].seen = 0;
        }
        w->failed += (uint64_t)failed;
    }
}

static void check_table(struct live_data *d, int window, int by_line, int one)
{
    struct want w;
    recount(&w, window, by_line, one);
    struct live_table t = {0};
    struct live_scope sc = {.window = window,
                            .by_line = by_line,
                            .one_thread = one >= 0,
                            .thread =
                                one >= 0 ? (host_ids[one] ? host_ids[one] : native_ids[one]) : 0};
    assert_int_equal(live_table_build(&t, d, &sc), 0);
    assert_int_equal(t.snaps, w.snaps);
    assert_int_equal(t.failed, w.failed);
    assert_memory_equal(&t.counts, &w.c, sizeof w.c);
    size_t shown = 0;
    for (size_t i = 0; i < t.n; i++) {
        const struct live_row *r = &t.rows[i];
        if (r->own == 0 && r->total == 0)
            continue;
        shown++;
        const struct want_row *x = NULL;
        for (size_t k = 0; k < w.n && !x; k++)
            if (w.rows[k].name == r->name && w.rows[k].line == r->line)
                x = &w.rows[k];
        assert_non_null(x);
        assert_string_equal(r->file, x->file);
        assert_int_equal(r->own, x->own);
        assert_int_equal(r->total, x->total);
    }
    assert_int_equal(shown, w.n);
    assert_true(w.n >= 3); /* the scope is not trivially empty */
    assert_true(one > 0 || w.c.gc > 0);
    /* `t` cycles through the threads in the order they came. */
    assert_int_equal(t.nthreads, w.nthreads);
    for (size_t i = 0; i < w.nthreads; i++)
        assert_int_equal(t.threads[i], w.threads[i]);
    live_table_release(&t);
}

static void check_all_scopes(pys_profile *prof)
{
    static const struct rec r = {.mode = MODE_WALL, .line_mode = LINES_EXACT, .gc = 1};
    struct live_data *d = malloc(sizeof *d);
    assert_non_null(d);
    live_data_init(d, &r);
    feed_all(d, prof);
    for (int window = 0; window < 2; window++)
        for (int by_line = 0; by_line < 2; by_line++)
            for (int one = -1; one < THREADS; one++)
                check_table(d, window, by_line, one);
    live_data_release(d);
    free(d);
}

/* The default: the counts are those of the run's profile. */
static void test_counts_from_the_runs_profile(void **state)
{
    (void)state;
    pys_profile *p = pys_profile_new();
    assert_non_null(p);
    check_all_scopes(p);
    pys_profile_free(p);
}

/* --function, --subprocesses: the sink adds the stacks to its own. */
static void test_counts_from_its_own_profile(void **state)
{
    (void)state;
    check_all_scopes(NULL);
}

int main(void)
{
    make_samples();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_from_the_runs_profile),
        cmocka_unit_test(test_counts_from_its_own_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
