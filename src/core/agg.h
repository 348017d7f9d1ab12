/* SPDX-License-Identifier: MIT */
/*
 * agg.h - how a reducer combines the contributions to one part of its share:
 * the aggregation rule (weighted mean, coordinate-wise trimmed mean,
 * CenteredClip), its parameters and their encoding in the group key, and
 * the relative bound on weights. Pure functions: no I/O, no allocation.
 *
 * Definitions (normative; docs/AGGREGATION.md repeats them). A part of m
 * elements has c contributions x_1..x_c with weights w_1..w_c > 0 (weights
 * after the relative bound; contributions of weight 0 take no part):
 *
 *   mean         r = sum(w_k x_k) / sum(w_k), per element.
 *   trimmed mean per element e: order the c values x_k[e] ascending (ties
 *                by member index), drop the first t and the last t with
 *                t = min(trim, (c - 1) / 2), r[e] = the weighted mean of
 *                the c - 2t kept values (summed in roster order). Weights
 *                decide nothing about which values are dropped, only how
 *                the kept ones are averaged.
 *   CenteredClip v_0 = the coordinate-wise median (the trimmed mean with
 *                t = (c - 1) / 2: the middle value, or the weighted mean of
 *                the two middle ones). Radius R = tau * sqrt(m) (tau is
 *                per element, RMS), or with tau == 0 the lower median of
 *                the L2 distances ||x_k - v_0|| (the ((c - 1) / 2)-th
 *                smallest, from 0). Then iters times:
 *                  v <- v + sum_k (w_k / W) min(1, R / ||x_k - v||) (x_k - v)
 *                (W = sum w_k; a contribution at distance 0 has factor 1);
 *                r = v. Norms are L2 over the part (Gorbunov et al. 2022
 *                clip per part of the vector, Karimireddy et al. 2021
 *                define the iteration).
 *
 * Everything is computed in double and rounded to float once; results are
 * finite for finite inputs (each is a convex combination of them).
 *
 * A group applies a robust rule to a part only if it has at least
 * mp__agg_min_contrib() contributions of positive weight (2 trim + 1 for
 * the trimmed mean, so that all `trim` values are dropped at each end; 3
 * for CenteredClip, so that the median is a middle value): with fewer, one
 * attacker could move the result anywhere (two members: the rule is their
 * mean), so the part keeps local values, as a part nobody else contributed
 * to. The kernels themselves accept any c >= 1.
 */
#ifndef MP_CORE_AGG_H
#define MP_CORE_AGG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "moshpit.h"

#define MP_AGG_TRIM_MAX ((MP_GROUP_MAX - 1u) / 2u)
#define MP_AGG_ITERS_MAX 100u  /* CenteredClip iterations */
#define MP_AGG_CAP_MAX 65535u  /* relative weight bound K */
#define MP_AGG_CAP_DEFAULT 4u  /* K of the robust modes when 0 */
#define MP_AGG_KEY_MAX 9u      /* bytes of the group key suffix */
#define MP_AGG_KEY_CODEC 0xc0u /* key suffix byte: 0xc0 | compression */

/* The rule of a group; zero-initialized = the weighted mean, no relative
 * weight bound (the behaviour before robust aggregation, bit for bit). */
typedef struct mp_agg {
    uint32_t mode;       /* MOSHPIT_AGG_MEAN / _TRIMMED_MEAN / _CENTERED_CLIP */
    uint32_t trim;       /* trimmed mean: t at each end, 0..MP_AGG_TRIM_MAX */
    float tau;           /* CenteredClip: per-element radius, 0 = auto */
    uint32_t iters;      /* CenteredClip: 1..MP_AGG_ITERS_MAX */
    uint32_t weight_cap; /* K, 0 = no relative bound */
    uint32_t codec;      /* MOSHPIT_COMPRESS_*: how values travel (codec.h);
                            part of the rule because members must agree */
} mp_agg_t;

/* Contributions of positive weight a part needs for the rule to run:
 * 1 for the mean, 2 trim + 1 for the trimmed mean, 3 for CenteredClip. */
uint32_t mp__agg_min_contrib(const mp_agg_t *a);

/* Whether a is a rule a group can run (mode known, fields in range). */
bool mp__agg_valid(const mp_agg_t *a);

/* The rule of a peer's configuration, defaults resolved (weight_cap 0:
 * none for the mean, MP_AGG_CAP_DEFAULT for the robust modes). EINVAL if
 * the configuration asks for nonsense: an unknown mode, trim 0 or
 * 2 * trim >= group_size with the trimmed mean, trim beyond
 * MP_AGG_TRIM_MAX, clip_tau negative or not finite, clip_iters 0 or beyond
 * MP_AGG_ITERS_MAX, weight_cap beyond MP_AGG_CAP_MAX, an unknown
 * compression. */
moshpit_err_t mp__agg_from_config(const moshpit_config_t *c, mp_agg_t *out);

/*
 * The bytes a rule appends to the group key, so that peers with different
 * rules never share a group: none for the plain mean without a relative
 * weight bound (keys stay as they were), else mode (1 byte), K (u16
 * little-endian), then for the trimmed mean trim (1 byte), for
 * CenteredClip tau (IEEE float32 bits, little-endian) and iters (1 byte).
 * A compression other than NONE puts one byte 0xc0 | compression before
 * all that (the mode byte is at most 2, so the two never mix up).
 * Returns the length (0, 3, 4 or 8, plus 1 with compression).
 */
size_t mp__agg_key_suffix(const mp_agg_t *a, uint8_t out[MP_AGG_KEY_MAX]);

/* Whether s[0..len) is a suffix mp__agg_key_suffix can produce (len 0 is). */
bool mp__agg_key_suffix_ok(const uint8_t *s, size_t len);

/*
 * The relative weight bound: out[i] = min(w[i], cap * median), median the
 * lower median of the positive weights among w[0..n) (nothing changes if
 * none is positive or cap is 0). in and out may be the same array.
 * Identical on every member (same roster, same arithmetic). n <= 64.
 */
void mp__agg_weight_bound(uint32_t n, const double *w, uint32_t cap,
                          double *out);

/*
 * Kernels over c contributions x[0..c) of m floats each, weights w[0..c)
 * all > 0, 1 <= c <= 64; out (m floats) may be one of the x[k]. Ties are
 * broken by the position k in x, so callers pass members in roster order.
 */
void mp__agg_trimmed(const float *const *x, const double *w, uint32_t c,
                     size_t m, uint32_t trim, float *out);
/* scratch: 2 * m doubles. */
void mp__agg_clip(const float *const *x, const double *w, uint32_t c, size_t m,
                  float tau, uint32_t iters, double *scratch, float *out);

#endif
