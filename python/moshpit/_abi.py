# SPDX-License-Identifier: MIT
"""The C ABI of libmoshpit as ctypes sees it: the one place in this package
that mirrors include/moshpit.h.

moshpit_config_t and moshpit_round_t are declared here field by field, in
the header's order and with the header's types; the constants and error
codes too. tests/test_abi.py compiles a small C program against the header
and checks every offset, size and value below, so a header change this file
misses fails the tests instead of corrupting memory.

The library is found, in this order: the file named by the environment
variable MOSHPIT_LIBRARY; a libmoshpit.so* next to this file (a package
that ships the library); the system's library path.
"""

import ctypes
import ctypes.util
import glob
import os

KEY_BYTES = 32
KEY_TEXT_LEN = 40
CERT_BYTES = 160
CERT_TEXT_LEN = 200
WEIGHT_MAX = 1e15

# moshpit_err_t
OK = 0
EINVAL = 1
ENOMEM = 2
ETIMEDOUT = 3
ECLOSED = 4
EPROTO = 5
ECRYPTO = 6
EPEERAUTH = 7
ESYS = 8
ENOSTATE = 9
ECOUNT = 10
EBUSY = 11

# moshpit_agg_t
AGG_MEAN = 0
AGG_TRIMMED_MEAN = 1
AGG_CENTERED_CLIP = 2

# moshpit_compress_t
COMPRESS_NONE = 0
COMPRESS_FP16 = 1
COMPRESS_BF16 = 2
COMPRESS_INT8 = 3
COMPRESS_INT4 = 4
SHM_AUTO = 0
SHM_OFF = 1

# moshpit_log_level_t
LOG_ERROR = 0
LOG_WARN = 1
LOG_INFO = 2
LOG_DEBUG = 3

LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)

_Key = ctypes.c_uint8 * KEY_BYTES


class Config(ctypes.Structure):
    """moshpit_config_t."""

    _fields_ = [
        ("swarm", ctypes.c_char_p),
        ("listen", ctypes.c_char_p),
        ("advertise", ctypes.c_char_p),
        ("bootstrap", ctypes.POINTER(ctypes.c_char_p)),
        ("public_key", _Key),
        ("secret_key", _Key),
        ("swarm_secret", _Key),
        ("authorized_keys", ctypes.POINTER(_Key)),
        ("authorized_count", ctypes.c_size_t),
        ("group_size", ctypes.c_uint32),
        ("min_group_size", ctypes.c_uint32),
        ("grid_position", ctypes.c_int64),
        ("matchmaking_ms", ctypes.c_uint32),
        ("round_timeout_ms", ctypes.c_uint32),
        ("log", LOG_FN),
        ("log_user", ctypes.c_void_p),
        ("log_level", ctypes.c_int),
        ("peer_timeout_ms", ctypes.c_uint32),
        ("bandwidth_mbps", ctypes.c_uint32),
        ("grid_dims", ctypes.c_uint32),
        ("serve_state", ctypes.c_uint32),
        ("state_clients_max", ctypes.c_uint32),
        ("aggregation", ctypes.c_int),
        ("trim", ctypes.c_uint32),
        ("clip_tau", ctypes.c_float),
        ("clip_iters", ctypes.c_uint32),
        ("weight_cap", ctypes.c_uint32),
        ("authority_key", _Key),
        ("cert", ctypes.c_uint8 * CERT_BYTES),
        ("peers_max", ctypes.c_uint32),
        ("peer_msg_rate", ctypes.c_uint32),
        ("reserved_pad0", ctypes.c_uint32),
        ("compression", ctypes.c_uint32),
        ("data_streams", ctypes.c_uint32),
        ("congestion", ctypes.c_char_p),
        ("sessions_max", ctypes.c_uint64),
        ("shared_memory", ctypes.c_uint32),
    ]


class Round(ctypes.Structure):
    """moshpit_round_t."""

    _fields_ = [
        ("round_id", ctypes.c_uint64),
        ("group_size", ctypes.c_uint32),
        ("group_weight", ctypes.c_double),
        ("fraction_averaged", ctypes.c_double),
        ("peers_failed", ctypes.c_uint32),
        ("bytes_sent", ctypes.c_uint64),
        ("bytes_received", ctypes.c_uint64),
        ("matchmaking_ms", ctypes.c_uint32),
        ("allreduce_ms", ctypes.c_uint32),
    ]


def _candidates():
    env = os.environ.get("MOSHPIT_LIBRARY")
    if env:
        # An explicit choice: no silent fallback to another copy.
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    found = sorted(glob.glob(os.path.join(here, "libmoshpit.so*")))
    found += sorted(glob.glob(os.path.join(here, "libmoshpit*.dylib")))
    system = ctypes.util.find_library("moshpit")
    if system:
        found.append(system)
    found.append("libmoshpit.so.0")
    return found


def _declare(lib):
    c = ctypes
    err = c.c_int
    p = c.c_void_p
    u8p = c.POINTER(c.c_uint8)
    sigs = {
        "moshpit_config_init": (None, [c.POINTER(Config)]),
        "moshpit_open": (err, [c.POINTER(Config), c.POINTER(p)]),
        "moshpit_average": (
            err,
            [p, c.c_void_p, c.c_size_t, c.c_double, c.POINTER(Round)],
        ),
        "moshpit_endpoint": (err, [p, c.c_char_p, c.c_size_t]),
        "moshpit_members": (c.c_size_t, [p]),
        "moshpit_wait_members": (err, [p, c.c_size_t, c.c_uint32]),
        "moshpit_close": (None, [p]),
        "moshpit_keypair": (err, [u8p, u8p]),
        "moshpit_key_to_text": (err, [u8p, c.c_char_p]),
        "moshpit_key_from_text": (err, [c.c_char_p, u8p]),
        "moshpit_cert_from_text": (err, [c.c_char_p, u8p]),
        "moshpit_authority_keypair": (err, [u8p, u8p]),
        "moshpit_cert_issue": (
            err,
            [u8p, u8p, c.c_char_p, c.c_uint64, u8p],
        ),
        "moshpit_strerror": (c.c_char_p, [c.c_int]),
        "moshpit_fetch_state": (
            err,
            [p, c.c_void_p, c.c_size_t, c.c_uint32, c.POINTER(c.c_uint64)],
        ),
        "moshpit_errno": (c.c_int, [p]),
        "moshpit_version": (c.c_char_p, []),
        # Present from the release whose structs grow at their end; the
        # binding passes the size of its own mirror when they exist.
        "moshpit_config_init_sized": (err, [c.POINTER(Config), c.c_size_t]),
        "moshpit_open_sized": (
            err,
            [c.POINTER(Config), c.c_size_t, c.POINTER(p)],
        ),
        "moshpit_average_sized": (
            err,
            [p, c.c_void_p, c.c_size_t, c.c_double, c.POINTER(Round), c.c_size_t],
        ),
        # Averaging in the background (after 0.2.0).
        "moshpit_average_start": (
            err,
            [p, c.c_void_p, c.c_size_t, c.c_double, c.POINTER(p)],
        ),
        "moshpit_op_wait": (err, [p, c.c_uint32, c.POINTER(Round)]),
        "moshpit_op_wait_sized": (
            err,
            [p, c.c_uint32, c.POINTER(Round), c.c_size_t],
        ),
    }
    optional = {"moshpit_config_init_sized", "moshpit_open_sized",
                "moshpit_average_sized", "moshpit_average_start",
                "moshpit_op_wait", "moshpit_op_wait_sized"}
    for name, (res, args) in sigs.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            if name in optional:
                continue
            raise OSError("%s does not export %s" % (lib._name, name))
        fn.restype = res
        fn.argtypes = args


def load():
    """Loads and declares libmoshpit; raises OSError naming every path tried."""
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        _declare(lib)
        return lib
    raise OSError(
        "libmoshpit not found; set MOSHPIT_LIBRARY to its path. Tried: "
        + "; ".join(tried)
    )
