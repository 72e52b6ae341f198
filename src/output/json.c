/*
 * json: streaming JSON writer with one escaping routine for all strings.
 */
#include "output/json.h"
#include "output/utf8.h"

#include <inttypes.h>
#include <string.h>

void out_json_init(struct out_json *j, FILE *f)
{
    memset(j, 0, sizeof *j);
    j->f = f;
}

void out_json_quote(FILE *f, const char *str)
{
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    size_t left = strlen((const char *)s);
    fputc('"', f);
    while (left > 0) {
        const unsigned char *at = s;
        unsigned c = *s;
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc((int)c, f);
            s++;
        } else if (c < 0x20 || c == '<' || c == '>' || c == '&' || c == 0x7f) {
            fprintf(f, "\\u%04x", c);
            s++;
        } else {
            uint32_t cp = 0;
            size_t n = out_utf8_decode(s, left, &cp);
            if (n == 0) {
                fputs("\\ufffd", f);
                s++;
            } else if (cp == 0x2028 || cp == 0x2029) {
                /* valid JSON, but not in a JavaScript string */
                fprintf(f, "\\u%04x", (unsigned)cp);
                s += n;
            } else {
                fwrite(s, 1, n, f);
                s += n;
            }
        }
        left -= (size_t)(s - at);
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

void out_json_string_or_null(struct out_json *j, const char *s)
{
    if (s)
        out_json_string(j, s);
    else
        out_json_null(j);
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
