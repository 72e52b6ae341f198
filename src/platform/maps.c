/*
 * maps: the address space of another process as /proc/PID/maps describes it,
 * and the files behind its mappings.
 *
 * The text of a maps file is treated as untrusted input: the parser works on
 * (pointer, length), never reads past the end, never overflows a number, and
 * rejects any line that is not in the kernel's format instead of guessing.
 * One line of that format is
 *
 *     START-END PERMS OFFSET MAJOR:MINOR INODE[ PADDING PATH]
 *
 * with START, END, OFFSET, MAJOR and MINOR in hexadecimal, INODE in decimal,
 * fields separated by single spaces and the path, if any, after a run of
 * spaces up to the end of the line (it may itself contain spaces).
 */
#include "platform/platform.h"

#include <pystrobe/pystrobe.h>

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A process with vm.max_map_count (default 65530) mappings, each naming a path
 * of PATH_MAX bytes, prints about 270 MiB; a maps file larger than this is not
 * one pystrobe can use. */
#define MAPS_MAX_BYTES ((size_t)1 << 30)
/* First read buffer: a typical CPython process (a few hundred mappings,
 * 20-40 KiB of text) fits without growing it. */
#define MAPS_FIRST_BYTES ((size_t)64 << 10)

/* One parsed line; path points into the text and is not NUL-terminated. */
struct maps_line {
    struct plat_map map;
    const char *path;
    size_t path_len;
};

/* A cursor over one line: [p, end). */
struct maps_cursor {
    const char *p;
    const char *end;
};

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* At least one hex digit, at most as many as fit in max. */
static int take_hex(struct maps_cursor *c, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    size_t ndigits = 0;
    int d;

    while (c->p < c->end && (d = hex_value(*c->p)) >= 0) {
        if (v > (max - (uint64_t)d) / 16)
            return -1;
        v = v * 16 + (uint64_t)d;
        c->p++;
        ndigits++;
    }
    if (ndigits == 0)
        return -1;
    *out = v;
    return 0;
}

static int take_dec(struct maps_cursor *c, uint64_t *out)
{
    uint64_t v = 0;
    size_t ndigits = 0;

    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        uint64_t d = (uint64_t)(*c->p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
        c->p++;
        ndigits++;
    }
    if (ndigits == 0)
        return -1;
    *out = v;
    return 0;
}

static int take_char(struct maps_cursor *c, char ch)
{
    if (c->p >= c->end || *c->p != ch)
        return -1;
    c->p++;
    return 0;
}

/* Four permission letters, each either its letter or '-'; the last is 'p'
 * (private) or 's' (shared). */
static int take_perms(struct maps_cursor *c, char perms[5])
{
    static const char allowed[4][3] = {"r-", "w-", "x-", "ps"};

    if (c->end - c->p < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        char ch = c->p[i];
        if (ch != allowed[i][0] && ch != allowed[i][1])
            return -1;
        perms[i] = ch;
    }
    perms[4] = '\0';
    c->p += 4;
    return 0;
}

/* Parse one line (without its '\n'). Returns 0 or PYS_E_CORRUPT. */
static int parse_line(const char *s, size_t len, struct maps_line *out)
{
    struct maps_cursor c = {s, s + len};
    struct maps_line l;
    uint64_t major, minor;

    memset(&l, 0, sizeof(l));
    /* A NUL cannot come from the kernel and would cut the path short. */
    if (memchr(s, '\0', len) != NULL)
        return PYS_E_CORRUPT;
    if (take_hex(&c, UINT64_MAX, &l.map.start) < 0 || take_char(&c, '-') < 0 ||
        take_hex(&c, UINT64_MAX, &l.map.end) < 0 || take_char(&c, ' ') < 0 ||
        take_perms(&c, l.map.perms) < 0 || take_char(&c, ' ') < 0 ||
        take_hex(&c, UINT64_MAX, &l.map.offset) < 0 || take_char(&c, ' ') < 0 ||
        take_hex(&c, 0xffffffffu, &major) < 0 || take_char(&c, ':') < 0 ||
        take_hex(&c, 0xffffffffu, &minor) < 0 || take_char(&c, ' ') < 0 ||
        take_dec(&c, &l.map.inode) < 0)
        return PYS_E_CORRUPT;
    if (l.map.start > l.map.end)
        return PYS_E_CORRUPT;
    l.map.dev_major = (unsigned)major;
    l.map.dev_minor = (unsigned)minor;
    if (c.p < c.end) {
        /* The inode ends the line or is followed by the padding. */
        if (take_char(&c, ' ') < 0)
            return PYS_E_CORRUPT;
        while (c.p < c.end && *c.p == ' ')
            c.p++;
        if (c.p < c.end) {
            l.path = c.p;
            l.path_len = (size_t)(c.end - c.p);
        }
    }
    *out = l;
    return 0;
}

/* Call fn on each line of text; stops at the first failure. The last line
 * need not end in '\n'; an empty text has no lines. */
static int for_each_line(const char *text, size_t len,
                         int (*fn)(const struct maps_line *l, void *arg), void *arg)
{
    size_t pos = 0;

    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t line_len = nl != NULL ? (size_t)(nl - (text + pos)) : len - pos;
        struct maps_line l;
        int rc;

        rc = parse_line(text + pos, line_len, &l);
        if (rc < 0)
            return rc;
        rc = fn(&l, arg);
        if (rc < 0)
            return rc;
        pos += line_len + (nl != NULL ? 1 : 0);
    }
    return 0;
}

struct maps_count {
    size_t n;
    size_t path_bytes; /* including each path's NUL */
};

static int count_line(const struct maps_line *l, void *arg)
{
    struct maps_count *cnt = arg;

    cnt->n++;
    if (l->path != NULL)
        cnt->path_bytes += l->path_len + 1;
    return 0;
}

struct maps_fill {
    struct plat_map *v;
    size_t n;
    char *strings; /* next free byte after the array */
};

static int fill_line(const struct maps_line *l, void *arg)
{
    struct maps_fill *f = arg;
    struct plat_map *m = &f->v[f->n++];

    *m = l->map;
    m->path = NULL;
    if (l->path != NULL) {
        memcpy(f->strings, l->path, l->path_len);
        f->strings[l->path_len] = '\0';
        m->path = f->strings;
        f->strings += l->path_len + 1;
    }
    return 0;
}

/*
 * Two passes over the text: the first validates every line and sizes the
 * result, the second fills it. The array and all path strings share one
 * allocation (paths after the array), so plat_maps_release frees one block.
 */
int plat_maps_parse(const char *text, size_t len, struct plat_maps *out)
{
    struct maps_count cnt = {0, 0};
    struct maps_fill fill;
    struct plat_map *v = NULL;
    size_t array_bytes;
    int rc;

    if (out == NULL || (text == NULL && len > 0))
        return PYS_E_INVAL;
    if (len == 0) {
        out->v = NULL;
        out->n = 0;
        return 0;
    }
    /* With len > 0 there is at least one line, or an error. */
    rc = for_each_line(text, len, count_line, &cnt);
    if (rc < 0)
        goto out;
    /* Each line holds at least 20 bytes of fields, so n and path_bytes are
     * far below SIZE_MAX; check anyway rather than rely on it. */
    if (cnt.n > SIZE_MAX / sizeof(*v) || cnt.path_bytes > SIZE_MAX - cnt.n * sizeof(*v)) {
        rc = PYS_E_NOMEM;
        goto out;
    }
    array_bytes = cnt.n * sizeof(*v);
    v = malloc(array_bytes + cnt.path_bytes);
    if (v == NULL) {
        rc = PYS_E_NOMEM;
        goto out;
    }
    fill.v = v;
    fill.n = 0;
    fill.strings = (char *)v + array_bytes;
    rc = for_each_line(text, len, fill_line, &fill);
    if (rc < 0)
        goto out;
    out->v = v;
    out->n = fill.n;
    v = NULL;
out:
    free(v);
    return rc;
}

int plat_maps_read(pid_t pid, struct plat_maps *out)
{
    char path[48];
    char *buf = NULL;
    size_t cap = MAPS_FIRST_BYTES, len = 0;
    int fd = -1;
    int rc;

    if (pid <= 0)
        return PYS_E_INVAL;
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = plat_proc_errno(pid, errno);
        /* /proc/PID/maps exists for every process. */
        if (rc == PYS_E_NOTFOUND)
            rc = PYS_E_NOPROC;
        goto out;
    }
    buf = malloc(cap);
    if (buf == NULL) {
        rc = PYS_E_NOMEM;
        goto out;
    }
    /* The kernel produces the file a page or so per read(); read until EOF. */
    for (;;) {
        ssize_t r;

        if (len == cap) {
            char *bigger;

            if (cap >= MAPS_MAX_BYTES) {
                rc = PYS_E_NOMEM;
                goto out;
            }
            cap *= 2;
            bigger = realloc(buf, cap);
            if (bigger == NULL) {
                rc = PYS_E_NOMEM;
                goto out;
            }
            buf = bigger;
        }
        r = read(fd, buf + len, cap - len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            rc = plat_proc_errno(pid, errno);
            if (rc == PYS_E_NOTFOUND)
                rc = PYS_E_NOPROC;
            goto out;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    rc = plat_maps_parse(buf, len, out);
out:
    if (fd >= 0)
        close(fd);
    free(buf);
    return rc;
}

void plat_maps_release(struct plat_maps *m)
{
    if (m == NULL)
        return;
    /* The path strings live in the same block as the array. */
    free(m->v);
    m->v = NULL;
    m->n = 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);

    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

/*
 * map_files names the very inode that is mapped, even across mount namespaces
 * and chroots, and even if the file was deleted; it needs CAP_SYS_ADMIN.
 * /proc/PID/root/PATH is the fallback for unprivileged callers; it is not
 * tried for a path the kernel marks " (deleted)", because whatever now lives
 * at that path is not what the process mapped.
 */
/* Open the regular file at path (a snprintf'd name): an fd, or the error
 * mapped. A process may map a device (a GPU's, a frame buffer); opening
 * one can have effects, so anything not a regular file is PYS_E_NOTFOUND
 * without being opened (stat follows the map_files link as open would). */
static int open_proc_path(pid_t pid, const char *path, int n, size_t cap)
{
    struct stat st;

    if (n < 0 || (size_t)n >= cap)
        return PYS_E_NOMEM;
    if (stat(path, &st) != 0)
        return plat_proc_errno(pid, errno);
    if (!S_ISREG(st.st_mode))
        return PYS_E_NOTFOUND;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return plat_proc_errno(pid, errno);
    /* The path may have changed between the two calls. */
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return PYS_E_NOTFOUND;
    }
    return fd;
}

int plat_map_open(pid_t pid, const struct plat_map *m)
{
    char path[PATH_MAX + 64];
    int rc, map_files_rc;

    if (pid <= 0 || m == NULL)
        return PYS_E_INVAL;
    /* Lower-case hex without leading zeros, as the kernel names them. */
    rc = open_proc_path(pid, path,
                        snprintf(path, sizeof path, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64,
                                 (int)pid, m->start, m->end),
                        sizeof path);
    if (rc >= 0 || rc == PYS_E_NOPROC || m->path == NULL || m->path[0] != '/' ||
        ends_with(m->path, " (deleted)"))
        return rc;
    map_files_rc = rc;
    rc = open_proc_path(
        pid, path, snprintf(path, sizeof path, "/proc/%d/root%s", (int)pid, m->path), sizeof path);
    /* "Permission denied" on map_files tells the user what would help
     * (privileges) better than "not found" on the path does. */
    if (rc == PYS_E_NOTFOUND && map_files_rc == PYS_E_PERM)
        rc = PYS_E_PERM;
    return rc;
}

int plat_file_size(int fd, uint64_t *size)
{
    struct stat st;

    if (size == NULL || fstat(fd, &st) != 0 || st.st_size < 0)
        return PYS_E_INVAL;
    *size = (uint64_t)st.st_size;
    return 0;
}
