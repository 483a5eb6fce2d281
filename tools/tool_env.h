/*
 * What the tools share about their environment (header-only: each tool is
 * one program over the public headers).
 */
#ifndef DV_TOOL_ENV_H
#define DV_TOOL_ENV_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

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

#endif
