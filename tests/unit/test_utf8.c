/*
 * Unit tests of the writers' one UTF-8 decoder (output/utf8.h): each rule
 * (shortest form, no surrogates, nothing above U+10FFFF, no lone or missing
 * continuation bytes, never past the end) has a case that fails if the
 * rule is broken, and the writers built on it (JSON, the HTML and SVG
 * markup) replace exactly what it rejects.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "output/json.h"
#include "output/markup.h"
#include "output/utf8.h"

struct ok_case {
    const char *bytes;
    size_t len;
    uint32_t cp;
};

/* Well-formed characters, at each length's boundaries. */
static const struct ok_case OK[] = {
    {"\x00", 1, 0x0},
    {"A", 1, 0x41},
    {"\x7f", 1, 0x7f},
    {"\xc2\x80", 2, 0x80},
    {"\xdf\xbf", 2, 0x7ff},
    {"\xe0\xa0\x80", 3, 0x800},
    {"\xed\x9f\xbf", 3, 0xd7ff}, /* just below the surrogates */
    {"\xee\x80\x80", 3, 0xe000}, /* just above them */
    {"\xef\xbf\xbd", 3, 0xfffd},
    {"\xef\xbf\xbf", 3, 0xffff}, /* a noncharacter is still a character */
    {"\xf0\x90\x80\x80", 4, 0x10000},
    {"\xf4\x8f\xbf\xbf", 4, 0x10ffff},
    {"\xe2\x98\x83", 3, 0x2603},
};

/* What is not a character: (bytes, bytes that may be read). */
static const struct {
    const char *bytes;
    size_t n;
    const char *rule;
} BAD[] = {
    {"\xc0\x80", 2, "overlong 2-byte (C0)"},
    {"\xc1\xbf", 2, "overlong 2-byte (C1)"},
    {"\xe0\x80\x80", 3, "overlong 3-byte"},
    {"\xe0\x9f\xbf", 3, "overlong 3-byte, top"},
    {"\xf0\x80\x80\x80", 4, "overlong 4-byte"},
    {"\xf0\x8f\xbf\xbf", 4, "overlong 4-byte, top"},
    {"\xed\xa0\x80", 3, "surrogate D800"},
    {"\xed\xbf\xbf", 3, "surrogate DFFF"},
    {"\xf4\x90\x80\x80", 4, "above U+10FFFF"},
    {"\xf5\x80\x80\x80", 4, "F5 lead"},
    {"\xf8\x88\x80\x80\x80", 5, "5-byte form"},
    {"\xff", 1, "FF"},
    {"\xfe", 1, "FE"},
    {"\x80", 1, "lone continuation 80"},
    {"\xbf", 1, "lone continuation BF"},
    {"\xe2\x82", 2, "cut by the end of the text"},
    {"\xe2\x82\xac", 2, "cut by n although the bytes follow"},
    {"\xf0\x9f\x98", 3, "4-byte cut at 3"},
    {"\xe2\x82\x41", 3, "continuation missing (ASCII)"},
    {"\xe2\xc2\xa2", 3, "continuation missing (a lead)"},
    {"", 0, "nothing to read"},
};

static void test_well_formed(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof OK / sizeof OK[0]; i++) {
        uint32_t cp = 0xdeadbeef;
        size_t n = out_utf8_decode((const unsigned char *)OK[i].bytes, OK[i].len, &cp);
        if (n != OK[i].len || cp != OK[i].cp)
            fail_msg("case %zu: length %zu (want %zu), U+%04X (want U+%04X)", i, n, OK[i].len,
                     (unsigned)cp, (unsigned)OK[i].cp);
        /* more bytes after it change nothing */
        char buf[8] = {0};
        memcpy(buf, OK[i].bytes, OK[i].len);
        buf[OK[i].len] = 'x';
        assert_int_equal(out_utf8_decode((const unsigned char *)buf, OK[i].len + 1, &cp),
                         OK[i].len);
    }
}

static void test_not_characters(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        uint32_t cp = 0x12345;
        size_t n = out_utf8_decode((const unsigned char *)BAD[i].bytes, BAD[i].n, &cp);
        if (n != 0)
            fail_msg("%s: accepted as %zu bytes (U+%04X)", BAD[i].rule, n, (unsigned)cp);
        assert_int_equal(cp, 0x12345); /* left alone */
    }
}

static char *json_of(const char *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    out_json_quote(f, s);
    fclose(f);
    return buf;
}

/* The JSON writer replaces each byte the decoder rejects, keeps what it
 * accepts, and resumes at the next byte. */
static void test_json_writer_follows_the_rules(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"a\xc0\x80z", "\"a\\ufffd\\ufffdz\""},
        {"\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\""},
        {"\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""},
        {"x\xe2\x82", "\"x\\ufffd\\ufffd\""},
        {"\xe2\x82\xac\xe2\x98\x83", "\"\xe2\x82\xac\xe2\x98\x83\""},
        {"\xf0\x9f\x98\x80", "\"\xf0\x9f\x98\x80\""},
        {"\xe2\x80\xa8<", "\"\\u2028\\u003c\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = json_of(cases[i].in);
        assert_string_equal(got, cases[i].out);
        free(got);
    }
}

/* s escaped as markup, at most max characters; *left what was not. */
static char *markup_of(const char *s, size_t max, size_t *left)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    *left = out_markup_put(f, s, strlen(s), max);
    fclose(f);
    return buf;
}

static void test_markup_writer_follows_the_rules(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"a<b>&\"'", "a&lt;b&gt;&amp;&quot;&#39;"},
        {"t\tn\nz", "t\tn\xef\xbf\xbdz"},                   /* a control but tab */
        {"\x7f\xc2\x85", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* DEL, C1: per byte */
        {"\xef\xbf\xbe.", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd."}, /* U+FFFE */
        {"\xc0\x80\xe2\x82\xac", "\xef\xbf\xbd\xef\xbf\xbd\xe2\x82\xac"}, /* overlong */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t left;
        char *got = markup_of(cases[i].in, SIZE_MAX, &left);
        assert_string_equal(got, cases[i].out);
        assert_int_equal(left, 0);
        free(got);
    }
    size_t left;
    char *got = markup_of("\xe2\x82\xac<\xffxy", 2, &left);
    assert_string_equal(got, "\xe2\x82\xac&lt;");
    assert_int_equal(left, 3);
    assert_int_equal(out_markup_chars("\xe2\x82\xac<\xffxy", 7), 5);
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_well_formed),
        cmocka_unit_test(test_not_characters),
        cmocka_unit_test(test_json_writer_follows_the_rules),
        cmocka_unit_test(test_markup_writer_follows_the_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
