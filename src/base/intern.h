/*
 * Interned strings: allocation tags, copied once and kept for the life of
 * the process, so a message can carry a tag by pointer after the caller's
 * string is gone.
 *
 * dv__intern(s) returns a pointer that stays valid for the process and
 * compares equal (as a pointer) for equal strings.  The table holds
 * DV_INTERN_MAX strings; later new ones intern as "other", and NULL as
 * "untagged".  Lookups take no lock (an open-addressing table of atomic
 * pointers, published with release stores); inserting takes a mutex.
 * Any thread.
 */
#ifndef DV_BASE_INTERN_H
#define DV_BASE_INTERN_H

#define DV_INTERN_MAX 1024u

const char *dv__intern(const char *s);

#endif /* DV_BASE_INTERN_H */
