/*
 * live: `pystrobe run|attach --live`, a top-like view of the sampled
 * process in the terminal.
 *
 *   live.c      the command's side: the terminal, the UI thread, its keys
 *   live_draw.c what the screen shows (ncurses)
 *   live_agg.c  the counts: a sink of the sample stream, and the table the
 *               screen is drawn from
 *
 * The sampling thread hands each sample to live_agg's sink, which adds it to
 * the counts under a mutex it only tries to take: when the UI thread holds
 * it, the sample goes to a spill area only the sampling thread touches, and
 * is merged at the next sample that gets the lock. The UI thread takes the
 * lock only to copy the counts into its table, never while it draws, so a
 * terminal that stops reading never stops sampling.
 *
 * Private to src/cli.
 */
#ifndef PYSTROBE_CLI_LIVE_H
#define PYSTROBE_CLI_LIVE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cli/record.h"

/* --- live_agg.c: the counts ------------------------------------------- */

/* Thread-samples read without error, and how many had each state. */
struct live_counts {
    uint64_t samples;
    uint64_t gil, gil_wait, cpu, cpu_known, exc, gc;
};

#define LIVE_MAX_THREADS 256
struct live_thread {
    uint64_t id; /* as in the profile: the host's id, else the target's */
    struct live_counts c;
};

/* Counts over a span of samples: their stacks and their states. */
struct live_part {
    pys_profile *prof; /* NULL until a stack was added */
    uint64_t sec;      /* a window bucket: seconds since counting began */
    uint64_t snaps;    /* samples, failed ones included */
    uint64_t failed;   /* samples that failed, or in which a thread could not be read */
    struct live_counts all;
    struct live_thread th[LIVE_MAX_THREADS];
    size_t nth;
};

/* The last N seconds, in buckets of a second: the one filling, and N before. */
#define LIVE_WINDOW_S 10
#define LIVE_BUCKETS (LIVE_WINDOW_S + 1)
#define LIVE_STR_(x) #x
#define LIVE_STR(x) LIVE_STR_(x)

struct live_data {
    pthread_mutex_t mu;
    /* Under mu. */
    struct live_part whole;
    struct live_part bucket[LIVE_BUCKETS];
    size_t cur;           /* the bucket filling */
    uint64_t start_ns;    /* when counting (re)started; 0 before the first sample */
    uint64_t last_ns;     /* the last sample's time */
    uint64_t run_samples; /* the run's counters (pys_profile_info), as last seen */
    uint64_t run_failed;
    uint64_t run_missed;
    size_t nthreads; /* threads in the last snapshot */
    pys_session *s;  /* the program sampled now */
    int reset;       /* the UI asked to start counting again */
    /* The sampling thread's alone. */
    struct live_part spill; /* samples taken while the UI held mu */
    int spilled;
    struct pys_frame *scratch; /* a stack being copied out of the spill */
    size_t scratch_cap;
    const struct rec *r;
    atomic_int quit; /* the user asked to end: the sink ends sampling */
};

void live_data_init(struct live_data *d, const struct rec *r);
void live_data_release(struct live_data *d);
/* The sink (struct rec_sink.sample): ctx is a struct live_data. */
int live_data_sample(void *ctx, const struct rec_sample *smp);

/* One row of the table: a function (or a line), with its counts. */
struct live_row {
    const char *file, *name;
    int32_t line; /* first line (functions) or line (lines); -1 unknown */
    int32_t kind; /* PYS_FRAME_* */
    uint64_t own, total;
    uint64_t up, down; /* call tree of the selected row: as its caller, as its callee */
    int32_t onpath;    /* scratch: times on the stack being walked */
    /* --opcodes, by line: its most sampled instruction (op, -1 none) with
     * its samples, and all its samples at a known instruction. */
    int32_t op;
    uint64_t op_count, op_all;
};

/* Samples of a row at an instruction (the table's scratch). */
struct live_op {
    uint32_t row;
    int32_t opcode;
    uint64_t count;
};

/* What the UI draws from: its own copy, built under the lock. */
struct live_table {
    struct live_row *rows;
    size_t n, cap;
    uint32_t *index; /* open addressing: row + 1, 0 empty */
    size_t icap;
    uint32_t *node_row; /* scratch: a node's row + 1, 0 none */
    size_t ncap;
    /* The scope's counts. */
    uint64_t snaps, failed, span_ns;
    struct live_counts counts;
    uint64_t top_callers; /* samples of the selected row with no caller */
    long sel;             /* the selected row's index, -1 none */
    /* The threads seen, for cycling through them. */
    uint64_t threads[LIVE_MAX_THREADS];
    size_t nthreads;
    /* The run, as the sink saw it last. */
    uint64_t run_samples, run_failed, run_missed;
    size_t live_threads;
    const char *version;
    uint32_t python_version; /* for the instructions' names */
    struct live_op *ops;
    size_t nops, capops;
};

/* Which counts a table shows. */
struct live_scope {
    int window;     /* the last LIVE_WINDOW_S seconds, else the whole run */
    int by_line;    /* a row a line, else a function */
    int one_thread; /* only `thread` (whose id may be 0: not known yet), else all */
    uint64_t thread;
    /* The row whose callers and callees to count (file NULL: none). */
    const char *sel_file, *sel_name;
    int32_t sel_line, sel_kind;
};

/* Build t from d's counts for scope sc; takes d->mu for the copy. 0, or
 * PYS_E_NOMEM (t then holds what fit). */
int live_table_build(struct live_table *t, struct live_data *d, const struct live_scope *sc);
void live_table_release(struct live_table *t);
/* Start counting again (the UI's `r`). */
void live_data_reset(struct live_data *d);

/* --- live_draw.c: the screen (UI thread only) --------------------------- */

enum live_sort { LIVE_SORT_OWN, LIVE_SORT_TOTAL, LIVE_SORT_NAME, LIVE_SORT_FILE, LIVE_SORT_N };

/* The smallest screen the view draws on; below it, a message. */
#define LIVE_MIN_COLS 40
#define LIVE_MIN_LINES 8

struct live_ui {
    /* Facts fixed at the start. */
    int pid;
    char cmd[512];
    const char *mode;
    double rate_hz;
    uint64_t interval_ns;
    uint64_t t0_ns; /* when the view opened */
    /* What is shown. */
    struct live_scope sc;
    struct live_table t;
    size_t *order; /* the rows shown (filtered), sorted */
    size_t norder, ocap;
    enum live_sort sort;
    int paused, help, tree;
    int prompt; /* the filter is being typed into edit */
    char filter[64], edit[64];
    long pos, top;    /* the selected row (in order), the first one shown */
    size_t thread_ix; /* 0: all threads, else t.threads[thread_ix - 1] */
    int refresh_ix;   /* into the refresh intervals */
    int finished;     /* sampling ended: banner shows */
    char banner[160];
    uint64_t now_ns; /* the clock at the last build */
};

/* The refresh interval in ms for refresh_ix, and how many there are. */
unsigned live_refresh_ms(int ix);
#define LIVE_REFRESH_N 7
#define LIVE_REFRESH_DEFAULT 2
/* Filter and sort u->t's rows into u->order; the selection stays on its row
 * (the top row's follows the top). */
void live_order(struct live_ui *u);
/* Draw everything on stdscr (and refresh it). */
void live_draw(struct live_ui *u);

/* --- live.c: the command's side --------------------------------------- */

struct live;
/* Before the target starts: refuse a standard input or output that is not
 * a terminal (after saying so), and set the standard streams aside: `run`'s
 * command gets /dev/null for input and output, and what it and pystrobe
 * write on stderr is kept and shown when the view ends. Returns -1 (*out
 * set), or the exit status to end with. */
int live_prepare(struct live **out, const struct rec *r);
/* Open the view on session s (the target pid) and start the UI thread;
 * add its sink to ks. Returns -1, or the exit status to end with (after
 * saying why). */
int live_start(struct live *lv, pys_session *s, int pid, struct rec_sinks *ks);
/* Sampling ended (why): unless by a signal or `q`, keep the final counts on
 * screen with a banner until `q`. Then close the view. */
void live_end(struct live *lv, enum end why);
/* Close the view if open, give the standard streams back and show what was
 * written on stderr meanwhile; free lv (NULL: nothing). */
void live_free(struct live *lv);

#endif
