/*
 * live: `pystrobe run|attach --live`, a top-like view of the sampled
 * process in the terminal.
 *
 *   live.c      the command's side: the terminal, the UI thread, its keys
 *   live_draw.c what the screen shows (ncurses)
 *   live_agg.c  the counts: a sink of the sample stream, and the table the
 *               screen is drawn from
 *
 * The sampling thread reads nothing twice: the profile the run builds (or,
 * when that one holds the stacks rewritten, one of live_agg's own, filled
 * once) already counts every stack by node, cumulatively. At each second's
 * edge and when the UI asks, the sampling thread publishes those counts
 * (and the nodes and frames new since the last time) under a mutex it only
 * tries to take; when the UI thread holds it, it publishes at a later
 * sample. Counts are cumulative, so a late publication loses nothing: the
 * UI's views are differences of publications (since the reset, over the
 * last seconds). Memory follows the profile's (its own bound), never the
 * time the UI lags. The UI thread takes the lock only to build its table,
 * never while it draws, so a terminal that stops reading never stops
 * sampling.
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
    uint64_t id;      /* as in the profile: the host's id, else the target's */
    const char *name; /* its Python name, the last seen (the session's string); NULL none */
    struct live_counts c;
};

/* Samples counted over a span: snapshots, failed ones, thread states. */
struct live_tally {
    uint64_t snaps;  /* samples, failed ones included */
    uint64_t failed; /* samples that failed, or in which a thread could not be read */
    struct live_counts all;
    struct live_thread th[LIVE_MAX_THREADS];
    size_t nth;
};

/* Samples of a profile node (key: node id << 32), or of a node at one
 * instruction (key: node id << 32 | opcode + 1); lists are sorted by key. */
struct live_cnt {
    uint64_t key, n;
};
struct live_cnts {
    struct live_cnt *v;
    size_t n, cap;
};

/* A node of the profile's trie as published: node 0 the root, threads'
 * nodes its children (thread: the thread's id, else 0); parents have
 * smaller ids. frame: into live_data.frames (0: none). */
struct live_node {
    uint32_t parent, frame;
    uint64_t thread;
};

/* The last N seconds, in buckets of a second: the one filling, and N before. */
#define LIVE_WINDOW_S 10
#define LIVE_BUCKETS (LIVE_WINDOW_S + 1)
#define LIVE_STR_(x) #x
#define LIVE_STR(x) LIVE_STR_(x)

/* A second's samples (sec: since counting began): what they added. */
struct live_bucket {
    uint64_t sec;
    struct live_cnts d;
    struct live_tally t;
};

/* The run's facts as of a sample. */
struct live_run {
    uint64_t last_ns; /* the sample's end */
    uint64_t samples, failed, missed;
    size_t nthreads; /* threads in its snapshot */
    pys_session *s;  /* the program it came from */
};

struct live_data {
    pthread_mutex_t mu;
    pthread_cond_t published; /* seq moved */
    /* Under mu: the last publication. */
    struct live_node *nodes;
    size_t nnodes, capnodes;
    struct pys_frame *frames; /* frames[0] unused */
    size_t nframes, capframes;
    struct live_cnts now;  /* cumulative counts */
    struct live_cnts mark; /* ... at the start of the filling bucket */
    struct live_cnts base; /* ... at the reset (or none) */
    /* The states of the filling bucket's samples, and of the closed
     * buckets' since counting (re)started (a bucket keeps its own too). */
    struct live_tally pub, whole_t;
    struct live_bucket bucket[LIVE_BUCKETS]; /* bucket[cur] is the filling one: now - mark */
    size_t cur;
    uint64_t start_ns; /* when counting (re)started; 0 before the first publication */
    struct live_run run;
    uint64_t seq; /* publications so far */
    int reset;    /* the UI asked to start counting again */
    int finished; /* sampling ended: no publication will come */
    /* The sampling thread's alone. */
    pys_profile *prof;         /* the profile published: the run's, or own */
    pys_profile *own;          /* stacks added here when the run's profile has them rewritten */
    struct live_tally cum;     /* the states since the filling bucket began */
    size_t hint;               /* where the next thread's counts likely are in cum */
    struct live_cnts next;     /* a publication being built */
    uint64_t edge_ns;          /* the filling bucket's end */
    uint64_t first_ns, last_t; /* the first and the last sample's start */
    struct live_run at;        /* as of the last sample */
    const struct rec *r;
    atomic_int want; /* the UI waits for a publication */
    atomic_int quit; /* the user asked to end: the sink ends sampling */
};

void live_data_init(struct live_data *d, const struct rec *r);
void live_data_release(struct live_data *d);
/* The sink (struct rec_sink.sample): ctx is a struct live_data. */
int live_data_sample(void *ctx, const struct rec_sample *smp);
/* Sampling ended (called on the thread that sampled, after the last
 * sample): publish the final counts. */
void live_data_finish(struct live_data *d);

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

/* A published node's counts in a table's scope. */
struct live_tnode {
    uint64_t self, total;
    uint32_t first_child, next_sibling; /* of nodes with samples in scope */
    uint32_t row;
};

/* What the UI draws from: its own copy, built under the lock. */
struct live_table {
    struct live_row *rows;
    size_t n, cap;
    uint32_t *index; /* open addressing: row + 1, 0 empty */
    size_t icap;
    /* Scratch: the scope's counts by node (row: + 1, 0 none), and by
     * node and instruction (struct live_op with row a node id). */
    struct live_tnode *tn;
    size_t ncap;
    uint32_t *frow; /* published frame -> its row + 1 (0: not looked up yet) */
    size_t capfrow;
    struct live_op *nodeops;
    size_t nnodeops, capnodeops;
    /* The scope's counts. */
    uint64_t snaps, failed, span_ns;
    struct live_counts counts;
    uint64_t top_callers; /* samples of the selected row with no caller */
    long sel;             /* the selected row's index, -1 none */
    /* The threads seen, for cycling through them, with their Python names
     * (NULL: none). */
    uint64_t threads[LIVE_MAX_THREADS];
    const char *thread_names[LIVE_MAX_THREADS];
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
