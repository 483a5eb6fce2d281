/*
 * A small TAP producer in the manner of c-tap-harness.
 *
 *   plan(n)            first line: "1..n"
 *   ok(cond, fmt, ...) one described assertion per line
 *   is_int / is_u64 / is_str  comparisons that print both sides on failure
 *   skip_all(fmt, ...) "1..0 # SKIP reason" and exit 0
 *   skip(fmt, ...)     one assertion that cannot be made here: "ok N # SKIP reason"
 *   diag(fmt, ...)     "# ..." diagnostics
 *   tap_done()         exit status: non-zero on any failure, on a count
 *                      that differs from the plan, or when nothing was
 *                      asserted at all
 *
 * Header-only: each test is one program, so static state is per test.
 */
#ifndef DV_TESTS_TAP_H
#define DV_TESTS_TAP_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devactor.h"

static int tap_planned = -1;
static int tap_run;
static int tap_failed;

#if defined(__GNUC__)
#define TAP_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define TAP_UNUSED       __attribute__((unused))
#else
#define TAP_PRINTF(a, b)
#define TAP_UNUSED
#endif

static TAP_UNUSED void plan(int n)
{
    tap_planned = n;
    printf("1..%d\n", n);
    fflush(stdout);
}

static TAP_UNUSED TAP_PRINTF(1, 2) void diag(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("# ", stdout);
    vprintf(fmt, ap);
    fputs("\n", stdout);
    va_end(ap);
    fflush(stdout);
}

static TAP_UNUSED TAP_PRINTF(1, 2) void skip_all(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("1..0 # SKIP ", stdout);
    vprintf(fmt, ap);
    fputs("\n", stdout);
    va_end(ap);
    fflush(stdout);
    exit(0);
}

static TAP_UNUSED TAP_PRINTF(1, 2) void skip(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("ok %d # SKIP ", ++tap_run);
    vprintf(fmt, ap);
    fputs("\n", stdout);
    va_end(ap);
    fflush(stdout);
}

/* Stop the whole program: something the rest depends on failed. */
static TAP_UNUSED TAP_PRINTF(1, 2) void bail_out(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("Bail out! ", stdout);
    vprintf(fmt, ap);
    fputs("\n", stdout);
    va_end(ap);
    fflush(stdout);
    exit(1);
}

static bool tap_vok(bool cond, const char *fmt, va_list ap)
{
    tap_run++;
    if (!cond)
        tap_failed++;
    printf("%sok %d - ", cond ? "" : "not ", tap_run);
    vprintf(fmt, ap);
    fputs("\n", stdout);
    fflush(stdout);
    return cond;
}

static TAP_UNUSED TAP_PRINTF(2, 3) bool ok(bool cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tap_vok(cond, fmt, ap);
    va_end(ap);
    return cond;
}

static TAP_UNUSED TAP_PRINTF(3, 4) bool is_int(long long got, long long want, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bool cond = tap_vok(got == want, fmt, ap);
    va_end(ap);
    if (!cond)
        diag("     got: %lld\n#   wanted: %lld", got, want);
    return cond;
}

static TAP_UNUSED TAP_PRINTF(3, 4) bool is_u64(uint64_t got, uint64_t want, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bool cond = tap_vok(got == want, fmt, ap);
    va_end(ap);
    if (!cond)
        diag("     got: %" PRIu64 " (0x%" PRIx64 ")\n#   wanted: %" PRIu64 " (0x%" PRIx64 ")", got,
             got, want, want);
    return cond;
}

static TAP_UNUSED TAP_PRINTF(3, 4) bool is_str(const char *got, const char *want, const char *fmt,
                                               ...)
{
    va_list ap;
    va_start(ap, fmt);
    bool cond = tap_vok(got != NULL && want != NULL && strcmp(got, want) == 0, fmt, ap);
    va_end(ap);
    if (!cond)
        diag("     got: \"%s\"\n#   wanted: \"%s\"", got ? got : "(null)", want ? want : "(null)");
    return cond;
}

static TAP_UNUSED int tap_done(void)
{
    if (tap_run == 0) {
        diag("no assertion ran");
        return 1;
    }
    if (tap_planned >= 0 && tap_run != tap_planned) {
        diag("planned %d tests but ran %d", tap_planned, tap_run);
        return 1;
    }
    if (tap_failed > 0) {
        diag("failed %d of %d tests", tap_failed, tap_run);
        return 1;
    }
    return 0;
}

/* A dv_status comparison that names both codes and the failure detail. */
static TAP_UNUSED TAP_PRINTF(3, 4) bool is_status(int got, int want, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bool cond = tap_vok(got == want, fmt, ap);
    va_end(ap);
    if (!cond)
        diag("     got: %s (%d): %s\n#   wanted: %s (%d)", dv_err_name(got), got,
             dv_last_error()->message, dv_err_name(want), want);
    return cond;
}

#endif /* DV_TESTS_TAP_H */
