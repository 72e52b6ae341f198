/*
 * json: streaming JSON writer with one escaping routine for all strings.
 */
#include "output/json.h"

#include <inttypes.h>
#include <string.h>

void out_json_init(struct out_json *j, FILE *f)
{
    memset(j, 0, sizeof *j);
    j->f = f;
}

/* Length of the valid UTF-8 sequence at s, or 0 if invalid. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return n;
}

void out_json_quote(FILE *f, const char *str)
{
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    fputc('"', f);
    while (*s) {
        unsigned c = *s;
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc((int)c, f);
            s++;
        } else if (c < 0x20 || c == '<' || c == '>' || c == '&' || c == 0x7f) {
            fprintf(f, "\\u%04x", c);
            s++;
        } else {
            size_t n = utf8_len(s);
            if (n == 0) {
                fputs("\\ufffd", f);
                s++;
            } else if (n == 3 && s[0] == 0xe2 && s[1] == 0x80 && (s[2] == 0xa8 || s[2] == 0xa9)) {
                /* U+2028, U+2029: valid JSON, but not in a JavaScript string. */
                fprintf(f, "\\u%04x", 0x2000u | (s[2] == 0xa8 ? 0x28u : 0x29u));
                s += 3;
            } else {
                fwrite(s, 1, n, f);
                s += n;
            }
        }
    }
    fputc('"', f);
}

static void sep(struct out_json *j)
{
    if (j->after_key) {
        j->after_key = 0;
        return;
    }
    if (j->depth > 0 && j->count[j->depth - 1]++ > 0)
        fputc(',', j->f);
}

static void open_(struct out_json *j, int c)
{
    sep(j);
    fputc(c, j->f);
    if (j->depth < OUT_JSON_MAX_DEPTH)
        j->count[j->depth] = 0;
    j->depth++;
}

static void close_(struct out_json *j, int c)
{
    j->depth--;
    fputc(c, j->f);
}

void out_json_begin_object(struct out_json *j)
{
    open_(j, '{');
}

void out_json_end_object(struct out_json *j)
{
    close_(j, '}');
}

void out_json_begin_array(struct out_json *j)
{
    open_(j, '[');
}

void out_json_end_array(struct out_json *j)
{
    close_(j, ']');
}

void out_json_key(struct out_json *j, const char *key)
{
    sep(j);
    out_json_quote(j->f, key);
    fputc(':', j->f);
    j->after_key = 1;
}

void out_json_string(struct out_json *j, const char *s)
{
    sep(j);
    out_json_quote(j->f, s);
}

void out_json_int(struct out_json *j, int64_t v)
{
    sep(j);
    fprintf(j->f, "%" PRId64, v);
}

void out_json_int_or_null(struct out_json *j, int64_t v)
{
    if (v < 0)
        out_json_null(j);
    else
        out_json_int(j, v);
}

void out_json_bool(struct out_json *j, int v)
{
    sep(j);
    fputs(v ? "true" : "false", j->f);
}

void out_json_null(struct out_json *j)
{
    sep(j);
    fputs("null", j->f);
}
