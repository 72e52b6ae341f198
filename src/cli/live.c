/*
 * live: the live view's life: the terminal set up before the target starts
 * and given back as it was however the view ends (q, Ctrl-C, SIGTERM or
 * SIGHUP, an error, a second signal's abort), the UI thread and its keys.
 *
 * While the view is open, the standard streams are set aside: `run`'s
 * command gets /dev/null for input and output (it would draw over the
 * view), and its stderr and pystrobe's go to a temporary file shown when
 * the view closes. ncurses talks to the terminal through duplicates of the
 * original descriptors. Only the UI thread calls ncurses between
 * live_start and live_end; it blocks SIGINT, SIGTERM and SIGHUP (they go to
 * the sampling thread, whose waits they cut short) and the sampling thread
 * blocks SIGWINCH (it goes to the UI thread, whose wait for a key it cuts
 * short: a resize is drawn at once).
 */
#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <term.h>
#include <termios.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/live.h"

struct live {
    const struct rec *r;
    struct live_data d;
    struct live_ui u;
    int saved[3]; /* the original standard descriptors, -1 once given back */
    FILE *errlog; /* stderr while the view is open */
    SCREEN *scr;
    FILE *fin, *fout;
    pthread_t ui;
    int started;
    atomic_int finished; /* sampling ended: show the banner */
    atomic_int stop_now; /* ... and close the view without waiting for q */
    int quit_asked;      /* UI thread: q was pressed */
};

/* For an abort by a second signal (async-signal-safe): the terminal's
 * modes before the view, and what leaves its alternate screen and shows
 * the cursor. */
static int abort_fd = -1;
static struct termios abort_tio;
static char abort_seq[128];
static size_t abort_seq_len;

/* ... and where stderr went meanwhile, and where it goes back to. */
static int abort_log = -1, abort_err = -1;

static void restore_on_abort(void)
{
    if (abort_fd < 0)
        return;
    tcsetattr(abort_fd, TCSANOW, &abort_tio);
    ssize_t w = write(abort_fd, abort_seq, abort_seq_len);
    (void)w;
    char buf[4096];
    ssize_t n;
    for (off_t at = 0;
         abort_log >= 0 && abort_err >= 0 && (n = pread(abort_log, buf, sizeof buf, at)) > 0;
         at += n)
        if (write(abort_err, buf, (size_t)n) != n)
            break;
}

/* A sanitizer's report ends the process: the terminal is given back and the
 * report shown (the symbol exists only in sanitized builds). */
void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

static void add_seq(const char *cap)
{
    const char *s = tigetstr(cap);
    if (!s || s == (char *)-1)
        return;
    size_t n = strlen(s);
    if (abort_seq_len + n < sizeof abort_seq) {
        memcpy(abort_seq + abort_seq_len, s, n);
        abort_seq_len += n;
    }
}

static uint64_t now_ns(void)
{
    return rec_now_ns();
}

/* --- streams ---------------------------------------------------------- */

/* Give the standard descriptors back and show what went to stderr. */
static void streams_restore(struct live *lv)
{
    if (lv->saved[0] < 0)
        return;
    for (int i = 0; i < 3; i++) {
        dup2(lv->saved[i], i);
        close(lv->saved[i]);
        lv->saved[i] = -1;
    }
    if (lv->errlog) {
        char buf[4096];
        size_t n;
        rewind(lv->errlog);
        while ((n = fread(buf, 1, sizeof buf, lv->errlog)) > 0)
            if (fwrite(buf, 1, n, stderr) != n)
                break;
        fclose(lv->errlog);
        lv->errlog = NULL;
    }
}

static int streams_aside(struct live *lv)
{
    for (int i = 0; i < 3; i++) {
        lv->saved[i] = fcntl(i, F_DUPFD_CLOEXEC, 3);
        if (lv->saved[i] < 0)
            return -1;
    }
    lv->errlog = tmpfile();
    int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (!lv->errlog || nul < 0) {
        if (nul >= 0)
            close(nul);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    dup2(nul, 0);
    dup2(nul, 1);
    dup2(fileno(lv->errlog), 2);
    close(nul);
    return 0;
}

/* --- the screen ------------------------------------------------------- */

static int screen_open(struct live *lv)
{
    int in = fcntl(lv->saved[0], F_DUPFD_CLOEXEC, 3);
    int out = fcntl(lv->saved[1], F_DUPFD_CLOEXEC, 3);
    lv->fin = in >= 0 ? fdopen(in, "r") : NULL;
    lv->fout = out >= 0 ? fdopen(out, "w") : NULL;
    if (!lv->fin || !lv->fout) {
        if (!lv->fin && in >= 0)
            close(in);
        if (!lv->fout && out >= 0)
            close(out);
        return -1;
    }
    if (tcgetattr(lv->saved[1], &abort_tio) == 0)
        abort_fd = lv->saved[1];
    setlocale(LC_CTYPE, ""); /* UTF-8 names; numbers keep the C locale */
    lv->scr = newterm(NULL, lv->fout, lv->fin);
    if (!lv->scr) {
        abort_fd = -1;
        return -1;
    }
    set_term(lv->scr);
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    curs_set(0);
    set_escdelay(25);
    abort_seq_len = 0;
    add_seq("sgr0");
    add_seq("cnorm");
    add_seq("rmcup");
    abort_log = fileno(lv->errlog);
    abort_err = lv->saved[2];
    rec_abort_hook = restore_on_abort;
    if (__sanitizer_set_death_callback)
        __sanitizer_set_death_callback(restore_on_abort);
    return 0;
}

static void screen_close(struct live *lv)
{
    if (lv->scr) {
        rec_abort_hook = NULL;
        abort_log = abort_err = -1;
        endwin();
        delscreen(lv->scr);
        lv->scr = NULL;
        abort_fd = -1;
    }
    if (lv->fin)
        fclose(lv->fin);
    if (lv->fout)
        fclose(lv->fout);
    lv->fin = lv->fout = NULL;
}

/* --- the UI thread --------------------------------------------------------- */

/* The selection follows the row under the cursor. */
static void select_row(struct live_ui *u)
{
    if (u->tree)
        return;
    if (u->norder == 0) {
        u->sc.sel_file = NULL;
        return;
    }
    const struct live_row *w = &u->t.rows[u->order[u->pos]];
    u->sc.sel_file = w->file;
    u->sc.sel_name = w->name;
    u->sc.sel_line = w->line;
    u->sc.sel_kind = w->kind;
}

static void build(struct live *lv)
{
    struct live_ui *u = &lv->u;
    (void)live_table_build(&u->t, &lv->d, &u->sc);
    u->now_ns = now_ns();
    u->thread_ix = 0;
    for (size_t i = 0; u->sc.one_thread && i < u->t.nthreads; i++)
        if (u->t.threads[i] == u->sc.thread)
            u->thread_ix = i + 1;
    if (u->sc.one_thread && !u->thread_ix) /* gone from the scope: show all */
        u->sc.one_thread = 0;
    live_order(u);
    select_row(u);
}

static void cycle_thread(struct live_ui *u, int dir)
{
    size_t n = u->t.nthreads, ix = u->thread_ix;
    if (n == 0)
        return;
    ix = dir > 0 ? (ix + 1) % (n + 1) : (ix + n) % (n + 1);
    u->thread_ix = ix;
    u->sc.one_thread = ix != 0;
    u->sc.thread = ix ? u->t.threads[ix - 1] : 0;
}

/* What a typed key does to the filter prompt. */
static void prompt_key(struct live_ui *u, int ch)
{
    size_t n = strlen(u->edit);
    if (ch == 27) {
        u->prompt = 0;
    } else if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
        snprintf(u->filter, sizeof u->filter, "%s", u->edit);
        u->prompt = 0;
        u->pos = u->top = 0;
    } else if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
        if (n)
            u->edit[n - 1] = '\0';
    } else if (ch >= 32 && ch <= 126 && n + 1 < sizeof u->edit) {
        u->edit[n] = (char)ch;
        u->edit[n + 1] = '\0';
    }
}

/* A key that moves the cursor or opens the tree of the row under it;
 * *rebuild: the table must be built again. Returns 0 if ch is none of them. */
static int move_key(struct live_ui *u, int ch, int *rebuild)
{
    switch (ch) {
    case KEY_UP:
    case 'k':
        if (!u->tree && u->pos > 0)
            u->pos--;
        select_row(u);
        break;
    case KEY_DOWN:
    case 'j':
        if (!u->tree && u->pos + 1 < (long)u->norder)
            u->pos++;
        select_row(u);
        break;
    case KEY_PPAGE:
        u->pos = u->pos > 10 ? u->pos - 10 : 0;
        select_row(u);
        break;
    case KEY_NPAGE:
        u->pos = u->pos + 10 < (long)u->norder ? u->pos + 10 : (long)u->norder - 1;
        if (u->pos < 0)
            u->pos = 0;
        select_row(u);
        break;
    case '\n':
    case '\r':
    case KEY_ENTER:
        if (u->norder) {
            select_row(u);
            u->tree = 1;
            *rebuild = 1;
        }
        break;
    default:
        return 0;
    }
    return 1;
}

/* A key that changes what the table shows or how (sort, filter, thread,
 * lines, window, refresh, pause, help); *rebuild: the table must be built
 * again. Returns 0 if ch is none of them. */
static int view_key(struct live_ui *u, int ch, int *rebuild)
{
    switch (ch) {
    case 's':
        u->sort = (u->sort + 1) % LIVE_SORT_N;
        live_order(u);
        select_row(u);
        break;
    case 'S':
        u->sort = (u->sort + LIVE_SORT_N - 1) % LIVE_SORT_N;
        live_order(u);
        select_row(u);
        break;
    case 'p':
    case 'P':
        u->paused = !u->paused;
        break;
    case '+':
    case '=':
        if (u->refresh_ix > 0)
            u->refresh_ix--;
        break;
    case '-':
    case '_':
        if (u->refresh_ix < LIVE_REFRESH_N - 1)
            u->refresh_ix++;
        break;
    case '/':
        u->prompt = 1;
        snprintf(u->edit, sizeof u->edit, "%s", u->filter);
        break;
    case 'c':
    case 'C':
        u->filter[0] = '\0';
        live_order(u);
        select_row(u);
        break;
    case 't':
    case 'T':
    case KEY_RIGHT:
        cycle_thread(u, 1);
        *rebuild = 1;
        break;
    case KEY_LEFT:
        cycle_thread(u, -1);
        *rebuild = 1;
        break;
    case 'l':
    case 'L':
        u->sc.by_line = !u->sc.by_line;
        u->pos = u->top = 0;
        u->tree = 0;
        *rebuild = 1;
        break;
    case 'w':
    case 'W':
        u->sc.window = !u->sc.window;
        *rebuild = 1;
        break;
    case 'h':
    case 'H':
    case '?':
        u->help = 1;
        break;
    default:
        return 0;
    }
    return 1;
}

/* Do what key ch says; *rebuild: the table must be built again. Returns 1
 * to close the view. The prompt, the help and the tree each take keys
 * first; then the session's keys (quit, reset), the view's and the
 * cursor's. */
static int on_key(struct live *lv, int ch, int *rebuild)
{
    struct live_ui *u = &lv->u;
    if (u->prompt) {
        prompt_key(u, ch);
        live_order(u);
        select_row(u);
        return 0;
    }
    if (u->help) {
        u->help = ch == KEY_RESIZE;
        return 0;
    }
    if (u->tree && (ch == 27 || ch == '\n' || ch == '\r' || ch == KEY_ENTER || ch == KEY_LEFT ||
                    ch == KEY_BACKSPACE || ch == 127)) {
        u->tree = 0;
        *rebuild = 1;
        return 0;
    }
    switch (ch) {
    case 'q':
    case 'Q':
        if (atomic_load(&lv->finished))
            return 1;
        lv->quit_asked = 1;
        atomic_store(&lv->d.quit, 1);
        break;
    case 'r':
    case 'R':
        if (!atomic_load(&lv->finished)) {
            live_data_reset(&lv->d);
            u->t0_ns = now_ns();
            *rebuild = 1;
        }
        break;
    default:
        if (!view_key(u, ch, rebuild))
            (void)move_key(u, ch, rebuild);
        break;
    }
    return 0;
}

/* How far below the sampling thread's priority the UI thread runs (nice
 * steps; 19 at most). The rate the view shows is the sampling thread's: where
 * both want the same CPU, it goes to sampling first. At +10 the UI still gets
 * about a tenth of a CPU it shares with one busy thread of the sampler's
 * priority, several times what a table and a screen take at the default
 * refresh. */
#define UI_NICE 10

/* Lower the calling thread's priority by UI_NICE (best effort: the view
 * works without it). */
static void ui_give_way(void)
{
    pid_t tid = gettid();
    errno = 0;
    int prio = getpriority(PRIO_PROCESS, (id_t)tid);
    if (prio == -1 && errno != 0)
        return;
    prio = prio + UI_NICE > 19 ? 19 : prio + UI_NICE;
    (void)setpriority(PRIO_PROCESS, (id_t)tid, prio);
}

static void *ui_main(void *arg)
{
    struct live *lv = arg;
    struct live_ui *u = &lv->u;
    uint64_t next = 0;
    int shown_finished = 0;

    ui_give_way();
    for (;;) {
        if (rec_stop)
            break;
        int fin = atomic_load(&lv->finished);
        if (fin && (atomic_load(&lv->stop_now) || lv->quit_asked))
            break;
        int rebuild = 0, redraw = 0;
        if (fin && !shown_finished) {
            shown_finished = u->finished = 1;
            u->paused = 0;
            rebuild = 1;
        }
        uint64_t t = now_ns();
        if (t >= next) {
            rebuild |= !u->paused;
            redraw = 1;
        }
        if (rebuild)
            build(lv);
        if (rebuild || redraw) {
            live_draw(u);
            next = now_ns() + (uint64_t)live_refresh_ms(u->refresh_ix) * 1000000u;
        }
        t = now_ns();
        uint64_t wait = next > t ? (next - t) / 1000000u : 0;
        /* Short enough to notice a signal or the end of sampling soon. */
        timeout(wait > 50 ? 50 : (int)wait);
        int ch = getch();
        if (ch == ERR)
            continue;
        rebuild = 0;
        if (on_key(lv, ch, &rebuild))
            break;
        if (rebuild)
            build(lv);
        live_draw(u);
    }
    return NULL;
}

/* --- the command's side ----------------------------------------------------- */

int live_prepare(struct live **out, const struct rec *r)
{
    if (!isatty(STDOUT_FILENO)) {
        fprintf(stderr, "pystrobe: --live needs a terminal: standard output is not one\n");
        return CLI_USAGE;
    }
    if (!isatty(STDIN_FILENO)) {
        fprintf(stderr, "pystrobe: --live needs a terminal: standard input is not one\n");
        return CLI_USAGE;
    }
    struct live *lv = calloc(1, sizeof *lv);
    if (!lv) {
        fprintf(stderr, "pystrobe: out of memory\n");
        return CLI_ERROR;
    }
    lv->r = r;
    lv->saved[0] = lv->saved[1] = lv->saved[2] = -1;
    live_data_init(&lv->d, r);
    atomic_init(&lv->finished, 0);
    atomic_init(&lv->stop_now, 0);
    int err = 0;
    if (streams_aside(lv) < 0) {
        err = errno;
        streams_restore(lv);
        live_free(lv);
        fprintf(stderr, "pystrobe: --live: cannot set the standard streams aside: %s\n",
                strerror(err));
        return CLI_ERROR;
    }
    if (screen_open(lv) < 0) {
        screen_close(lv);
        streams_restore(lv);
        const char *term = getenv("TERM");
        fprintf(stderr, "pystrobe: --live: cannot drive the terminal (TERM=%s)\n",
                term ? term : "");
        live_free(lv);
        return CLI_ERROR;
    }
    *out = lv;
    return -1;
}

/* The target's command line, arguments joined by spaces. */
static void read_cmdline(char *buf, size_t n, int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    buf[0] = '\0';
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    size_t got = fread(buf, 1, n - 1, f);
    fclose(f);
    buf[got] = '\0';
    while (got > 0 && buf[got - 1] == '\0')
        got--;
    for (size_t i = 0; i < got; i++)
        if (buf[i] == '\0' || buf[i] == '\n' || buf[i] == '\t')
            buf[i] = ' ';
}

int live_start(struct live *lv, pys_session *s, int pid, struct rec_sinks *ks)
{
    struct live_ui *u = &lv->u;
    u->pid = pid;
    read_cmdline(u->cmd, sizeof u->cmd, pid);
    u->mode = rec_mode_names[lv->r->mode];
    u->rate_hz = lv->r->rate_hz;
    u->interval_ns = lv->r->interval_ns;
    u->t0_ns = now_ns();
    u->refresh_ix = LIVE_REFRESH_DEFAULT;
    lv->d.run.s = s;
    if (rec_sinks_add(ks, &lv->d, live_data_sample) < 0) {
        fprintf(stderr, "pystrobe: --live: too many consumers of the samples\n");
        return CLI_ERROR;
    }

    sigset_t quiet, old, winch;
    sigemptyset(&quiet);
    sigaddset(&quiet, SIGINT);
    sigaddset(&quiet, SIGTERM);
    sigaddset(&quiet, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &quiet, &old);
    int rc = pthread_create(&lv->ui, NULL, ui_main, lv);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        fprintf(stderr, "pystrobe: --live: cannot start the view's thread: %s\n", strerror(rc));
        ks->n--;
        return CLI_ERROR;
    }
    lv->started = 1;
    sigemptyset(&winch);
    sigaddset(&winch, SIGWINCH);
    pthread_sigmask(SIG_BLOCK, &winch, NULL);
    return -1;
}

void live_end(struct live *lv, enum end why)
{
    if (!lv || !lv->started)
        return;
    const char *what = why == END_EXITED       ? "the process exited"
                       : why == END_DURATION   ? "the duration ran out"
                       : why == END_NOT_PYTHON ? "the process is no longer Python"
                                               : "sampling ended";
    snprintf(lv->u.banner, sizeof lv->u.banner, " %s: final counts. Press q to quit. ", what);
    live_data_finish(&lv->d);
    atomic_store(&lv->stop_now, why == END_SIGNAL);
    atomic_store(&lv->finished, 1);
    pthread_join(lv->ui, NULL);
    lv->started = 0;
    sigset_t winch;
    sigemptyset(&winch);
    sigaddset(&winch, SIGWINCH);
    pthread_sigmask(SIG_UNBLOCK, &winch, NULL);
}

void live_free(struct live *lv)
{
    if (!lv)
        return;
    if (lv->started)
        live_end(lv, END_SIGNAL);
    screen_close(lv);
    streams_restore(lv);
    live_table_release(&lv->u.t);
    free(lv->u.order);
    live_data_release(&lv->d);
    free(lv);
}
