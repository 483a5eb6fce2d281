/*
 * Graded assertions, in the manner of mimalloc's.
 *
 *   dv_assert(c)            always checked: a broken invariant here would
 *                           corrupt memory or hang a caller, and the check
 *                           is cheap next to what it guards.
 *   dv_assert_internal(c)   checked in debug builds (DV_DEBUG, the default
 *                           without NDEBUG): what the code believes of its
 *                           own state on hot paths, such as "this handler
 *                           runs on its actor's thread".
 *   dv_assert_expensive(c)  checked only with DV_EXPENSIVE_CHECKS: walks
 *                           of whole structures.
 *
 * A failed assertion prints the file, line, function and expression and
 * aborts: the process's state can no longer be trusted.  Every build
 * compiles every assertion (the flags are `static const bool`), so a
 * check never rots in the builds that skip it.
 */
#ifndef DV_BASE_ASSERT_H
#define DV_BASE_ASSERT_H

#include <stdbool.h>

#ifndef DV_DEBUG
#ifdef NDEBUG
#define DV_DEBUG 0
#else
#define DV_DEBUG 1
#endif
#endif
#ifndef DV_EXPENSIVE_CHECKS
#define DV_EXPENSIVE_CHECKS 0
#endif

static const bool dv_config_debug = DV_DEBUG;
static const bool dv_config_expensive = DV_EXPENSIVE_CHECKS;

#if defined(__GNUC__)
__attribute__((noreturn, cold))
#endif
void dv__assert_fail(const char *file, int line, const char *func, const char *expr);

#define dv_assert(c) ((c) ? (void)0 : dv__assert_fail(__FILE__, __LINE__, __func__, #c))
#define dv_assert_internal(c)                                                                      \
    ((!dv_config_debug || (c)) ? (void)0 : dv__assert_fail(__FILE__, __LINE__, __func__, #c))
#define dv_assert_expensive(c)                                                                     \
    ((!dv_config_expensive || (c)) ? (void)0 : dv__assert_fail(__FILE__, __LINE__, __func__, #c))

#endif /* DV_BASE_ASSERT_H */
