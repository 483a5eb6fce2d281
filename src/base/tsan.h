/*
 * ThreadSanitizer annotations for what TSan cannot see: ck's fences (the
 * actor's queues) and device memory that streams race on by design (the
 * sim).  No-ops in every other build.
 */
#ifndef DV_BASE_TSAN_H
#define DV_BASE_TSAN_H

#if defined(__SANITIZE_THREAD__)
#define DV_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DV_TSAN 1
#endif
#endif

#ifdef DV_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
#define dv__tsan_acquire(p) __tsan_acquire(p)
#define dv__tsan_release(p) __tsan_release(p)
/* The calling thread's memory accesses are not checked until _end. */
#define dv__tsan_ignore_begin() __tsan_ignore_thread_begin()
#define dv__tsan_ignore_end()   __tsan_ignore_thread_end()
#else
#define dv__tsan_acquire(p)     ((void)0)
#define dv__tsan_release(p)     ((void)0)
#define dv__tsan_ignore_begin() ((void)0)
#define dv__tsan_ignore_end()   ((void)0)
#endif

#endif /* DV_BASE_TSAN_H */
