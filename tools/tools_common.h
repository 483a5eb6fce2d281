/*
 * What the tools share (header-only: each tool is one program over the
 * public headers).
 */
#ifndef DV_TOOLS_COMMON_H
#define DV_TOOLS_COMMON_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* DEVACTOR_CONF configures dv_actor_get's actors; a tool makes its own
 * (dv_actor_create): said, so that an operator who set it knows. */
static inline void note_env_conf(const char *tool, bool has_conf)
{
    const char *env = getenv("DEVACTOR_CONF");
    if (env != NULL && env[0] != '\0')
        fprintf(stderr,
                "%s: DEVACTOR_CONF is not read here (it configures dv_actor_get's actors)%s\n",
                tool, has_conf ? "; give its text to --conf" : "");
}

/* A whole number written in decimal, or in hex after 0x: a digit first
 * (no sign, no space: strtoull takes both, and wraps a negative one), and
 * a leading 0 is no octal.  *end after it, as strtoull's. */
static inline bool tool_number(const char *s, unsigned long long *v, char **end)
{
    if (*s < '0' || *s > '9')
        return false;
    int base = s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ? 16 : 10;
    errno = 0;
    *v = strtoull(s, end, base);
    return errno == 0 && *end != s;
}

/* tool_number over the whole of s (an option's value): nothing after it. */
static inline bool tool_whole_number(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;
    if (!tool_number(s, &v, &end) || *end != '\0')
        return false;
    *out = v;
    return true;
}

/* Standard output written whole (a full disk or a closed stdout loses a
 * report silently otherwise): 0, or -1 said on stderr. */
static inline int tool_stdout_done(const char *tool)
{
    if (fflush(stdout) == 0 && !ferror(stdout))
        return 0;
    fprintf(stderr, "%s: <stdout>: %s\n", tool, errno != 0 ? strerror(errno) : "write error");
    return -1;
}

/* A number of bytes: 256M, 2G, 1048576, 64KiB ... (binary multiples). */
static inline bool parse_bytes(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;
    if (!tool_number(s, &v, &end))
        return false;
    unsigned shift = 0;
    switch (*end) {
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    default:
        break;
    }
    if (shift != 0) {
        end++;
        if (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0)
            end += strlen(end);
    }
    if (*end != '\0' || (shift != 0 && v > (UINT64_MAX >> shift)))
        return false;
    *out = (uint64_t)v << shift;
    return true;
}

#endif
