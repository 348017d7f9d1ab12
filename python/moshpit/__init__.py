# SPDX-License-Identifier: MIT
"""Python binding of libmoshpit: decentralized, encrypted parameter
averaging (Moshpit All-Reduce) for NumPy arrays and PyTorch tensors.

    import moshpit
    with moshpit.Peer(swarm="run", bootstrap=[endpoint],
                      swarm_secret=secret) as peer:
        peer.wait_members(4, timeout=10.0)
        info = peer.average(params, weight=1.0)   # float32, in place
        op = peer.average_start(params)   # in the background ...
        train_some_more()                 # ... (not on params)
        info = op.wait()

Every field of the C moshpit_config_t is a keyword argument of Peer with the
same name. Calls that block (average, fetch_state, wait_members, close,
Op.wait) release the GIL while they wait. Errors of the library raise
MoshpitError with the C code (.code) and message; arguments of the wrong type raise
TypeError, of the right type but unusable (a non-contiguous or read-only
array, an out-of-range integer) ValueError.
"""

import atexit
import ctypes
import math
import operator
import sys
import threading
import weakref

from . import _abi
from ._abi import (  # noqa: F401  (re-exported constants)
    EBUSY,
    ECLOSED,
    ECOUNT,
    ECRYPTO,
    EINVAL,
    ENOMEM,
    ENOSTATE,
    EPEERAUTH,
    EPROTO,
    ESYS,
    ETIMEDOUT,
    AGG_CENTERED_CLIP,
    AGG_MEAN,
    AGG_TRIMMED_MEAN,
    CERT_BYTES,
    COMPRESS_BF16,
    COMPRESS_FP16,
    COMPRESS_INT4,
    SHM_AUTO,
    SHM_OFF,
    COMPRESS_INT8,
    COMPRESS_NONE,
    KEY_BYTES,
    LOG_DEBUG,
    LOG_ERROR,
    LOG_INFO,
    LOG_WARN,
    WEIGHT_MAX,
)

__all__ = [
    "Peer",
    "Op",
    "RoundInfo",
    "MoshpitError",
    "keypair",
    "key_to_text",
    "key_from_text",
    "version",
    "authority_keypair",
    "cert_issue",
    "library_path",
    "build_config",
    "CONFIG_FIELDS",
    "AGG_MEAN",
    "AGG_TRIMMED_MEAN",
    "AGG_CENTERED_CLIP",
    "COMPRESS_NONE",
    "COMPRESS_FP16",
    "COMPRESS_BF16",
    "COMPRESS_INT8",
    "COMPRESS_INT4",
    "SHM_AUTO",
    "SHM_OFF",
    "LOG_ERROR",
    "LOG_WARN",
    "LOG_INFO",
    "LOG_DEBUG",
    "KEY_BYTES",
    "CERT_BYTES",
    "WEIGHT_MAX",
]

_ERROR_NAMES = {
    _abi.EINVAL: "EINVAL",
    _abi.ENOMEM: "ENOMEM",
    _abi.ETIMEDOUT: "ETIMEDOUT",
    _abi.ECLOSED: "ECLOSED",
    _abi.EPROTO: "EPROTO",
    _abi.ECRYPTO: "ECRYPTO",
    _abi.EPEERAUTH: "EPEERAUTH",
    _abi.ESYS: "ESYS",
    _abi.ENOSTATE: "ENOSTATE",
    _abi.ECOUNT: "ECOUNT",
    _abi.EBUSY: "EBUSY",
}
__all__ += list(_ERROR_NAMES.values())


class _Library:
    """The loaded library; loaded on first use so that `import moshpit`
    works (and says what it tried) even before the library is built."""

    def __init__(self):
        self._lock = threading.Lock()
        self._lib = None

    def __call__(self):
        with self._lock:
            if self._lib is None:
                self._lib = _abi.load()
            return self._lib


_library = _Library()


def library_path():
    """Path (or name) of the loaded libmoshpit."""
    return _library()._name


class MoshpitError(Exception):
    """An error returned by libmoshpit. .code is the moshpit_err_t value,
    .name its name ("EINVAL", ...), .message the C library's message;
    .errno the saved errno for ESYS (else 0)."""

    def __init__(self, code, what="", errno=0):
        self.code = int(code)
        self.name = _ERROR_NAMES.get(self.code, "E%d" % self.code)
        self.message = _library().moshpit_strerror(self.code).decode()
        self.errno = errno
        text = "%s (%s)" % (self.message, self.name)
        if what:
            text = "%s: %s" % (what, text)
        if errno:
            text += " [errno %d]" % errno
        super().__init__(text)


def _check(code, what, mp=None):
    if code != _abi.OK:
        errno = 0
        if code == _abi.ESYS:
            errno = _library().moshpit_errno(mp)
        raise MoshpitError(code, what, errno)


def keypair():
    """A new identity: (public_key, secret_key), 32 bytes each."""
    pub = (ctypes.c_uint8 * KEY_BYTES)()
    sec = (ctypes.c_uint8 * KEY_BYTES)()
    _check(_library().moshpit_keypair(pub, sec), "moshpit_keypair")
    out = bytes(pub), bytes(sec)
    ctypes.memset(sec, 0, KEY_BYTES)
    return out


def key_to_text(key):
    """32-byte key -> its 40-character Z85 text."""
    raw = _key_bytes(key, "key")
    out = ctypes.create_string_buffer(_abi.KEY_TEXT_LEN + 1)
    src = (ctypes.c_uint8 * KEY_BYTES).from_buffer_copy(raw)
    _check(_library().moshpit_key_to_text(src, out), "moshpit_key_to_text")
    return out.value.decode("ascii")


def key_from_text(text):
    """40-character Z85 text -> 32-byte key."""
    return _key_bytes(text, "key")


def authority_keypair():
    """A new swarm authority: (public_key 32 bytes, secret_key 64 bytes).
    Give the public key to every peer as authority_key; keep the secret
    offline and sign identities with cert_issue."""
    pub = (ctypes.c_uint8 * KEY_BYTES)()
    sec = (ctypes.c_uint8 * 64)()
    _check(
        _library().moshpit_authority_keypair(pub, sec), "moshpit_authority_keypair"
    )
    out = bytes(pub), bytes(sec)
    ctypes.memset(sec, 0, 64)
    return out


def cert_issue(authority_secret, peer_public_key, swarm, not_after_unix):
    """A certificate (CERT_BYTES bytes) by which the authority admits the
    identity peer_public_key to the swarm until not_after_unix (seconds)."""
    if not isinstance(authority_secret, (bytes, bytearray)):
        raise TypeError("authority_secret: expected bytes")
    if len(authority_secret) != 64:
        raise ValueError("authority_secret: expected 64 bytes")
    if not isinstance(swarm, str):
        raise TypeError("swarm: expected str")
    pub = _key_bytes(peer_public_key, "peer_public_key")
    when = _as_index(not_after_unix, "not_after_unix")
    if not 0 <= when < 2**64:
        raise ValueError("not_after_unix: out of range")
    sec = (ctypes.c_uint8 * 64).from_buffer_copy(bytes(authority_secret))
    out = (ctypes.c_uint8 * CERT_BYTES)()
    rc = _library().moshpit_cert_issue(
        sec, (ctypes.c_uint8 * KEY_BYTES).from_buffer_copy(pub),
        swarm.encode(), when, out,
    )
    ctypes.memset(sec, 0, 64)
    _check(rc, "moshpit_cert_issue")
    return bytes(out)


def version():
    """The library's version string, e.g. "0.1.0"."""
    return _library().moshpit_version().decode()


def _key_bytes(value, name, size=KEY_BYTES, text_len=_abi.KEY_TEXT_LEN,
               from_text="moshpit_key_from_text"):
    """bytes of `size`, or Z85 text of `text_len` characters -> bytes."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        if len(raw) != size:
            raise ValueError("%s: %d bytes, expected %d" % (name, len(raw), size))
        return raw
    if isinstance(value, str):
        if len(value) != text_len:
            raise ValueError(
                "%s: Z85 text of %d characters, expected %d"
                % (name, len(value), text_len)
            )
        try:
            text = value.encode("ascii")
        except UnicodeEncodeError:
            raise ValueError("%s: not Z85 text" % name) from None
        out = (ctypes.c_uint8 * size)()
        _check(getattr(_library(), from_text)(text, out), "%s: %s" % (name, from_text))
        return bytes(out)
    raise TypeError(
        "%s: expected bytes or str, got %s" % (name, type(value).__name__)
    )


class Op:
    """A round running in the background (moshpit_op_t), made by
    Peer.average_start. wait() returns its RoundInfo (or raises its error)
    once it is over, as often as it is called; done() looks without
    blocking. Safe to use from several threads (waits take turns)."""

    def __init__(self, peer, ptr, x):
        self._peer = peer
        self._ptr = ptr
        self._x = x  # the library writes into it until the op is over
        self._lock = threading.Lock()
        self._info = None
        self._error = None

    def _over(self):
        return self._info is not None or self._error is not None

    def _closed(self):
        # the peer closed: moshpit_close freed the op (under the peer's
        # close, which waited for every wait in progress)
        with self._lock:
            if not self._over():
                self._error = MoshpitError(_abi.ECLOSED, "moshpit_op_wait")
            self._ptr = None
            self._x = None

    def _wait_ms(self, ms):
        """One moshpit_op_wait; True once the op is over. Holds _lock."""
        if self._over():
            return True
        peer = self._peer
        lib = peer._lib
        info = _abi.Round()
        try:
            mp = peer._enter("moshpit_op_wait")
        except MoshpitError as e:
            self._error = e
            return True
        try:
            if hasattr(lib, "moshpit_op_wait_sized"):
                rc = lib.moshpit_op_wait_sized(
                    self._ptr, ms, ctypes.byref(info), ctypes.sizeof(info)
                )
            else:
                rc = lib.moshpit_op_wait(self._ptr, ms, ctypes.byref(info))
            if rc == _abi.ETIMEDOUT:
                return False
            # over: the library freed the op
            self._ptr = None
            self._x = None
            if peer._op is self:
                peer._op = None
            if rc == _abi.OK:
                self._info = RoundInfo(info)
            else:
                errno = lib.moshpit_errno(mp) if rc == _abi.ESYS else 0
                self._error = MoshpitError(rc, "moshpit_op_wait", errno)
            return True
        finally:
            peer._leave()

    def done(self):
        """True once the round is over (then wait() returns at once)."""
        if not self._lock.acquire(blocking=False):
            return False  # another thread is waiting for it
        try:
            return self._wait_ms(0)
        finally:
            self._lock.release()

    def wait(self, timeout=None):
        """Blocks until the round is over and returns its RoundInfo (the
        GIL is released meanwhile). With timeout (seconds, 0 looks only):
        MoshpitError ETIMEDOUT if it is not over by then; the op stays
        live. Errors of the round raise MoshpitError (ECLOSED if the peer
        was closed first)."""
        if timeout is None:
            self._lock.acquire()
            try:
                while not self._wait_ms(2**32 - 1):
                    pass
            finally:
                self._lock.release()
        else:
            ms = Peer._timeout_ms(timeout)
            if not self._lock.acquire(timeout=timeout):
                raise MoshpitError(_abi.ETIMEDOUT, "moshpit_op_wait")
            try:
                if not self._wait_ms(ms):
                    raise MoshpitError(_abi.ETIMEDOUT, "moshpit_op_wait")
            finally:
                self._lock.release()
        if self._error is not None:
            raise self._error
        return self._info

    def __repr__(self):
        return "<moshpit.Op %s>" % ("over" if self._over() else "live")


class RoundInfo:
    """What one average() did: the fields of moshpit_round_t as attributes
    (round_id, group_size, group_weight, fraction_averaged, peers_failed,
    bytes_sent, bytes_received, matchmaking_ms, allreduce_ms)."""

    __slots__ = tuple(name for name, _ in _abi.Round._fields_)

    def __init__(self, raw):
        for name in self.__slots__:
            setattr(self, name, getattr(raw, name))

    def _asdict(self):
        return {name: getattr(self, name) for name in self.__slots__}

    def __repr__(self):
        return "RoundInfo(%s)" % ", ".join(
            "%s=%r" % kv for kv in self._asdict().items()
        )


_UINT_LIMITS = {
    ctypes.c_uint32: (0, 2**32 - 1),
    ctypes.c_int: (-(2**31), 2**31 - 1),
    ctypes.c_int64: (-(2**63), 2**63 - 1),
    ctypes.c_size_t: (0, 2**64 - 1),
}

# Fields Peer fills itself (pointers, callbacks) or that take keys.
_KEY_FIELDS = ("public_key", "secret_key", "swarm_secret", "authority_key")
_STRING_FIELDS = ("swarm", "listen", "advertise", "congestion")
CONFIG_FIELDS = tuple(
    name for name, _ in _abi.Config._fields_ if not name.startswith("reserved")
)


def _as_index(value, name):
    if isinstance(value, bool):
        return int(value)
    if not isinstance(value, int):
        try:
            return operator.index(value)
        except TypeError:
            raise TypeError(
                "%s: expected an int, got %s" % (name, type(value).__name__)
            ) from None
    return value


def _buffer_of(x):
    """(address, element count) of a float32 C-contiguous writable array or
    CPU tensor; TypeError / ValueError otherwise."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        if x.dtype != torch.float32:
            raise TypeError("expected a float32 tensor, got %s" % x.dtype)
        if x.device.type != "cpu":
            raise ValueError(
                "expected a CPU tensor, got one on %s "
                "(moshpit.torch.average_ copies through the host)" % x.device
            )
        if not x.is_contiguous():
            raise ValueError("expected a contiguous tensor")
        return x.data_ptr(), x.numel()
    np = sys.modules.get("numpy")
    if np is not None and isinstance(x, np.ndarray):
        if x.dtype != np.float32:
            raise TypeError("expected a float32 array, got %s" % x.dtype)
        if not x.flags.c_contiguous:
            raise ValueError("expected a C-contiguous array")
        if not x.flags.writeable:
            raise ValueError("expected a writable array")
        return x.ctypes.data, x.size
    raise TypeError(
        "expected a float32 numpy.ndarray or torch.Tensor, got %s"
        % type(x).__name__
    )


def build_config(config):
    """A moshpit_config_t (the ctypes mirror) from keyword arguments, with
    the library's defaults for fields not given, and the list of Python
    objects its pointers point into (keep it alive while cfg is used).
    Raises TypeError / ValueError for unknown fields and bad values."""
    lib = _library()
    cfg = _abi.Config()
    keep = []
    if hasattr(lib, "moshpit_config_init_sized"):
        _check(
            lib.moshpit_config_init_sized(ctypes.byref(cfg), ctypes.sizeof(cfg)),
            "moshpit_config_init_sized",
        )
    else:
        lib.moshpit_config_init(ctypes.byref(cfg))
    config = dict(config)
    unknown = set(config) - set(CONFIG_FIELDS)
    if unknown:
        raise TypeError(
            "unknown config field(s): %s" % ", ".join(sorted(unknown))
        )
    types = dict(_abi.Config._fields_)
    log_user = config.pop("log_user", None)
    for name, value in config.items():
        if value is None and name != "swarm":
            continue
        if name in _STRING_FIELDS:
            if not isinstance(value, str):
                raise TypeError(
                    "%s: expected str, got %s" % (name, type(value).__name__)
                )
            if "\0" in value:
                raise ValueError("%s: contains a NUL character" % name)
            raw = value.encode()
            keep.append(raw)
            setattr(cfg, name, raw)
        elif name == "bootstrap":
            if isinstance(value, str):
                value = [value]
            try:
                items = list(value)
            except TypeError:
                raise TypeError(
                    "bootstrap: expected a list of str, got %s"
                    % type(value).__name__
                ) from None
            for e in items:
                if not isinstance(e, str):
                    raise TypeError(
                        "bootstrap: expected str endpoints, got %s"
                        % type(e).__name__
                    )
                if "\0" in e:
                    raise ValueError("bootstrap: contains a NUL character")
            arr = (ctypes.c_char_p * (len(items) + 1))(
                *[e.encode() for e in items], None
            )
            keep.append(arr)
            cfg.bootstrap = arr
        elif name in _KEY_FIELDS:
            raw = _key_bytes(value, name)
            ctypes.memmove(getattr(cfg, name), raw, KEY_BYTES)
        elif name == "cert":
            raw = _key_bytes(
                value,
                "cert",
                CERT_BYTES,
                _abi.CERT_TEXT_LEN,
                "moshpit_cert_from_text",
            )
            ctypes.memmove(cfg.cert, raw, CERT_BYTES)
        elif name == "authorized_keys":
            if isinstance(value, (bytes, str)):
                raise TypeError("authorized_keys: expected a list of keys")
            try:
                keys = [_key_bytes(k, "authorized_keys") for k in value]
            except TypeError as e:
                if "authorized_keys:" in str(e):
                    raise
                raise TypeError(
                    "authorized_keys: expected a list of keys"
                ) from None
            arr = (ctypes.c_uint8 * KEY_BYTES * max(len(keys), 1))()
            for i, k in enumerate(keys):
                ctypes.memmove(arr[i], k, KEY_BYTES)
            keep.append(arr)
            cfg.authorized_keys = ctypes.cast(
                arr, ctypes.POINTER(ctypes.c_uint8 * KEY_BYTES)
            )
            cfg.authorized_count = len(keys)
        elif name == "authorized_count":
            if _as_index(value, name) != len(config.get("authorized_keys") or []):
                raise ValueError(
                    "authorized_count must equal len(authorized_keys)"
                )
        elif name == "log":
            if not callable(value):
                raise TypeError("log: expected a callable")
            cb = _make_log(value, log_user)
            keep.append(cb)
            cfg.log = cb
        elif name == "clip_tau":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(
                    "clip_tau: expected a float, got %s" % type(value).__name__
                )
            cfg.clip_tau = float(value)
        elif types[name] in _UINT_LIMITS:
            ctype = types[name]
            value = _as_index(value, name)
            lo, hi = _UINT_LIMITS[ctype]
            if not lo <= value <= hi:
                raise ValueError(
                    "%s: %d out of range [%d, %d]" % (name, value, lo, hi)
                )
            setattr(cfg, name, value)
        else:  # a field the mirror has and this function does not know
            raise TypeError("%s: not supported by this binding" % name)
    if cfg.swarm is None:
        raise TypeError("swarm: expected str, got None")
    return cfg, keep


def _make_log(fn, user):
    def trampoline(_user, level, msg):
        fn(user, level, msg.decode("utf-8", "replace") if msg else "")

    return _abi.LOG_FN(trampoline)


class Peer:
    """One peer of a swarm (moshpit_t). Keyword arguments are the fields of
    moshpit_config_t:

    swarm (str, required), listen (str, default "tcp://127.0.0.1:0"),
    advertise (str), congestion (str: TCP congestion control of the data
    connections, "default" for the system's), bootstrap (list of
    endpoints, or one str),
    public_key / secret_key / swarm_secret / authority_key (32 bytes or
    40-character Z85 text), authorized_keys (list of such keys; sets
    authorized_count), cert (160 bytes or 200-character Z85 text),
    log (callable log(log_user, level, message), which the library may
    call on its own threads), log_user (any object, passed to log), and the numbers
    group_size, min_group_size, grid_position, matchmaking_ms,
    round_timeout_ms, log_level, peer_timeout_ms, bandwidth_mbps, grid_dims,
    serve_state, state_clients_max, aggregation (AGG_*), trim, clip_tau,
    clip_iters, weight_cap, peers_max, peer_msg_rate, compression
    (COMPRESS_*), data_streams, sessions_max, shared_memory (SHM_*).
    Fields not given keep
    the library's defaults. authorized_count is accepted only if it matches
    len(authorized_keys).

    Methods may be called from any thread; close() waits for calls in
    progress on other threads (each bounded by the library's deadlines).
    """

    def __init__(self, swarm, **config):
        lib = _library()
        self._lib = lib
        self._mp = None
        self._cond = threading.Condition()
        self._active = 0
        self._closing = False
        self._op = None  # the Op of average_start not yet waited for
        config["swarm"] = swarm
        cfg, keep = build_config(config)
        # The log trampoline must outlive the peer: the engine calls it.
        self._log_keep = keep
        mp = ctypes.c_void_p()
        if hasattr(lib, "moshpit_open_sized"):
            rc = lib.moshpit_open_sized(
                ctypes.byref(cfg), ctypes.sizeof(cfg), ctypes.byref(mp)
            )
        else:
            rc = lib.moshpit_open(ctypes.byref(cfg), ctypes.byref(mp))
        ctypes.memset(cfg.secret_key, 0, KEY_BYTES)
        ctypes.memset(cfg.swarm_secret, 0, KEY_BYTES)
        _check(rc, "moshpit_open", None)
        self._mp = mp
        # A peer still open when the interpreter exits is closed first, so
        # its engine never calls into a Python that is going away.
        ref = weakref.ref(self)

        def at_exit():
            peer = ref()
            if peer is not None:
                peer.close()

        self._at_exit = at_exit
        atexit.register(at_exit)

    # -- call bracketing: close() must not race with a call in progress --

    def _enter(self, what):
        with self._cond:
            if self._mp is None or self._closing:
                raise MoshpitError(_abi.ECLOSED, what)
            self._active += 1
            return self._mp

    def _leave(self):
        with self._cond:
            self._active -= 1
            self._cond.notify_all()

    @property
    def endpoint(self):
        """This peer's endpoint "tcp://host:port#KEY": what others pass as
        bootstrap."""
        mp = self._enter("moshpit_endpoint")
        try:
            buf = ctypes.create_string_buffer(256)
            _check(
                self._lib.moshpit_endpoint(mp, buf, len(buf)), "moshpit_endpoint"
            )
            return buf.value.decode()
        finally:
            self._leave()

    @property
    def members(self):
        """Live members this peer knows, itself included."""
        mp = self._enter("moshpit_members")
        try:
            return int(self._lib.moshpit_members(mp))
        finally:
            self._leave()

    @staticmethod
    def _timeout_ms(timeout):
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise TypeError(
                "timeout: expected seconds as a number, got %s"
                % type(timeout).__name__
            )
        if not math.isfinite(timeout) or timeout < 0:
            raise ValueError("timeout: expected finite seconds >= 0")
        ms = int(round(timeout * 1000.0))
        if ms > 2**32 - 1:
            raise ValueError("timeout: at most %d s" % ((2**32 - 1) // 1000))
        return ms

    def wait_members(self, n, timeout=10.0):
        """Blocks until this peer knows at least n live members (itself
        included); MoshpitError ETIMEDOUT after timeout seconds."""
        n = _as_index(n, "n")
        if n < 0:
            raise ValueError("n: expected >= 0")
        ms = self._timeout_ms(timeout)
        mp = self._enter("moshpit_wait_members")
        try:
            _check(
                self._lib.moshpit_wait_members(mp, n, ms),
                "moshpit_wait_members(%d)" % n,
                mp,
            )
        finally:
            self._leave()

    def average(self, x, weight=1.0):
        """Averages x in place with a group of peers and returns a RoundInfo.
        x: a C-contiguous writable float32 numpy array or a contiguous
        float32 CPU torch tensor, any shape. weight: finite, 0..WEIGHT_MAX.
        A round with nobody to average with returns group_size 1 and leaves
        x untouched."""
        addr, count = _buffer_of(x)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise TypeError(
                "weight: expected a number, got %s" % type(weight).__name__
            )
        info = _abi.Round()
        mp = self._enter("moshpit_average")
        try:
            if hasattr(self._lib, "moshpit_average_sized"):
                rc = self._lib.moshpit_average_sized(
                    mp, addr, count, float(weight), ctypes.byref(info),
                    ctypes.sizeof(info),
                )
            else:
                rc = self._lib.moshpit_average(
                    mp, addr, count, float(weight), ctypes.byref(info)
                )
            _check(rc, "moshpit_average", mp)
        finally:
            self._leave()
        return RoundInfo(info)

    def average_start(self, x, weight=1.0):
        """Starts averaging x in place in the background and returns an Op
        at once; Op.wait() returns the RoundInfo. Arguments as for
        average(), checked the same way before anything is sent. Until the
        op is over, x belongs to the library: do not read or write it (the
        Op keeps a reference, so it stays alive). One op per peer: another
        average_start before this op was waited for raises MoshpitError
        EBUSY, as it does while an average() or fetch_state() runs on
        another thread; average() and fetch_state() wait for the op's
        round to end. close() ends a live op's round (its wait then raises
        ECLOSED)."""
        addr, count = _buffer_of(x)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise TypeError(
                "weight: expected a number, got %s" % type(weight).__name__
            )
        if not hasattr(self._lib, "moshpit_average_start"):
            raise NotImplementedError(
                "%s has no moshpit_average_start" % self._lib._name
            )
        ptr = ctypes.c_void_p()
        mp = self._enter("moshpit_average_start")
        try:
            _check(
                self._lib.moshpit_average_start(
                    mp, addr, count, float(weight), ctypes.byref(ptr)
                ),
                "moshpit_average_start",
                mp,
            )
            op = Op(self, ptr, x)
            self._op = op
        finally:
            self._leave()
        return op

    def fetch_state(self, x, timeout=30.0):
        """Downloads the swarm's latest averaged vector (from a peer opened
        with serve_state=1) into x, which must have the state's length;
        returns the serving peer's count of averaged rounds."""
        addr, count = _buffer_of(x)
        ms = self._timeout_ms(timeout)
        rounds = ctypes.c_uint64()
        mp = self._enter("moshpit_fetch_state")
        try:
            _check(
                self._lib.moshpit_fetch_state(
                    mp, addr, count, ms, ctypes.byref(rounds)
                ),
                "moshpit_fetch_state",
                mp,
            )
        finally:
            self._leave()
        return rounds.value

    def close(self):
        """Leaves the swarm and frees the peer; waits for calls in progress
        on other threads first. Idempotent."""
        with self._cond:
            if self._mp is None or self._closing:
                return
            self._closing = True
            while self._active:
                self._cond.wait()
            mp, self._mp = self._mp, None
        self._lib.moshpit_close(mp)
        # moshpit_close ended and freed an op nobody waited for
        op, self._op = self._op, None
        if op is not None:
            op._closed()
        self._log_keep = None
        atexit.unregister(self._at_exit)

    @property
    def closed(self):
        return self._mp is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_mp", None) is not None:
            try:
                self.close()
            except Exception:
                pass

    def __repr__(self):
        if self._mp is None:
            return "<moshpit.Peer closed>"
        return "<moshpit.Peer %s>" % self.endpoint
