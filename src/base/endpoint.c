/* SPDX-License-Identifier: MIT */
/*
 * endpoint.c - parsing and checking peer addresses (see endpoint.h).
 */
#include "base/endpoint.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/z85.h"

int mp__endpoint_split(const char *addr, char *host, size_t hostcap,
                       long *port) {
    if (addr == NULL || strncmp(addr, "tcp://", 6) != 0)
        return -1;
    const char *h = addr + 6;
    const char *colon = strrchr(h, ':');
    if (colon == NULL || colon == h)
        return -1;
    size_t hl = (size_t)(colon - h);
    if (hl + 1 > hostcap)
        return -1;
    if (colon[1] == '*' && colon[2] == '\0') {
        *port = 0;
    } else {
        char *end = NULL;
        errno = 0;
        long p = strtol(colon + 1, &end, 10);
        if (errno != 0 || end == colon + 1 || *end != '\0' || p < 0 ||
            p > 65535)
            return -1;
        *port = p;
    }
    memcpy(host, h, hl);
    host[hl] = '\0';
    return 0;
}

bool mp__endpoint_addr_ok(const char *addr) {
    char host[MP_ADDR_MAX];
    long port = 0;
    if (addr == NULL || strlen(addr) >= MP_ADDR_MAX)
        return false;
    if (mp__endpoint_split(addr, host, sizeof(host), &port) != 0)
        return false;
    if (port <= 0 || host[0] == '\0' || strchr(host, '*') != NULL)
        return false;
    for (const char *c = host; *c; c++)
        if (*c <= ' ' || *c == '/' || *c == ';')
            return false;
    return true;
}

moshpit_err_t mp__endpoint_parse(const char *text, mp_endpoint_t *out) {
    if (text == NULL || out == NULL)
        return MOSHPIT_EINVAL;
    size_t len = strnlen(text, MP_ADDR_MAX + MOSHPIT_KEY_TEXT_LEN + 1);
    if (len < MOSHPIT_KEY_TEXT_LEN + 2 ||
        len > MP_ADDR_MAX + MOSHPIT_KEY_TEXT_LEN ||
        text[len - MOSHPIT_KEY_TEXT_LEN - 1] != '#')
        return MOSHPIT_EINVAL;
    size_t alen = len - MOSHPIT_KEY_TEXT_LEN - 1;
    if (alen + 1 > MP_ADDR_MAX)
        return MOSHPIT_EINVAL;
    memcpy(out->addr, text, alen);
    out->addr[alen] = '\0';
    if (!mp__endpoint_addr_ok(out->addr))
        return MOSHPIT_EINVAL;
    if (mp__z85_decode(text + alen + 1, MOSHPIT_KEY_TEXT_LEN, out->key) != 0)
        return MOSHPIT_EINVAL;
    return MOSHPIT_OK;
}
