/*
 * record_procs: --subprocesses. The target and every Python process it
 * starts, however (fork, multiprocessing, subprocess, a shell script that
 * starts python, grandchildren), are sampled by this one pystrobe, each in
 * a session of its own.
 *
 * Discovery: the process tree below the root is followed at most every
 * DISCOVER_NS of sampling (the kernel's per-thread children lists: a few
 * reads per process), and only when the kernel has handed out a pid since
 * (the last one is in /proc/loadavg), or RECHECK_NS has passed (an exec
 * makes no pid). A process first seen is attached at once; one that is not
 * Python yet (a fork before its exec, an interpreter still starting) is
 * tried again, ever less often, for FOLLOW_NS, then left as "other"; a new
 * command line (an exec) starts that again. A target that execs is
 * followed the same way. A target whose parent exits stays
 * sampled; with run, pystrobe is a child subreaper, so that orphans stay
 * in its tree.
 *
 * Failures (permission, an unsupported version, out of memory) are the
 * target's own: said in the table at the end, never stopping the others.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/record.h"
#include "platform/platform.h"

/* How often the tree is followed: every sample up to 1 kHz; faster
 * sampling does not make a new process's start any less missed. */
#define DISCOVER_NS 1000000ull
/* A process that is not Python yet is attached again after PROBE_NS, then
 * after each wait a quarter longer than the one before, up to
 * PROBE_MAX_NS: an attempt reads its maps and probes its files (half a
 * millisecond), and an interpreter is attachable a few milliseconds after
 * its exec. */
#define PROBE_NS 1000000ull
#define PROBE_MAX_NS 50000000ull
/* ... for this long after it appeared or changed its command line: an
 * interpreter initialises in its first tens of milliseconds, a shell that
 * execs one takes a little more. */
#define FOLLOW_NS 2000000000ull
/* The tree is followed at least this often, for the execs of processes
 * known (which make no new pid). */
#define RECHECK_NS 20000000ull
/* Processes known at once (targets and others): beyond it new ones are
 * not followed (said once). Each target holds a session and a profile. */
#define MAX_PROCS 1024
/* Descendants read in one walk of the tree. */
#define MAX_TREE 4096
/* A command line as kept: enough to tell processes apart. */
#define CMD_LEN 256

struct proc {
    struct rec_target t;
    int is_main;      /* the first target: sessions and profile are the caller's */
    int in_tree;      /* seen in the last walk */
    uint64_t seen_ns; /* first seen */
    uint64_t born_ns; /* when it started, CLOCK_BOOTTIME to a clock tick; 0 unknown */
    uint64_t probe_until, next_probe, probe_wait;
    uint64_t start_ns, end_ns;      /* attached, ended */
    char cmd[CMD_LEN];              /* its command line as last read ("" for a zombie) */
    char why[512];                  /* REC_T_FAILED: why */
    char *labels[REC_MAX_PROGRAMS]; /* the root frame's name per program */
    /* Its sources (--heatmap, its recording; NULL: none): its files read
     * through its own root and working directory as its samples show
     * them. */
    struct rec_sources *sources;
    /* Another target's options, with its output's name (out_path) and the
     * writers fed by its own sample stream (its recording: bin, rec_path). */
    struct rec r;
    char out_path[4096], rec_path[4096];
    struct rec_bin *bin;
    struct rec_sinks sinks;
};

struct rec_procs {
    const struct rec *r;
    const struct pys_options *opt;
    const struct rec_sinks *rooted;
    int root;
    int command; /* run's child (reaped by record.c), else -1 */
    struct proc *v[MAX_PROCS];
    size_t n;
    uint64_t next_walk, recheck;
    uint64_t began_ns; /* sampling's start, CLOCK_BOOTTIME */
    long last_pid;     /* as /proc/loadavg said at the last walk */
    int said_full;
    pid_t tree[MAX_TREE];
};

/* The command line of pid, NUL-separated words joined by spaces and bytes
 * that are not printable ASCII as '?'; "" for a zombie or a process gone.
 * Returns its length. */
static size_t read_cmdline(int pid, char *buf, size_t n)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t len = read(fd, buf, n - 1);
    close(fd);
    if (len <= 0)
        return 0;
    while (len > 0 && buf[len - 1] == '\0')
        len--;
    for (ssize_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)buf[i];
        buf[i] = c == '\0' ? ' ' : c < 0x20 || c > 0x7e ? '?' : (char)c;
    }
    buf[len] = '\0';
    return (size_t)len;
}

/* The process known as pid, ended ones included (a zombie stays in the
 * tree until reaped; a pid used again within one run is taken as the same
 * process). */
static struct proc *find(struct rec_procs *p, int pid)
{
    for (size_t i = p->n; i-- > 0;)
        if (p->v[i]->t.pid == pid)
            return p->v[i];
    return NULL;
}

/* CLOCK_BOOTTIME, in ns. */
static uint64_t boot_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* /proc/PID/stat read into buf (len bytes at most, NUL-terminated): where
 * the name ends (its closing parenthesis: the name may hold anything, the
 * fields after it cannot), or NULL if unreadable. */
static const char *read_stat(int pid, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    return strrchr(buf, ')');
}

static struct proc *proc_new(struct rec_procs *p, int pid, uint64_t now)
{
    if (p->n == MAX_PROCS) {
        if (!p->said_full)
            fprintf(stderr, "pystrobe: --subprocesses: %d processes followed already: no more\n",
                    MAX_PROCS);
        p->said_full = 1;
        return NULL;
    }
    struct proc *pr = calloc(1, sizeof *pr);
    if (!pr)
        return NULL;
    pr->t.pid = pid;
    pr->t.state = REC_T_PROBING;
    pr->seen_ns = pr->next_probe = now;
    pr->probe_until = now + FOLLOW_NS;
    pr->probe_wait = PROBE_NS;
    pr->born_ns = plat_proc_started_ns(pid);
    pr->in_tree = 1;
    read_cmdline(pid, pr->cmd, sizeof pr->cmd);
    p->v[p->n++] = pr;
    return pr;
}

/* The root frame of pr's current program (the profile's with
 * --merge-processes, the rooted sinks'). 0, or PYS_E_NOMEM. */
static int set_root(struct proc *pr)
{
    size_t k = pr->t.ss.n - 1;
    char buf[CMD_LEN + 32];
    snprintf(buf, sizeof buf, "process %d %s", pr->t.pid, pr->cmd[0] ? pr->cmd : "?");
    if (!(pr->labels[k] = strdup(buf)))
        return PYS_E_NOMEM;
    pr->t.root = (struct pys_frame){.filename = "~",
                                    .qualname = pr->labels[k],
                                    .firstlineno = 0,
                                    .lineno = 0,
                                    .end_lineno = -1,
                                    .col = -1,
                                    .end_col = -1,
                                    .lasti = -1,
                                    .kind = PYS_FRAME_PROCESS,
                                    .opcode = -1};
    return 0;
}

static void fail(struct proc *pr, const char *why)
{
    pr->t.state = REC_T_FAILED;
    snprintf(pr->why, sizeof pr->why, "%s", why);
}

/* The profile of a new target: its own, or the merged one. */
static pys_profile *target_profile(struct rec_procs *p, const struct pys_session *s, int pid)
{
    if (p->r->merge_processes)
        return p->v[0]->t.prof;
    pys_profile *prof = pys_profile_new();
    if (!prof)
        return NULL;
    pys_profile_count_opcodes(prof, p->r->opcodes);
    /* As the first target's: with --binary only the counters. */
    pys_profile_set_max_memory(prof, p->r->binary ? (uint64_t)1 << 20 : p->r->max_memory);
    struct pys_profile_info *info = pys_profile_info(prof);
    info->pid = pid;
    info->python_version = pys_session_python_version(s);
    info->interval_ns = p->r->interval_ns;
    info->mode = rec_mode_names[p->r->mode];
    info->max_frames = p->r->max_frames ? p->r->max_frames : PYS_MAX_FRAMES_DEFAULT;
    return prof;
}

/* Where target pid's output at path goes beside the main one: its name
 * with _PID before its extension (ext if it ends so, else the last dot's). */
static void child_name(const char *path, const char *ext, int pid, char *buf, size_t n)
{
    size_t len = strlen(path);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t el = strlen(ext);
    size_t cut = len;
    if (el && len - (size_t)(base - path) > el && strcmp(path + len - el, ext) == 0) {
        cut = len - el;
    } else {
        const char *dot = strrchr(base, '.');
        if (dot && dot != base)
            cut = (size_t)(dot - path);
    }
    snprintf(buf, n, "%.*s_%d%s", (int)cut, path, pid, path + cut);
}

/* Where target pid's profile goes beside the main one: -o's name with
 * _PID before its extension (the format's, else the last dot's); no -o:
 * the format's default name (pstats: a file, the main table being on
 * stdout; none under the live view). NULL: the default name, or none. */
static const char *child_path(const struct rec *r, int pid, char *buf, size_t n)
{
    static const char *const ext[] = {".pstats", ".txt",  ".html",  ".speedscope.json",
                                      ".pb.gz",  "",      ".jsonl", ".json",
                                      ".svg",    ".json", ".html"};
    if (!r->output) {
        if (r->format != FMT_PSTATS || r->live)
            return NULL; /* the live view writes a profile only when given -o */
        snprintf(buf, n, "profile_%d.pstats", pid);
        return buf;
    }
    child_name(r->output, ext[r->format], pid, buf, n);
    return buf;
}

/* A new target's own outputs fed by its sample stream (its recording,
 * --jsonl, --gecko, --chrometrace), named as its profile. 0, or -1 (said
 * why on stderr). */
static int start_outputs(struct rec_procs *p, struct proc *pr, pys_session *s)
{
    struct rec *r = &pr->r;
    *r = *p->r;
    r->jsonl = NULL;
    r->gecko = NULL;
    r->trace = NULL;
    r->meta = NULL;
    r->stream = NULL;
    r->output = child_path(p->r, pr->t.pid, pr->out_path, sizeof pr->out_path);
    if (p->r->record_path) {
        child_name(p->r->record_path, ".pysr", pr->t.pid, pr->rec_path, sizeof pr->rec_path);
        r->record_path = pr->rec_path;
    }
    if (rec_sinks_start(r, s, pr->t.pid, &pr->bin, &pr->sinks) != -1)
        return -1;
    /* Its sources, after its recording's sink (whose new frames name
     * them). */
    if (r->format == FMT_HEATMAP || r->binary || r->record_path) {
        if (!(pr->sources = rec_sources_new(pr->t.pid, r->format == FMT_HEATMAP))) {
            fprintf(stderr, "pystrobe: out of memory\n");
            return -1;
        }
        rec_sources_record(pr->sources, pr->bin);
        rec_sinks_add(&pr->sinks, pr->sources, rec_sources_sample);
    }
    pr->t.sinks = &pr->sinks;
    return 0;
}

/* A target's first program: its profile, and what its outputs need. 0, or
 * -1 with pr failed. */
static int first_program(struct rec_procs *p, struct proc *pr, pys_session *s, uint64_t now)
{
    struct rec_target *t = &pr->t;
    pr->start_ns = now;
    if (!(t->prof = target_profile(p, s, t->pid))) {
        fail(pr, "out of memory");
        return -1;
    }
    if (!p->r->merge_processes && start_outputs(p, pr, s) < 0) {
        fail(pr, "its outputs could not be started (said above)");
        return -1;
    }
    return 0;
}

/* --async-aware: a reader of s's tasks for target pr. 0, or -1 with pr
 * failed. */
static int async_reader(struct proc *pr, pys_session *s)
{
    char why[256] = "", msg[320];
    int rc = rec_async_usable(s, why, sizeof why);
    if (rc < 0) {
        snprintf(msg, sizeof msg, "--async-aware: %s", why[0] ? why : pys_strerror(rc));
        fail(pr, msg);
        return -1;
    }
    if (!pr->t.async && !(pr->t.async = calloc(1, sizeof *pr->t.async))) {
        fail(pr, "out of memory");
        return -1;
    }
    return 0;
}

/* Attached: s is pr's new program. */
static void attached(struct rec_procs *p, struct proc *pr, pys_session *s, uint64_t now)
{
    struct rec_target *t = &pr->t;
    if (t->ss.n == REC_MAX_PROGRAMS) {
        pys_session_free(s);
        t->state = REC_T_ENDED;
        return;
    }
    t->ss.v[t->ss.n++] = s;
    t->ss.opt = p->opt;
    if (t->ss.n == 1 && first_program(p, pr, s, now) < 0)
        return;
    if (p->r->async_aware && async_reader(pr, s) < 0)
        return;
    read_cmdline(t->pid, pr->cmd, sizeof pr->cmd);
    if (set_root(pr) < 0) {
        fail(pr, "out of memory");
        return;
    }
    t->state = REC_T_SAMPLING;
}

/* Try to attach to a process that may have become Python. */
static void probe(struct rec_procs *p, struct proc *pr, uint64_t now)
{
    char err[512];
    pys_session *s = NULL;
    int rc = pys_session_attach(&s, pr->t.pid, p->opt, err, sizeof err);
    if (rc == 0) {
        attached(p, pr, s, now);
        return;
    }
    if (rc == PYS_E_NOPROC || rc == PYS_E_EXITED) {
        pr->t.state = REC_T_ENDED;
        pr->end_ns = now;
        return;
    }
    if (rc != PYS_E_NOTPYTHON) {
        fail(pr, err);
        return;
    }
    pr->next_probe = now + pr->probe_wait;
    pr->probe_wait += pr->probe_wait / 4;
    if (pr->probe_wait > PROBE_MAX_NS)
        pr->probe_wait = PROBE_MAX_NS;
    if (now >= pr->probe_until)
        pr->t.state = REC_T_OTHER;
}

/* pr's command line changed (an exec, most likely): try it again soon. */
static void probe_again(struct proc *pr, uint64_t now)
{
    pr->t.state = REC_T_PROBING;
    pr->probe_until = now + FOLLOW_NS;
    pr->probe_wait = PROBE_NS;
    pr->next_probe = now;
}

/* The last pid the kernel handed out (to a process or a thread), from
 * /proc/loadavg; -1 if unknown. */
static long last_pid(void)
{
    char buf[128];
    int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    const char *sp = strrchr(buf, ' ');
    return sp ? strtol(sp + 1, NULL, 10) : -1;
}

/* Is pid a process that runs (not gone, not a zombie)? Its state letter
 * in /proc/PID/stat, after the name (which may hold anything). */
static int alive(int pid)
{
    char buf[512];
    const char *close_paren = read_stat(pid, buf, sizeof buf);
    return close_paren && close_paren[1] == ' ' && close_paren[2] != 'Z' && close_paren[2] != 'X' &&
           close_paren[2] != '\0';
}

/* A process not in the tree (or a zombie): ended if it is gone, or if it
 * runs on but is not followed any more (a non-Python process re-parented
 * away). A target stays: its samples say when it ends. */
static void left_tree(struct rec_procs *p, struct proc *pr, uint64_t now)
{
    if (pr->t.state != REC_T_PROBING && pr->t.state != REC_T_OTHER)
        return;
    int running = alive(pr->t.pid);
    if (running && pr->t.state == REC_T_PROBING)
        return;
    pr->t.state = REC_T_ENDED;
    pr->end_ns = now;
    if (!running && pr->t.pid != p->command)
        waitpid(pr->t.pid, NULL, WNOHANG); /* an orphan re-parented to pystrobe */
}

/* Follow the tree below the root: new processes, execs of others. */
static void walk(struct rec_procs *p, uint64_t now)
{
    int n = pys_child_pids(p->root, 1, p->tree, MAX_TREE);
    if (n < 0)
        return;
    for (size_t i = 0; i < p->n; i++)
        p->v[i]->in_tree = 0;
    for (int k = 0; k < n; k++) {
        struct proc *pr = find(p, p->tree[k]);
        if (!pr) {
            if ((pr = proc_new(p, p->tree[k], now)) != NULL)
                probe(p, pr, now);
            continue;
        }
        pr->in_tree = 1;
        if (pr->t.state != REC_T_OTHER && pr->t.state != REC_T_PROBING)
            continue;
        char cmd[CMD_LEN];
        read_cmdline(pr->t.pid, cmd, sizeof cmd);
        if (cmd[0] == '\0') { /* a zombie, or a moment of its exec */
            pr->in_tree = alive(pr->t.pid);
        } else if (strcmp(cmd, pr->cmd) != 0) { /* an exec, most likely */
            memcpy(pr->cmd, cmd, sizeof cmd);
            probe_again(pr, now);
        }
    }
    for (size_t i = 1; i < p->n; i++)
        if (!p->v[i]->in_tree)
            left_tree(p, p->v[i], now);
}

struct rec_procs *rec_procs_new(const struct rec *r, const struct pys_options *opt, int root,
                                int command, const struct rec_sessions *ss, pys_profile *prof,
                                const struct rec_sinks *sinks, const struct rec_sinks *rooted)
{
    struct rec_procs *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->r = r;
    p->opt = opt;
    p->rooted = rooted;
    p->root = root;
    p->command = command;
    p->began_ns = boot_ns();
    uint64_t now = rec_now_ns();
    int pid = pys_session_pid(ss->v[ss->n - 1]);
    struct proc *main = proc_new(p, pid, now);
    if (!main) {
        free(p);
        return NULL;
    }
    main->is_main = 1;
    main->t.ss = *ss;
    main->t.prof = prof;
    main->start_ns = now;
    main->t.state = REC_T_SAMPLING;
    main->t.sinks = sinks;
    if (set_root(main) < 0 ||
        (r->async_aware && !(main->t.async = calloc(1, sizeof *main->t.async)))) {
        rec_procs_free(p);
        return NULL;
    }
    return p;
}

const struct rec_sinks *rec_procs_rooted(const struct rec_procs *p)
{
    return p->rooted;
}

void rec_procs_poll(struct rec_procs *p, uint64_t now)
{
    if (now >= p->next_walk) {
        long last = last_pid();
        if (last != p->last_pid || last < 0 || now >= p->recheck) {
            walk(p, now);
            p->last_pid = last;
            p->recheck = now + RECHECK_NS;
        }
        p->next_walk = now + DISCOVER_NS;
    }
    for (size_t i = 0; i < p->n; i++) {
        struct proc *pr = p->v[i];
        if (pr->t.state == REC_T_PROBING && now >= pr->next_probe)
            probe(p, pr, now);
    }
}

size_t rec_procs_count(const struct rec_procs *p)
{
    return p->n;
}

struct rec_target *rec_procs_target(struct rec_procs *p, size_t i)
{
    return &p->v[i]->t;
}

static struct proc *proc_of(struct rec_target *t)
{
    return (struct proc *)t; /* t is a proc's first member */
}

void rec_procs_exited(struct rec_procs *p, struct rec_target *t, uint64_t now)
{
    struct proc *pr = proc_of(t);
    t->state = REC_T_ENDED;
    pr->end_ns = now;
    if (t->pid != p->command && !pr->is_main)
        waitpid(t->pid, NULL, WNOHANG);
}

void rec_procs_exec(struct rec_procs *p, struct rec_target *t, uint64_t now)
{
    (void)p;
    probe_again(proc_of(t), now);
}

void rec_procs_fail(struct rec_procs *p, struct rec_target *t, const char *why)
{
    (void)p;
    fail(proc_of(t), why);
    proc_of(t)->end_ns = rec_now_ns();
}

/* Sampling goes on while a target is sampled or may become Python, and
 * while run's command runs (a shell script may start Python again); other
 * programs that are not Python hold nothing up (a daemon). */
int rec_procs_done(const struct rec_procs *p)
{
    for (size_t i = 0; i < p->n; i++) {
        enum rec_target_state st = p->v[i]->t.state;
        if (st == REC_T_SAMPLING || st == REC_T_PROBING ||
            (st == REC_T_OTHER && p->v[i]->t.pid == p->command))
            return 0;
    }
    return 1;
}

struct rec_sessions *rec_procs_main_sessions(struct rec_procs *p)
{
    return &p->v[0]->t.ss;
}

/* Write target pr's own profile (unless the output is a recording, or
 * the live view had no -o) and finish its recording. Returns an exit
 * status. */
static int write_target(struct proc *pr)
{
    const struct rec *r = &pr->r;
    struct pys_profile_info *info = pys_profile_info(pr->t.prof);
    uint64_t end = pr->end_ns ? pr->end_ns : rec_now_ns();
    info->duration_ns = end - pr->start_ns;
    int status = CLI_OK;
    rec_sources_finish(pr->sources);
    if (!r->binary && (!r->live || r->output)) {
        /* An output that cannot be prepared (said) loses only itself: the
         * recording below is still finished. */
        struct rec_out o;
        status = rec_out_prepare(&o, r, pr->t.pid);
        if (status == -1) {
            o.sources = pr->sources;
            status = rec_write_output(r, &o, pr->t.prof, pr->t.pid, pr->t.unmatched);
            if (r->browser && status == CLI_OK && o.path)
                rec_open_browser(r, o.path);
        }
    }
    if (pr->bin) {
        int st = rec_bin_finish(pr->bin, info);
        status = status == CLI_OK ? st : status;
    }
    return status;
}

static const char *state_text(const struct proc *pr)
{
    if (pr->t.state == REC_T_FAILED)
        return pr->why;
    if (pr->t.ss.n == 0)
        return "not Python: followed through";
    return "";
}

/* --stats of each target but the first (whose are the run's): its
 * session's counters over its own samples. */
static void print_stats(const struct rec_procs *p)
{
    for (size_t i = 1; i < p->n; i++) {
        const struct proc *pr = p->v[i];
        if (pr->t.ss.n == 0)
            continue;
        char title[CMD_LEN + 64];
        snprintf(title, sizeof title, "Statistics of process %d (%s):", pr->t.pid,
                 pr->cmd[0] ? pr->cmd : "?");
        uint64_t end = pr->end_ns ? pr->end_ns : rec_now_ns();
        struct pys_profile_info info = {
            .samples = pr->t.samples, .failed = pr->t.failed, .duration_ns = end - pr->start_ns};
        rec_print_stats(title, pr->t.ss.v[pr->t.ss.n - 1], &info, NULL);
    }
}

int rec_procs_finish(struct rec_procs *p, const struct rec *r, int quiet)
{
    int status = CLI_OK;
    if (r->stats)
        print_stats(p);
    for (size_t i = 1; i < p->n && !r->merge_processes; i++) {
        struct proc *pr = p->v[i];
        if (pr->t.ss.n == 0 || !pr->t.prof || pr->r.interval_ns == 0)
            continue;
        int st = write_target(pr);
        if (st != CLI_OK && st != CLI_NOSAMPLES && status == CLI_OK)
            status = st;
    }
    if (quiet)
        return status;
    /* FIRST: from a process's start to its first sample, for those that
     * started while pystrobe sampled (the kernel gives the start to a
     * clock tick, 10 ms: the figure may be that much too high). */
    uint64_t boot_minus_mono = boot_ns() - rec_now_ns();
    fprintf(stderr, "Processes (--subprocesses):\n");
    fprintf(stderr, "  %8s %9s %7s %8s  %s\n", "PID", "SAMPLES", "FAILED", "FIRST", "COMMAND");
    for (size_t i = 0; i < p->n; i++) {
        const struct proc *pr = p->v[i];
        const char *st = state_text(pr);
        char first[32] = "-";
        uint64_t first_boot = pr->t.first_ns + boot_minus_mono;
        if (pr->t.first_ns && pr->born_ns >= p->began_ns && first_boot >= pr->born_ns)
            snprintf(first, sizeof first, "%.0fms", (double)(first_boot - pr->born_ns) / 1e6);
        fprintf(stderr, "  %8d %9llu %7llu %8s  %s%s%s%s\n", pr->t.pid,
                (unsigned long long)pr->t.samples, (unsigned long long)pr->t.failed, first,
                pr->cmd[0] ? pr->cmd : "?", *st ? " (" : "", st, *st ? ")" : "");
    }
    return status;
}

void rec_procs_free(struct rec_procs *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++) {
        struct proc *pr = p->v[i];
        if (!pr->is_main) {
            if (!p->r->merge_processes)
                pys_profile_free(pr->t.prof);
            rec_bin_free(pr->bin);
            rec_stream_free(&pr->r);
            for (size_t k = 0; k < pr->t.ss.n; k++)
                pys_session_free(pr->t.ss.v[k]);
        }
        if (pr->t.async) {
            rec_async_release(pr->t.async);
            free(pr->t.async);
        }
        for (size_t k = 0; k < REC_MAX_PROGRAMS; k++)
            free(pr->labels[k]);
        rec_sources_free(pr->sources);
        free(pr);
    }
    free(p);
}
