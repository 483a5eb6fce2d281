/*
 * The error model every layer shares.
 *
 * Functions return 0 or a negative dv_status (the list is DV_ERRNO_MAP in
 * devactor.h).  A failure also writes the calling thread's detail: the
 * call that failed, a line for a person, and where they apply the raw
 * driver code, bytes requested and remaining, a block generation and an
 * offset.  dv__fail is the one way to write it: it clears the detail
 * first, so no field of an earlier failure survives into a new one.
 * Success never reads or clears it.
 */
#ifndef DV_BASE_ERROR_H
#define DV_BASE_ERROR_H

#include "devactor.h"

/* Record a failure in the calling thread's detail; returns status. */
int dv__fail(int status, const char *call, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The same with a fixed message, no formatting: for failures that are an
 * expected answer on a hot path (a try call's DV_EAGAIN). */
int dv__fail_static(int status, const char *call, const char *message);
/* Writable detail of the calling thread. */
dv_error_detail *dv__detail(void);
/* Add to the end of the detail's message (what was tried before the
 * failure stood), as far as it has room. */
void dv__detail_append(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* A status of user code (a task, a layer, a stack function) as one a
 * caller can test: DV_OK and the listed codes pass; anything else (a
 * positive number, an unknown negative one) becomes DV_EINVAL naming who
 * answered what, so that rc < 0 never reads as success.  who is a whole
 * phrase ("task: its function").  A failure that left no detail of its own
 * (the thread's detail says another status: clear it before calling the
 * user's code) is given one, "<who> answered <status> (<its meaning>)". */
int dv__user_answer(int status, const char *call, const char *who);
/* Is status DV_OK or one of the dv_status codes? */
bool dv__is_status(int status);

/* Refused for want of memory: the device's or a budget's. */
static inline bool dv__short_of_memory(int status)
{
    return status == DV_EDEVICE_OOM || status == DV_EOUT_OF_BUDGET;
}

/* Is this failure the device's (a fault the driver keeps: context or
 * device lost, no device), or one a later try may not meet (memory, a
 * transient driver error)? */
static inline bool dv__fault_of_device(int status)
{
    return status == DV_ECONTEXT_LOST || status == DV_EDEVICE_LOST || status == DV_ENODEVICE;
}

#endif /* DV_BASE_ERROR_H */
