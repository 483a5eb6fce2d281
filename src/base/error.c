/*
 * The error model: messages and names generated from DV_ERRNO_MAP and the
 * per-thread failure detail (design: error.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"

const char *dv_strerror(int status)
{
    switch (status) {
    case DV_OK:
        return "success";
#define DV__ERRNO_MSG(name, value, msg)                                                            \
    case DV_##name:                                                                                \
        return msg;
        DV_ERRNO_MAP(DV__ERRNO_MSG)
#undef DV__ERRNO_MSG
    default:
        return "unknown error";
    }
}

const char *dv_err_name(int status)
{
    switch (status) {
    case DV_OK:
        return "DV_OK";
#define DV__ERRNO_NAME(name, value, msg)                                                           \
    case DV_##name:                                                                                \
        return "DV_" #name;
        DV_ERRNO_MAP(DV__ERRNO_NAME)
#undef DV__ERRNO_NAME
    default:
        return "DV_UNKNOWN";
    }
}

const char *dv_version(void)
{
#define DV__STR2(x) #x
#define DV__STR(x)  DV__STR2(x)
    return DV__STR(DV_VERSION_MAJOR) "." DV__STR(DV_VERSION_MINOR) "." DV__STR(DV_VERSION_PATCH);
}

static _Thread_local dv_error_detail last_detail;

dv_error_detail *dv__detail(void)
{
    return &last_detail;
}

const dv_error_detail *dv_last_error(void)
{
    return &last_detail;
}

void dv_error_clear(void)
{
    memset(&last_detail, 0, sizeof(last_detail));
}

/* The calling thread's detail := status, call, bytes and the message. */
static int set_detail(int status, const char *call, uint64_t requested, uint64_t remaining,
                      const char *fmt, va_list ap)
{
    dv_error_detail *d = &last_detail;
    memset(d, 0, sizeof(*d));
    d->status = status;
    d->call = call;
    d->requested = requested;
    d->remaining = remaining;
    if (fmt != NULL)
        vsnprintf(d->message, sizeof(d->message), fmt, ap);
    else
        snprintf(d->message, sizeof(d->message), "%s", dv_strerror(status));
    return status;
}

int dv_error_set(int status, const char *call, uint64_t requested, uint64_t remaining,
                 const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_detail(status, call, requested, remaining, fmt, ap);
    va_end(ap);
    return status;
}

void dv__detail_append(const char *fmt, ...)
{
    dv_error_detail *d = &last_detail;
    size_t len = strlen(d->message);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->message + len, sizeof(d->message) - len, fmt, ap);
    va_end(ap);
}

int dv__fail_static(int status, const char *call, const char *message)
{
    dv_error_detail *d = &last_detail;
    memset(d, 0, sizeof(*d));
    d->status = status;
    d->call = call;
    size_t n = strlen(message);
    if (n >= sizeof(d->message))
        n = sizeof(d->message) - 1;
    memcpy(d->message, message, n);
    return status;
}

int dv__fail(int status, const char *call, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_detail(status, call, 0, 0, fmt, ap);
    va_end(ap);
    return status;
}

bool dv__is_status(int status)
{
    return status == DV_OK || strcmp(dv_err_name(status), "DV_UNKNOWN") != 0;
}

int dv__user_answer(int status, const char *call, const char *who)
{
    if (!dv__is_status(status))
        return dv__fail(DV_EINVAL, call, "%s answered %d, not a dv_status", who, status);
    if (status != DV_OK && dv_last_error()->status != status)
        dv__fail(status, call, "%s answered %s (%s)", who, dv_err_name(status),
                 dv_strerror(status));
    return status;
}
