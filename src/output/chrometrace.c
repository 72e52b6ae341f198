/*
 * chrometrace: the sample stream as Chrome trace events (format in
 * chrometrace.h). Events are written as they happen into an in-memory
 * stream; each thread keeps its last stack (outermost first) to compare the
 * next one with.
 */
#include "output/chrometrace.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "output/json.h"
#include "output/procframe.h"

struct thread {
    uint64_t tid;
    /* Its process, from its first stack's process frame (--merge-processes);
     * 0: the trace's. command: that frame's, NULL when none. */
    int pid;
    const char *command;
    char *name;              /* its Python name, the last given (a copy); NULL: none */
    struct pys_frame *stack; /* outermost first */
    size_t n, cap;
    int seen; /* given in the current sample */
};

struct out_chrometrace {
    int pid;
    enum out_trace_lines lines;
    uint64_t max_bytes;
    FILE *events; /* the events so far, each followed by ",\n" */
    char *buf;    /* events' memory (open_memstream) */
    size_t len;
    struct thread *threads;
    size_t nthreads, cap;
    uint64_t t0, now; /* the first sample's time, the current one's */
    int started, full;
    uint64_t dropped;
};

struct out_chrometrace *out_chrometrace_new(int pid, enum out_trace_lines lines, uint64_t max_bytes)
{
    struct out_chrometrace *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->pid = pid;
    t->lines = lines;
    t->max_bytes = max_bytes;
    t->events = open_memstream(&t->buf, &t->len);
    if (!t->events) {
        free(t);
        return NULL;
    }
    return t;
}

void out_chrometrace_free(struct out_chrometrace *t)
{
    if (!t)
        return;
    fclose(t->events);
    free(t->buf);
    for (size_t i = 0; i < t->nthreads; i++) {
        free(t->threads[i].stack);
        free(t->threads[i].name);
    }
    free(t->threads);
    free(t);
}

void out_chrometrace_set_pid(struct out_chrometrace *t, int pid)
{
    t->pid = pid;
}

uint64_t out_chrometrace_dropped(const struct out_chrometrace *t)
{
    return t->dropped;
}

/* The line a frame is shown at and compared by; -1 for none. */
static int32_t frame_line(const struct out_chrometrace *t, const struct pys_frame *f)
{
    if (f->kind != PYS_FRAME_PYTHON || t->lines == OUT_TRACE_LINE_NONE)
        return -1;
    return t->lines == OUT_TRACE_LINE_FUNCTION ? f->firstlineno : f->lineno;
}

/* Strings are interned by the session: equal names have equal pointers. */
static int same_frame(const struct out_chrometrace *t, const struct pys_frame *a,
                      const struct pys_frame *b)
{
    return a->kind == b->kind && a->qualname == b->qualname && a->filename == b->filename &&
           a->firstlineno == b->firstlineno && frame_line(t, a) == frame_line(t, b);
}

/* The process thread th belongs to. */
static int thread_pid(const struct out_chrometrace *t, const struct thread *th)
{
    return th->pid ? th->pid : t->pid;
}

static void put_event(struct out_chrometrace *t, char ph, const struct thread *th,
                      const struct pys_frame *f)
{
    FILE *o = t->events;
    uint64_t us = t->now - t->t0;
    fprintf(o, "{\"ph\":\"%c\",\"name\":", ph);
    out_json_quote(o, f->qualname ? f->qualname : "");
    fprintf(o,
            ",\"cat\":\"python\",\"pid\":%d,\"tid\":%" PRIu64 ",\"ts\":%" PRIu64 ".%03u,"
            "\"args\":{\"filename\":",
            thread_pid(t, th), th->tid, us / 1000, (unsigned)(us % 1000));
    out_json_quote(o, f->filename ? f->filename : "");
    int32_t line = frame_line(t, f);
    if (line >= 0)
        fprintf(o, ",\"line\":%d", (int)line);
    fputs("}},\n", o);
}

/* Close th's frames from the innermost down to depth keep. */
static void close_to(struct out_chrometrace *t, struct thread *th, size_t keep)
{
    while (th->n > keep) {
        th->n--;
        put_event(t, 'E', th, &th->stack[th->n]);
    }
}

static struct thread *thread_get(struct out_chrometrace *t, uint64_t tid)
{
    for (size_t i = 0; i < t->nthreads; i++)
        if (t->threads[i].tid == tid)
            return &t->threads[i];
    if (t->nthreads == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        struct thread *v = realloc(t->threads, cap * sizeof *v);
        if (!v)
            return NULL;
        t->threads = v;
        t->cap = cap;
    }
    struct thread *th = &t->threads[t->nthreads++];
    memset(th, 0, sizeof *th);
    th->tid = tid;
    return th;
}

void out_chrometrace_sample_begin(struct out_chrometrace *t, uint64_t t_ns)
{
    if (!t->started) {
        t->t0 = t->now = t_ns;
        t->started = 1;
    }
    /* Never back: events stay in time order. */
    if (!t->full && t_ns > t->now)
        t->now = t_ns;
    for (size_t i = 0; i < t->nthreads; i++)
        t->threads[i].seen = 0;
}

int out_chrometrace_thread(struct out_chrometrace *t, uint64_t tid, const char *name,
                           const struct pys_frame *frames, size_t n)
{
    if (t->full)
        return 0;
    struct thread *th = thread_get(t, tid);
    if (!th)
        return PYS_E_NOMEM;
    th->seen = 1;
    if (name && (!th->name || strcmp(th->name, name) != 0)) {
        char *copy = strdup(name);
        if (!copy)
            return PYS_E_NOMEM;
        free(th->name);
        th->name = copy;
    }
    if (!th->pid)
        out_stack_process(frames, n, &th->pid, &th->command);
    if (n > th->cap) {
        struct pys_frame *v = realloc(th->stack, n * sizeof *v);
        if (!v)
            return PYS_E_NOMEM;
        th->stack = v;
        th->cap = n;
    }
    /* The common part, outermost first (frames is innermost first). */
    size_t k = 0;
    while (k < th->n && k < n && same_frame(t, &th->stack[k], &frames[n - 1 - k]))
        k++;
    close_to(t, th, k);
    for (; k < n; k++) {
        th->stack[k] = frames[n - 1 - k];
        th->n = k + 1;
        put_event(t, 'B', th, &th->stack[k]);
    }
    return 0;
}

void out_chrometrace_thread_unread(struct out_chrometrace *t, uint64_t tid)
{
    if (t->full)
        return;
    for (size_t i = 0; i < t->nthreads; i++)
        if (t->threads[i].tid == tid)
            t->threads[i].seen = 1;
}

int out_chrometrace_sample_end(struct out_chrometrace *t)
{
    if (t->full) {
        t->dropped++;
        return 0;
    }
    for (size_t i = 0; i < t->nthreads; i++)
        if (!t->threads[i].seen)
            close_to(t, &t->threads[i], 0);
    if (fflush(t->events) != 0)
        return PYS_E_NOMEM;
    if (t->max_bytes && t->len >= t->max_bytes) {
        /* The bound: close everything here, record no more. */
        for (size_t i = 0; i < t->nthreads; i++)
            close_to(t, &t->threads[i], 0);
        t->full = 1;
    }
    return 0;
}

/* The index of the first thread of thread i's process. */
static size_t first_of_process(const struct out_chrometrace *t, size_t i)
{
    size_t k = 0;
    while (thread_pid(t, &t->threads[k]) != thread_pid(t, &t->threads[i]))
        k++;
    return k;
}

/* A process_name event: "pid P", and its command where known. */
static void put_process_name(FILE *f, int pid, const char *command)
{
    char name[32];
    snprintf(name, sizeof name, "pid %d", pid);
    fprintf(f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":", pid);
    if (command && command[0]) {
        /* "pid P COMMAND", escaped as one string. */
        size_t n = strlen(name) + 1 + strlen(command) + 1;
        char *full = malloc(n);
        if (full) {
            snprintf(full, n, "%s %s", name, command);
            out_json_quote(f, full);
            free(full);
            fputs("}}", f);
            return;
        }
    }
    out_json_quote(f, name);
    fputs("}}", f);
}

/* A thread's name as collapsed output's thread frame has it: "tid:N", with
 * " (NAME)" after it when it has a Python name; a JSON string. */
static void put_thread_name(FILE *f, const struct thread *th)
{
    char id[32];
    snprintf(id, sizeof id, "tid:%" PRIu64, th->tid);
    if (!th->name) {
        out_json_quote(f, id);
        return;
    }
    size_t n = strlen(id) + strlen(th->name) + 4;
    char *full = malloc(n);
    if (!full) {
        out_json_quote(f, id);
        return;
    }
    snprintf(full, n, "%s (%s)", id, th->name);
    out_json_quote(f, full);
    free(full);
}

int out_chrometrace_write(FILE *f, struct out_chrometrace *t)
{
    for (size_t i = 0; i < t->nthreads; i++)
        close_to(t, &t->threads[i], 0);
    if (fflush(t->events) != 0)
        return PYS_E_NOMEM;
    fputs("{\"traceEvents\":[\n", f);
    for (size_t i = 0; i < t->nthreads; i++) {
        const struct thread *th = &t->threads[i];
        fprintf(f,
                "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%" PRIu64
                ",\"args\":{\"name\":",
                thread_pid(t, th), th->tid);
        put_thread_name(f, th);
        fputs("}},\n", f);
    }
    /* Each other process's name (--merge-processes), once. */
    for (size_t i = 0; i < t->nthreads; i++) {
        const struct thread *th = &t->threads[i];
        if (thread_pid(t, th) == t->pid || first_of_process(t, i) != i)
            continue;
        put_process_name(f, th->pid, th->command);
        fputs(",\n", f);
    }
    fwrite(t->buf, 1, t->len, f);
    /* The process's name ends the list: no comma after the last event. */
    const struct thread *main = NULL;
    for (size_t i = 0; i < t->nthreads && !main; i++)
        if (thread_pid(t, &t->threads[i]) == t->pid && t->threads[i].command)
            main = &t->threads[i];
    put_process_name(f, t->pid, main ? main->command : NULL);
    fprintf(f,
            "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"pystrobe\","
            "\"dropped_samples\":%" PRIu64 "}}\n",
            t->dropped);
    return fflush(f) != 0 || ferror(f) ? PYS_E_IO : 0;
}
