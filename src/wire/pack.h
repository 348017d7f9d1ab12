/* SPDX-License-Identifier: MIT */
/*
 * pack.h - the msgpack-c helpers both control codecs use (wire.c for the
 * engine's messages, wire_swim.c for membership): packing keys, integers,
 * strings and byte strings, and reading the same back with the checks the
 * decoders rely on (type, range, exact length, no NUL inside a string), and
 * collecting the known keys of a message map. Every message is a map from
 * short string keys; each codec names its keys in a table indexed by its
 * own key enum. Static inline, no state. Only for src/wire.
 *
 * Pack functions ignore the packer's result: the write callback
 * (mp__wire_buf_write) records an overflow once, and the encoders check
 * that flag at the end.
 */
#ifndef MP_WIRE_PACK_H
#define MP_WIRE_PACK_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- packing ---- */

static inline void mp__pack_str(msgpack_packer *pk, const char *s) {
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

static inline void mp__pack_bin(msgpack_packer *pk, const uint8_t *p,
                                size_t n) {
    msgpack_pack_bin(pk, n);
    msgpack_pack_bin_body(pk, p, n);
}

/* A map key and an unsigned integer value. */
static inline void mp__pack_u64(msgpack_packer *pk, const char *key,
                                uint64_t v) {
    mp__pack_str(pk, key);
    msgpack_pack_uint64(pk, v);
}

/* ---- reading; each returns 0, or -1 leaving *out untouched ---- */

static inline int mp__pack_get_u64(const msgpack_object *o, uint64_t *out) {
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return -1;
    *out = o->via.u64;
    return 0;
}

static inline int mp__pack_get_u32(const msgpack_object *o, uint32_t *out) {
    uint64_t v;
    if (mp__pack_get_u64(o, &v) != 0 || v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* A byte string of exactly n bytes. */
static inline int mp__pack_get_bin(const msgpack_object *o, uint8_t *out,
                                   size_t n) {
    if (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size != n)
        return -1;
    memcpy(out, o->via.bin.ptr, n);
    return 0;
}

/* A string shorter than cap bytes without a NUL inside, NUL-terminated
 * into out. */
static inline int mp__pack_get_str(const msgpack_object *o, char *out,
                                   size_t cap) {
    if (o->type != MSGPACK_OBJECT_STR || o->via.str.size >= cap)
        return -1;
    size_t n = o->via.str.size;
    if (n > 0 && memchr(o->via.str.ptr, '\0', n) != NULL)
        return -1;
    if (n > 0)
        memcpy(out, o->via.str.ptr, n);
    out[n] = '\0';
    return 0;
}

/* ---- message maps ---- */

/* Index of s in names[0..count), -1 for an unknown key. */
static inline int mp__pack_key_index(const msgpack_object_str *s,
                                     const char *const *names, int count) {
    for (int k = 0; k < count; k++) {
        size_t n = strlen(names[k]);
        if (s->size == n && memcmp(s->ptr, names[k], n) == 0)
            return k;
    }
    return -1;
}

/* Points val[k] (count entries, all NULL on entry) at the value of every
 * known key of the map root; unknown keys are ignored (forward
 * compatibility). -1 on a root that is not a map, a key that is not a
 * string, or a known key given twice (the message would be ambiguous). */
static inline int mp__pack_collect(const msgpack_object *root,
                                   const char *const *names, int count,
                                   const msgpack_object **val) {
    if (root->type != MSGPACK_OBJECT_MAP)
        return -1;
    for (uint32_t i = 0; i < root->via.map.size; i++) {
        const msgpack_object_kv *kv = &root->via.map.ptr[i];
        if (kv->key.type != MSGPACK_OBJECT_STR)
            return -1;
        int k = mp__pack_key_index(&kv->key.via.str, names, count);
        if (k < 0)
            continue;
        if (val[k] != NULL)
            return -1;
        val[k] = &kv->val;
    }
    return 0;
}

#endif
