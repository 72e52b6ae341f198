/*
 * json: a streaming JSON writer. Every string goes through one escaping
 * routine: quotes, backslashes and control characters are escaped, invalid
 * UTF-8 becomes U+FFFD, and <, > and & are written as \u escapes so that the
 * output can be embedded in HTML as it is.
 */
#ifndef PYSTROBE_OUTPUT_JSON_H
#define PYSTROBE_OUTPUT_JSON_H

#include <stdint.h>
#include <stdio.h>

#define OUT_JSON_MAX_DEPTH 32

struct out_json {
    FILE *f;
    int depth;
    int count[OUT_JSON_MAX_DEPTH]; /* items written at each depth */
    int after_key;
};

void out_json_init(struct out_json *j, FILE *f);
void out_json_begin_object(struct out_json *j);
void out_json_end_object(struct out_json *j);
void out_json_begin_array(struct out_json *j);
void out_json_end_array(struct out_json *j);
void out_json_key(struct out_json *j, const char *key);
void out_json_string(struct out_json *j, const char *s);
void out_json_int(struct out_json *j, int64_t v);
/* v, or null when v is negative (unknown). */
void out_json_int_or_null(struct out_json *j, int64_t v);
/* s, or null when s is NULL. */
void out_json_string_or_null(struct out_json *j, const char *s);
void out_json_bool(struct out_json *j, int v);
void out_json_null(struct out_json *j);

/* Write s as a JSON string literal (with quotes) to f. */
void out_json_quote(FILE *f, const char *s);

#endif
