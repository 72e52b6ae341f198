/*
 * record_loop: the sampling loop of `run` and `attach`.
 *
 * Timing: deadlines are absolute (start + k * interval); the sampler sleeps
 * to each with clock_nanosleep, or spins when the interval is shorter than
 * twice the measured wake-up latency and than 50 us. A deadline passed by more than a whole
 * interval is counted as missed and skipped, never made up with a burst.
 *
 * Signals: the first SIGINT, SIGTERM or SIGHUP ends sampling (the profile is
 * written); a second aborts at once, after killing `run`'s command and
 * removing the temporary output file (rec_abort_cleanup).
 *
 * Exec: when the library says the process replaced its program, a new
 * session is attached to the same pid as soon as the new program is Python,
 * and sampling goes on into the same profile; a program that is not Python
 * within FOLLOW_NS ends sampling.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/blocking.h"
#include "cli/cli.h"
#include "cli/record.h"
#include "output/collapsed.h"
#include "util/array.h"

volatile sig_atomic_t rec_stop;

/* What an abort cleans up; written with the signals blocked. */
static volatile pid_t abort_child = -1, abort_python = -1;
static const char *volatile abort_tmp;
void (*volatile rec_abort_hook)(void);

static void on_signal(int sig)
{
    if (rec_stop) {
        static const char msg[] = "\npystrobe: interrupted again: aborting\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        if (abort_python > 0 && abort_python != abort_child)
            kill(abort_python, SIGKILL);
        if (abort_child > 0)
            kill(abort_child, SIGKILL);
        if (abort_tmp)
            unlink(abort_tmp);
        if (rec_abort_hook)
            rec_abort_hook();
        _exit(130);
    }
    rec_stop = sig;
}

static const int STOP_SIGNALS[] = {SIGINT, SIGTERM, SIGHUP};

void rec_abort_cleanup(pid_t child, pid_t python, const char *tmp_path)
{
    sigset_t set, old;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof STOP_SIGNALS / sizeof STOP_SIGNALS[0]; i++)
        sigaddset(&set, STOP_SIGNALS[i]);
    sigprocmask(SIG_BLOCK, &set, &old);
    abort_child = child;
    abort_python = python;
    abort_tmp = tmp_path;
    sigprocmask(SIG_SETMASK, &old, NULL);
}

void rec_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof STOP_SIGNALS / sizeof STOP_SIGNALS[0]; i++)
        sigaddset(&sa.sa_mask, STOP_SIGNALS[i]);
    for (size_t i = 0; i < sizeof STOP_SIGNALS / sizeof STOP_SIGNALS[0]; i++)
        sigaction(STOP_SIGNALS[i], &sa, NULL);
}

uint64_t rec_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t deadline)
{
    struct timespec ts = {(time_t)(deadline / 1000000000ull), (long)(deadline % 1000000000ull)};
    while (!rec_stop && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static void spin_until(uint64_t deadline)
{
    while (!rec_stop && rec_now_ns() < deadline)
        ;
}

/* How late clock_nanosleep wakes up here: the median of a few short sleeps. */
static uint64_t wake_latency_ns(void)
{
    uint64_t v[9];
    for (int i = 0; i < 9; i++) {
        uint64_t t = rec_now_ns() + 100000;
        sleep_until(t);
        uint64_t late = rec_now_ns() - t;
        int j = i;
        while (j > 0 && v[j - 1] > late) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = late;
    }
    return v[4];
}

/* --- exec ------------------------------------------------------------------ */

/* How long a program exec'd by the target is given to become Python: it maps
 * its interpreter at once and initialises the runtime in its first
 * milliseconds; a shell that execs Python takes a little more. */
#define FOLLOW_NS 2000000000ull

/* The target exec'd (detail: the session's error). Attach to the new
 * program if it is Python, adding its session to ss; else say why not. */
static enum end follow_exec(struct rec_sessions *ss, uint64_t until)
{
    pys_session *old = ss->v[ss->n - 1];
    int pid = pys_session_pid(old);
    char what[512], err[512];
    snprintf(what, sizeof what, "%s", pys_session_last_error(old));
    if (ss->n == REC_MAX_PROGRAMS) {
        fprintf(stderr, "pystrobe: %s: followed %d programs already: stopping\n", what,
                REC_MAX_PROGRAMS - 1);
        return END_NOT_PYTHON;
    }
    uint64_t start = rec_now_ns();
    int rc;
    for (;;) {
        pys_session *s = NULL;
        rc = pys_session_attach(&s, pid, ss->opt, err, sizeof err);
        if (rc == 0) {
            ss->v[ss->n++] = s;
            fprintf(stderr, "pystrobe: %s: following it (Python %s)\n", what,
                    pys_session_python_version_text(s));
            return END_SIGNAL; /* unused: sampling goes on */
        }
        if (rc == PYS_E_NOPROC || rc == PYS_E_EXITED)
            return END_EXITED;
        uint64_t now = rec_now_ns();
        if (rc != PYS_E_NOTPYTHON || rec_stop || now - start >= FOLLOW_NS || now >= until)
            break;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    if (rec_stop)
        return END_SIGNAL;
    if (rc == PYS_E_NOTPYTHON && rec_now_ns() >= until)
        return END_DURATION;
    if (rc == PYS_E_NOTPYTHON)
        fprintf(stderr, "pystrobe: %s: not Python: stopping\n", what);
    else
        fprintf(stderr, "pystrobe: %s: %s: stopping\n", what, err);
    return END_NOT_PYTHON;
}

/* --- sampling -------------------------------------------------------------- */

int rec_thread_matches(const struct rec *r, const struct pys_thread *t)
{
    if (r->main_only && !(t->status & PYS_THREAD_MAIN_THREAD))
        return 0;
    /* --no-idle: a thread whose state could not be read is kept, not
     * guessed idle. */
    if (r->no_idle && !(t->status & (PYS_THREAD_ON_CPU | PYS_THREAD_UNKNOWN)))
        return 0;
    switch (r->mode) {
    case MODE_CPU:
        return (t->status & PYS_THREAD_ON_CPU) != 0;
    case MODE_GIL:
        return (t->status & PYS_THREAD_HAS_GIL) != 0;
    case MODE_EXCEPTION:
        return (t->status & PYS_THREAD_HAS_EXCEPTION) != 0;
    default:
        return 1;
    }
}

struct timing {
    uint64_t n, sum, min, max, last_print, window_n, window_start;
};

/* For tests: PYSTROBE_TEST_UNREAD_EVERY=N makes every Nth snapshot taken
 * one in which no thread's stack could be read (a copy: each thread with
 * PYS_E_CORRUPT and no frames), so that a test sees deterministically what
 * the profile, the outputs and the recording make of a failed read. */
struct unread_hook {
    unsigned long every, n; /* every: 0, off */
    struct pys_interp *interps;
    struct pys_thread *threads;
    size_t capi, capt;
    struct pys_snapshot snap;
};

/* One call of rec_sample_loop: its arguments and where it stands. */
struct loop {
    const struct rec *r;
    struct rec_sessions *ss;
    pys_session *s; /* the last of ss: the program sampled */
    pys_profile *prof;
    struct pys_profile_info *info;
    const struct rec_sinks *sinks; /* the program's own consumers; NULL: none */
    /* --subprocesses: the consumers of every target's samples, under its
     * process's frame (root), and the run's counters they are given. */
    const struct rec_sinks *rooted;
    struct pys_profile_info *run_info;
    uint64_t *unmatched;
    int spin;        /* wait for a deadline by spinning, else by sleeping */
    uint64_t start;  /* when sampling started */
    uint64_t next;   /* the next sample's deadline */
    uint64_t waited; /* time spent waiting for exec'd programs to become Python */
    struct timing tm;
    struct rec_async *async;     /* --async-aware's reader of the program's tasks */
    struct pys_frame *lines_buf; /* --function, --nolineno: a stack's rewritten frames */
    size_t lines_cap;
    /* --subprocesses: the target's process frame; the profile's stacks go
     * under it with --merge-processes (merge). */
    const struct pys_frame *root;
    int merge;
    /* A snapshot's copy with root outermost in every stack, for rooted. */
    struct pys_interp *r_interps;
    struct pys_thread *r_threads;
    struct pys_frame *r_frames;
    size_t r_capi, r_capt, r_capf;
    struct pys_snapshot r_snap;
    struct unread_hook unread;
};

static void realtime_line(const struct timing *tm, uint64_t samples, uint64_t failed, uint64_t now)
{
    double secs = (double)(now - tm->window_start) / 1e9;
    fprintf(stderr,
            "\r%8.1f samples/s  per sample: mean %.1f us, min %.1f us, max %.1f us  "
            "samples %llu, failed %llu   ",
            secs > 0 ? (double)tm->window_n / secs : 0.0,
            tm->n ? (double)tm->sum / (double)tm->n / 1e3 : 0.0, (double)tm->min / 1e3,
            (double)tm->max / 1e3, (unsigned long long)samples, (unsigned long long)failed);
}

const struct pys_frame *rec_frames_for_lines(enum line_mode m, const struct pys_frame *frames,
                                             size_t n, struct pys_frame **buf, size_t *cap)
{
    if (m == LINES_EXACT)
        return frames;
    if (n > *cap) {
        struct pys_frame *v = realloc(*buf, n * sizeof *v);
        if (!v)
            return NULL;
        *buf = v;
        *cap = n;
    }
    for (size_t i = 0; i < n; i++) {
        struct pys_frame *f = &(*buf)[i];
        *f = frames[i];
        if (f->kind != PYS_FRAME_PYTHON)
            continue;
        f->lineno = f->end_lineno = m == LINES_FUNCTION ? f->firstlineno : OUT_LINE_OMITTED;
        f->col = f->end_col = f->lasti = f->opcode = -1;
    }
    return *buf;
}

/* Thread t's frames as the profile gets them (rec_frames_for_lines), with
 * --merge-processes below the process's frame (*n then one more). NULL if
 * out of memory. */
static const struct pys_frame *frames_for_lines(struct loop *l, const struct pys_thread *t,
                                                size_t *n)
{
    *n = t->nframes;
    if (!l->merge)
        return rec_frames_for_lines(l->r->line_mode, t->frames, t->nframes, &l->lines_buf,
                                    &l->lines_cap);
    if (t->nframes + 1 > l->lines_cap) {
        struct pys_frame *v = realloc(l->lines_buf, (t->nframes + 1) * sizeof *v);
        if (!v)
            return NULL;
        l->lines_buf = v;
        l->lines_cap = t->nframes + 1;
    }
    const struct pys_frame *f =
        rec_frames_for_lines(l->r->line_mode, t->frames, t->nframes, &l->lines_buf, &l->lines_cap);
    if (f != l->lines_buf)
        memcpy(l->lines_buf, f, t->nframes * sizeof *f);
    l->lines_buf[(*n)++] = *l->root;
    return l->lines_buf;
}

/* Add thread t of interpreter in's stack, under its id in pystrobe's
 * /proc (the target's own, marked, when it runs in another PID namespace),
 * with its Python name when it has one (the main interpreter's threads; s,
 * else NULL). */
static int add_thread(struct loop *l, pys_session *s, const struct pys_interp *in,
                      const struct pys_thread *t)
{
    pys_profile *prof = l->prof;
    uint64_t id = t->host_id ? t->host_id : t->native_id;
    if (id != t->native_id && pys_profile_thread_ns(prof, id) != t->native_id &&
        pys_profile_set_thread_ns(prof, id, t->native_id) < 0)
        return PYS_E_NOMEM;
    const char *name = s ? pys_session_thread_name(s, t->thread_id) : NULL;
    if (name && pys_profile_thread_name(prof, id) != name &&
        pys_profile_set_thread_name(prof, id, name) < 0)
        return PYS_E_NOMEM;
    size_t n;
    const struct pys_frame *frames = frames_for_lines(l, t, &n);
    if (!frames)
        return PYS_E_NOMEM;
    /* Its states; the stack is looked through for a <GC> frame only where
     * one can be: while its interpreter ran a collection (gc_running, which
     * --no-gc and targets before 3.15 never set). */
    size_t scan = in->gc_running ? t->nframes : 0;
    if (id && pys_profile_count_states(prof, id, t->status, t->frames, scan, 1) < 0)
        return PYS_E_NOMEM;
    return pys_profile_add(prof, id, frames, n, 1);
}

/* Add one snapshot's stacks that pass the filters to the profile, and
 * count the sample: failed if a thread could not be read, unmatched if
 * stacks were seen but none passed, truncated if a stack was cut at
 * --max-frames. 0, or PYS_E_NOMEM (the sample's counts then not taken). */
static int add_snapshot(struct loop *l, const struct pys_snapshot *snap)
{
    int failed = 0, stacks = 0, kept = 0, truncated = 0;
    for (size_t i = 0; i < snap->ninterps; i++) {
        const struct pys_interp *in = &snap->interps[i];
        for (size_t k = 0; k < in->nthreads; k++) {
            const struct pys_thread *t = &in->threads[k];
            if (t->error) {
                failed = 1;
                continue;
            }
            if (t->nframes == 0)
                continue;
            stacks++;
            truncated |= t->frames[t->nframes - 1].kind == PYS_FRAME_TRUNCATED;
            if (!rec_thread_matches(l->r, t))
                continue;
            kept++;
            if (add_thread(l, in->id == 0 ? l->s : NULL, in, t) < 0)
                return PYS_E_NOMEM;
        }
    }
    l->info->failed += (uint64_t)failed;
    *l->unmatched += stacks > 0 && kept == 0;
    l->info->truncated += (uint64_t)truncated;
    return 0;
}

/* Account a sample taken from t0 to t1: its time, the realtime line
 * (every 250 ms with --realtime-stats), and the next deadline; deadlines
 * passed by more than a whole interval are counted missed and skipped. */
static uint64_t sample_done(struct loop *l, uint64_t t0, uint64_t t1)
{
    struct timing *tm = &l->tm;
    uint64_t dt = t1 - t0, interval = l->r->interval_ns;
    tm->n++;
    tm->window_n++;
    tm->sum += dt;
    tm->min = dt < tm->min ? dt : tm->min;
    tm->max = dt > tm->max ? dt : tm->max;
    if (l->r->realtime && t1 - tm->last_print >= 250000000ull) {
        realtime_line(tm, l->info->samples, l->info->failed, t1);
        tm->last_print = tm->window_start = t1;
        tm->window_n = 0;
    }
    l->next += interval;
    if (t1 < l->next + interval)
        return 0;
    uint64_t skip = (t1 - l->next) / interval;
    l->info->missed += skip;
    l->next += skip * interval;
    return skip;
}

/* The program was replaced (t1: when the sample saw it). Returns 1 if
 * the new program is followed (sampling goes on from now), else 0 with
 * *why. */
static int on_exec(struct loop *l, uint64_t t1, enum end *why)
{
    size_t had = l->ss->n;
    const struct rec *r = l->r;
    *why = follow_exec(l->ss, r->duration_ns ? l->start + r->duration_ns : UINT64_MAX);
    uint64_t t2 = rec_now_ns();
    /* The wait for the new program is neither sampled nor missed. */
    l->waited += t2 - t1;
    l->next = t2;
    if (l->ss->n == had)
        return 0;
    l->s = l->ss->v[l->ss->n - 1];
    return 1;
}

/* Wait for the next deadline or the end of the duration, whichever is
 * first, or a signal. */
static void wait_deadline(const struct loop *l)
{
    uint64_t until = l->next;
    if (l->r->duration_ns && l->start + l->r->duration_ns < until)
        until = l->start + l->r->duration_ns;
    if (l->spin)
        spin_until(until);
    else
        sleep_until(until);
}

int rec_sinks_add(struct rec_sinks *ks, void *ctx, int (*sample)(void *, const struct rec_sample *))
{
    if (ks->n == REC_MAX_SINKS)
        return -1;
    ks->v[ks->n++] = (struct rec_sink){ctx, sample};
    return 0;
}

/* snap with l->root outermost in every stack (a thread without a stack
 * keeps none), in l's scratch arrays; NULL if out of memory. */
static const struct pys_snapshot *rooted_snapshot(struct loop *l, const struct pys_snapshot *snap)
{
    size_t nt = 0, nf = 0;
    for (size_t i = 0; i < snap->ninterps; i++)
        for (size_t k = 0; k < snap->interps[i].nthreads; k++) {
            nt++;
            nf += snap->interps[i].threads[k].nframes + 1;
        }
    if (util_array_reserve((void **)&l->r_interps, &l->r_capi, snap->ninterps,
                           sizeof *l->r_interps) < 0 ||
        util_array_reserve((void **)&l->r_threads, &l->r_capt, nt, sizeof *l->r_threads) < 0 ||
        util_array_reserve((void **)&l->r_frames, &l->r_capf, nf, sizeof *l->r_frames) < 0)
        return NULL;
    struct pys_thread *t = l->r_threads;
    struct pys_frame *f = l->r_frames;
    for (size_t i = 0; i < snap->ninterps; i++) {
        const struct pys_interp *in = &snap->interps[i];
        l->r_interps[i] = *in;
        l->r_interps[i].threads = t;
        for (size_t k = 0; k < in->nthreads; k++, t++) {
            *t = in->threads[k];
            if (t->nframes == 0)
                continue;
            memcpy(f, t->frames, t->nframes * sizeof *f);
            f[t->nframes] = *l->root;
            t->frames = f;
            f += ++t->nframes;
        }
    }
    l->r_snap = (struct pys_snapshot){snap->ninterps, l->r_interps};
    return &l->r_snap;
}

/* Hand the sample to each of ks; 0, or the first one's error. */
static int feed(const struct rec_sinks *ks, const struct rec_sample *smp)
{
    for (size_t i = 0; ks && i < ks->n; i++) {
        int rc = ks->v[i].sample(ks->v[i].ctx, smp);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Hand the sample to the program's own sinks (*own_rc their error) and
 * to the rooted ones (with the process's frame under each stack). 0, or
 * the rooted ones' error (PYS_E_NOMEM if the copy could not be made). */
static int feed_sinks(struct loop *l, uint64_t t0, uint64_t t1, const struct pys_snapshot *snap,
                      int rc, int *own_rc)
{
    int as_sampled = l->r->line_mode == LINES_EXACT && !l->merge;
    struct rec_sample smp = {t0, t1, snap, rc, l->s, l->info, as_sampled ? l->prof : NULL, l->prof};
    *own_rc = feed(l->sinks, &smp);
    if (!l->rooted || l->rooted->n == 0)
        return 0;
    if (snap && !(smp.snap = rooted_snapshot(l, snap))) {
        fprintf(stderr, "pystrobe: out of memory: stopping\n");
        return PYS_E_NOMEM;
    }
    smp.info = l->run_info;
    smp.prof = NULL;
    /* The merged profile holds every target's stacks: its new nodes are
     * this target's. */
    smp.into = l->merge ? l->prof : NULL;
    return feed(l->rooted, &smp);
}

int rec_error_status = CLI_ERROR;

/* --blocking could not stop the target (rc): the end of sampling, the
 * target gone, or a thread that cannot be stopped (an error the user sees:
 * never sampled around). */
static void blocking_failed(struct loop *l, int rc, enum end *why)
{
    if (rc == PYS_E_EXITED) {
        *why = END_EXITED;
        return;
    }
    char msg[512];
    snprintf(msg, sizeof msg, "%s: %s",
             l->r->native_stacks ? "--native (stopping the threads to unwind them)" : "--blocking",
             pys_session_last_error(l->s));
    rec_error_status = cli_report(rc, msg);
    *why = END_ERROR;
}

/* snap as the test hook makes it (struct unread_hook): itself, or at every
 * Nth call a copy with every thread unread; NULL if out of memory. */
static const struct pys_snapshot *unread_hook_apply(struct unread_hook *h,
                                                   const struct pys_snapshot *snap)
{
    if (!h->every || ++h->n % h->every != 0)
        return snap;
    size_t nt = 0;
    for (size_t i = 0; i < snap->ninterps; i++)
        nt += snap->interps[i].nthreads;
    if (util_array_reserve((void **)&h->interps, &h->capi, snap->ninterps, sizeof *h->interps) <
            0 ||
        util_array_reserve((void **)&h->threads, &h->capt, nt, sizeof *h->threads) < 0)
        return NULL;
    struct pys_thread *t = h->threads;
    for (size_t i = 0; i < snap->ninterps; i++) {
        const struct pys_interp *in = &snap->interps[i];
        h->interps[i] = *in;
        h->interps[i].threads = t;
        for (size_t k = 0; k < in->nthreads; k++, t++) {
            *t = in->threads[k];
            t->error = PYS_E_CORRUPT;
            t->error_text = "unread by PYSTROBE_TEST_UNREAD_EVERY";
            t->nframes = 0;
            t->frames = NULL;
        }
    }
    h->snap = (struct pys_snapshot){snap->ninterps, h->interps};
    return &h->snap;
}

/* One snapshot of l's program as the options ask: with every thread
 * stopped (--blocking; *pause_rc as cli_blocking_snapshot's, else 0),
 * task stacks for thread stacks (--async-aware, read while the target is
 * still stopped: the same moment). Returns as pys_session_snapshot. */
static int take_snapshot(struct loop *l, const struct pys_snapshot **snap, int *pause_rc)
{
    int rc, async = l->r->async_aware;
    *pause_rc = 0;
    if (l->r->blocking && async)
        rc = cli_blocking_snapshot_paused(l->s, snap, pause_rc);
    else if (l->r->blocking)
        rc = cli_blocking_snapshot(l->s, snap, pause_rc);
    else
        rc = pys_session_snapshot(l->s, snap);
    if (*pause_rc < 0)
        return rc;
    if (async && rc >= 0)
        rc = rec_async_sample(l->async, l->r, l->s, *snap, snap);
    if (l->r->blocking && async)
        pys_session_resume(l->s);
    if (rc >= 0 && !(*snap = unread_hook_apply(&l->unread, *snap)))
        rc = PYS_E_NOMEM;
    return rc;
}

/* take_in: the profile is out of memory (unsaid; the sinks not fed). */
#define TAKE_NOMEM 1

/* Count a sample (snap, rc as take_snapshot's) begun at t0 and complete at
 * t1 in the profile and hand it to the sinks. 0, TAKE_NOMEM, or a rooted
 * sink's error (said); *own_rc: the program's own sinks' error. */
static int take_in(struct loop *l, uint64_t t0, uint64_t t1, const struct pys_snapshot *snap,
                   int rc, int *own_rc)
{
    *own_rc = 0;
    l->info->samples++;
    if (rc < 0)
        l->info->failed++;
    else if (add_snapshot(l, snap) < 0)
        return TAKE_NOMEM;
    return feed_sinks(l, t0, t1, rc < 0 ? NULL : snap, rc, own_rc);
}

/* Take one sample, begun at t0. Returns 1 to go on, else 0 with *why. */
static int sample_one(struct loop *l, uint64_t t0, enum end *why)
{
    const struct pys_snapshot *snap;
    int pause_rc, own_rc;
    int rc = take_snapshot(l, &snap, &pause_rc);
    if (pause_rc < 0) {
        blocking_failed(l, pause_rc, why);
        return 0;
    }
    if (rc == PYS_E_NOMEM && l->r->async_aware) {
        fprintf(stderr, "pystrobe: out of memory: stopping\n");
        *why = END_SIGNAL;
        return 0;
    }
    uint64_t t1 = rec_now_ns();
    if (rc == PYS_E_EXITED) {
        *why = END_EXITED;
        return 0;
    }
    if (rc == PYS_E_EXEC)
        return on_exec(l, t1, why);
    rc = take_in(l, t0, t1, snap, rc, &own_rc);
    if (rc == TAKE_NOMEM)
        fprintf(stderr, "pystrobe: out of memory: stopping\n");
    if (rc != 0 || own_rc < 0) {
        *why = END_SIGNAL;
        return 0;
    }
    sample_done(l, t0, t1);
    return 1;
}

/* Where sampling starts: the way to wait, the clock. */
static void loop_start(struct loop *l)
{
    /* Spin only where sleeping cannot keep up: intervals shorter than twice
     * the wake-up latency, and never at 20 kHz or below (sleeping a little
     * late there costs nothing: deadlines are absolute). */
    l->spin = l->r->interval_ns < 50000 && l->r->interval_ns < 2 * wake_latency_ns();
    l->start = l->next = rec_now_ns();
    l->tm = (struct timing){0, 0, UINT64_MAX, 0, l->start, 0, l->start};
    const char *every = getenv("PYSTROBE_TEST_UNREAD_EVERY");
    l->unread.every = every ? strtoul(every, NULL, 10) : 0;
}

/* Sample at each deadline with tick (1: go on, else 0 with *why) until
 * the end: a signal, the duration, or what tick says. Returns why. */
static enum end run_loop(struct loop *l, void *ctx,
                         int (*tick)(struct loop *, void *, uint64_t, enum end *))
{
    enum end why = END_SIGNAL;
    loop_start(l);
    for (;;) {
        if (rec_stop) {
            why = END_SIGNAL;
            break;
        }
        uint64_t t0 = rec_now_ns();
        if (t0 < l->next) {
            wait_deadline(l);
            if (rec_stop)
                continue;
            t0 = rec_now_ns();
        }
        /* Checked after the wait: a wake-up late past the end (a loaded
         * machine) takes no sample outside the duration asked. */
        if (l->r->duration_ns && t0 - l->start >= l->r->duration_ns) {
            why = END_DURATION;
            break;
        }
        if (!tick(l, ctx, t0, &why))
            break;
    }
    if (l->r->realtime)
        fputc('\n', stderr);
    free(l->lines_buf);
    free(l->r_interps);
    free(l->r_threads);
    free(l->r_frames);
    free(l->unread.interps);
    free(l->unread.threads);
    return why;
}

static int tick_one(struct loop *l, void *ctx, uint64_t t0, enum end *why)
{
    (void)ctx;
    return sample_one(l, t0, why);
}

/* Sample until the end; fill the profile and its info. */
enum end rec_sample_loop(const struct rec *r, struct rec_sessions *ss, pys_profile *prof,
                         const struct rec_sinks *sinks, uint64_t *unmatched)
{
    struct rec_async async = {0};
    struct loop l = {.r = r,
                     .ss = ss,
                     .s = ss->v[ss->n - 1],
                     .prof = prof,
                     .info = pys_profile_info(prof),
                     .sinks = sinks,
                     .unmatched = unmatched,
                     .async = &async};
    *unmatched = 0;
    enum end why = run_loop(&l, NULL, tick_one);
    rec_async_release(&async);
    l.info->duration_ns = rec_now_ns() - l.start - l.waited;
    return why;
}

/* --- several processes (--subprocesses) ------------------------------------ */

/* Sample target t of procs once, into its profile. Returns
 * 1, or 0 when sampling ends (a rooted sink's error, or one of the first
 * target's own sinks: *why); a target's own failures end only it. */
static int sample_target(struct loop *l, struct rec_procs *procs, struct rec_target *t,
                         enum end *why)
{
    l->ss = &t->ss;
    l->s = t->ss.v[t->ss.n - 1];
    l->prof = t->prof;
    l->info = pys_profile_info(t->prof);
    l->unmatched = &t->unmatched;
    l->sinks = t->sinks;
    l->async = t->async;
    l->root = &t->root;
    uint64_t t0 = rec_now_ns();
    const struct pys_snapshot *snap;
    int pause_rc, own_rc;
    int rc = take_snapshot(l, &snap, &pause_rc);
    uint64_t t1 = rec_now_ns();
    if (rc == PYS_E_EXITED || pause_rc == PYS_E_EXITED) {
        rec_procs_exited(procs, t, t1);
        return 1;
    }
    if (pause_rc < 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "--blocking: %s", pys_session_last_error(l->s));
        rec_procs_fail(procs, t, msg);
        return 1;
    }
    if (rc == PYS_E_EXEC) {
        rec_procs_exec(procs, t, t1);
        return 1;
    }
    if (rc == PYS_E_NOMEM && l->r->async_aware) {
        rec_procs_fail(procs, t, "out of memory");
        return 1;
    }
    if (t->samples++ == 0)
        t->first_ns = t1;
    t->failed += rc < 0;
    rc = take_in(l, t0, t1, snap, rc, &own_rc);
    if (rc == TAKE_NOMEM) {
        rec_procs_fail(procs, t, "out of memory");
    } else if (rc < 0 || (own_rc < 0 && t == rec_procs_target(procs, 0))) {
        *why = END_SIGNAL;
        return 0;
    } else if (own_rc < 0) {
        rec_procs_fail(procs, t, "its output failed (said above)");
    }
    return 1;
}

/* One tick of --subprocesses: follow the tree, sample every target. */
static int tick_procs(struct loop *l, void *ctx, uint64_t t0, enum end *why)
{
    struct rec_procs *procs = ctx;
    rec_procs_poll(procs, t0);
    size_t n = rec_procs_count(procs);
    for (size_t i = 0; i < n; i++) {
        struct rec_target *t = rec_procs_target(procs, i);
        if (t->state == REC_T_SAMPLING && !sample_target(l, procs, t, why))
            return 0;
    }
    if (rec_procs_done(procs)) {
        *why = END_EXITED;
        return 0;
    }
    /* The tick's timing and missed deadlines count in the first target's
     * profile: its summary is the run's. */
    l->info = l->run_info;
    sample_done(l, t0, rec_now_ns());
    return 1;
}

enum end rec_sample_procs(const struct rec *r, struct rec_procs *procs)
{
    struct pys_profile_info *info = pys_profile_info(rec_procs_target(procs, 0)->prof);
    struct loop l = {.r = r,
                     .info = info,
                     .run_info = info,
                     .rooted = rec_procs_rooted(procs),
                     .merge = r->merge_processes};
    enum end why = run_loop(&l, procs, tick_procs);
    info->duration_ns = rec_now_ns() - l.start;
    return why;
}
